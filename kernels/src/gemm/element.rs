//! The element types a packed weight can be stored in, and how a microkernel widens them to
//! `f32` vectors.
//!
//! `f32` panels are read as they are. `f16` and `bf16` panels interleave pairs of rows of `B`
//! (see [`packed_b`](super::packed_b)): one `u32` word per column holds row `2p` in its low
//! half and row `2p + 1` in its high half, so one vector load of words yields two rows of
//! `LANES` columns and two integer operations per row put each 16-bit value in the high half of
//! its lane. From there `bf16` is an `f32` already; `f16` is rebased exactly (zero, subnormal,
//! infinity and NaN included) with integer operations and one multiply. The same generic body
//! runs at every ISA level, except for `f16` on x86-64: AVX-512 and AVX2 (through F16C) split a
//! row pair with one permute (AVX2: a byte shuffle and a 64-bit permute) and convert each row
//! with `vcvtph2ps`, which is exact too. Inside a microkernel AVX2 converts the pair's two
//! halves straight from memory and gathers each row with one `vshufps`, leaving the columns in
//! an order the kernel restores once per tile (`Widen::load_pair_tile`). A tile of one row of
//! `A` against `f16` at those levels does not split the pairs at all
//! ([`f16_pairs`](super::f16_pairs)).

use core::fmt::Debug;
use half::{bf16, f16};
use pulp::Simd;

