//! Many horizontal sums at once: `L` vectors of `L` lanes each (`L` = the level's f32 lanes)
//! become one vector whose lane `j` is the sum of vector `j`'s lanes.
//!
//! A transpose-and-add tree: each level interleaves pairs of vectors and adds them, halving the
//! vector count and doubling the number of vectors whose partial sums share a register, so `L`
//! sums cost `L - 1` additions and about twice as many shuffles (AVX-512: 45 instructions for
//! 16 sums, against about 8 per sum one vector at a time, plus no scalar stores). The decode
//! path uses it to turn per-key partial dot products into one vector of scores.
//!
//! AVX-512, AVX2 and NEON have their trees; other levels (scalar) sum vector by vector.

use pulp::Simd;

/// The most f32 lanes of any level (AVX-512).
pub(crate) const MAX_LANES: usize = 16;

/// `out[j] = Σ_l rows[j][l]` for `j < S::F32_LANES`; `rows[S::F32_LANES..]` are ignored.
#[inline(always)]
pub(crate) fn transpose_sum<S: Simd>(simd: S, rows: [S::f32s; MAX_LANES]) -> S::f32s {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(out) = x86::transpose_sum(simd, rows) {
            return out;
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if let Some(out) = arm::transpose_sum(simd, rows) {
            return out;
        }
    }
    let mut sums = [0.0f32; MAX_LANES];
    for (sum, &row) in sums.iter_mut().zip(&rows).take(S::F32_LANES) {
        *sum = simd.reduce_sum_f32s(row);
    }
    simd.partial_load_f32s(&sums[..S::F32_LANES.min(MAX_LANES)])
}

