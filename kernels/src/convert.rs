//! `f32 → f16` narrowing, round to nearest even, for operands a kernel reads as `f16` (K and V
//! of a long cache, [`crate::attention::KvElement`]).
//!
//! AVX-512 and AVX2 use `vcvtps2ph` (F16C), 16 or 8 values per instruction; the other levels and
//! the tail use [`half::f16::from_f32`]. Both round to nearest even, saturate to ±infinity past
//! the f16 range and keep NaN a NaN (the payload may differ): every non-NaN value gives the
//! same bits at every level.

use half::f16;
use pulp::Simd;

use crate::error::KernelError;
use crate::isa::Isa;

/// Writes `src[i]` rounded to `f16` into `dst[i]`; the two must have the same length.
pub fn narrow_to_f16(isa: Isa, src: &[f32], dst: &mut [f16]) -> Result<(), KernelError> {
    if src.len() != dst.len() {
        return Err(KernelError::InvalidArgument(
            "narrow_to_f16: source and destination lengths differ",
        ));
    }
    struct Narrow<'a> {
        src: &'a [f32],
        dst: &'a mut [f16],
    }
    impl pulp::WithSimd for Narrow<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
            let done = vectors(simd, self.src, self.dst);
            for (d, &s) in self.dst[done..].iter_mut().zip(&self.src[done..]) {
                *d = f16::from_f32(s);
            }
        }
    }
    isa.dispatch(Narrow { src, dst });
    Ok(())
}

/// Narrows the leading whole vectors with `vcvtps2ph` where the level has it; returns how many
/// elements it wrote (0 elsewhere).
#[inline(always)]
fn vectors<S: Simd>(simd: S, src: &[f32], dst: &mut [f16]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use core::any::TypeId;
        use core::arch::x86_64::{__m128i, __m256i, _mm256_cvtps_ph, _MM_FROUND_TO_NEAREST_INT};
        use pulp::x86::{V3, V4};
        let n = src.len().min(dst.len());
        if TypeId::of::<S>() == TypeId::of::<V4>() {
            // SAFETY: `S` is `V4` (same type id), so the token is a `V4`.
            let v4 = unsafe { core::mem::transmute_copy::<S, V4>(&simd) };
            let whole = n - n % 16;
            for (s, d) in src[..whole].chunks_exact(16).zip(dst.chunks_exact_mut(16)) {
                // SAFETY: 16 floats read and 16 halves written, inside both chunks; no
                // alignment is assumed.
                unsafe {
                    let x = core::ptr::read_unaligned(s.as_ptr().cast());
                    let h = v4.avx512f._mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                    core::ptr::write_unaligned(d.as_mut_ptr().cast::<__m256i>(), h);
                }
            }
            return whole;
        }
        if TypeId::of::<S>() == TypeId::of::<V3>() {
            let whole = n - n % 8;
            for (s, d) in src[..whole].chunks_exact(8).zip(dst.chunks_exact_mut(8)) {
                // SAFETY: 8 floats read and 8 halves written, inside both chunks; no alignment
                // is assumed. F16C: a `V3` token reaches this crate's code only through
                // `Isa::dispatch`, which runs it in a function compiled with F16C, and an `Isa`
                // at the `Avx2` level is only built after detection found it.
                unsafe {
                    let x = core::ptr::read_unaligned(s.as_ptr().cast());
                    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
                    core::ptr::write_unaligned(d.as_mut_ptr().cast::<__m128i>(), h);
                }
            }
            return whole;
        }
    }
    let _ = (simd, src, dst);
    0
}
