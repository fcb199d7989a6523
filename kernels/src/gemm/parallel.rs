//! The task runner a host supplies to spread one GEMM over threads.
//!
//! The kernels crate has no threads of its own (it is `no_std`). A host implements
//! [`Parallel`] on top of its thread pool; [`Sequential`] runs everything on the calling thread.
//! Work is split over blocks of output columns, and every column is computed by the same
//! instruction sequence whatever the split, so results are bit-identical for any thread count.

use core::sync::atomic::{AtomicU64, Ordering};

/// Runs independent tasks, possibly on several threads.
pub trait Parallel: Sync {
    /// How many threads `run` may use at once (at least 1). Kernels size per-thread scratch and
    /// the number of tasks with it.
    fn threads(&self) -> usize;

    /// Calls `task(i)` once for every `i` in `0..tasks`, in any order and on any threads, and
    /// returns once all calls have finished.
    ///
    /// A runner that skips an index makes the kernel return an error; one that repeats an
    /// index has the repeat ignored. Neither is unsafe.
    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync));
}

/// Runs every task on the calling thread, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sequential;

impl Parallel for Sequential {
    fn threads(&self) -> usize {
        1
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in 0..tasks {
            task(i);
        }
    }
}

/// Most tasks one kernel call splits into (one bit each in the claim mask).
pub const MAX_TASKS: usize = 64;

/// Hands each task index out at most once, so that each owns its share of the output and
/// scratch even under a runner that calls an index twice.
pub(crate) struct Claims {
    taken: AtomicU64,
}

impl Claims {
    pub(crate) fn new() -> Claims {
        Claims {
            taken: AtomicU64::new(0),
        }
    }

    /// Whether the caller is the first to claim `task` (< [`MAX_TASKS`]).
    pub(crate) fn claim(&self, task: usize) -> bool {
        if task >= MAX_TASKS {
            return false;
        }
        let bit = 1u64 << task;
        self.taken.fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    /// Whether every task in `0..tasks` has been claimed.
    pub(crate) fn all_claimed(&self, tasks: usize) -> bool {
        let all = if tasks >= MAX_TASKS {
            u64::MAX
        } else {
            (1u64 << tasks) - 1
        };
        self.taken.load(Ordering::Acquire) & all == all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_handed_out_once() {
        let claims = Claims::new();
        assert!(claims.claim(3));
        assert!(!claims.claim(3));
        assert!(!claims.claim(MAX_TASKS));
        assert!(!claims.all_claimed(4));
        for t in 0..4 {
            claims.claim(t);
        }
        assert!(claims.all_claimed(4));
        let full = Claims::new();
        for t in 0..MAX_TASKS {
            assert!(full.claim(t));
        }
        assert!(full.all_claimed(MAX_TASKS));
    }
}
