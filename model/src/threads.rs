//! A fixed pool of worker threads that runs the GEMMs' column blocks, allocation-free per call.
//!
//! The kernels crate has no threads ([`tessel_kernels::gemm::Parallel`] is its interface); this
//! is the std implementation a [`crate::Session`] owns. Workers are spawned once; each call
//! publishes the task under a mutex, bumps a generation counter and wakes them. Workers spin
//! briefly before sleeping, because a decode step issues ~40 small GEMMs back to back and a
//! futex wake-up per call would cost more than the work it splits. The calling thread takes
//! tasks too; once no task is left to take it withdraws the call, so a worker that has not yet
//! joined it (asleep, or not scheduled on a busy machine) never will, and waits only for the
//! workers that did join to finish their tasks: a late worker costs nothing, and a borrowed
//! task can still be shared. Per call nothing is allocated: `Mutex`/`Condvar` are futex-based,
//! task indices are handed out by an atomic counter. A new thread allocates as it starts (the
//! standard library records its name for the stack-overflow handler), so [`ThreadPool::new`]
//! returns only once every worker has started: a worker the OS schedules late cannot allocate
//! during the first calls.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use tessel_kernels::gemm::Parallel;

/// Polls a waiting thread makes before it blocks: the first [`BUSY_SPINS`] busy-wait (a
/// fraction of a microsecond each), the rest yield the core (so an oversubscribed machine
/// still runs the thread being waited for).
const SPIN_LIMIT: u32 = 1 << 11;
/// Polls that busy-wait before the waiting thread starts yielding.
const BUSY_SPINS: u32 = 1 << 8;