/// `simd` as the concrete token `T`, when `S` is `T`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn token_as<S: Simd, T: Simd>(simd: S) -> Option<T> {
    if core::any::TypeId::of::<S>() == core::any::TypeId::of::<T>() {
        // SAFETY: `S` and `T` are the same type (equal `TypeId`s), so this copy is the
        // identity; the token proves its features as `S` did.
        Some(unsafe { core::mem::transmute_copy::<S, T>(&simd) })
    } else {
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{token_as, MAX_LANES};
    use core::arch::x86_64::{__m256, __m512};
    use pulp::x86::{V3, V4};
    use pulp::{bytemuck, f32x16, f32x8, Simd};

    /// The tree for `S` = AVX-512 or AVX2, `None` at other levels.
    #[inline(always)]
    pub(super) fn transpose_sum<S: Simd>(simd: S, rows: [S::f32s; MAX_LANES]) -> Option<S::f32s> {
        if let Some(v4) = token_as::<S, V4>(simd) {
            let mut cast = [bytemuck::Zeroable::zeroed(); 16];
            for (y, &x) in cast.iter_mut().zip(&rows) {
                *y = bytemuck::try_cast(x).ok()?;
            }
            return bytemuck::try_cast(sum16(v4, cast)).ok();
        }
        if let Some(v3) = token_as::<S, V3>(simd) {
            let mut cast = [bytemuck::Zeroable::zeroed(); 8];
            for (y, &x) in cast.iter_mut().zip(&rows) {
                *y = bytemuck::try_cast(x).ok()?;
            }
            return bytemuck::try_cast(sum8(v3, cast)).ok();
        }
        None
    }

    #[inline(always)]
    fn to512(x: f32x16) -> __m512 {
        // SAFETY: both are 64 bytes of 16 f32, any bit pattern valid.
        unsafe { core::mem::transmute::<f32x16, __m512>(x) }
    }

    #[inline(always)]
    fn from512(x: __m512) -> f32x16 {
        // SAFETY: as in `to512`.
        unsafe { core::mem::transmute::<__m512, f32x16>(x) }
    }

    #[inline(always)]
    fn to256(x: f32x8) -> __m256 {
        // SAFETY: both are 32 bytes of 8 f32, any bit pattern valid.
        unsafe { core::mem::transmute::<f32x8, __m256>(x) }
    }

    #[inline(always)]
    fn from256(x: __m256) -> f32x8 {
        // SAFETY: as in `to256`.
        unsafe { core::mem::transmute::<__m256, f32x8>(x) }
    }

    /// 16 vectors → 16 sums: 32-bit then 64-bit interleaves within 128-bit blocks, then two
    /// rounds of block shuffles. Plain loops, no closures: a closure would not inherit the
    /// caller's target features and its intrinsics would become calls.
    #[inline(always)]
    fn sum16(simd: V4, rows: [f32x16; 16]) -> f32x16 {
        let f = simd.avx512f;
        let mut r = [f._mm512_setzero_ps(); 16];
        for (r, &row) in r.iter_mut().zip(&rows) {
            *r = to512(row);
        }
        // Per 128-bit block: [a, b, a, b] partial sums of rows 2p, 2p + 1.
        let mut pairs = [f._mm512_setzero_ps(); 8];
        for (p, pair) in pairs.iter_mut().enumerate() {
            let (a, b) = (r[2 * p], r[2 * p + 1]);
            *pair = f._mm512_add_ps(f._mm512_unpacklo_ps(a, b), f._mm512_unpackhi_ps(a, b));
        }
        // Per block: [a, b, c, d] partial sums of rows 4q..4q + 4.
        let mut quads = [f._mm512_setzero_ps(); 4];
        for (q, quad) in quads.iter_mut().enumerate() {
            let (a, b) = (
                f._mm512_castps_pd(pairs[2 * q]),
                f._mm512_castps_pd(pairs[2 * q + 1]),
            );
            *quad = f._mm512_add_ps(
                f._mm512_castpd_ps(f._mm512_unpacklo_pd(a, b)),
                f._mm512_castpd_ps(f._mm512_unpackhi_pd(a, b)),
            );
        }
        // Blocks [0, 1]: rows 8o..8o + 4, blocks [2, 3]: rows 8o + 4..8o + 8, half sums each.
        let mut octets = [f._mm512_setzero_ps(); 2];
        for (o, octet) in octets.iter_mut().enumerate() {
            let (a, b) = (quads[2 * o], quads[2 * o + 1]);
            *octet = f._mm512_add_ps(
                f._mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
                f._mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
            );
        }
        let (a, b) = (octets[0], octets[1]);
        from512(f._mm512_add_ps(
            f._mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
            f._mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
        ))
    }

    /// 8 vectors → 8 sums: 32-bit then 64-bit interleaves within 128-bit halves, then one
    /// exchange of halves.
    #[inline(always)]
    fn sum8(simd: V3, rows: [f32x8; 8]) -> f32x8 {
        let f = simd.avx;
        let mut r = [f._mm256_setzero_ps(); 8];
        for (r, &row) in r.iter_mut().zip(&rows) {
            *r = to256(row);
        }
        let mut pairs = [f._mm256_setzero_ps(); 4];
        for (p, pair) in pairs.iter_mut().enumerate() {
            let (a, b) = (r[2 * p], r[2 * p + 1]);
            *pair = f._mm256_add_ps(f._mm256_unpacklo_ps(a, b), f._mm256_unpackhi_ps(a, b));
        }
        let mut quads = [f._mm256_setzero_ps(); 2];
        for (q, quad) in quads.iter_mut().enumerate() {
            let (a, b) = (
                f._mm256_castps_pd(pairs[2 * q]),
                f._mm256_castps_pd(pairs[2 * q + 1]),
            );
            *quad = f._mm256_add_ps(
                f._mm256_castpd_ps(f._mm256_unpacklo_pd(a, b)),
                f._mm256_castpd_ps(f._mm256_unpackhi_pd(a, b)),
            );
        }
        let (a, b) = (quads[0], quads[1]);
        from256(f._mm256_add_ps(
            f._mm256_permute2f128_ps::<0x20>(a, b),
            f._mm256_permute2f128_ps::<0x31>(a, b),
        ))
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::{token_as, MAX_LANES};
    use core::arch::aarch64::float32x4_t;
    use pulp::aarch64::Neon;
    use pulp::{bytemuck, f32x4, Simd};

    /// The tree for `S` = NEON (two rounds of pairwise adds), `None` at other levels.
    #[inline(always)]
    pub(super) fn transpose_sum<S: Simd>(simd: S, rows: [S::f32s; MAX_LANES]) -> Option<S::f32s> {
        let neon = token_as::<S, Neon>(simd)?;
        let mut r = [to_neon(bytemuck::try_cast(rows[0]).ok()?); 4];
        for (r, &row) in r.iter_mut().zip(&rows) {
            *r = to_neon(bytemuck::try_cast(row).ok()?);
        }
        let n = neon.neon;
        let sums = n.vpaddq_f32(n.vpaddq_f32(r[0], r[1]), n.vpaddq_f32(r[2], r[3]));
        // SAFETY: as above.
        let sums = unsafe { core::mem::transmute::<float32x4_t, f32x4>(sums) };
        bytemuck::try_cast(sums).ok()
    }

    #[inline(always)]
    fn to_neon(x: f32x4) -> float32x4_t {
        // SAFETY: `f32x4` and `float32x4_t` are both 16 bytes of 4 f32, any bit pattern valid.
        unsafe { core::mem::transmute::<f32x4, float32x4_t>(x) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Isa;

    struct Check;

    impl pulp::WithSimd for Check {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            let lanes = S::F32_LANES;
            let values: [f32; MAX_LANES * MAX_LANES] =
                core::array::from_fn(|n| ((n * 37) % 101) as f32 - 50.0 + 0.25 * (n % 3) as f32);
            let rows: [S::f32s; MAX_LANES] = core::array::from_fn(|j| {
                let start = (j * lanes).min(values.len() - lanes);
                simd.partial_load_f32s(&values[start..start + lanes])
            });
            let mut got = [0.0f32; MAX_LANES];
            simd.partial_store_f32s(&mut got[..lanes], transpose_sum(simd, rows));
            for (j, &sum) in got.iter().enumerate().take(lanes) {
                let start = (j * lanes).min(values.len() - lanes);
                let want: f32 = values[start..start + lanes].iter().sum();
                // Small integers and quarters: every partial sum is exact.
                assert_eq!(sum, want, "lane {j} of {lanes}");
            }
        }
    }

    #[test]
    fn sums_every_row_at_every_level() {
        for isa in Isa::supported() {
            isa.dispatch(Check);
        }
    }
}
