//! Vectorised elementary functions, generic over the pulp SIMD level, each with a stated and
//! tested maximum error.

mod exp;
mod reciprocal;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use exp::exp_in_range;
pub use exp::{exp, exp_non_positive, exp_slice, EXP_MAX_RELATIVE_ERROR};
pub use reciprocal::{reciprocal, RECIPROCAL_MAX_RELATIVE_ERROR};
