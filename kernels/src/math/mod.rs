//! Vectorised elementary functions, generic over the pulp SIMD level, each with a stated and
//! tested maximum error.

mod exp;

pub use exp::{exp, exp_non_positive, exp_slice, EXP_MAX_RELATIVE_ERROR};
