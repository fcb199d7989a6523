//! The seam between the model and the numeric kernels.
//!
//! Every number the model computes goes through one of these functions, shaped like the
//! kernels of `tessel-kernels` they stand in for: a linear layer with a fused
//! bias/activation/residual epilogue over a weight held in a kernel-friendly form
//! ([`Linear`]), single-pass online-softmax attention over strided Q/K/V (so K/V can be slices
//! of the KV cache), LayerNorm with an optional residual input and sum output, and
//! log-softmax/argmax for search. The bodies here are plain but vectorised (one generic pulp
//! body per ISA level) and never allocate; swapping them for the tuned kernels changes nothing
//! else in the model.
//!
//! # Switching to the tuned kernels
//! - [`Linear`]: hold the kernel's packed B instead of `weight`, built once in
//!   [`Linear::from_out_in`] from PyTorch's `[out × in]` rows (that is Bᵀ row-major, so it can
//!   be packed directly, without the transpose done here). Keep [`Linear::bytes`] exact: the
//!   e2e suite's streaming baseline uses it.
//! - [`linear`]: call the GEMM with `bias`, `epilogue.activation` and the residual
//!   ([`Residual::Add`]: add a strided matrix; [`Residual::Accumulate`]: β = 1 into `out`).
//!   [`linear_scratch`] returns the GEMM's scratch spec; the arena plan already reserves the
//!   largest over the model's shapes.
//! - [`attention`]: call the flash kernel with the same [`AttentionShape`] (causal offset,
//!   key length) and strided [`Rows`]; [`attention_scratch`] returns its spec.
//! - [`layer_norm`]: call the fused LayerNorm (residual in, optional sum out).
//!
//! The tests in `tests/tests/model_ops.rs`, `model_golden.rs` and `no_alloc.rs` hold any body
//! to the same contract.

use pulp::Simd;
use tessel_kernels::activation::Activation;
use tessel_kernels::error::{check_dim, check_view};
use tessel_kernels::math::exp;
use tessel_kernels::{Isa, KernelError, Scratch, ScratchSpec};

use crate::aligned::AlignedBuf;

/// A linear layer `y = x·W + b` with `W` stored `[in × out]` row-major (the transpose of
/// PyTorch's `[out × in]`), 64-byte aligned, laid out once at load.
#[derive(Clone, Debug)]
pub struct Linear {
    in_features: usize,
    out_features: usize,
    weight: AlignedBuf,
    bias: Option<AlignedBuf>,
}

impl Linear {
    /// From PyTorch's layout: `weight` is `[out × in]` row-major, `bias` has `out` elements.
    pub fn from_out_in(
        out_features: usize,
        in_features: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Linear, KernelError> {
        let len = out_features
            .checked_mul(in_features)
            .ok_or(KernelError::Overflow("linear weight"))?;
        check_dim("linear weight elements", len, weight.len())?;
        if let Some(b) = bias {
            check_dim("linear bias elements", out_features, b.len())?;
        }
        let mut packed = AlignedBuf::zeros(len);
        let dst = packed.as_mut_slice();
        // Transpose in cache-sized tiles so neither side is walked with a large stride alone.
        const TILE: usize = 32;
        for o0 in (0..out_features).step_by(TILE) {
            for i0 in (0..in_features).step_by(TILE) {
                for o in o0..(o0 + TILE).min(out_features) {
                    for i in i0..(i0 + TILE).min(in_features) {
                        dst[i * out_features + o] = weight[o * in_features + i];
                    }
                }
            }
        }
        Ok(Linear {
            in_features,
            out_features,
            weight: packed,
            bias: bias.map(AlignedBuf::from_slice),
        })
    }

    /// Input width `k`.
    pub fn in_features(&self) -> usize {
        self.in_features
    }

    /// Output width `n`.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// Whether a bias is added.
    pub fn has_bias(&self) -> bool {
        self.bias.is_some()
    }

    /// Bytes of weight and bias.
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + self.bias.as_ref().map_or(0, AlignedBuf::bytes)
    }
}

