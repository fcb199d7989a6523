//! Who runs a session's GEMM column blocks: the calling thread alone, or (with `std`) the
//! session's pool of worker threads.
//!
//! A session over a host's buffer ([`crate::Session::in_buffer`]), and every session without
//! `std`, runs serially: nothing is spawned or allocated for it.

#[cfg(feature = "std")]
use std::sync::Arc;

use tessel_kernels::gemm::{Parallel, Sequential};
use tessel_kernels::Isa;

use crate::layers::Run;
#[cfg(feature = "std")]
use crate::threads::ThreadPool;

/// The runner a session owns.
pub(crate) enum Runner {
    /// Every task on the calling thread.
    Serial,
    /// A fixed pool of workers (shared by clones of the handle).
    #[cfg(feature = "std")]
    Pool(Arc<ThreadPool>),
}

impl Runner {
    /// The runner as the kernels take it.
    pub(crate) fn parallel(&self) -> &dyn Parallel {
        match self {
            Runner::Serial => &Sequential,
            #[cfg(feature = "std")]
            Runner::Pool(pool) => &**pool,
        }
    }

    /// How the layers run: at `isa`, on this runner.
    pub(crate) fn run(&self, isa: Isa) -> Run<'_> {
        Run {
            isa,
            parallel: self.parallel(),
        }
    }
}
