//! The `norm` suite (its cases are being written).

use super::Suite;

/// The `norm` suite.
pub const SUITE: Suite = Suite {
    name: "norm",
    about: "not measured yet",
    run: |_, _| {},
};