/// What is added after the activation of a linear layer.
#[derive(Clone, Copy, Debug)]
pub enum Residual<'a> {
    /// Nothing.
    None,
    /// `out = act(x·W + b) + r`, `r` strided by the given row stride.
    Add(&'a [f32], usize),
    /// `out += x·W + b` (the previous contents of `out` are the residual); needs the identity
    /// activation.
    Accumulate,
}

/// The fused epilogue of [`linear`].
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    /// Applied to `x·W + b`.
    pub activation: Activation,
    /// Added after the activation.
    pub residual: Residual<'a>,
}

impl Epilogue<'_> {
    /// Bias only.
    pub const PLAIN: Epilogue<'static> = Epilogue {
        activation: Activation::Identity,
        residual: Residual::None,
    };

    /// Bias then `activation`.
    pub fn activation(activation: Activation) -> Epilogue<'static> {
        Epilogue {
            activation,
            residual: Residual::None,
        }
    }
}

/// Scratch [`linear`] needs for `rows` rows of a `in_features → out_features` layer (none for
/// this implementation; the tuned GEMM states its packing buffers here).
pub fn linear_scratch(_rows: usize, _in_features: usize, _out_features: usize) -> ScratchSpec {
    ScratchSpec::EMPTY
}

/// Rows of `out` computed together: each weight row segment is read once per block.
const LINEAR_ROW_BLOCK: usize = 4;
/// Output columns computed together: a block of accumulators stays in L1.
const LINEAR_COL_BLOCK: usize = 1024;

/// `out[r] = act(x[r]·W + b) (+ residual)` for `rows` rows; `x` rows are `w.in_features()`
/// wide at stride `x_stride`, `out` rows `w.out_features()` wide at stride `out_stride`.
#[allow(clippy::too_many_arguments)]
pub fn linear(
    isa: Isa,
    rows: usize,
    x: &[f32],
    x_stride: usize,
    w: &Linear,
    out: &mut [f32],
    out_stride: usize,
    epilogue: Epilogue<'_>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (k, n) = (w.in_features, w.out_features);
    check_view("x", x.len(), rows, k, x_stride)?;
    check_view("out", out.len(), rows, n, out_stride)?;
    Scratch::new(scratch, linear_scratch(rows, k, n))?;
    match epilogue.residual {
        Residual::Add(r, stride) => check_view("residual", r.len(), rows, n, stride)?,
        Residual::Accumulate if epilogue.activation != Activation::Identity => {
            return Err(KernelError::InvalidArgument(
                "an accumulating residual needs the identity activation",
            ))
        }
        _ => {}
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    struct Run<'a, 'b> {
        rows: usize,
        x: &'a [f32],
        x_stride: usize,
        w: &'a Linear,
        out: &'a mut [f32],
        out_stride: usize,
        epilogue: Epilogue<'b>,
    }
    impl pulp::WithSimd for Run<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            let Run {
                rows,
                x,
                x_stride,
                w,
                out,
                out_stride,
                epilogue,
            } = self;
            let (k, n) = (w.in_features, w.out_features);
            let weight = w.weight.as_slice();
            let bias = w.bias.as_ref().map(AlignedBuf::as_slice);
            let accumulate = matches!(epilogue.residual, Residual::Accumulate);
            // One row (greedy decode): whole weight rows, so the weights stream sequentially
            // from memory once. Otherwise column blocks keep the four weight-row segments and
            // the accumulators of a row block in L1 while the rows of the block reuse them.
            let col_block = if rows == 1 { n } else { LINEAR_COL_BLOCK };
            for r0 in (0..rows).step_by(LINEAR_ROW_BLOCK) {
                let r1 = (r0 + LINEAR_ROW_BLOCK).min(rows);
                for c0 in (0..n).step_by(col_block) {
                    let c1 = (c0 + col_block).min(n);
                    for r in r0..r1 {
                        let o = &mut out[r * out_stride + c0..r * out_stride + c1];
                        match (bias, accumulate) {
                            (Some(b), true) => add_assign(simd, o, &b[c0..c1]),
                            (Some(b), false) => o.copy_from_slice(&b[c0..c1]),
                            (None, true) => {}
                            (None, false) => o.fill(0.0),
                        }
                    }
                    // Four weight rows per pass: one load and store of the accumulators per
                    // four FMAs.
                    let mut kk = 0;
                    while kk + 4 <= k {
                        let w4 =
                            [0, 1, 2, 3].map(|i| &weight[(kk + i) * n + c0..(kk + i) * n + c1]);
                        for r in r0..r1 {
                            let xr = &x[r * x_stride + kk..r * x_stride + kk + 4];
                            let a = [xr[0], xr[1], xr[2], xr[3]];
                            let o = &mut out[r * out_stride + c0..r * out_stride + c1];
                            axpy4(simd, a, w4, o);
                        }
                        kk += 4;
                    }
                    for kk in kk..k {
                        let wrow = &weight[kk * n + c0..kk * n + c1];
                        for r in r0..r1 {
                            let a = x[r * x_stride + kk];
                            let o = &mut out[r * out_stride + c0..r * out_stride + c1];
                            axpy(simd, a, wrow, o);
                        }
                    }
                    for r in r0..r1 {
                        let o = &mut out[r * out_stride + c0..r * out_stride + c1];
                        activate(simd, epilogue.activation, o);
                        if let Residual::Add(res, stride) = epilogue.residual {
                            add_assign(simd, o, &res[r * stride + c0..r * stride + c1]);
                        }
                    }
                }
            }
        }
    }
    isa.dispatch(Run {
        rows,
        x,
        x_stride,
        w,
        out,
        out_stride,
        epilogue,
    });
    Ok(())
}

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

