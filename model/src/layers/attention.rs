//! Multi-head attention layers: self-attention with a fused Q/K/V projection, and
//! cross-attention whose queries come from the decoder and whose fused K/V projection is applied
//! to the encoder output once per source.
//!
//! The attention itself is the kernels' flash attention over strided views (no score matrix);
//! its [`Mask`] (causal offset, key length, sliding window, additive bias such as T5's relative
//! positions) is passed through unchanged. The output projection belongs to the layer but is
//! applied by the [`super::Block`], which fuses it with the residual connection.

use half::f16;
use tessel_kernels::activation::Activation;
use tessel_kernels::attention::{self as flash, KvElement, Mask};
use tessel_kernels::gemm::Sequential;
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::{Isa, KernelError, ScratchSpec, View, ViewMut};

use super::{linear, Linear, LocalAttention, MemoryKv, Run};

/// The head layout and score scale shared by both attention layers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Heads {
    /// Number of heads.
    pub heads: usize,
    /// Width of one head.
    pub d_head: usize,
    /// Score scale (`1/√d_head` for most models, 1 for T5).
    pub scale: f32,
}

impl Heads {
    /// The layout `config` describes for `stack`'s attention: its heads, and its score scale
    /// (`1/√d_head` unless the config sets one).
    pub fn of(config: &crate::config::Config, stack: crate::config::StackKind) -> Heads {
        let d_head = config.d_head(stack);
        Heads {
            heads: config.heads_in(stack),
            d_head,
            scale: config
                .attention_scale
                .unwrap_or_else(|| flash::default_scale(d_head)),
        }
    }

    /// `heads × d_head`, the width of a row.
    pub fn width(&self) -> usize {
        self.heads * self.d_head
    }

    fn shape(&self, q_len: usize, kv_len: usize) -> flash::AttentionShape {
        flash::AttentionShape {
            heads: self.heads,
            d_head: self.d_head,
            q_len,
            kv_len,
        }
    }

    /// Scratch for any call of at most `q_rows` queries over at most `kv_len` keys on
    /// `threads` threads, at every ISA level this machine runs (a session may be forced to any
    /// of them), through either of the kernel's paths (few-query decode and tiled prefill).
    pub fn scratch(&self, q_rows: usize, kv_len: usize, threads: usize) -> ScratchSpec {
        let beam = q_rows.min(flash::MAX_DECODE_QUERIES);
        Isa::supported().fold(ScratchSpec::EMPTY, |spec, isa| {
            [q_rows, beam, 1].into_iter().fold(spec, |spec, q_len| {
                let shape = self.shape(q_len, kv_len);
                spec.or(flash::attention_parallel_scratch(isa, &shape, threads))
                    .or(flash::attention_parallel_scratch_kv::<f16>(
                        isa, &shape, threads,
                    ))
            })
        })
    }

    /// Scratch of one call of at most `q_rows` queries over at most `kv_len` keys on one
    /// thread, at every ISA level this machine runs, with `f32` or `f16` keys: one part of
    /// [`attend_units`].
    pub fn unit_scratch(&self, q_rows: usize, kv_len: usize) -> usize {
        let shape = self.shape(q_rows, kv_len);
        Isa::supported()
            .map(|isa| {
                let f32s = flash::attention_parallel_scratch(isa, &shape, 1).len();
                let f16s = flash::attention_parallel_scratch_kv::<f16>(isa, &shape, 1).len();
                f32s.max(f16s)
            })
            .max()
            .unwrap_or(0)
    }

    /// `out = softmax(scale · q·kᵀ + mask) · v` per head for the rows of `q` (and of `out`)
    /// over the rows of `k` and `v`; every row is `heads × d_head` wide.
    pub fn attend<E: KvElement>(
        &self,
        run: Run<'_>,
        (q, k, v): (View<'_>, View<'_, E>, View<'_, E>),
        mask: &Mask<'_>,
        out: ViewMut<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        if self.heads == 0 || self.d_head == 0 {
            return Err(KernelError::InvalidArgument(
                "heads and d_head must be positive",
            ));
        }
        flash::attention_parallel(
            run.isa,
            run.parallel,
            &self.shape(q.rows(), k.rows()),
            q,
            k,
            v,
            out,
            mask,
            Some(self.scale),
            scratch,
        )
    }
}

/// One unit's call of [`attend_units`]: the unit, the run it is given, its rows of the output,
/// its scratch.
pub type AttendCall<'a> =
    dyn Fn(usize, Run<'_>, ViewMut<'_>, &mut [f32]) -> Result<(), KernelError> + Sync + 'a;

/// When [`attend_units`] spreads its units over the threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Whenever there are two threads and two units or more: for calls too small to split
    /// their heads (one query over a beam's cache).
    Always,
    /// Only when every thread gets as many units: for calls that otherwise split their heads
    /// evenly over the threads (a sequence's beams over its encoder memory).
    Even,
}

