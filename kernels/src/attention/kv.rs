//! The element types K and V may be stored in: `f32`, or `f16` for half the bytes a decoder
//! step reads from a long cache (Whisper's cross-attention reads 1500 positions of K and V per
//! layer and step).
//!
//! Every element is widened to `f32` exactly as it is loaded, and all arithmetic is the `f32`
//! arithmetic of the `f32` path: an `f16` call computes what an `f32` call computes on the
//! widened values, so the error bound of [`super`] holds for those values. Rounding K and V to
//! `f16` (done by the caller when it stores them) is a relative change of at most `2^-11` per
//! element.
//!
//! The tiled prefill path reads `f32` only; calls with `f16` K/V and more queries than the
//! decode path takes run the decode path on consecutive runs of
//! [`MAX_DECODE_QUERIES`](super::MAX_DECODE_QUERIES) queries.

use half::f16;
use pulp::Simd;

use super::lanes::MAX_LANES;
use crate::view::View;

/// An element type of K and V. Implemented for `f32` and `f16` only.
pub trait KvElement: sealed::Load + Copy + core::fmt::Debug + Send + Sync + 'static {
    /// Whether the tiled prefill path reads this type (otherwise many queries run the decode
    /// path a few at a time).
    const PREFILL: bool;

    /// The same view as `f32`, where `Self` is `f32`.
    fn as_f32(view: View<'_, Self>) -> Option<View<'_, f32>>;
}

impl KvElement for f32 {
    const PREFILL: bool = true;

    #[inline(always)]
    fn as_f32(view: View<'_, f32>) -> Option<View<'_, f32>> {
        Some(view)
    }
}

impl KvElement for f16 {
    const PREFILL: bool = false;

    #[inline(always)]
    fn as_f32(_: View<'_, f16>) -> Option<View<'_, f32>> {
        None
    }
}

pub(crate) mod sealed {
    use super::*;

    /// How the decode path reads K and V vectors as `f32`.
    pub trait Load: Sized {
        /// `S::F32_LANES` consecutive elements at `ptr`, widened.
        ///
        /// # Safety
        /// The `S::F32_LANES` elements at `ptr` must be readable.
        unsafe fn load<S: Simd>(simd: S, ptr: *const Self) -> S::f32s;

        /// The `len < S::F32_LANES` elements at `ptr` in the low lanes, zeros above.
        ///
        /// # Safety
        /// The `len` elements at `ptr` must be readable.
        unsafe fn load_tail<S: Simd>(simd: S, ptr: *const Self, len: usize) -> S::f32s;
    }

    impl Load for f32 {
        #[inline(always)]
        unsafe fn load<S: Simd>(_: S, ptr: *const f32) -> S::f32s {
            // SAFETY: the caller guarantees the lanes are readable; `read_unaligned` has no
            // alignment requirement and `S::f32s` is plain floats.
            unsafe { core::ptr::read_unaligned(ptr.cast::<S::f32s>()) }
        }

        #[inline(always)]
        unsafe fn load_tail<S: Simd>(simd: S, ptr: *const f32, len: usize) -> S::f32s {
            // SAFETY: the caller guarantees the `len` floats are readable.
            simd.partial_load_f32s(unsafe { core::slice::from_raw_parts(ptr, len) })
        }
    }

    impl Load for f16 {
        #[inline(always)]
        unsafe fn load<S: Simd>(simd: S, ptr: *const f16) -> S::f32s {
            #[cfg(target_arch = "x86_64")]
            {
                use core::any::TypeId;
                use core::mem::transmute_copy;
                use pulp::x86::{V3, V4};
                if TypeId::of::<S>() == TypeId::of::<V4>() {
                    // SAFETY: `S` is `V4` (same type id), so the token and vector types are
                    // `V4`'s; forwarded contract for the 16 elements.
                    unsafe {
                        let v4 = transmute_copy::<S, V4>(&simd);
                        return transmute_copy(&x86::widen_v4(v4, ptr));
                    }
                }
                if TypeId::of::<S>() == TypeId::of::<V3>() {
                    // SAFETY: as above for `V3` and 8 elements; F16C: see `x86::widen_v3`.
                    unsafe { return transmute_copy(&x86::widen_v3(ptr)) };
                }
            }
            // SAFETY: forwarded contract.
            unsafe { widen_lanes(simd, ptr, S::F32_LANES) }
        }

        #[inline(always)]
        unsafe fn load_tail<S: Simd>(simd: S, ptr: *const f16, len: usize) -> S::f32s {
            // SAFETY: forwarded contract.
            unsafe { widen_lanes(simd, ptr, len) }
        }
    }

    /// The `len <= S::F32_LANES` elements at `ptr`, widened exactly through their bits (the
    /// levels without a conversion instruction, and tails), zeros above.
    ///
    /// # Safety
    /// The `len` elements at `ptr` must be readable.
    #[inline(always)]
    unsafe fn widen_lanes<S: Simd>(simd: S, ptr: *const f16, len: usize) -> S::f32s {
        let mut high = [0u32; MAX_LANES];
        for (i, slot) in high.iter_mut().enumerate().take(len.min(S::F32_LANES)) {
            // SAFETY: `i < len`, readable by the caller's contract.
            *slot = u32::from(unsafe { ptr.add(i).read_unaligned() }.to_bits()) << 16;
        }
        // SAFETY: `high` holds `MAX_LANES >= S::F32_LANES` plain integers.
        let words = unsafe { core::ptr::read_unaligned(high.as_ptr().cast::<S::u32s>()) };
        crate::gemm::element::f16_high_to_f32(simd, words)
    }
}

/// `vcvtph2ps` on consecutive `f16`.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{__m128i, __m256i, _mm256_cvtph_ps};
    use half::f16;
    use pulp::x86::V4;

    /// 16 elements at AVX-512.
    ///
    /// # Safety
    /// The 16 `f16` at `ptr` must be readable.
    #[inline(always)]
    pub(super) unsafe fn widen_v4(simd: V4, ptr: *const f16) -> pulp::f32x16 {
        // SAFETY: the caller guarantees 32 readable bytes; no alignment is assumed.
        let words = unsafe { core::ptr::read_unaligned(ptr.cast::<__m256i>()) };
        pulp::cast(simd.avx512f._mm512_cvtph_ps(words))
    }

    /// 8 elements at AVX2.
    ///
    /// # Safety
    /// The 8 `f16` at `ptr` must be readable, and the CPU must have F16C: this crate's kernels
    /// reach a `V3` token only through [`Isa::dispatch`](crate::Isa::dispatch), which runs them
    /// in a function compiled with F16C, and an `Isa` at the `Avx2` level is only built after
    /// detection found it.
    #[inline(always)]
    pub(super) unsafe fn widen_v3(ptr: *const f16) -> pulp::f32x8 {
        // SAFETY: the caller guarantees 16 readable bytes; no alignment is assumed.
        let words = unsafe { core::ptr::read_unaligned(ptr.cast::<__m128i>()) };
        // SAFETY: F16C, guaranteed by the caller.
        pulp::cast(unsafe { _mm256_cvtph_ps(words) })
    }
}