/// Strided rows: a slice and its row stride.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Elements between consecutive rows.
    pub stride: usize,
}

/// Keys scored together: their scores are exponentiated as one vector pass.
const ATTENTION_KEY_BLOCK: usize = 64;

/// Scratch [`attention`] needs: a block of scores and one head's accumulator.
pub fn attention_scratch(shape: &AttentionShape) -> ScratchSpec {
    ScratchSpec::f32s(ATTENTION_KEY_BLOCK).and(ScratchSpec::f32s(shape.d_head))
}

/// `out = softmax(scale · q·kᵀ) · v` per head, one online-softmax pass over the keys per query:
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
    let width = shape
        .heads
        .checked_mul(shape.d_head)
        .ok_or(KernelError::Overflow("heads * d_head"))?;
    check_view("q", q.data.len(), shape.q_rows, width, q.stride)?;
    check_view("k", k.data.len(), shape.kv_len, width, k.stride)?;
    check_view("v", v.data.len(), shape.kv_len, width, v.stride)?;
    check_view("out", out.len(), shape.q_rows, width, out_stride)?;
    let mut parts = Scratch::new(scratch, attention_scratch(&shape))?;
    let scores = parts.take(ATTENTION_KEY_BLOCK)?;
    let acc = parts.take(shape.d_head)?;
    struct Run<'a> {
        shape: AttentionShape,
        q: Rows<'a>,
        k: Rows<'a>,
        v: Rows<'a>,
        out: &'a mut [f32],
        out_stride: usize,
        scale: f32,
        scores: &'a mut [f32],
        acc: &'a mut [f32],
    }
    impl pulp::WithSimd for Run<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            let Run {
                shape,
                q,
                k,
                v,
                out,
                out_stride,
                scale,
                scores,
                acc,
            } = self;
            let dh = shape.d_head;
            for i in 0..shape.q_rows {
                let visible = match shape.causal_offset {
                    Some(offset) => shape.kv_len.min(offset.saturating_add(i).saturating_add(1)),
                    None => shape.kv_len,
                };
                for h in 0..shape.heads {
                    let col = h * dh;
                    let qh = &q.data[i * q.stride + col..i * q.stride + col + dh];
                    let oh = &mut out[i * out_stride + col..i * out_stride + col + dh];
                    if visible == 0 {
                        oh.fill(0.0);
                        continue;
                    }
                    acc.fill(0.0);
                    let mut running_max = f32::NEG_INFINITY;
                    let mut denominator = 0.0f32;
                    for j0 in (0..visible).step_by(ATTENTION_KEY_BLOCK) {
                        let j1 = (j0 + ATTENTION_KEY_BLOCK).min(visible);
                        let block = &mut scores[..j1 - j0];
                        let mut block_max = f32::NEG_INFINITY;
                        for (s, j) in block.iter_mut().zip(j0..j1) {
                            let kj = &k.data[j * k.stride + col..j * k.stride + col + dh];
                            *s = dot(simd, qh, kj) * scale;
                            block_max = block_max.max(*s);
                        }
                        let new_max = running_max.max(block_max);
                        if new_max > running_max && denominator > 0.0 {
                            let correction = (running_max - new_max).exp();
                            denominator *= correction;
                            scale_in_place(simd, acc, correction);
                        }
                        running_max = new_max;
                        denominator += exp_shifted(simd, block, new_max);
                        for (&p, j) in block.iter().zip(j0..j1) {
                            let vj = &v.data[j * v.stride + col..j * v.stride + col + dh];
                            axpy(simd, p, vj, acc);
                        }
                    }
                    let inv = 1.0 / denominator;
                    for (o, &a) in oh.iter_mut().zip(acc.iter()) {
                        *o = a * inv;
                    }
                }
            }
        }
    }
    isa.dispatch(Run {
        shape,
        q,
        k,
        v,
        out,
        out_stride,
        scale,
        scores,
        acc,
    });
    Ok(())
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
/// writes `x + residual` there (the pre-LN residual stream). Two-pass mean and variance.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<'a>(
    isa: Isa,
    rows: usize,
    x: Rows<'a>,
    residual: Option<Rows<'a>>,
    norm: NormParams<'a>,
    out: &'a mut [f32],
    out_stride: usize,
    sum_out: Option<(&'a mut [f32], usize)>,
) -> Result<(), KernelError> {
    let cols = norm.gamma.len();
    check_dim("beta", cols, norm.beta.len())?;
    check_view("x", x.data.len(), rows, cols, x.stride)?;
    check_view("out", out.len(), rows, cols, out_stride)?;
    if let Some(r) = residual {
        check_view("residual", r.data.len(), rows, cols, r.stride)?;
    }
    if let Some((s, stride)) = sum_out.as_ref() {
        check_view("sum_out", s.len(), rows, cols, *stride)?;
    }
    if cols == 0 {
        return Ok(());
    }
    struct Run<'a> {
        rows: usize,
        x: Rows<'a>,
        residual: Option<Rows<'a>>,
        norm: NormParams<'a>,
        out: &'a mut [f32],
        out_stride: usize,
        sum_out: Option<(&'a mut [f32], usize)>,
    }
    impl pulp::WithSimd for Run<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(mut self, simd: S) {
            let cols = self.norm.gamma.len();
            for r in 0..self.rows {
                let o = &mut self.out[r * self.out_stride..r * self.out_stride + cols];
                o.copy_from_slice(&self.x.data[r * self.x.stride..r * self.x.stride + cols]);
                if let Some(res) = self.residual {
                    add_assign(simd, o, &res.data[r * res.stride..r * res.stride + cols]);
                }
                if let Some((s, stride)) = self.sum_out.as_mut() {
                    s[r * *stride..r * *stride + cols].copy_from_slice(o);
                }
                // Statistics of `x - x[0]`: exact differences keep a large common offset from
                // costing the mean its low bits (two passes, never E[x²] - E[x]²).
                let shift = o[0];
                let mean = shifted_sum(simd, o, shift) / cols as f32;
                let var = centered_square_sum(simd, o, shift, mean) / cols as f32;
                let inv_std = 1.0 / (var + self.norm.eps).sqrt();
                normalise(
                    simd,
                    o,
                    shift,
                    mean,
                    inv_std,
                    self.norm.gamma,
                    self.norm.beta,
                );
            }
        }
    }
    isa.dispatch(Run {
        rows,
        x,
        residual,
        norm,
        out,
        out_stride,
        sum_out,
    });
    Ok(())
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

