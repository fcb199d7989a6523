//! The `attention` suite (its cases are being written).

use super::Suite;

/// The `attention` suite.
pub const SUITE: Suite = Suite {
    name: "attention",
    about: "not measured yet",
    run: |_, _| {},
};
