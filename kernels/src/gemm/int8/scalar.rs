//! The portable int8 primitive: one channel per "vector", four `i8 · i8` products per step.

use crate::gemm::driver::Columns;
use crate::gemm::int8::driver::{run, sweep, Dot, Job, Sink};
use crate::gemm::int8::quant::AFormat;

/// The scalar primitive.
#[derive(Clone, Copy)]
pub(crate) struct Scalar;

impl Dot for Scalar {
    type S = pulp::Scalar;
    type B = [i8; 4];
    type A = [i8; 4];
    type Acc = i32;
    type I32 = i32;
    const LANES: usize = 1;
    const FORMAT: AFormat = AFormat::Signed;
    const MAX_MR: usize = 4;
    const HINT_ONE_ROW: bool = false;

    #[inline(always)]
    fn simd(self) -> pulp::Scalar {
        pulp::Scalar::new()
    }

    #[inline(always)]
    fn zero(self) -> i32 {
        0
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> [i8; 4] {
        // SAFETY: the caller guarantees 4 readable bytes.
        unsafe { core::ptr::read_unaligned(ptr as *const [i8; 4]) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> [i8; 4] {
        // SAFETY: the caller guarantees 4 readable bytes.
        unsafe { core::ptr::read_unaligned(ptr as *const [i8; 4]) }
    }

    #[inline(always)]
    fn madd(self, acc: i32, a: [i8; 4], b: [i8; 4]) -> i32 {
        // Each product is at most 127² in magnitude; the sums stay exact up to `MAX_K`.
        a.iter().zip(&b).fold(acc, |s, (&x, &y)| {
            s.wrapping_add(i32::from(x) * i32::from(y))
        })
    }

    #[inline(always)]
    fn add(self, x: i32, y: i32) -> i32 {
        x.wrapping_add(y)
    }

    #[inline(always)]
    unsafe fn finish(self, acc: i32, _sums: *const i8) -> i32 {
        acc
    }

    #[inline(always)]
    fn to_f32(self, v: i32) -> f32 {
        v as f32
    }

    #[inline(always)]
    fn store_i32(self, v: i32, dst: &mut [i32]) {
        if let Some(slot) = dst.first_mut() {
            *slot = v;
        }
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep::<Self, K, 1, 4>(self, job, sink, cols, row0, rows),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 4, 4>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

/// Runs one task with the scalar primitive.
///
/// # Safety
/// As [`run`].
pub(crate) unsafe fn run_scalar<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    // SAFETY: forwarded contract.
    unsafe { run(Scalar, job, sink, cols) }
}