/// `values[i] = exp(values[i] - shift)`, returning their sum.
#[inline(always)]
fn exp_shifted<S: Simd>(simd: S, values: &mut [f32], shift: f32) -> f32 {
    let s = simd.splat_f32s(shift);
    let (head, tail) = S::as_mut_simd_f32s(values);
    let mut total = simd.splat_f32s(0.0);
    for v in head {
        *v = exp(simd, simd.sub_f32s(*v, s));
        total = simd.add_f32s(total, *v);
    }
    let mut sum = simd.reduce_sum_f32s(total);
    if !tail.is_empty() {
        let v = exp(simd, simd.sub_f32s(simd.partial_load_f32s(tail), s));
        simd.partial_store_f32s(tail, v);
        sum += tail.iter().sum::<f32>();
    }
    sum
}

#[inline(always)]
fn dot<S: Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (ah, at) = S::as_simd_f32s(a);
    let (bh, bt) = S::as_simd_f32s(b);
    let mut acc = simd.splat_f32s(0.0);
    for (x, y) in ah.iter().zip(bh) {
        acc = simd.mul_add_f32s(*x, *y, acc);
    }
    if !at.is_empty() {
        let x = simd.partial_load_f32s(at);
        let y = simd.partial_load_f32s(bt);
        acc = simd.mul_add_f32s(x, y, acc);
    }
    simd.reduce_sum_f32s(acc)
}

