//! A bounded pool of sessions: at most `capacity` exist, busy or idle, so the memory a model's
//! calls take is known up front (`capacity` arenas of the largest shape asked for).
//!
//! A pool copied into a child process by `fork` holds sessions whose worker threads did not
//! come along (a session on several threads would wait for them forever): the first call in
//! the child forgets them, without dropping them (dropping would join those threads), and
//! makes new ones. So a model made before `fork` works in the child.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Sessions of type `T`, each planned for a shape `K`.
pub struct Pool<K, T> {
    capacity: usize,
    state: Mutex<State<K, T>>,
    freed: Condvar,
}

struct State<K, T> {
    idle: Vec<(K, T)>,
    busy: usize,
    /// The process the sessions belong to.
    pid: u32,
}

impl<K, T> State<K, T> {
    /// In a child process after `fork`: forgets the parent's sessions (their threads are the
    /// parent's) and its busy count (their calls run in the parent).
    fn adopt(&mut self) {
        let pid = std::process::id();
        if self.pid != pid {
            for session in self.idle.drain(..) {
                std::mem::forget(session);
            }
            self.busy = 0;
            self.pid = pid;
        }
    }
}

impl<K: PartialEq, T> Pool<K, T> {
    /// An empty pool for at most `capacity` sessions (at least 1).
    pub fn new(capacity: usize) -> Pool<K, T> {
        Pool {
            capacity: capacity.max(1),
            state: Mutex::new(State {
                idle: Vec::new(),
                busy: 0,
                pid: std::process::id(),
            }),
            freed: Condvar::new(),
        }
    }

    /// Sessions there may be at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// A session of `shape`: an idle one of that shape; else a new one from `make` while there
    /// is room, dropping the oldest idle session of another shape when the pool is full; else,
    /// when every session is busy, the first one given back. Give it back with
    /// [`Pool::put`].
    pub fn take<E>(&self, shape: K, make: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut state = lock(&self.state);
        state.adopt();
        loop {
            if let Some(i) = state.idle.iter().position(|(k, _)| *k == shape) {
                state.busy += 1;
                return Ok(state.idle.swap_remove(i).1);
            }
            let room = state.busy + state.idle.len() < self.capacity;
            if room || !state.idle.is_empty() {
                let evicted = (!room).then(|| state.idle.remove(0));
                state.busy += 1;
                drop(state);
                drop(evicted);
                let made = make();
                if made.is_err() {
                    lock(&self.state).busy -= 1;
                    self.freed.notify_one();
                }
                return made;
            }
            state = self
                .freed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A session of `shape` without waiting: an idle one of that shape, else a new one from
    /// `make`, past `capacity` if every session is busy (a host holding several calls open at
    /// once, such as transcriptions whose segments are not read yet, gets one each rather than
    /// waiting on itself); [`Pool::put`] keeps no more than `capacity`.
    pub fn take_now<E>(&self, shape: K, make: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut state = lock(&self.state);
        state.adopt();
        state.busy += 1;
        if let Some(i) = state.idle.iter().position(|(k, _)| *k == shape) {
            return Ok(state.idle.swap_remove(i).1);
        }
        drop(state);
        let made = make();
        if made.is_err() {
            lock(&self.state).busy -= 1;
        }
        made
    }

    /// Gives a session of `shape` back: kept while the pool holds fewer than `capacity`,
    /// else dropped (after [`Pool::take_now`] made one past it).
    pub fn put(&self, shape: K, session: T) {
        let mut state = lock(&self.state);
        state.busy -= 1;
        if state.busy + state.idle.len() < self.capacity {
            state.idle.push((shape, session));
            drop(state);
        } else {
            drop(state);
            drop(session);
        }
        self.freed.notify_one();
    }
}

/// A mutex's value, also after a thread panicked holding it (the pool's counts stay usable).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