/// One poll of a waiting thread: busy-wait at first, then yield.
fn backoff(poll: u32) {
    if poll < BUSY_SPINS {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Why a pool could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Zero threads, or more than the GEMM splits a call into.
    #[error("thread count must be between 1 and {max}, got {got}")]
    BadCount {
        /// Requested.
        got: usize,
        /// Largest supported.
        max: usize,
    },
    /// The OS refused to start a worker.
    #[error("could not start a worker thread: {0}")]
    Spawn(std::io::ErrorKind),
}

/// The task of the current call, its lifetime erased (see [`ThreadPool::run`]).
#[derive(Clone, Copy)]
struct Job {
    task: *const (dyn Fn(usize) + Sync),
    tasks: usize,
}

// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every worker that took the job
// is done with it.
unsafe impl Send for Job {}

struct Shared {
    job: Mutex<Option<Job>>,
    shutdown: AtomicBool,
    generation: AtomicU64,
    next_task: AtomicUsize,
    /// Workers that took the current job and have not finished with it (incremented under
    /// the lock while the job is published).
    active: AtomicUsize,
    panicked: AtomicBool,
    /// Workers that have started (counted under the lock; see [`ThreadPool::new`]).
    started: AtomicUsize,
    wake: Condvar,
    finished: Condvar,
    /// Signalled by each worker as it starts.
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Option<Job>> {
        // A poisoned lock only means a thread panicked while holding it; the `Option<Job>` is
        // always in a valid state, so keep going.
        self.job
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes task indices until none are left.
    fn work(&self, job: Job) {
        // SAFETY: `job.task` points to the task of the call in progress: the calling thread is
        // inside `run`, and a worker counted in `active` while it works here, so `run` does not
        // return (and the task stays alive) before this returns.
        let task = unsafe { &*job.task };
        loop {
            let index = self.next_task.fetch_add(1, Ordering::Relaxed);
            if index >= job.tasks {
                return;
            }
            if catch_unwind(AssertUnwindSafe(|| task(index))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// A pool of `threads - 1` workers plus the calling thread. It may be shared between threads:
/// calls from several threads at once run one after the other.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held for the whole of a call, so one call's job, counters and wait never mix with
    /// another's.
    calls: Mutex<()>,
}

impl ThreadPool {
    /// A pool running calls on `threads` threads in all (the caller included).
    pub fn new(threads: usize) -> Result<ThreadPool, PoolError> {
        let max = tessel_kernels::gemm::MAX_TASKS;
        if threads == 0 || threads > max {
            return Err(PoolError::BadCount { got: threads, max });
        }
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            next_task: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            started: AtomicUsize::new(0),
            wake: Condvar::new(),
            finished: Condvar::new(),
            ready: Condvar::new(),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(threads - 1),
            calls: Mutex::new(()),
        };
        for i in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("tessel-worker-{i}"))
                .spawn(move || worker(&shared))
                .map_err(|err| PoolError::Spawn(err.kind()))?;
            pool.workers.push(handle);
        }
        pool.wait_for_start();
        Ok(pool)
    }

    /// Waits until every worker has started: a thread's start-up allocations then lie before
    /// the pool is used.
    fn wait_for_start(&self) {
        let shared = &*self.shared;
        let mut guard = shared.lock();
        while shared.started.load(Ordering::Acquire) < self.workers.len() {
            guard = shared
                .ready
                .wait(guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Waits until no worker is working on the current job.
    fn wait_for_workers(&self) {
        let shared = &*self.shared;
        for poll in 0..SPIN_LIMIT {
            if shared.active.load(Ordering::Acquire) == 0 {
                return;
            }
            backoff(poll);
        }
        let mut guard = shared.lock();
        while shared.active.load(Ordering::Acquire) != 0 {
            guard = shared
                .finished
                .wait(guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Parallel for ThreadPool {
    fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        if self.workers.is_empty() || tasks <= 1 {
            (0..tasks).for_each(task);
            return;
        }
        // A poisoned lock only means a task panicked during an earlier call, which that call
        // reported; the pool's state was restored before it returned.
        let _one_call = self
            .calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let shared = &*self.shared;
        // SAFETY (lifetime erasure): a worker uses the pointer only after taking the job under
        // the lock while it is published, counted in `active` until it stops using it. This
        // function withdraws the job (under the lock) and then waits for `active` to be 0
        // before returning, so the erased borrow never outlives `task`.
        let task: *const (dyn Fn(usize) + Sync + '_) = task;
        // SAFETY: only the lifetime changes; see above.
        let task: *const (dyn Fn(usize) + Sync + 'static) = unsafe { core::mem::transmute(task) };
        let job = Job { task, tasks };
        {
            let mut slot = shared.lock();
            *slot = Some(job);
            // No worker is active (the previous call waited for them), so none still claims.
            shared.next_task.store(0, Ordering::Relaxed);
            shared.generation.fetch_add(1, Ordering::Release);
            shared.wake.notify_all();
        }
        shared.work(job);
        // Every task is claimed: workers that have not taken the job by now are not needed.
        *shared.lock() = None;
        self.wait_for_workers();
        if shared.panicked.swap(false, Ordering::Relaxed) {
            panic!("a task of the tessel thread pool panicked");
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let _guard = self.shared.lock();
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.wake.notify_all();
        }
        for handle in self.workers.drain(..) {
            // A worker never panics outside `catch_unwind`; nothing useful to do if it did.
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads())
            .finish()
    }
}

fn worker(shared: &Shared) {
    {
        let _guard = shared.lock();
        shared.started.fetch_add(1, Ordering::Release);
        shared.ready.notify_one();
    }
    let mut seen = 0u64;
    loop {
        let mut spins = 0;
        while shared.generation.load(Ordering::Acquire) == seen
            && !shared.shutdown.load(Ordering::Acquire)
            && spins < SPIN_LIMIT
        {
            backoff(spins);
            spins += 1;
        }
        let job = {
            let mut guard = shared.lock();
            while shared.generation.load(Ordering::Acquire) == seen
                && !shared.shutdown.load(Ordering::Acquire)
            {
                guard = shared
                    .wake
                    .wait(guard)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            seen = shared.generation.load(Ordering::Acquire);
            if guard.is_some() {
                // Under the lock, while the job is published: `run` sees this count when it
                // withdraws the job.
                shared.active.fetch_add(1, Ordering::AcqRel);
            }
            *guard
        };
        if let Some(job) = job {
            shared.work(job);
            if shared.active.fetch_sub(1, Ordering::AcqRel) == 1 {
                let _guard = shared.lock();
                shared.finished.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_exactly_once() {
        for threads in 1..=4 {
            let pool = ThreadPool::new(threads).unwrap();
            assert_eq!(pool.threads(), threads);
            for tasks in [0, 1, 2, 3, 7, 64] {
                let counts: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                for _ in 0..50 {
                    pool.run(tasks, &|i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
                assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 50));
            }
        }
    }

    /// One call of `tasks` tasks that each spin `spin` times, checking every task ran once.
    /// The counters are borrowed by this call alone.
    fn run_once_each(pool: &ThreadPool, tasks: usize, spin: usize) {
        let counts: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
        pool.run(tasks, &|i| {
            counts[i].fetch_add(1, Ordering::Relaxed);
            for _ in 0..spin {
                std::hint::spin_loop();
            }
        });
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn late_workers_never_run_a_withdrawn_call() {
        // More threads than this machine has cores and tiny calls: most calls end before some
        // worker wakes, so workers keep arriving after the call is withdrawn. Each call's task
        // borrows that call's own counters; a late worker running it would count twice (or
        // touch a dead borrow, which Miri and sanitizers would flag).
        let pool = ThreadPool::new(4).unwrap();
        for call in 0..20_000usize {
            run_once_each(&pool, 2 + call % 5, 0);
        }
    }

    #[test]
    fn calls_from_several_threads_at_once_each_run_every_task_once() {
        let pool = ThreadPool::new(2).unwrap();
        std::thread::scope(|scope| {
            for caller in 0..3usize {
                let pool = &pool;
                scope.spawn(move || {
                    for call in 0..2_000usize {
                        // Tasks long enough for the callers' calls to overlap.
                        run_once_each(pool, 2 + (call + caller) % 6, 2_000);
                    }
                });
            }
        });
    }

    #[test]
    fn bad_counts_are_refused() {
        assert!(matches!(
            ThreadPool::new(0),
            Err(PoolError::BadCount { .. })
        ));
        assert!(matches!(
            ThreadPool::new(65),
            Err(PoolError::BadCount { .. })
        ));
    }

    #[test]
    fn a_panicking_task_is_reported_and_the_pool_survives() {
        let pool = ThreadPool::new(2).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.run(8, &|i| {
                if i == 5 {
                    panic!("task 5");
                }
            })
        }));
        assert!(result.is_err());
        let total = AtomicUsize::new(0);
        pool.run(8, &|i| {
            total.fetch_add(i, Ordering::Relaxed);
        });
        assert_eq!(total.load(Ordering::Relaxed), 28);
    }
}