/// `y += alpha * x`.
#[inline(always)]
fn axpy<S: Simd>(simd: S, alpha: f32, x: &[f32], y: &mut [f32]) {
    let a = simd.splat_f32s(alpha);
    let (xh, xt) = S::as_simd_f32s(x);
    let (yh, yt) = S::as_mut_simd_f32s(y);
    for (yv, xv) in yh.iter_mut().zip(xh) {
        *yv = simd.mul_add_f32s(a, *xv, *yv);
    }
    for (yv, xv) in yt.iter_mut().zip(xt) {
        *yv += alpha * xv;
    }
}

/// `y += a[0]·w[0] + a[1]·w[1] + a[2]·w[2] + a[3]·w[3]`.
#[inline(always)]
fn axpy4<S: Simd>(simd: S, a: [f32; 4], w: [&[f32]; 4], y: &mut [f32]) {
    let av = a.map(|v| simd.splat_f32s(v));
    let (w0, t0) = S::as_simd_f32s(w[0]);
    let (w1, t1) = S::as_simd_f32s(w[1]);
    let (w2, t2) = S::as_simd_f32s(w[2]);
    let (w3, t3) = S::as_simd_f32s(w[3]);
    let (yh, yt) = S::as_mut_simd_f32s(y);
    for ((((yv, v0), v1), v2), v3) in yh.iter_mut().zip(w0).zip(w1).zip(w2).zip(w3) {
        let mut acc = simd.mul_add_f32s(av[0], *v0, *yv);
        acc = simd.mul_add_f32s(av[1], *v1, acc);
        acc = simd.mul_add_f32s(av[2], *v2, acc);
        *yv = simd.mul_add_f32s(av[3], *v3, acc);
    }
    for (i, yv) in yt.iter_mut().enumerate() {
        *yv += a[0] * t0[i] + a[1] * t1[i] + a[2] * t2[i] + a[3] * t3[i];
    }
}