/// Runs `units` independent attention calls over runs of `out`'s rows (unit `u` owns rows
/// `first_row(u)..first_row(u + 1)`): `call(u, run, rows, scratch)`. When `spread` allows it
/// and `scratch` has room for a `part` per thread ([`Heads::unit_scratch`]), the units are
/// spread over the threads ([`flash::per_unit`]) and each call runs on one thread; otherwise
/// they run in order on the calling thread with `run`, each call free to spread its heads over
/// the threads. A call computes the same bits either way.
pub fn attend_units(
    run: Run<'_>,
    (units, first_row, spread): (usize, &(dyn Fn(usize) -> usize + Sync), Spread),
    out: ViewMut<'_>,
    (scratch, part): (&mut [f32], usize),
    call: &AttendCall<'_>,
) -> Result<(), KernelError> {
    let threads = run.parallel.threads();
    let even = spread == Spread::Always || units % threads.max(1) == 0;
    if threads < 2 || units < 2 || !even || scratch.len() < part.saturating_mul(2) {
        let mut out = out;
        for unit in 0..units {
            let rows = first_row(unit)..first_row(unit + 1);
            let rows = out.reborrow().slice_rows(rows.start, rows.len())?;
            call(unit, run, rows, &mut *scratch)?;
        }
        return Ok(());
    }
    let single = Run {
        isa: run.isa,
        parallel: &Sequential,
    };
    flash::per_unit(
        run.parallel,
        (units, first_row),
        out,
        (scratch, part),
        &|unit, rows, own| call(unit, single, rows, own),
    )
}

impl Heads {
    /// The attention probabilities of head `head` that [`Heads::attend`] weighs the values
    /// with, written out (the flash kernel never forms them): for each row `r` of `q`,
    /// `out[r][j] = softmax_j(scale · q_r·k_j)` over the first `out.cols()` rows of `k`.
    ///
    /// Computed in `f32` as written: each score a sequential sum of `d_head` products of the
    /// head's query and key columns (`f16` keys widened exactly, once per key for all queries;
    /// past 256 columns the sum is taken in pieces of 256 added in order), then the kernels'
    /// row softmax of the scaled scores at `isa` ([`softmax_in_place`]). The probabilities
    /// differ from an `f64` evaluation by a few `f32` ulps per score times the score's
    /// magnitude; a reference computing the scores with a
    /// blocked GEMM rounds the same terms in another order. Cost: `rows × keys × d_head`
    /// multiply-adds per head, a side path run only when word timings are asked for.
    pub fn probabilities<E>(
        &self,
        isa: Isa,
        head: usize,
        q: View<'_>,
        k: View<'_, E>,
        mut out: ViewMut<'_>,
    ) -> Result<(), KernelError>
    where
        E: Copy,
        f32: From<E>,
    {
        check_heads(self)?;
        let (dh, keys) = (self.d_head, out.cols());
        if head >= self.heads {
            return Err(KernelError::InvalidArgument("attention head out of range"));
        }
        for (what, got) in [
            ("probability queries", q.cols()),
            ("probability keys", k.cols()),
        ] {
            if got != self.width() {
                return Err(KernelError::ShapeMismatch {
                    what,
                    expected: self.width(),
                    got,
                });
            }
        }
        if keys > k.rows() || out.rows() != q.rows() {
            return Err(KernelError::InvalidArgument(
                "probabilities over more keys than given, or rows other than the queries'",
            ));
        }
        let k = k.slice_cols(head * dh, dh)?;
        let q = q.slice_cols(head * dh, dh)?;
        // Key by key, each key's columns widened once into `widened` for every query, in
        // pieces of `WIDENED` columns whose partial sums add up in order.
        const WIDENED: usize = 256;
        let mut widened = [0.0f32; WIDENED];
        for j in 0..keys {
            let k_row = k.row(j).unwrap_or(&[]);
            for (piece, k_piece) in k_row.chunks(WIDENED).enumerate() {
                for (w, &v) in widened.iter_mut().zip(k_piece) {
                    *w = f32::from(v);
                }
                let widened = &widened[..k_piece.len()];
                let columns = piece * WIDENED..piece * WIDENED + k_piece.len();
                for (r, q_row) in q.iter_rows().enumerate() {
                    let q_piece = q_row.get(columns.clone()).unwrap_or(&[]);
                    let dot = q_piece
                        .iter()
                        .zip(widened)
                        .fold(0.0f32, |acc, (&a, &b)| acc + a * b);
                    if let Some(score) = out.row_mut(r).and_then(|row| row.get_mut(j)) {
                        *score = if piece == 0 { dot } else { *score + dot };
                    }
                }
            }
        }
        softmax_in_place(isa, out, self.scale)
    }
}

