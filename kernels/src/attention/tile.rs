//! The register-blocked microkernel behind both products of the prefill path.
//!
//! `C (MR rows × NR vectors) = Σ_k a(r, k) · B[k]`: each step of the reduction broadcasts `MR`
//! scalars of `A` and loads `NR` vectors of the packed `B`, for `MR × NR` independent FMAs held
//! in registers (6 × 4 zmm = 24 accumulators on AVX-512). `A` is read in place through two
//! strides, so the same code computes `S = K Qᵀ` (A = K rows, reduction over `d_head`) and
//! `Oᵀ += Vᵀ P` (A = V columns, reduction over keys) without packing K or V.

use pulp::Simd;

/// The strided left operand: `a(r, k) = data[r * row_step + k * depth_step]`.
#[derive(Clone, Copy)]
pub(crate) struct Lhs<'a> {
    pub data: &'a [f32],
    pub row_step: usize,
    pub depth_step: usize,
}

/// `c[r·NR + n] = Σ_{k < depth} a(r, k) · b[k·NR + n]` for `r < rows`, or with `alpha`,
/// `c[r·NR + n] = alpha[n] · c[r·NR + n] + Σ ...` (the online-softmax rescale, fused).
///
/// The caller guarantees `1 <= rows <= MR`, `b.len() >= depth·NR`, `c.len() >= rows·NR` and
/// that `a` spans `(rows-1)·row_step + (depth-1)·depth_step + 1` elements; these are checked
/// once here (a violation is a bug: debug builds assert, release builds write nothing).
#[inline(always)]
pub(crate) fn tile<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    a: Lhs<'_>,
    rows: usize,
    depth: usize,
    b: &[S::f32s],
    c: &mut [S::f32s],
    alpha: Option<&[S::f32s; NR]>,
) {
    let a_span = (rows.saturating_sub(1))
        .saturating_mul(a.row_step)
        .saturating_add(depth.saturating_sub(1).saturating_mul(a.depth_step))
        .saturating_add(1);
    let fits = rows >= 1
        && rows <= MR
        && depth.checked_mul(NR).is_some_and(|n| n <= b.len())
        && rows * NR <= c.len()
        && (depth == 0 || a_span <= a.data.len());
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
    let b_ptr = b.as_ptr();
    for k in 0..depth {
        // SAFETY: `k < depth` and `b.len() >= depth * NR` (checked above), so the NR vectors
        // at `k * NR` are in bounds.
        let bv: [S::f32s; NR] = core::array::from_fn(|n| unsafe { *b_ptr.add(k * NR + n) });
        for (acc_row, ptr) in acc.iter_mut().zip(row_ptr) {
            // SAFETY: the row index is below `rows` and `k < depth`, so the offset
            // `row * row_step + k * depth_step` is at most `a_span - 1 < a.data.len()`.
            let av = simd.splat_f32s(unsafe { *ptr.add(k * a.depth_step) });
            for (slot, b_n) in acc_row.iter_mut().zip(bv) {
                *slot = simd.mul_add_e_f32s(av, b_n, *slot);
            }
        }
    }
    for (c_row, acc_row) in c.chunks_exact_mut(NR).zip(acc).take(rows) {
        match alpha {
            Some(alpha) => {
                for ((slot, sum), scale) in c_row.iter_mut().zip(acc_row).zip(alpha) {
                    *slot = simd.mul_add_e_f32s(*slot, *scale, sum);
                }
            }
            None => c_row.copy_from_slice(&acc_row),
        }
    }
}