/// `y += x`.
#[inline(always)]
fn add_assign<S: Simd>(simd: S, y: &mut [f32], x: &[f32]) {
    let (xh, xt) = S::as_simd_f32s(x);
    let (yh, yt) = S::as_mut_simd_f32s(y);
    for (yv, xv) in yh.iter_mut().zip(xh) {
        *yv = simd.add_f32s(*yv, *xv);
    }
    for (yv, xv) in yt.iter_mut().zip(xt) {
        *yv += xv;
    }
}

#[inline(always)]
fn scale_in_place<S: Simd>(simd: S, y: &mut [f32], factor: f32) {
    let f = simd.splat_f32s(factor);
    let (yh, yt) = S::as_mut_simd_f32s(y);
    for yv in yh {
        *yv = simd.mul_f32s(*yv, f);
    }
    for yv in yt {
        *yv *= factor;
    }
}

#[inline(always)]
fn activate<S: Simd>(simd: S, activation: Activation, y: &mut [f32]) {
    if activation == Activation::Identity {
        return;
    }
    let (yh, yt) = S::as_mut_simd_f32s(y);
    for yv in yh {
        *yv = activation.apply(simd, *yv);
    }
    if !yt.is_empty() {
        let v = activation.apply(simd, simd.partial_load_f32s(yt));
        simd.partial_store_f32s(yt, v);
    }
}

/// `Σ (x - shift)`.
#[inline(always)]
fn shifted_sum<S: Simd>(simd: S, x: &[f32], shift: f32) -> f32 {
    let s = simd.splat_f32s(shift);
    let (xh, xt) = S::as_simd_f32s(x);
    let mut acc = simd.splat_f32s(0.0);
    for xv in xh {
        acc = simd.add_f32s(acc, simd.sub_f32s(*xv, s));
    }
    simd.reduce_sum_f32s(acc) + xt.iter().map(|v| v - shift).sum::<f32>()
}

/// `Σ ((x - shift) - mean)²`.
#[inline(always)]
fn centered_square_sum<S: Simd>(simd: S, x: &[f32], shift: f32, mean: f32) -> f32 {
    let s = simd.splat_f32s(shift);
    let m = simd.splat_f32s(mean);
    let (xh, xt) = S::as_simd_f32s(x);
    let mut acc = simd.splat_f32s(0.0);
    for xv in xh {
        let d = simd.sub_f32s(simd.sub_f32s(*xv, s), m);
        acc = simd.mul_add_f32s(d, d, acc);
    }
    simd.reduce_sum_f32s(acc)
        + xt.iter()
            .map(|v| (v - shift - mean) * (v - shift - mean))
            .sum::<f32>()
}

/// `y = ((y - shift) - mean) · inv_std · gamma + beta`.
#[inline(always)]
fn normalise<S: Simd>(
    simd: S,
    y: &mut [f32],
    shift: f32,
    mean: f32,
    inv_std: f32,
    gamma: &[f32],
    beta: &[f32],
) {
    let sh = simd.splat_f32s(shift);
    let m = simd.splat_f32s(mean);
    let s = simd.splat_f32s(inv_std);
    let (yh, yt) = S::as_mut_simd_f32s(y);
    let (gh, gt) = S::as_simd_f32s(gamma);
    let (bh, bt) = S::as_simd_f32s(beta);
    for ((yv, gv), bv) in yh.iter_mut().zip(gh).zip(bh) {
        let centred = simd.sub_f32s(simd.sub_f32s(*yv, sh), m);
        *yv = simd.mul_add_f32s(simd.mul_f32s(centred, s), *gv, *bv);
    }
    for ((yv, gv), bv) in yt.iter_mut().zip(gt).zip(bt) {
        *yv = (*yv - shift - mean) * inv_std * gv + bv;
    }
}