/// A type a [`PackedB`](super::PackedB) weight can be stored in: `f32`, `half::f16` or
/// `half::bf16`. Activations and accumulation are `f32` whatever the weight type.
///
/// Sealed: the microkernels know how to widen exactly these three.
pub trait Element: sealed::Widen + Copy + Debug + PartialEq + Send + Sync + 'static {
    /// The type's name in reports (`"f32"`, `"f16"`, `"bf16"`).
    const NAME: &'static str;
    /// Rows of `B` interleaved per packed column word: 1 for `f32`, 2 for the 16-bit types.
    const K_GROUP: usize;
    /// Zero (the padding value).
    const ZERO: Self;

    /// `value` rounded to this type, to nearest, ties to even (NaN stays NaN).
    fn from_f32(value: f32) -> Self;

    /// The exact `f32` value.
    fn to_f32(self) -> f32;
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    const K_GROUP: usize = 1;
    const ZERO: f32 = 0.0;

    fn from_f32(value: f32) -> f32 {
        value
    }

    fn to_f32(self) -> f32 {
        self
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    const K_GROUP: usize = 2;
    const ZERO: f16 = f16::ZERO;

    fn from_f32(value: f32) -> f16 {
        f16::from_f32(value)
    }

    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    const K_GROUP: usize = 2;
    const ZERO: bf16 = bf16::ZERO;

    fn from_f32(value: f32) -> bf16 {
        bf16::from_f32(value)
    }

    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

pub(crate) mod sealed {
    use super::*;

    /// How a microkernel reads packed rows of this type as `f32` vectors.
    pub trait Widen: Sized {
        /// Whether a one-row product hints its weights into L1 ahead of the sweep
        /// ([`STREAM_AHEAD_BYTES`](crate::gemm::tile::STREAM_AHEAD_BYTES)). Plain `f32` does
        /// not: a load per vector leaves the hardware prefetcher enough time, and the hints cost
        /// load slots (Zen 4, `report gemm`, one row against the stream read of its bytes:
        /// `1x512x2048` 0.75 with hints, 0.96 without; `1x512x32000` 0.93 and 1.04 at AVX2).
        /// The widening 16-bit types do: their conversions slow the sweep, and without hints an
        /// L3-resident `1x512x32000` fell from 0.37 to 0.31 (AVX2) and 0.44 to 0.37 (AVX-512).
        const HINT_ONE_ROW: bool;

        /// Rows `p` and `p + 1` (`p` even) of `LANES` consecutive columns. `ptr` is where
        /// element `(p, first column)` lives: for `f32` row `p + 1` is `PANEL_COLS` further; for
        /// the 16-bit types `ptr` starts `LANES` column words.
        ///
        /// # Safety
        /// Both rows' `LANES` columns (`2 · LANES` elements for 16-bit types) must be readable.
        unsafe fn load_pair<S: Simd>(simd: S, ptr: *const Self) -> (S::f32s, S::f32s);

        /// Row `p` (`p` even, the last row of an odd `k`) of `LANES` consecutive columns.
        ///
        /// # Safety
        /// As [`Widen::load_pair`] for row `p` (16-bit panels pad the missing row `p + 1`, so
        /// their words are whole).
        unsafe fn load_row<S: Simd>(simd: S, ptr: *const Self) -> S::f32s;

        /// [`Widen::load_pair`] with each vector's columns in an order of the type's choosing,
        /// which [`Widen::restore_order`] puts back: a microkernel accumulates in that order
        /// and restores its sums once per tile. The plain order unless stated otherwise.
        ///
        /// # Safety
        /// As [`Widen::load_pair`].
        #[inline(always)]
        unsafe fn load_pair_tile<S: Simd>(simd: S, ptr: *const Self) -> (S::f32s, S::f32s) {
            // SAFETY: forwarded contract.
            unsafe { Self::load_pair(simd, ptr) }
        }

        /// [`Widen::load_row`] in the column order of [`Widen::load_pair_tile`].
        ///
        /// # Safety
        /// As [`Widen::load_row`].
        #[inline(always)]
        unsafe fn load_row_tile<S: Simd>(simd: S, ptr: *const Self) -> S::f32s {
            // SAFETY: forwarded contract.
            unsafe { Self::load_row(simd, ptr) }
        }

        /// A vector of sums in the column order of [`Widen::load_pair_tile`], in plain order.
        /// The reordering is its own inverse, so it also takes plain sums into the tile's
        /// order (a tile that continues from stored partial sums).
        #[inline(always)]
        fn restore_order<S: Simd>(_: S, sums: S::f32s) -> S::f32s {
            sums
        }
    }

    impl Widen for f32 {
        const HINT_ONE_ROW: bool = false;

        #[inline(always)]
        unsafe fn load_pair<S: Simd>(_: S, ptr: *const f32) -> (S::f32s, S::f32s) {
            use crate::gemm::packed_b::PANEL_COLS;
            // SAFETY: the caller guarantees both rows are readable; `read_unaligned` assumes
            // no alignment of the packed storage.
            unsafe {
                (
                    core::ptr::read_unaligned(ptr as *const S::f32s),
                    core::ptr::read_unaligned(ptr.add(PANEL_COLS) as *const S::f32s),
                )
            }
        }

        #[inline(always)]
        unsafe fn load_row<S: Simd>(_: S, ptr: *const f32) -> S::f32s {
            // SAFETY: the caller guarantees the row is readable.
            unsafe { core::ptr::read_unaligned(ptr as *const S::f32s) }
        }
    }

    impl Widen for bf16 {
        const HINT_ONE_ROW: bool = true;

        #[inline(always)]
        unsafe fn load_pair<S: Simd>(simd: S, ptr: *const bf16) -> (S::f32s, S::f32s) {
            // SAFETY: forwarded contract.
            let (even, odd) = unsafe { high_halves(simd, ptr as *const u16) };
            (
                simd.transmute_f32s_u32s(even),
                simd.transmute_f32s_u32s(odd),
            )
        }

        #[inline(always)]
        unsafe fn load_row<S: Simd>(simd: S, ptr: *const bf16) -> S::f32s {
            // SAFETY: forwarded contract.
            let even = unsafe { high_halves(simd, ptr as *const u16) }.0;
            simd.transmute_f32s_u32s(even)
        }
    }

    impl Widen for f16 {
        const HINT_ONE_ROW: bool = true;

        #[inline(always)]
        unsafe fn load_pair<S: Simd>(simd: S, ptr: *const f16) -> (S::f32s, S::f32s) {
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V4>() {
                // SAFETY: `S` is `V4` (same type id), so the token and the vector types are
                // the same types as `V4`'s; forwarded contract for the load.
                unsafe {
                    let v4 = core::mem::transmute_copy::<S, pulp::x86::V4>(&simd);
                    let (even, odd) = x86::f16_pair_v4(v4, ptr);
                    return (
                        core::mem::transmute_copy::<pulp::f32x16, S::f32s>(&even),
                        core::mem::transmute_copy::<pulp::f32x16, S::f32s>(&odd),
                    );
                }
            }
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V3>() {
                // SAFETY: `S` is `V3` (same type id), so the token and the vector types are
                // the same types as `V3`'s; forwarded contract for the load. F16C: see
                // `f16_pair_v3`.
                unsafe {
                    let v3 = core::mem::transmute_copy::<S, pulp::x86::V3>(&simd);
                    let (even, odd) = x86::f16_pair_v3(v3, ptr);
                    return (
                        core::mem::transmute_copy::<pulp::f32x8, S::f32s>(&even),
                        core::mem::transmute_copy::<pulp::f32x8, S::f32s>(&odd),
                    );
                }
            }
            // SAFETY: forwarded contract.
            let (even, odd) = unsafe { high_halves(simd, ptr as *const u16) };
            (f16_high_to_f32(simd, even), f16_high_to_f32(simd, odd))
        }

        /// At AVX2 the columns come as `[0, 1, 4, 5, 2, 3, 6, 7]`: each 8-word half of the
        /// pair converted straight from memory, then one `vshufps` per row gathers its halves,
        /// without `load_pair`'s byte shuffle, cross-lane permute and extract.
        #[inline(always)]
        unsafe fn load_pair_tile<S: Simd>(simd: S, ptr: *const f16) -> (S::f32s, S::f32s) {
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V3>() {
                // SAFETY: `S` is `V3` (same type id), so the token and the vector types are
                // the same types as `V3`'s; forwarded contract for the load. F16C: see
                // `f16_pair_v3`.
                unsafe {
                    let v3 = core::mem::transmute_copy::<S, pulp::x86::V3>(&simd);
                    let (even, odd) = x86::f16_pair_v3_tile(v3, ptr);
                    return (
                        core::mem::transmute_copy::<pulp::f32x8, S::f32s>(&even),
                        core::mem::transmute_copy::<pulp::f32x8, S::f32s>(&odd),
                    );
                }
            }
            // SAFETY: forwarded contract.
            unsafe { Self::load_pair(simd, ptr) }
        }

        #[inline(always)]
        unsafe fn load_row_tile<S: Simd>(simd: S, ptr: *const f16) -> S::f32s {
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V3>() {
                // SAFETY: forwarded contract: the pair's words are whole (the packer pads the
                // missing odd row), and its even row is this row.
                return unsafe { Self::load_pair_tile(simd, ptr).0 };
            }
            // SAFETY: forwarded contract.
            unsafe { Self::load_row(simd, ptr) }
        }

        #[inline(always)]
        fn restore_order<S: Simd>(simd: S, sums: S::f32s) -> S::f32s {
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V3>() {
                // SAFETY: `S` is `V3` (same type id): the same token and vector types.
                unsafe {
                    let v3 = core::mem::transmute_copy::<S, pulp::x86::V3>(&simd);
                    let sums = core::mem::transmute_copy::<S::f32s, pulp::f32x8>(&sums);
                    let plain = x86::restore_v3(v3, sums);
                    return core::mem::transmute_copy::<pulp::f32x8, S::f32s>(&plain);
                }
            }
            let _ = simd;
            sums
        }

        #[inline(always)]
        unsafe fn load_row<S: Simd>(simd: S, ptr: *const f16) -> S::f32s {
            #[cfg(target_arch = "x86_64")]
            if core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V3>()
                || core::any::TypeId::of::<S>() == core::any::TypeId::of::<pulp::x86::V4>()
            {
                // SAFETY: forwarded contract: the pair's words are whole (the packer pads the
                // missing odd row), and its even row is this row.
                return unsafe { Self::load_pair(simd, ptr).0 };
            }
            // SAFETY: forwarded contract.
            let even = unsafe { high_halves(simd, ptr as *const u16) }.0;
            f16_high_to_f32(simd, even)
        }
    }
}

/// `vcvtph2ps` for `f16` row pairs, AVX-512's and AVX2's (F16C) forms: about half the
/// instructions of the integer widening.
///
/// pulp's `V3` token does not enable F16C; [`Isa::dispatch`](crate::Isa::dispatch) runs `V3`
/// code in a function that does, so the conversion inlines into the microkernel there.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{__m128i, __m256i, __m512i, _mm256_cvtph_ps};
    use half::f16;
    use pulp::x86::{V3, V4};

    /// Per 128-bit lane of 4 words: the even 16-bit halves to the low 8 bytes, the odd ones to
    /// the high 8 bytes (`vpshufb` indices, repeated for both lanes).
    const DEINTERLEAVE_LANE: [u8; 32] = [
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, //
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
    ];

    /// Rows `p` (even) and `p + 1` of 8 columns of an `f16` panel at AVX2: one load of 8 words,
    /// a byte shuffle inside each lane and a 64-bit permute across them put the 8 even halves
    /// in the low 128 bits and the 8 odd ones in the high, then two F16C conversions.
    ///
    /// # Safety
    /// The 16 `f16` at `ptr` must be readable, and the CPU must have F16C. The second holds
    /// wherever a `V3` token reaches this crate's microkernels: they run only through
    /// [`Isa::dispatch`](crate::Isa::dispatch), and an `Isa` at the `Avx2` level is only built
    /// after detection found F16C (the `Avx512` level, which implies it, uses `f16_pair_v4`).
    #[inline(always)]
    pub(super) unsafe fn f16_pair_v3(simd: V3, ptr: *const f16) -> (pulp::f32x8, pulp::f32x8) {
        // SAFETY: the caller guarantees 32 readable bytes; no alignment is assumed.
        let words = unsafe { core::ptr::read_unaligned(ptr as *const __m256i) };
        // SAFETY: 32 bytes of plain integers either way.
        let idx = unsafe { core::mem::transmute::<[u8; 32], __m256i>(DEINTERLEAVE_LANE) };
        let halves = simd.avx2._mm256_shuffle_epi8(words, idx);
        // 64-bit quarters (e0-3, o0-3, e4-7, o4-7) reordered to (e0-3, e4-7, o0-3, o4-7).
        let split = simd.avx2._mm256_permute4x64_epi64::<0b11_01_10_00>(halves);
        let even = simd.avx._mm256_castsi256_si128(split);
        let odd = simd.avx2._mm256_extracti128_si256::<1>(split);
        // SAFETY: `vcvtph2ps` needs F16C, which the caller guarantees; the function calling
        // this is compiled with it enabled (`Isa::dispatch`), so the intrinsic inlines.
        unsafe {
            (
                pulp::cast(_mm256_cvtph_ps(even)),
                pulp::cast(_mm256_cvtph_ps(odd)),
            )
        }
    }

    /// Rows `p` (even) and `p + 1` of 8 columns of an `f16` panel at AVX2, each in the column
    /// order `[0, 1, 4, 5, 2, 3, 6, 7]`: the two 8-word halves converted from memory
    /// (`[e0, o0, e1, o1 | e2, o2, e3, o3]` and the same for columns 4–7), then `vshufps`
    /// takes lanes 0 and 2 (even rows) or 1 and 3 (odd rows) of each 128-bit half of both.
    ///
    /// # Safety
    /// As [`f16_pair_v3`].
    #[inline(always)]
    pub(super) unsafe fn f16_pair_v3_tile(simd: V3, ptr: *const f16) -> (pulp::f32x8, pulp::f32x8) {
        // SAFETY: 16 readable bytes at `ptr` and 16 more after them, F16C: the caller's
        // guarantee; the function calling this is compiled with F16C enabled (`Isa::dispatch`).
        let (low, high) = unsafe {
            (
                _mm256_cvtph_ps(core::ptr::read_unaligned(ptr as *const __m128i)),
                _mm256_cvtph_ps(core::ptr::read_unaligned(ptr.add(8) as *const __m128i)),
            )
        };
        (
            pulp::cast(simd.avx._mm256_shuffle_ps::<0b10_00_10_00>(low, high)),
            pulp::cast(simd.avx._mm256_shuffle_ps::<0b11_01_11_01>(low, high)),
        )
    }

    /// Columns `[0, 1, 4, 5, 2, 3, 6, 7]` (of [`f16_pair_v3_tile`]) back in order: one 64-bit
    /// permute.
    #[inline(always)]
    pub(super) fn restore_v3(simd: V3, sums: pulp::f32x8) -> pulp::f32x8 {
        let sums = simd.avx._mm256_castps_pd(pulp::cast(sums));
        pulp::cast(
            simd.avx
                ._mm256_castpd_ps(simd.avx2._mm256_permute4x64_pd::<0b11_01_10_00>(sums)),
        )
    }

    /// Gathers the even 16-bit halves of the 32 into the low 256 bits, the odd ones above.
    const DEINTERLEAVE: [u16; 32] = {
        let mut idx = [0u16; 32];
        let mut i = 0;
        while i < 16 {
            idx[i] = 2 * i as u16;
            idx[16 + i] = 2 * i as u16 + 1;
            i += 1;
        }
        idx
    };

    /// Rows `p` (even) and `p + 1` of 16 columns of an `f16` panel: one load of 16 words, one
    /// permute, two conversions.
    ///
    /// # Safety
    /// The 32 `f16` at `ptr` must be readable.
    #[inline(always)]
    pub(super) unsafe fn f16_pair_v4(simd: V4, ptr: *const f16) -> (pulp::f32x16, pulp::f32x16) {
        // SAFETY: the caller guarantees 64 readable bytes; no alignment is assumed.
        let words = unsafe { core::ptr::read_unaligned(ptr as *const __m512i) };
        // SAFETY: 64 bytes of plain integers either way.
        let idx = unsafe { core::mem::transmute::<[u16; 32], __m512i>(DEINTERLEAVE) };
        let split = simd.avx512bw._mm512_permutexvar_epi16(idx, words);
        let even = simd.avx512f._mm512_castsi512_si256(split);
        let odd = simd.avx512f._mm512_extracti64x4_epi64::<1>(split);
        (
            pulp::cast(simd.avx512f._mm512_cvtph_ps(even)),
            pulp::cast(simd.avx512f._mm512_cvtph_ps(odd)),
        )
    }
}

