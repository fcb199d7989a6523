//! The x86-64 int8 primitives: AVX2 (`vpmaddubsw` with the complement trick), AVX-512 BW
//! (`vpmaddubsw` with the sign trick), AVX-VNNI and AVX-512 VNNI (`vpdpbusd` with the offset
//! trick). The proofs that every sum is exact are in
//! the module docs of [`int8`](super).
//!
//! The intrinsics are called from `#[inline(always)]` methods that are only ever inlined into
//! the `run_*` entry functions below, which enable the target features they need.

use crate::gemm::driver::Columns;
use crate::gemm::int8::driver::{run, sweep, sweep_row, Dot, Job, Sink};
use crate::gemm::int8::quant::AFormat;
use core::arch::x86_64::*;
use pulp::x86::{V3, V4};

/// Reads 4 bytes and broadcasts them to every 32-bit lane.
///
/// # Safety
/// 4 bytes at `ptr` must be readable.
#[inline(always)]
unsafe fn word(ptr: *const i8) -> i32 {
    // SAFETY: the caller guarantees 4 readable bytes.
    unsafe { core::ptr::read_unaligned(ptr as *const i32) }
}

/// AVX2: `|a| (u8) · (w XOR mask(a)) (s8)` pairs with `vpmaddubsw`, then `vpmaddwd` by ones;
/// each row's accumulators start at its correction `Σ_{a < 0} |a|`.
///
/// Where `a < 0`, `w XOR -1 = -w - 1`, so the product is `a · w - |a|`: the row's correction
/// gives the `|a|` back. The same loop with `vpsignb` (the plain sign trick: `|a| · sign(w, a)`)
/// in place of `vpxor` took ~20% longer on Zen 4.
#[derive(Clone, Copy)]
pub(crate) struct Avx2 {
    simd: V3,
    ones: __m256i,
}

/// AVX-VNNI: `(a + 128) (u8) · w (s8)` quadruples with `vpdpbusd` (256-bit), compensated.
#[derive(Clone, Copy)]
pub(crate) struct AvxVnni {
    simd: V3,
}

/// AVX-512 BW: `|a| (u8) · sign(w, a) (s8)` pairs with `vpmaddubsw` on 512-bit vectors, the
/// sign applied by a masked subtraction (`0 - w` where `a < 0`), then `vpmaddwd` by ones.
#[derive(Clone, Copy)]
pub(crate) struct Avx512Bw {
    simd: V4,
    ones: __m512i,
    zero: __m512i,
}

/// AVX-512 VNNI: as [`AvxVnni`] on 512-bit vectors.
#[derive(Clone, Copy)]
pub(crate) struct Avx512Vnni {
    simd: V4,
}

// The SAFETY argument shared by every intrinsic call below: these methods only run inlined into
// the `run_*` entry of their primitive, which enables every feature the intrinsic needs, and
// whose caller proved the CPU has them.

impl Dot for Avx2 {
    type S = V3;
    type B = __m256i;
    type A = (__m256i, __m256i);
    type Acc = __m256i;
    type I32 = __m256i;
    const LANES: usize = 8;
    const FORMAT: AFormat = AFormat::MaskAbs;
    const MAX_MR: usize = 4;
    const HINT_ONE_ROW: bool = true;

