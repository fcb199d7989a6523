//! The seam between the model and the numeric kernels.
//!
//! Every number the model computes goes through one of these functions: a linear layer over a
//! weight packed once at load ([`Linear`], the packed-B GEMM with its fused
//! bias/activation/residual epilogue), flash attention over strided Q/K/V (so K/V can be
//! slices of the KV cache or of a fused projection), fused LayerNorm with an optional residual
//! input and sum output, and log-softmax/argmax for search. Nothing here allocates.

use pulp::Simd;
use tessel_kernels::attention::{self as flash, Mask, Strided, StridedMut};
use tessel_kernels::error::check_view;
use tessel_kernels::math::exp;
use tessel_kernels::norm::{self, RowShape, RowsMut};
use tessel_kernels::{Isa, KernelError, ScratchSpec};

pub use crate::linear::{linear, linear_scratch, Epilogue, Linear, LinearError, Residual};
pub use tessel_kernels::gemm::Sequential;

/// Shape of one [`attention`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Heads; each row of Q/K/V/out holds `heads * d_head` values, head-major.
    pub heads: usize,
    /// Width of one head.
    pub d_head: usize,
    /// Query rows.
    pub q_rows: usize,
    /// Key/value rows.
    pub kv_len: usize,
    /// `Some(offset)`: query row `i` sees keys `0..=offset + i` (causal, the queries being the
    /// last rows of a sequence whose first `offset` positions are already in K/V); `None`:
    /// every query sees all `kv_len` keys.
    pub causal_offset: Option<usize>,
}

impl AttentionShape {
    fn kernel_shape(&self, q_len: usize) -> flash::AttentionShape {
        flash::AttentionShape {
            heads: self.heads,
            d_head: self.d_head,
            q_len,
            kv_len: self.kv_len,
        }
    }
}

/// Strided rows: a slice and its row stride.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Elements between consecutive rows.
    pub stride: usize,
}

/// Scratch [`attention`] needs for any call of at most `shape`'s sizes, at every ISA level
/// this machine runs (so one plan serves a session whatever level it is forced to): the
/// flash kernel's tiles for its prefill and its few-query decode path.
pub fn attention_scratch(shape: &AttentionShape) -> ScratchSpec {
    Isa::supported().fold(ScratchSpec::EMPTY, |spec, isa| {
        spec.or(flash::attention_scratch(
            isa,
            &shape.kernel_shape(shape.q_rows),
        ))
        .or(flash::attention_scratch(isa, &shape.kernel_shape(1)))
    })
}

/// `out = softmax(scale · q·kᵀ) · v` per head, computed tile by tile with an online softmax:
/// no `q_rows × kv_len` score matrix exists.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    isa: Isa,
    shape: AttentionShape,
    q: Rows<'_>,
    k: Rows<'_>,
    v: Rows<'_>,
    out: &mut [f32],
    out_stride: usize,
    scale: f32,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if shape.heads == 0 || shape.d_head == 0 {
        return Err(KernelError::InvalidArgument(
            "heads and d_head must be positive",
        ));
    }
    flash::attention(
        isa,
        &shape.kernel_shape(shape.q_rows),
        Strided {
            data: q.data,
            stride: q.stride,
        },
        Strided {
            data: k.data,
            stride: k.stride,
        },
        Strided {
            data: v.data,
            stride: v.stride,
        },
        StridedMut {
            data: out,
            stride: out_stride,
        },
        &Mask {
            causal_offset: shape.causal_offset,
            ..Mask::NONE
        },
        Some(scale),
        scratch,
    )
}

/// LayerNorm parameters.
#[derive(Clone, Copy, Debug)]
pub struct NormParams<'a> {
    /// Scale, one per column.
    pub gamma: &'a [f32],
    /// Shift, one per column.
    pub beta: &'a [f32],
    /// Added to the variance.
    pub eps: f32,
}

