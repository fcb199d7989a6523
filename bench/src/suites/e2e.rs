//! The `e2e` suite (its cases are being written).

use super::Suite;

/// The `e2e` suite.
pub const SUITE: Suite = Suite {
    name: "e2e",
    about: "not measured yet",
    run: |_, _| {},
};