    #[inline(always)]
    fn simd(self) -> V3 {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> __m256i {
        // SAFETY: see above (AVX).
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    unsafe fn start(self, row: *const i8, kp: usize) -> __m256i {
        // SAFETY: the row's correction ends it (`AFormat::MaskAbs`, caller); AVX (see above).
        unsafe { _mm256_set1_epi32(word(row.add(2 * kp))) }
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> __m256i {
        // SAFETY: 32 readable bytes (caller); AVX (see above).
        unsafe { _mm256_loadu_si256(ptr as *const __m256i) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> (__m256i, __m256i) {
        // SAFETY: the group (mask, then absolute values) is readable (caller); AVX (see above).
        unsafe {
            (
                _mm256_set1_epi32(word(ptr)),
                _mm256_set1_epi32(word(ptr.add(4))),
            )
        }
    }

    #[inline(always)]
    fn madd(self, acc: __m256i, (mask, abs): (__m256i, __m256i), b: __m256i) -> __m256i {
        // SAFETY: AVX2 (see above).
        unsafe {
            let pairs = _mm256_maddubs_epi16(abs, _mm256_xor_si256(b, mask));
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, self.ones))
        }
    }

    #[inline(always)]
    fn add(self, x: __m256i, y: __m256i) -> __m256i {
        // SAFETY: AVX2 (see above).
        unsafe { _mm256_add_epi32(x, y) }
    }

    #[inline(always)]
    unsafe fn finish(self, acc: __m256i, _sums: *const i8) -> __m256i {
        acc
    }

    #[inline(always)]
    fn to_f32(self, v: __m256i) -> pulp::f32x8 {
        // SAFETY: AVX (see above); both types are 8 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<__m256, pulp::f32x8>(_mm256_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: __m256i, dst: &mut [i32]) {
        // SAFETY: 8 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<__m256i, [i32; 8]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 4, 2, 1>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 4, 2>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

impl Dot for AvxVnni {
    type S = V3;
    type B = __m256i;
    type A = __m256i;
    type Acc = __m256i;
    type I32 = __m256i;
    const LANES: usize = 8;
    const FORMAT: AFormat = AFormat::Offset;
    const MAX_MR: usize = 4;
    const HINT_ONE_ROW: bool = true;

    #[inline(always)]
    fn simd(self) -> V3 {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> __m256i {
        // SAFETY: see above (AVX).
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> __m256i {
        // SAFETY: 32 readable bytes (caller); AVX (see above).
        unsafe { _mm256_loadu_si256(ptr as *const __m256i) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> __m256i {
        // SAFETY: the group is readable (caller); AVX (see above).
        unsafe { _mm256_set1_epi32(word(ptr)) }
    }

    #[inline(always)]
    fn madd(self, acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX-VNNI (see above).
        unsafe { _mm256_dpbusd_avx_epi32(acc, a, b) }
    }

    #[inline(always)]
    fn add(self, x: __m256i, y: __m256i) -> __m256i {
        // SAFETY: AVX2 (see above).
        unsafe { _mm256_add_epi32(x, y) }
    }

    #[inline(always)]
    unsafe fn finish(self, acc: __m256i, sums: *const i8) -> __m256i {
        // SAFETY: 8 channel sums readable (caller); AVX2 (see above).
        unsafe {
            let sums = _mm256_loadu_si256(sums as *const __m256i);
            _mm256_sub_epi32(acc, _mm256_slli_epi32::<7>(sums))
        }
    }

    #[inline(always)]
    fn to_f32(self, v: __m256i) -> pulp::f32x8 {
        // SAFETY: AVX (see above); both types are 8 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<__m256, pulp::f32x8>(_mm256_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: __m256i, dst: &mut [i32]) {
        // SAFETY: 8 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<__m256i, [i32; 8]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 4, 2, 1>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 4, 2>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

impl Dot for Avx512Bw {
    type S = V4;
    type B = __m512i;
    type A = (__m512i, __mmask64);
    type Acc = __m512i;
    type I32 = __m512i;
    const LANES: usize = 16;
    const FORMAT: AFormat = AFormat::MaskAbs;
    const MAX_MR: usize = 8;
    const HINT_ONE_ROW: bool = false;

    #[inline(always)]
    fn simd(self) -> V4 {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> __m512i {
        self.zero
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> __m512i {
        // SAFETY: 64 readable bytes (caller); AVX-512 F (see above).
        unsafe { _mm512_loadu_si512(ptr as *const __m512i) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> (__m512i, __mmask64) {
        // SAFETY: the group (mask, then absolute values) is readable (caller); AVX-512 BW (see
        // above).
        unsafe {
            let negative = _mm512_movepi8_mask(_mm512_set1_epi32(word(ptr)));
            (_mm512_set1_epi32(word(ptr.add(4))), negative)
        }
    }

    #[inline(always)]
    fn madd(self, acc: __m512i, (abs, negative): (__m512i, __mmask64), b: __m512i) -> __m512i {
        // SAFETY: AVX-512 BW (see above).
        unsafe {
            let signed = _mm512_mask_sub_epi8(b, negative, self.zero, b);
            let pairs = _mm512_maddubs_epi16(abs, signed);
            _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, self.ones))
        }
    }

    #[inline(always)]
    fn add(self, x: __m512i, y: __m512i) -> __m512i {
        // SAFETY: AVX-512 F (see above).
        unsafe { _mm512_add_epi32(x, y) }
    }

    #[inline(always)]
    unsafe fn finish(self, acc: __m512i, _sums: *const i8) -> __m512i {
        acc
    }

    #[inline(always)]
    fn to_f32(self, v: __m512i) -> pulp::f32x16 {
        // SAFETY: AVX-512 F (see above); both types are 16 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<__m512, pulp::f32x16>(_mm512_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: __m512i, dst: &mut [i32]) {
        // SAFETY: 16 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<__m512i, [i32; 16]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 2, 4, 2>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                3 | 4 => sweep::<Self, K, 4, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 8, 2>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

impl Dot for Avx512Vnni {
    type S = V4;
    type B = __m512i;
    type A = __m512i;
    type Acc = __m512i;
    type I32 = __m512i;
    const LANES: usize = 16;
    const FORMAT: AFormat = AFormat::Offset;
    const MAX_MR: usize = 8;
    const HINT_ONE_ROW: bool = false;

    #[inline(always)]
    fn simd(self) -> V4 {
        self.simd
    }

    #[inline(always)]
    fn zero(self) -> __m512i {
        // SAFETY: AVX-512 F (see above).
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    unsafe fn load_b(self, ptr: *const i8) -> __m512i {
        // SAFETY: 64 readable bytes (caller); AVX-512 F (see above).
        unsafe { _mm512_loadu_si512(ptr as *const __m512i) }
    }

    #[inline(always)]
    unsafe fn load_a(self, ptr: *const i8) -> __m512i {
        // SAFETY: the group is readable (caller); AVX-512 F (see above).
        unsafe { _mm512_set1_epi32(word(ptr)) }
    }

    #[inline(always)]
    fn madd(self, acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: AVX-512 VNNI (see above).
        unsafe { _mm512_dpbusd_epi32(acc, a, b) }
    }

    #[inline(always)]
    fn add(self, x: __m512i, y: __m512i) -> __m512i {
        // SAFETY: AVX-512 F (see above).
        unsafe { _mm512_add_epi32(x, y) }
    }

    #[inline(always)]
    unsafe fn finish(self, acc: __m512i, sums: *const i8) -> __m512i {
        // SAFETY: 16 channel sums readable (caller); AVX-512 F (see above).
        unsafe {
            let sums = _mm512_loadu_si512(sums as *const __m512i);
            _mm512_sub_epi32(acc, _mm512_slli_epi32::<7>(sums))
        }
    }

    #[inline(always)]
    fn to_f32(self, v: __m512i) -> pulp::f32x16 {
        // SAFETY: AVX-512 F (see above); both types are 16 `f32` lanes of plain bits.
        unsafe { core::mem::transmute::<__m512, pulp::f32x16>(_mm512_cvtepi32_ps(v)) }
    }

    #[inline(always)]
    fn store_i32(self, v: __m512i, dst: &mut [i32]) {
        // SAFETY: 16 `i32` lanes of plain bits.
        let lanes = unsafe { core::mem::transmute::<__m512i, [i32; 16]>(v) };
        dst.copy_from_slice(&lanes[..dst.len()]);
    }

    #[inline(always)]
    unsafe fn rows<K: Sink>(self, job: &Job, sink: &K, cols: Columns, row0: usize, rows: usize) {
        // SAFETY: forwarded contract; each tile height is at least `rows`.
        unsafe {
            match rows {
                1 => sweep_row::<Self, K, 2, 4, 2>(self, job, sink, cols, row0),
                2 => sweep::<Self, K, 2, 4>(self, job, sink, cols, row0, rows),
                3 | 4 => sweep::<Self, K, 4, 4>(self, job, sink, cols, row0, rows),
                _ => sweep::<Self, K, 8, 2>(self, job, sink, cols, row0, rows),
            }
        }
    }
}

/// Runs one task with the AVX2 primitive.
///
/// # Safety
/// The CPU has every feature of pulp's `V3` (an `Isa` at `Avx2` or `Avx512`); the rest as
/// [`run`].
#[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2,f16c")]
pub(crate) unsafe fn run_avx2<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = Avx2 {
        // SAFETY: the caller guarantees `V3`'s features.
        simd: unsafe { V3::new_unchecked() },
        ones: _mm256_set1_epi16(1),
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}

/// Runs one task with the AVX-VNNI primitive.
///
/// # Safety
/// As [`run_avx2`], and the CPU has AVX-VNNI.
#[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2,f16c,avxvnni")]
pub(crate) unsafe fn run_avx_vnni<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = AvxVnni {
        // SAFETY: the caller guarantees `V3`'s features.
        simd: unsafe { V3::new_unchecked() },
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}

/// Runs one task with the AVX-512 BW primitive.
///
/// # Safety
/// The CPU has every feature of pulp's `V4` (an `Isa` at `Avx512`); the rest as [`run`].
#[target_feature(enable = "avx512f,avx512bw,avx512cd,avx512dq,avx512vl")]
#[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2,f16c")]
pub(crate) unsafe fn run_avx512_bw<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = Avx512Bw {
        // SAFETY: the caller guarantees `V4`'s features.
        simd: unsafe { V4::new_unchecked() },
        ones: _mm512_set1_epi16(1),
        zero: _mm512_setzero_si512(),
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}

/// Runs one task with the AVX-512 VNNI primitive.
///
/// # Safety
/// As [`run_avx512_bw`], and the CPU has AVX-512 VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni")]
#[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2,f16c")]
pub(crate) unsafe fn run_avx512_vnni<K: Sink>(job: &Job, sink: &K, cols: Columns) {
    let d = Avx512Vnni {
        // SAFETY: the caller guarantees `V4`'s features.
        simd: unsafe { V4::new_unchecked() },
    };
    // SAFETY: forwarded contract.
    unsafe { run(d, job, sink, cols) }
}