/// Checks that a projection maps `inp` to `parts · out` features.
pub(super) fn check_projection(
    what: &'static str,
    p: &Linear<'_>,
    (inp, out): (usize, usize),
    parts: usize,
) -> Result<(), KernelError> {
    if p.in_features() != inp {
        return Err(KernelError::ShapeMismatch {
            what,
            expected: inp,
            got: p.in_features(),
        });
    }
    if p.out_features() != parts * out {
        return Err(KernelError::ShapeMismatch {
            what,
            expected: parts * out,
            got: p.out_features(),
        });
    }
    Ok(())
}

fn check_heads(heads: &Heads) -> Result<(), KernelError> {
    if heads.heads == 0 || heads.d_head == 0 {
        return Err(KernelError::InvalidArgument(
            "heads and d_head must be positive",
        ));
    }
    Ok(())
}

/// Self-attention: `[Q | K | V] = x·W_qkv + b` in one GEMM, attention, output projection.
#[derive(Clone, Debug)]
pub struct SelfAttention<'w> {
    qkv: Linear<'w>,
    out: Linear<'w>,
    heads: Heads,
    /// A local window (and global tokens) instead of full attention over the source.
    local: Option<LocalAttention<'w>>,
}

impl<'w> SelfAttention<'w> {
    /// Its linear layers, in the order the forward pass reads them.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> impl Iterator<Item = &mut Linear<'w>> {
        let local = self.local.iter_mut().flat_map(|l| l.linears_mut());
        [&mut self.qkv, &mut self.out].into_iter().chain(local)
    }

    /// From the fused `d → 3a` projection and the `a → d` output projection, where `d` is the
    /// model width and `a = heads × d_head` the attention width (usually `d`).
    pub fn new(
        qkv: Linear<'w>,
        out: Linear<'w>,
        heads: Heads,
    ) -> Result<SelfAttention<'w>, KernelError> {
        let (d, a) = (out.out_features(), heads.width());
        check_heads(&heads)?;
        check_projection("self-attention qkv", &qkv, (d, a), 3)?;
        check_projection("self-attention output", &out, (a, d), 1)?;
        Ok(SelfAttention {
            qkv,
            out,
            heads,
            local: None,
        })
    }

    /// The same layer attending within a local window ([`LocalAttention`]), as an encoder
    /// for long sources does.
    pub fn with_local(
        mut self,
        local: LocalAttention<'w>,
    ) -> Result<SelfAttention<'w>, KernelError> {
        local.check((self.out.out_features(), self.heads.width()))?;
        self.local = Some(local);
        Ok(self)
    }

    /// Its local window, when it has one.
    pub fn local(&self) -> Option<&LocalAttention<'w>> {
        self.local.as_ref()
    }

    /// The head layout.
    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    /// The output projection.
    pub fn output(&self) -> &Linear<'w> {
        &self.out
    }

    /// The fused Q/K/V projection.
    pub fn qkv(&self) -> &Linear<'w> {
        &self.qkv
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        let local = self.local.as_ref().map_or(0, LocalAttention::bytes);
        self.qkv.bytes() + self.out.bytes() + local
    }

    /// Scratch for `rows` query rows of width `d` over at most `kv_len` keys on `threads`
    /// threads (with or without a local window and global projections).
    pub fn scratch(
        heads: &Heads,
        d: usize,
        rows: usize,
        kv_len: usize,
        threads: usize,
    ) -> ScratchSpec {
        let a = heads.width();
        heads
            .scratch(rows, kv_len, threads)
            .or(linear::scratch(rows, d, 3 * a, threads))
            .or(linear::scratch(rows, a, d, threads))
            .or(LocalAttention::scratch(d, a, rows, threads))
    }

    /// `qkv = input·W_qkv + b` for every row of `input` (`qkv` rows are `3a` wide).
    pub fn project(
        &self,
        run: Run<'_>,
        input: View<'_>,
        qkv: ViewMut<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let identity = Activation::Identity;
        self.qkv.forward(run, input, qkv, identity, None, scratch)
    }

    /// The Q, K and V views, `a` columns each, of projected rows `3a` wide.
    pub fn split(qkv: View<'_>, a: usize) -> Result<[View<'_>; 3], KernelError> {
        Ok([
            qkv.slice_cols(0, a)?,
            qkv.slice_cols(a, a)?,
            qkv.slice_cols(2 * a, a)?,
        ])
    }
}

