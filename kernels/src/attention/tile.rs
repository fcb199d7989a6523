//! The register-blocked microkernel behind both products of the prefill path.
//!
//! `C (MR rows × NR vectors) = Σ_k a(r, k) · B[k]`: each step of the reduction broadcasts `MR`
//! scalars of `A` and loads `NR` vectors of the packed `B`, for `MR × NR` independent FMAs held
//! in registers (8 × 3 zmm = 24 accumulators on AVX-512). `A` is read in place through two
//! strides, so the same code computes `S = K Qᵀ` (A = K rows, reduction over `d_head`) and
//! `Oᵀ += Vᵀ P` (A = V columns, reduction over keys) without packing K or V. `B` and `C` rows
//! are `stride` vectors apart, so a call may cover only some of the query vectors of a tile
//! (the causal diagonal, where the later query vectors see more keys than the earlier ones).

use crate::tiling::ATTENTION_SHORT_ROWS;
use pulp::Simd;

/// The strided left operand: `a(r, k) = data[r * row_step + k * depth_step]`.
#[derive(Clone, Copy)]
pub(crate) struct Lhs<'a> {
    pub data: &'a [f32],
    pub row_step: usize,
    pub depth_step: usize,
}

/// Rows of vectors: row `k` is `data[k * stride..][..NR]`.
pub(crate) struct Rows<T> {
    pub data: T,
    pub stride: usize,
}

/// How the microkernel stores its sums into `C`.
#[derive(Clone, Copy)]
pub(crate) enum Store<'a, V> {
    /// `c = Σ`.
    Overwrite,
    /// `c = c + Σ`.
    Add,
    /// `c = alpha[n] · c + Σ` (the online-softmax rescale, fused).
    Rescale(&'a [V]),
}

/// One call of the microkernel: `c(r) = Σ_{k < depth} a(r, k) · b(k)` for `r < rows`.
pub(crate) struct Product<'a, V> {
    pub a: Lhs<'a>,
    pub rows: usize,
    pub depth: usize,
    pub b: Rows<&'a [V]>,
    pub c: Rows<&'a mut [V]>,
    pub store: Store<'a, V>,
}

/// Whether `rows` rows of `NR` vectors, `stride` apart, fit in `len` vectors.
fn rows_fit<const NR: usize>(rows: usize, stride: usize, len: usize) -> bool {
    rows == 0
        || (rows - 1)
            .checked_mul(stride)
            .and_then(|n| n.checked_add(NR))
            .is_some_and(|n| n <= len)
}

/// `product`, each of its rows a row of `NR` vectors, stored as its `store` says.
///
/// The caller guarantees `1 <= rows <= MR`, that `b` holds `depth` rows and `c` `rows` rows,
/// that `a` spans `(rows-1)·row_step + (depth-1)·depth_step + 1` elements and that a `Rescale`
/// slice holds `NR` vectors; these are checked once here (a violation is a bug: debug builds
/// assert, release builds write nothing).
#[inline(always)]
pub(crate) fn tile<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    product: Product<'_, S::f32s>,
) {
    let Product {
        a,
        rows,
        depth,
        b,
        c,
        store,
    } = product;
    let a_span = (rows.saturating_sub(1))
        .saturating_mul(a.row_step)
        .saturating_add(depth.saturating_sub(1).saturating_mul(a.depth_step))
        .saturating_add(1);
    let fits = rows >= 1
        && rows <= MR
        && rows_fit::<NR>(depth, b.stride, b.data.len())
        && rows_fit::<NR>(rows, c.stride, c.data.len())
        && (depth == 0 || a_span <= a.data.len())
        && !matches!(store, Store::Rescale(alpha) if alpha.len() < NR);
    debug_assert!(fits, "attention tile called out of bounds");
    if !fits {
        return;
    }
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; NR]; MR];
    // Rows past `rows` repeat the last valid row (computed, never stored) so the loop body has
    // no branch.
    let row_ptr: [*const f32; MR] =
        core::array::from_fn(|r| a.data.as_ptr().wrapping_add(r.min(rows - 1) * a.row_step));
    let b_ptr = b.data.as_ptr();
    for k in 0..depth {
        // SAFETY: `k < depth` and `b` holds `depth` rows of `NR` vectors `stride` apart
        // (checked above), so the NR vectors at `k * stride` are in bounds.
        let bv: [S::f32s; NR] = core::array::from_fn(|n| unsafe { *b_ptr.add(k * b.stride + n) });
        for (acc_row, ptr) in acc.iter_mut().zip(row_ptr) {
            // SAFETY: the row index is below `rows` and `k < depth`, so the offset
            // `row * row_step + k * depth_step` is at most `a_span - 1 < a.data.len()`.
            let av = simd.splat_f32s(unsafe { *ptr.add(k * a.depth_step) });
            for (slot, b_n) in acc_row.iter_mut().zip(bv) {
                *slot = simd.mul_add_e_f32s(av, b_n, *slot);
            }
        }
    }
    for (r, acc_row) in acc.into_iter().enumerate().take(rows) {
        let c_row = &mut c.data[r * c.stride..][..NR];
        match store {
            Store::Overwrite => c_row.copy_from_slice(&acc_row),
            Store::Add => {
                for (slot, sum) in c_row.iter_mut().zip(acc_row) {
                    *slot = simd.add_f32s(*slot, sum);
                }
            }
            Store::Rescale(alpha) => {
                for ((slot, sum), scale) in c_row.iter_mut().zip(acc_row).zip(alpha) {
                    *slot = simd.mul_add_e_f32s(*slot, *scale, sum);
                }
            }
        }
    }
}

/// [`tile`] over `width` vectors (`1..=4`), a runtime count: the query vectors of a tile that
/// see the keys of a segment. A call of at most [`ATTENTION_SHORT_ROWS`] rows runs the kernel
/// of that many rows.
#[inline(always)]
pub(crate) fn tile_of_width<S: Simd, const MR: usize>(
    simd: S,
    width: usize,
    product: Product<'_, S::f32s>,
) {
    if MR > ATTENTION_SHORT_ROWS && product.rows <= ATTENTION_SHORT_ROWS {
        tile_of_width_rows::<S, ATTENTION_SHORT_ROWS>(simd, width, product);
    } else {
        tile_of_width_rows::<S, MR>(simd, width, product);
    }
}

/// [`tile`] of `MR` rows over `width` vectors.
#[inline(always)]
fn tile_of_width_rows<S: Simd, const MR: usize>(
    simd: S,
    width: usize,
    product: Product<'_, S::f32s>,
) {
    match width {
        1 => tile::<S, MR, 1>(simd, product),
        2 => tile::<S, MR, 2>(simd, product),
        3 => tile::<S, MR, 3>(simd, product),
        4 => tile::<S, MR, 4>(simd, product),
        _ => debug_assert!(false, "attention tile width {width} out of range"),
    }
}
