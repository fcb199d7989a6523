//! [`Parallel`] runners for tests: real threads, a reversed order on one thread, and runners
//! that break the contract (skipping or repeating tasks), each counting the tasks it was given.

use std::sync::atomic::{AtomicUsize, Ordering};

use tessel_kernels::gemm::Parallel;

/// Runs the tasks on `.0` scoped std threads, each pulling task indices from a shared counter;
/// remembers the task count of the last call.
#[derive(Debug, Default)]
pub struct Threads(pub usize, pub AtomicUsize);

impl Threads {
    /// `threads` threads.
    pub fn new(threads: usize) -> Threads {
        Threads(threads, AtomicUsize::new(0))
    }

    /// Tasks of the last call.
    pub fn last_tasks(&self) -> usize {
        self.1.load(Ordering::Relaxed)
    }
}

impl Parallel for Threads {
    fn threads(&self) -> usize {
        self.0
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        self.1.store(tasks, Ordering::Relaxed);
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..self.0.min(tasks) {
                scope.spawn(|| loop {
                    let t = next.fetch_add(1, Ordering::Relaxed);
                    if t >= tasks {
                        break;
                    }
                    task(t);
                });
            }
        });
    }
}

/// Claims `.0` threads and runs the tasks on the calling thread, last first.
#[derive(Clone, Copy, Debug)]
pub struct Reversed(pub usize);

impl Parallel for Reversed {
    fn threads(&self) -> usize {
        self.0
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        for t in (0..tasks).rev() {
            task(t);
        }
    }
}

/// A runner that breaks its contract: skips the last task, or runs every task twice.
#[derive(Clone, Copy, Debug)]
pub struct Faulty {
    /// Skip the last task (else: run each twice).
    pub skip_last: bool,
    /// Threads it claims.
    pub threads: usize,
}

impl Parallel for Faulty {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        let count = if self.skip_last {
            tasks.saturating_sub(1)
        } else {
            tasks
        };
        for t in 0..count {
            task(t);
            if !self.skip_last {
                task(t);
            }
        }
    }
}
