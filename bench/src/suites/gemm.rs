//! The `gemm` suite (its cases are being written).

use super::Suite;

/// The `gemm` suite.
pub const SUITE: Suite = Suite {
    name: "gemm",
    about: "not measured yet",
    run: |_, _| {},
};
