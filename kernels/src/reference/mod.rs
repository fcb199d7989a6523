//! Plain scalar kernels that accumulate in `f64`: the truth every test and benchmark compares
//! the fast kernels against. Written for clarity, not speed; they never allocate either.

pub mod activation;
pub mod attention;
pub mod gemm;
pub mod gemm_int8;
pub mod norm;