/// Cross-attention: `Q = x·W_q + b` from the decoder, `[K | V] = memory·W_kv + b` from the
/// encoder output (projected once per source), attention, output projection.
#[derive(Clone, Debug)]
pub struct CrossAttention<'w> {
    q: Linear<'w>,
    kv: Linear<'w>,
    out: Linear<'w>,
    heads: Heads,
}

impl<'w> CrossAttention<'w> {
    /// Its linear layers: the query, memory and output projections.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> [&mut Linear<'w>; 3] {
        [&mut self.q, &mut self.kv, &mut self.out]
    }

    /// From the `d → a` query, the fused `d → 2a` key/value and the `a → d` output
    /// projections (`a = heads × d_head`, usually the model width `d`).
    pub fn new(
        q: Linear<'w>,
        kv: Linear<'w>,
        out: Linear<'w>,
        heads: Heads,
    ) -> Result<CrossAttention<'w>, KernelError> {
        let (d, a) = (out.out_features(), heads.width());
        check_heads(&heads)?;
        check_projection("cross-attention query", &q, (d, a), 1)?;
        check_projection("cross-attention kv", &kv, (d, a), 2)?;
        check_projection("cross-attention output", &out, (a, d), 1)?;
        Ok(CrossAttention { q, kv, out, heads })
    }

    /// The output projection.
    pub fn output(&self) -> &Linear<'w> {
        &self.out
    }

    /// The query projection.
    pub fn query(&self) -> &Linear<'w> {
        &self.q
    }

    /// The fused key/value projection of the encoder memory.
    pub fn memory(&self) -> &Linear<'w> {
        &self.kv
    }

    /// The head layout.
    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    /// Bytes a decoder step reads (query and output projections).
    pub fn step_bytes(&self) -> usize {
        self.q.bytes() + self.out.bytes()
    }

    /// Bytes of the memory projection (read once per source).
    pub fn memory_bytes(&self) -> usize {
        self.kv.bytes()
    }

    /// Scratch for `rows` query rows of width `d` over `src_rows` source rows on `threads`
    /// threads.
    pub fn scratch(
        heads: &Heads,
        d: usize,
        rows: usize,
        src_rows: usize,
        threads: usize,
    ) -> ScratchSpec {
        let a = heads.width();
        heads
            .scratch(rows, src_rows, threads)
            .or(linear::scratch(rows, d, a, threads))
            .or(linear::scratch(rows, a, d, threads))
            .or(linear::scratch(src_rows, d, 2 * a, threads))
    }

    /// `kv = memory·W_kv + b` for every source row of `memory` (`kv` rows are `2a` wide).
    pub fn project_memory(
        &self,
        run: Run<'_>,
        memory: View<'_>,
        kv: ViewMut<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let identity = Activation::Identity;
        self.kv.forward(run, memory, kv, identity, None, scratch)
    }

    /// `q = input·W_q + b` for every row of `input` (`q` is `rows × a`).
    pub fn project_query(
        &self,
        run: Run<'_>,
        input: View<'_>,
        q: ViewMut<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let identity = Activation::Identity;
        self.q.forward(run, input, q, identity, None, scratch)
    }

    /// [`Heads::probabilities`] of head `head` for every row of `q` (projected queries) over
    /// the first `out.cols()` source rows of `memory`.
    pub fn probabilities(
        &self,
        isa: Isa,
        head: usize,
        q: View<'_>,
        memory: MemoryKv<'_>,
        out: ViewMut<'_>,
    ) -> Result<(), KernelError> {
        match memory {
            MemoryKv::F32(k, _) => self.heads.probabilities(isa, head, q, k, out),
            MemoryKv::F16(k, _) => self.heads.probabilities(isa, head, q, k, out),
        }
    }

    /// `out = attention(q, K, V)` for every row of `q` (projected queries) over the source
    /// rows of `memory`; `q` and `out` are `rows × a`.
    pub fn attend_memory(
        &self,
        run: Run<'_>,
        q: View<'_>,
        memory: MemoryKv<'_>,
        out: ViewMut<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let mask = &Mask::NONE;
        match memory {
            MemoryKv::F32(k, v) => self.heads.attend(run, (q, k, v), mask, out, scratch),
            MemoryKv::F16(k, v) => self.heads.attend(run, (q, k, v), mask, out, scratch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic values in [-1, 1).
    fn values(n: usize, seed: u32) -> std::vec::Vec<f32> {
        let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// The probabilities of each head are the `f64` softmax of its scaled scores within a few
    /// `f32` ulps, over a prefix of the keys, from `f32` and from `f16` keys.
    #[test]
    fn probabilities_are_the_softmax_of_one_heads_scores() {
        let heads = Heads {
            heads: 3,
            d_head: 8,
            scale: 0.35,
        };
        let (a, rows, keys, used) = (24, 5, 11, 7);
        let q = values(rows * a, 1);
        let k = values(keys * a, 2);
        let k16: std::vec::Vec<f16> = k.iter().map(|&v| f16::from_f32(v)).collect();
        for (isa, head) in Isa::supported().flat_map(|isa| (0..3).map(move |h| (isa, h))) {
            let mut out = std::vec![0.0f32; rows * used];
            let mut out16 = out.clone();
            let qv = View::new(&q, rows, a, a).unwrap();
            let view = ViewMut::new(&mut out, rows, used, used).unwrap();
            heads
                .probabilities(isa, head, qv, View::new(&k, keys, a, a).unwrap(), view)
                .unwrap();
            let view = ViewMut::new(&mut out16, rows, used, used).unwrap();
            heads
                .probabilities(isa, head, qv, View::new(&k16, keys, a, a).unwrap(), view)
                .unwrap();
            for r in 0..rows {
                for (got, keys_of) in [
                    (&out, &k),
                    (&out16, &k16.iter().map(|v| v.to_f32()).collect()),
                ] {
                    let scores: std::vec::Vec<f64> = (0..used)
                        .map(|j| {
                            let dot: f64 = (0..8)
                                .map(|d| {
                                    f64::from(q[r * a + head * 8 + d])
                                        * f64::from(keys_of[j * a + head * 8 + d])
                                })
                                .sum();
                            0.35 * dot
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                    for j in 0..used {
                        let want = (scores[j] - max).exp() / sum;
                        let got = f64::from(got[r * used + j]);
                        assert!((got - want).abs() < 1e-6, "head {head} row {r} key {j}");
                    }
                }
            }
        }
        let qv = View::new(&q, rows, a, a).unwrap();
        let mut out = std::vec![0.0f32; rows * (keys + 1)];
        let view = ViewMut::new(&mut out, rows, keys + 1, keys + 1).unwrap();
        let kv = View::new(&k, keys, a, a).unwrap();
        assert!(
            heads.probabilities(Isa::scalar(), 0, qv, kv, view).is_err(),
            "more keys than given"
        );
        let view = ViewMut::new(&mut out, rows, keys, keys).unwrap();
        assert!(
            heads.probabilities(Isa::scalar(), 3, qv, kv, view).is_err(),
            "head out of range"
        );
    }
}