/// Loads `LANES` column words of a 16-bit row pair and returns, per column, the even row's and
/// the odd row's 16 bits in the high half of a `u32` lane (low half zero).
///
/// # Safety
/// `2 · LANES` `u16` at `ptr` must be readable.
#[inline(always)]
unsafe fn high_halves<S: Simd>(simd: S, ptr: *const u16) -> (S::u32s, S::u32s) {
    // SAFETY: the caller guarantees the words are readable; no alignment is assumed. The words
    // are native-endian: the packer stores the even row in the low half of each word.
    let words = unsafe { core::ptr::read_unaligned(ptr as *const S::u32s) };
    let even = simd.wrapping_dyn_shl_u32s(words, simd.splat_u32s(16));
    let odd = simd.and_u32s(words, simd.splat_u32s(0xFFFF_0000));
    (even, odd)
}

/// Exact `f16 → f32` for f16 bits held in the high half of each lane (low half zero).
///
/// The magnitude shifted right by 3 lines the f16 exponent and mantissa up with f32's; read as
/// an f32 that is the value scaled by `2^-112` (subnormal f16 become subnormal f32 exactly), so
/// one multiply by `2^112` rebases every finite value. Infinity and NaN (exponent all ones)
/// get the f32 all-ones exponent instead, keeping the NaN payload.
#[inline(always)]
pub(crate) fn f16_high_to_f32<S: Simd>(simd: S, x: S::u32s) -> S::f32s {
    /// `2^112` (biased exponent `112 + 127`).
    const REBASE: u32 = (112 + 127) << 23;
    /// The f16 infinity's magnitude after the shift.
    const INF_SHIFTED: i32 = 0x7C00_0000 >> 3;
    let sign = simd.and_u32s(x, simd.splat_u32s(0x8000_0000));
    let magnitude = simd.wrapping_dyn_shr_u32s(simd.xor_u32s(x, sign), simd.splat_u32s(3));
    let finite = simd.mul_f32s(
        simd.transmute_f32s_u32s(magnitude),
        simd.splat_f32s(f32::from_bits(REBASE)),
    );
    // Magnitudes are below 2^31, so the signed compare is exact (and cheaper on AVX2).
    let special = simd.greater_than_i32s(
        simd.transmute_i32s_u32s(magnitude),
        simd.splat_i32s(INF_SHIFTED - 1),
    );
    let inf_nan = simd.or_u32s(magnitude, simd.splat_u32s(0x7F80_0000));
    let bits = simd.select_u32s(special, inf_nan, simd.transmute_u32s_f32s(finite));
    simd.transmute_f32s_u32s(simd.or_u32s(bits, sign))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widening agrees bit for bit with `half` on every f16 (NaN: any NaN).
    #[test]
    fn f16_widening_is_exact_for_every_value() {
        let simd = pulp::Scalar::new();
        for bits in 0..=u16::MAX {
            let got = f16_high_to_f32(simd, (bits as u32) << 16);
            let want = f16::from_bits(bits).to_f32();
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{bits:#06x}");
            }
        }
    }
}
