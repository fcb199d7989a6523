//! Empty: the Miri harness is `tests/scalar.rs`.
