//! The suites of the report binary, one module each.

use crate::{Budget, Record};

pub mod attention;
pub mod e2e;
pub mod gemm;
pub mod gemm_int8;
pub mod load;
pub mod norm;
pub mod peaks;

/// A suite: its name and the function that measures it.
pub struct Suite {
    /// Name given on the command line.
    pub name: &'static str,
    /// What the suite measures.
    pub about: &'static str,
    /// Runs every case, calling `emit` with each record as soon as it is measured.
    pub run: fn(Budget, &mut dyn FnMut(Record)),
}

/// Every suite, in the order `report all` runs them.
pub const ALL: &[Suite] = &[
    gemm::SUITE,
    attention::SUITE,
    norm::SUITE,
    e2e::SUITE,
    load::SUITE,
];
