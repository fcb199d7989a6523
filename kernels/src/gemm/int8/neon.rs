//! The AArch64 int8 primitives: `sdot` (the dot-product extension, through inline assembly:
//! its intrinsics are not stable at the workspace's MSRV) and, without it, `smull` + `sadalp`.
//! Both multiply `i8 · i8`, so `A` is stored signed and no compensation is needed.
//!
//! The intrinsics and the assembly are called from `#[inline(always)]` methods that are only
//! ever inlined into the `run_*` entry functions below, which enable the features they need.

use crate::gemm::driver::Columns;
use crate::gemm::int8::driver::{run, sweep, sweep_row, Dot, Job, Sink};
use crate::gemm::int8::quant::AFormat;
use core::arch::aarch64::*;
use pulp::aarch64::Neon;

/// Reads one group of 4 activations and repeats it in every 32-bit lane.
///
/// # Safety
/// 4 bytes at `ptr` must be readable.
#[inline(always)]
unsafe fn group(ptr: *const i8) -> int8x16_t {
    // SAFETY: the caller guarantees 4 readable bytes; NEON is the AArch64 baseline.
    unsafe {
        let word = core::ptr::read_unaligned(ptr as *const i32);
        vreinterpretq_s8_s32(vdupq_n_s32(word))
    }
}

/// NEON with the dot-product extension: one `sdot` per 4 channels × 4 depths.
#[derive(Clone, Copy)]
pub(crate) struct NeonDot {
    simd: Neon,
}

/// Plain NEON: `smull`/`smull2` to 16-bit products (|q_a · q_w| <= 127² fits), then `sadalp`
/// adds adjacent pairs into 32-bit lanes; `addp` folds the two halves at the end.
#[derive(Clone, Copy)]
pub(crate) struct NeonPlain {
    simd: Neon,
}

// The SAFETY argument shared by every intrinsic call below: these methods only run inlined into
// the `run_*` entry of their primitive, which enables every feature the instruction needs, and
// whose caller proved the CPU has them.

impl Dot for NeonDot {
    type S = Neon;
    type B = int8x16_t;
    type A = int8x16_t;
    type Acc = int32x4_t;
    type I32 = int32x4_t;
    const LANES: usize = 4;
    const FORMAT: AFormat = AFormat::Signed;
    const MAX_MR: usize = 4;
    const HINT_ONE_ROW: bool = false;

    #[inline(always)]
    fn simd(self) -> Neon {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> int32x4_t {
        // SAFETY: NEON (see above).
        unsafe { vdupq_n_s32(0) }
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> int8x16_t {
        // SAFETY: 16 readable bytes (caller); NEON (see above).
        unsafe { vld1q_s8(ptr) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> int8x16_t {
        // SAFETY: the group is readable (caller).
        unsafe { group(ptr) }
    }

    #[inline(always)]
    fn madd(self, mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: `sdot` only reads and writes these registers; the dot-product extension is
        // enabled (see above).
        unsafe {
            core::arch::asm!(
                "sdot {acc:v}.4s, {b:v}.16b, {a:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        acc
    }

    #[inline(always)]
    fn add(self, x: int32x4_t, y: int32x4_t) -> int32x4_t {
        // SAFETY: NEON (see above).
        unsafe { vaddq_s32(x, y) }
    }

    #[inline(always)]
    unsafe fn finish(self, acc: int32x4_t, _sums: *const i8) -> int32x4_t {
        acc
    }

    #[inline(always)]
    fn to_f32(self, v: int32x4_t) -> pulp::f32x4 {
        // SAFETY: NEON (see above); both types are 4 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<float32x4_t, pulp::f32x4>(vcvtq_f32_s32(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: int32x4_t, dst: &mut [i32]) {
        // SAFETY: 4 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<int32x4_t, [i32; 4]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 8, 1, 1>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 8>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 4, 4>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

impl Dot for NeonPlain {
    type S = Neon;
    type B = int8x16_t;
    type A = int8x16_t;
    type Acc = (int32x4_t, int32x4_t);
    type I32 = int32x4_t;
    const LANES: usize = 4;
    const FORMAT: AFormat = AFormat::Signed;
    const MAX_MR: usize = 4;
    const HINT_ONE_ROW: bool = false;

    #[inline(always)]
    fn simd(self) -> Neon {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> (int32x4_t, int32x4_t) {
        // SAFETY: NEON (see above).
        unsafe { (vdupq_n_s32(0), vdupq_n_s32(0)) }
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> int8x16_t {
        // SAFETY: 16 readable bytes (caller); NEON (see above).
        unsafe { vld1q_s8(ptr) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> int8x16_t {
        // SAFETY: the group is readable (caller).
        unsafe { group(ptr) }
    }

    #[inline(always)]
    fn madd(
        self,
        (lo, hi): (int32x4_t, int32x4_t),
        a: int8x16_t,
        b: int8x16_t,
    ) -> (int32x4_t, int32x4_t) {
        // Lanes of `lo`: channel 0 depths 0+1, 2+3, channel 1 depths 0+1, 2+3; `hi`: channels
        // 2 and 3.
        // SAFETY: NEON (see above).
        unsafe {
            let lo_products = vmull_s8(vget_low_s8(b), vget_low_s8(a));
            let hi_products = vmull_high_s8(b, a);
            (vpadalq_s16(lo, lo_products), vpadalq_s16(hi, hi_products))
        }
    }

    #[inline(always)]
    fn add(
        self,
        (x_lo, x_hi): (int32x4_t, int32x4_t),
        (y_lo, y_hi): (int32x4_t, int32x4_t),
    ) -> (int32x4_t, int32x4_t) {
        // SAFETY: NEON (see above).
        unsafe { (vaddq_s32(x_lo, y_lo), vaddq_s32(x_hi, y_hi)) }
    }

    #[inline(always)]
    unsafe fn finish(self, (lo, hi): (int32x4_t, int32x4_t), _sums: *const i8) -> int32x4_t {
        // SAFETY: NEON (see above).
        unsafe { vpaddq_s32(lo, hi) }
    }

    #[inline(always)]
    fn to_f32(self, v: int32x4_t) -> pulp::f32x4 {
        // SAFETY: NEON (see above); both types are 4 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<float32x4_t, pulp::f32x4>(vcvtq_f32_s32(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: int32x4_t, dst: &mut [i32]) {
        // SAFETY: 4 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<int32x4_t, [i32; 4]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 8, 1, 1>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 4, 2>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

/// Runs one task with the dot-product primitive.
///
/// # Safety
/// The CPU has the dot-product extension (`Isa::has_neon_dotprod`); the rest as [`run`].
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn run_neon_dot<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = NeonDot {
        // SAFETY: NEON is the AArch64 baseline.
        simd: unsafe { Neon::new_unchecked() },
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}

/// Runs one task with the plain NEON primitive.
///
/// # Safety
/// As [`run`].
#[target_feature(enable = "neon")]
pub(crate) unsafe fn run_neon<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = NeonPlain {
        // SAFETY: NEON is the AArch64 baseline.
        simd: unsafe { Neon::new_unchecked() },
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}