/// `out = LN(x + residual)` over `rows` rows of `gamma.len()` columns; with `sum_out`, also
/// writes `x + residual` there (the pre-LN residual stream). The fused kernel reads each input
/// and writes each output once.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<'a>(
    isa: Isa,
    rows: usize,
    x: Rows<'a>,
    residual: Option<Rows<'a>>,
    params: NormParams<'a>,
    out: &'a mut [f32],
    out_stride: usize,
    sum_out: Option<(&'a mut [f32], usize)>,
) -> Result<(), KernelError> {
    let shape = RowShape::new(rows, params.gamma.len());
    let layer = norm::Norm::layer(params.gamma, params.beta, params.eps);
    let x = norm::Rows::new(x.data, x.stride);
    let out = RowsMut::new(out, out_stride);
    match residual {
        Some(r) => norm::add_normalize(
            isa,
            shape,
            layer,
            x,
            norm::Rows::new(r.data, r.stride),
            sum_out.map(|(s, stride)| RowsMut::new(s, stride)),
            out,
        ),
        None => match sum_out {
            // With no residual the "sum" is `x` itself: copy it, then normalise the copy.
            Some((sum, sum_stride)) => {
                let width = shape.width;
                check_view("x", x.data.len(), rows, width, x.stride)?;
                check_view("sum_out", sum.len(), rows, width, sum_stride)?;
                for r in 0..rows {
                    sum[r * sum_stride..][..width]
                        .copy_from_slice(&x.data[r * x.stride..][..width]);
                }
                norm::normalize(isa, shape, layer, norm::Rows::new(sum, sum_stride), out)
            }
            None => norm::normalize(isa, shape, layer, x, out),
        },
    }
}

/// Replaces `values` by their log-softmax; returns the log of the normaliser
/// (`max + ln Σ exp(x - max)`). Empty input returns negative infinity.
pub fn log_softmax(isa: Isa, values: &mut [f32]) -> f32 {
    struct Run<'a>(&'a mut [f32]);
    impl pulp::WithSimd for Run<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            let values = self.0;
            let lse = log_sum_exp(simd, values);
            let (head, tail) = S::as_mut_simd_f32s(values);
            let shift = simd.splat_f32s(lse);
            for v in head {
                *v = simd.sub_f32s(*v, shift);
            }
            for v in tail {
                *v -= lse;
            }
            lse
        }
    }
    if values.is_empty() {
        return f32::NEG_INFINITY;
    }
    isa.dispatch(Run(values))
}

/// `ln Σ exp(values)`, computed stably; negative infinity for empty input.
pub fn logsumexp(isa: Isa, values: &[f32]) -> f32 {
    struct Run<'a>(&'a [f32]);
    impl pulp::WithSimd for Run<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            log_sum_exp(simd, self.0)
        }
    }
    if values.is_empty() {
        return f32::NEG_INFINITY;
    }
    isa.dispatch(Run(values))
}

/// Index and value of the largest element (the first on ties; NaN never wins). `None` when
/// empty.
pub fn argmax(values: &[f32]) -> Option<(usize, f32)> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        let better = match best {
            Some((_, b)) => v > b,
            None => !v.is_nan(),
        };
        if better {
            best = Some((i, v));
        }
    }
    best
}

#[inline(always)]
fn log_sum_exp<S: Simd>(simd: S, values: &[f32]) -> f32 {
    let max = values.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    if max == f32::NEG_INFINITY || !max.is_finite() {
        return max;
    }
    let shift = simd.splat_f32s(max);
    let (head, tail) = S::as_simd_f32s(values);
    let mut total = simd.splat_f32s(0.0);
    for v in head {
        total = simd.add_f32s(total, exp(simd, simd.sub_f32s(*v, shift)));
    }
    let mut sum = simd.reduce_sum_f32s(total);
    if !tail.is_empty() {
        let v = simd.partial_load_f32s(tail);
        let e = exp(simd, simd.sub_f32s(v, shift));
        let mut lanes = [0.0f32; 16];
        let n = tail.len().min(lanes.len());
        simd.partial_store_f32s(&mut lanes[..n], e);
        sum += lanes[..n].iter().sum::<f32>();
    }
    max + sum.ln()
}
