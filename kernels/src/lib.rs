//! tessel-kernels: the hot loops of the tessel inference engine.
//!
//! `#![no_std]` and without `alloc`: every kernel works on caller-provided slices and scratch
//! and never allocates. Matrices and batches of rows are passed as [`View`] and [`ViewMut`],
//! validated when they are made. Each kernel takes an [`Isa`] token and runs the AVX-512,
//! AVX2+FMA, NEON or scalar instantiation of one generic body; [`reference`](mod@reference)
//! holds plain scalar versions that accumulate in `f64`, the truth every test compares against.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod activation;
pub mod attention;
pub mod convert;
pub mod error;
pub mod gemm;
pub mod isa;
pub mod math;
pub mod norm;
pub mod reference;
pub mod scratch;
pub mod softmax;
mod sweep;
mod tiling;
pub mod view;

pub use error::KernelError;
pub use isa::{cpu_features, CpuFeatures, Isa, IsaError, Level};
pub use scratch::{Scratch, ScratchSpec};
pub use view::{View, ViewMut};
