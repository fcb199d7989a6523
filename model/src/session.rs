//! A session: one preallocated arena, the encoder forward and the incremental decoder step.
//!
//! After [`Session::new`] nothing here allocates: every buffer is a region of the arena the
//! [`ArenaPlan`] sized from the config.

use tessel_kernels::{Isa, KernelError};
use thiserror::Error;

use crate::aligned::AlignedBuf;
use crate::config::{Config, NormPlacement};
use crate::ops::{
    attention, layer_norm, linear, AttentionShape, Epilogue, Linear, NormParams, Residual, Rows,
};
use crate::plan::{ArenaPlan, Limits, Span};
use crate::threads::{PoolError, ThreadPool};
use crate::weights::{Model, Norm};
use std::sync::Arc;

/// Why a call on a session was refused. A refused call changes nothing: the session keeps its
/// state and stays usable.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum RunError {
    /// Empty source.
    #[error("the source is empty")]
    EmptySource,
    /// Source longer than `max_src_len`.
    #[error("source length {len} exceeds max_src_len {max}")]
    SourceTooLong {
        /// Given length.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A token id outside its vocabulary.
    #[error("{side} token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange {
        /// `source` or `target`.
        side: &'static str,
        /// The id.
        token: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// Decoding before any successful encode.
    #[error("decode called before encode")]
    NotEncoded,
    /// More beams than the plan holds, or none.
    #[error("beam width {beam} outside 1..={max}")]
    BadBeam {
        /// Requested width.
        beam: usize,
        /// `max_beam`.
        max: usize,
    },
    /// The target would exceed `max_tgt_len` positions.
    #[error("target length {len} exceeds max_tgt_len {max}")]
    TargetTooLong {
        /// Positions requested.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A step's row count differs from the beams in the cache.
    #[error("step has {got} rows but the cache holds {expected} beams")]
    BeamCountMismatch {
        /// Beams in the cache.
        expected: usize,
        /// Rows given.
        got: usize,
    },
    /// A parent index is not an active beam.
    #[error("parent {parent} is not one of the {active} active beams")]
    BadParent {
        /// The index.
        parent: u32,
        /// Active beams.
        active: usize,
    },
    /// A search option is invalid.
    #[error("invalid search option: {0}")]
    BadOption(&'static str),
    /// A kernel refused its arguments (an internal inconsistency; never expected).
    #[error("kernel error: {0}")]
    Kernel(#[from] KernelError),
}

/// Why a session could not be created.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SessionError {
    /// The limits exceed the model's config (or are zero).
    #[error(transparent)]
    Limits(#[from] crate::config::ConfigError),
    /// The arena could not be allocated.
    #[error("cannot allocate the {bytes}-byte arena")]
    OutOfMemory {
        /// Arena size.
        bytes: usize,
    },
    /// The worker threads could not be started (or the count is out of range).
    #[error(transparent)]
    Threads(#[from] PoolError),
}

/// One model's working state: the arena, the encoded source and the decoder caches.
pub struct Session<'m> {
    pub(crate) model: &'m Model,
    pub(crate) isa: Isa,
    pub(crate) plan: ArenaPlan,
    pub(crate) arena: AlignedBuf,
    pub(crate) pool: Arc<ThreadPool>,
    pub(crate) src_len: Option<usize>,
    pub(crate) position: usize,
    pub(crate) active: usize,
    /// Rows of valid logits from the last step (0 after encode or reset).
    pub(crate) logits_rows: usize,
}

/// Splits `arena` into the given spans, which must be in increasing, non-overlapping order.
pub(crate) fn carve<const N: usize>(arena: &mut [f32], spans: [Span; N]) -> [&mut [f32]; N] {
    let mut rest = arena;
    let mut base = 0;
    let mut parts: [&mut [f32]; N] = core::array::from_fn(|_| Default::default());
    for (part, span) in parts.iter_mut().zip(spans) {
        let (_, tail) = core::mem::take(&mut rest).split_at_mut(span.start - base);
        let (head, tail) = tail.split_at_mut(span.len);
        *part = head;
        rest = tail;
        base = span.start + span.len;
    }
    parts
}

/// `TokenOutOfRange` for the first id of `tokens` at or above `vocab`.
pub(crate) fn check_tokens(
    side: &'static str,
    tokens: &[u32],
    vocab: usize,
) -> Result<(), RunError> {
    match tokens.iter().find(|&&t| t as usize >= vocab) {
        Some(&token) => Err(RunError::TokenOutOfRange { side, token, vocab }),
        None => Ok(()),
    }
}

/// Shared per-call constants of a stack.
struct Ctx {
    isa: Isa,
    /// Runs the GEMMs' column blocks (shared with the session; cloning it allocates nothing).
    pool: Arc<ThreadPool>,
    placement: NormPlacement,
    eps: f32,
    rows: usize,
    d: usize,
}

impl Ctx {
    fn norm<'a>(&self, norm: &'a Norm) -> NormParams<'a> {
        NormParams {
            gamma: norm.gamma.as_slice(),
            beta: norm.beta.as_slice(),
            eps: self.eps,
        }
    }

    /// `out = LN(x)` over the rows.
    fn layer_norm(&self, x: &[f32], norm: &Norm, out: &mut [f32]) -> Result<(), KernelError> {
        let rows = Rows {
            data: x,
            stride: self.d,
        };
        layer_norm(
            self.isa,
            self.rows,
            rows,
            None,
            self.norm(norm),
            out,
            self.d,
            None,
        )
    }

    /// The input of a sublayer: `LN(hidden)` (pre-LN, written to `normed`) or `hidden` (post-LN).
    fn sublayer_input<'a>(
        &self,
        hidden: &'a [f32],
        normed: &'a mut [f32],
        norm: &Norm,
    ) -> Result<&'a [f32], KernelError> {
        match self.placement {
            NormPlacement::Pre => {
                self.layer_norm(hidden, norm, normed)?;
                Ok(normed)
            }
            NormPlacement::Post => Ok(hidden),
        }
    }

    /// Projects a sublayer's inner result back into the residual stream:
    /// `hidden += inner·W + b` (pre-LN) or `hidden = LN(hidden + inner·W + b)` (post-LN).
    #[allow(clippy::too_many_arguments)]
    fn sublayer_output(
        &self,
        inner: &[f32],
        inner_stride: usize,
        projection: &Linear,
        hidden: &mut [f32],
        normed: &mut [f32],
        norm: &Norm,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        // The GEMM writes C without reading it: the residual stream comes in through the
        // epilogue, into `normed` (free once the sublayer has consumed it).
        linear(
            self.isa,
            self.rows,
            inner,
            inner_stride,
            projection,
            normed,
            self.d,
            Epilogue {
                activation: tessel_kernels::activation::Activation::Identity,
                residual: Residual::Add(hidden, self.d),
            },
            scratch,
            &*self.pool,
        )?;
        match self.placement {
            NormPlacement::Pre => {
                let len = self.rows * self.d;
                hidden[..len].copy_from_slice(&normed[..len]);
                Ok(())
            }
            NormPlacement::Post => self.layer_norm(normed, norm, hidden),
        }
    }

    /// The feed-forward sublayer.
    #[allow(clippy::too_many_arguments)]
    fn feed_forward(
        &self,
        config: &Config,
        ff1: &Linear,
        ff2: &Linear,
        norm: &Norm,
        hidden: &mut [f32],
        normed: &mut [f32],
        ffn: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let input = self.sublayer_input(hidden, normed, norm)?;
        linear(
            self.isa,
            self.rows,
            input,
            self.d,
            ff1,
            ffn,
            config.d_ff,
            Epilogue::activation(config.activation.kernel()),
            scratch,
            &*self.pool,
        )?;
        self.sublayer_output(ffn, config.d_ff, ff2, hidden, normed, norm, scratch)
    }
}

/// `out[i] = table[tokens[i]] · scale + positions[first_position (+ i when advancing)]`.
#[allow(clippy::too_many_arguments)]
fn embed(
    table: &[f32],
    positions: &[f32],
    tokens: &[u32],
    first_position: usize,
    advance_position: bool,
    scale: f32,
    d: usize,
    out: &mut [f32],
) {
    for (i, (&token, row)) in tokens.iter().zip(out.chunks_exact_mut(d)).enumerate() {
        let t = token as usize * d;
        let p = (first_position + if advance_position { i } else { 0 }) * d;
        for ((o, &e), &pe) in row
            .iter_mut()
            .zip(&table[t..t + d])
            .zip(&positions[p..p + d])
        {
            *o = e * scale + pe;
        }
    }
}

impl<'m> Session<'m> {
    /// A session over `model` running at `isa`, planned for the config's maximum lengths and
    /// beam: plans and allocates the whole arena, once.
    pub fn new(model: &'m Model, isa: Isa) -> Result<Session<'m>, SessionError> {
        Session::with_limits(model, isa, Limits::of(&model.config))
    }

    /// A session planned for `limits` (each at most the config's maximum): a smaller arena for
    /// hosts that know their lengths.
    pub fn with_limits(
        model: &'m Model,
        isa: Isa,
        limits: Limits,
    ) -> Result<Session<'m>, SessionError> {
        let plan = ArenaPlan::with_limits(&model.config, limits)?;
        let pool = ThreadPool::new(limits.threads)?;
        let arena = AlignedBuf::zeros(plan.total_f32())
            .map_err(|e| SessionError::OutOfMemory { bytes: e.bytes })?;
        Ok(Session {
            model,
            isa,
            plan,
            arena,
            pool: Arc::new(pool),
            src_len: None,
            position: 0,
            active: 0,
            logits_rows: 0,
        })
    }

    /// The lengths and beam width this session holds.
    pub fn limits(&self) -> Limits {
        self.plan.limits
    }

    /// The arena plan (named regions and sizes).
    pub fn plan(&self) -> &ArenaPlan {
        &self.plan
    }

    /// The ISA level this session runs at.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Length of the encoded source, if any.
    pub fn source_len(&self) -> Option<usize> {
        self.src_len
    }

    /// Target positions decoded since the last encode or reset.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Beams held by the self-attention cache.
    pub fn active_beams(&self) -> usize {
        self.active
    }

    /// Forgets the decoded positions (keeps the encoded source and its cross-attention K/V).
    pub fn reset_decoder(&mut self) {
        self.position = 0;
        self.active = 0;
        self.logits_rows = 0;
    }

    fn ctx(&self, rows: usize) -> Ctx {
        let c = &self.model.config;
        Ctx {
            isa: self.isa,
            pool: Arc::clone(&self.pool),
            placement: c.norm,
            eps: c.layer_norm_eps,
            rows,
            d: c.d_model,
        }
    }

    fn embed_scale(&self) -> f32 {
        let c = &self.model.config;
        if c.scale_embeddings {
            (c.d_model as f32).sqrt()
        } else {
            1.0
        }
    }

    /// Runs the encoder over `src` and projects the cross-attention K/V of every decoder layer,
    /// once for all beams. Resets the decoder.
    pub fn encode(&mut self, src: &[u32]) -> Result<(), RunError> {
        let config = &self.model.config;
        if src.is_empty() {
            return Err(RunError::EmptySource);
        }
        let limits = self.plan.limits;
        if src.len() > limits.max_src_len {
            return Err(RunError::SourceTooLong {
                len: src.len(),
                max: limits.max_src_len,
            });
        }
        check_tokens("source", src, config.src_vocab)?;
        self.src_len = None;
        self.reset_decoder();
        let result = self.run_encoder(src);
        if result.is_ok() {
            self.src_len = Some(src.len());
        }
        result
    }

    fn run_encoder(&mut self, src: &[u32]) -> Result<(), RunError> {
        let model = self.model;
        let config = &model.config;
        let (d, s) = (config.d_model, src.len());
        let c = self.ctx(s);
        let scale = self.embed_scale();
        let heads = config.heads;
        let attention_scale = 1.0 / (config.d_head() as f32).sqrt();
        let l = &self.plan.layout;
        let [hidden, normed, qkv, attn, ffn, cross_kv, scratch] = carve(
            self.arena.as_mut_slice(),
            [
                l.wide.hidden,
                l.wide.normed,
                l.wide.qkv,
                l.wide.attn,
                l.wide.ffn,
                l.cross_kv,
                l.scratch,
            ],
        );
        let table = model
            .src_embed
            .as_ref()
            .unwrap_or(&model.tgt_embed)
            .as_slice();
        embed(
            table,
            model.src_pos.as_slice(),
            src,
            0,
            true,
            scale,
            d,
            hidden,
        );
        for layer in &model.encoder {
            let input = c.sublayer_input(hidden, normed, &layer.norm1)?;
            linear(
                c.isa,
                s,
                input,
                d,
                &layer.qkv,
                qkv,
                3 * d,
                Epilogue::PLAIN,
                scratch,
                &*c.pool,
            )?;
            attention(
                c.isa,
                AttentionShape {
                    heads,
                    d_head: config.d_head(),
                    q_rows: s,
                    kv_len: s,
                    causal_offset: None,
                },
                Rows {
                    data: qkv,
                    stride: 3 * d,
                },
                Rows {
                    data: &qkv[d..],
                    stride: 3 * d,
                },
                Rows {
                    data: &qkv[2 * d..],
                    stride: 3 * d,
                },
                attn,
                d,
                attention_scale,
                scratch,
            )?;
            c.sublayer_output(attn, d, &layer.out, hidden, normed, &layer.norm1, scratch)?;
            c.feed_forward(
                config,
                &layer.ff1,
                &layer.ff2,
                &layer.norm2,
                hidden,
                normed,
                ffn,
                scratch,
            )?;
        }
        let memory: &[f32] = match &model.encoder_norm {
            Some(norm) => {
                c.layer_norm(hidden, norm, normed)?;
                normed
            }
            None => hidden,
        };
        let per_layer = self.plan.limits.max_src_len * 2 * d;
        for (layer, kv) in model
            .decoder
            .iter()
            .zip(cross_kv.chunks_exact_mut(per_layer))
        {
            linear(
                c.isa,
                s,
                memory,
                d,
                &layer.cross_kv,
                kv,
                2 * d,
                Epilogue::PLAIN,
                scratch,
                &*c.pool,
            )?;
        }
        Ok(())
    }

    /// Checks a decoder step of `rows` beams and its tokens against the session state.
    fn check_step(&self, tokens: &[u32]) -> Result<(), RunError> {
        let config = &self.model.config;
        if self.src_len.is_none() {
            return Err(RunError::NotEncoded);
        }
        let rows = tokens.len();
        let limits = self.plan.limits;
        if rows == 0 || rows > limits.max_beam {
            return Err(RunError::BadBeam {
                beam: rows,
                max: limits.max_beam,
            });
        }
        if self.position > 0 && rows != self.active {
            return Err(RunError::BeamCountMismatch {
                expected: self.active,
                got: rows,
            });
        }
        if self.position >= limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len: self.position + 1,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", tokens, config.tgt_vocab)?;
        Ok(())
    }

    /// Decodes one position for each beam: row `i` of the cache continues with `tokens[i]`.
    /// Returns the logits, `tokens.len() × tgt_vocab`. The first step after encode (or
    /// [`Session::reset_decoder`]) sets the number of beams; later steps must keep it (use
    /// [`Session::reorder_beams`] to change which history each row continues).
    pub fn decode_step(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        self.check_step(tokens)?;
        let span = self.plan.layout.step_tokens;
        let staged: &mut [u32] =
            bytemuck::cast_slice_mut(&mut self.arena.as_mut_slice()[span.range()]);
        staged[..tokens.len()].copy_from_slice(tokens);
        self.run_step(tokens.len())?;
        Ok(self.logits())
    }

    /// Logits of the last decoder step, one row per beam of that step (empty before any step
    /// since the last encode or reset; a later [`Session::reorder_beams`] does not move them).
    pub fn logits(&self) -> &[f32] {
        let vocab = self.model.config.tgt_vocab;
        &self.arena.as_slice()[self.plan.layout.logits.range()][..self.logits_rows * vocab]
    }

    /// Runs one decoder step over the `rows` tokens staged in the arena, one per beam.
    pub(crate) fn run_step(&mut self, rows: usize) -> Result<(), RunError> {
        self.run_decoder(rows, None)?;
        self.position += 1;
        self.active = rows;
        self.logits_rows = rows;
        Ok(())
    }

    /// Feeds a forced target prefix as one beam (BOS first when starting from scratch), in
    /// chunks of up to `max_src_len` rows: each chunk reads every weight once for all its
    /// tokens, with causal self-attention over the cache. Returns the logits after the last
    /// token (`1 × tgt_vocab`); decoding then continues with [`Session::decode_step`].
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        let config = &self.model.config;
        let limits = self.plan.limits;
        if self.src_len.is_none() {
            return Err(RunError::NotEncoded);
        }
        if tokens.is_empty() {
            return Err(RunError::BadOption("prefill needs at least one token"));
        }
        if self.position > 0 && self.active != 1 {
            return Err(RunError::BeamCountMismatch {
                expected: self.active,
                got: 1,
            });
        }
        let len = self.position.saturating_add(tokens.len());
        if len > limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", tokens, config.tgt_vocab)?;
        for chunk in tokens.chunks(limits.max_src_len) {
            self.run_decoder(chunk.len(), Some(chunk))?;
            self.position += chunk.len();
            self.active = 1;
            self.logits_rows = 1;
        }
        Ok(self.logits())
    }

    /// One decoder pass over `rows` rows at `self.position`: with `prefix`, the rows are
    /// consecutive positions of beam 0 (causal attention among them, logits of the last row
    /// only); without, they are one new position per beam (tokens staged in the arena).
    fn run_decoder(&mut self, rows: usize, prefix: Option<&[u32]>) -> Result<(), RunError> {
        let model = self.model;
        let config = &model.config;
        let Some(src_len) = self.src_len else {
            return Err(RunError::NotEncoded);
        };
        let d = config.d_model;
        let limits = self.plan.limits;
        let (max_beam, max_tgt, max_src) =
            (limits.max_beam, limits.max_tgt_len, limits.max_src_len);
        let position = self.position;
        let c = self.ctx(rows);
        let (first, out_rows) = match prefix {
            Some(_) => (rows.saturating_sub(1), 1),
            None => (0, rows),
        };
        let c_out = self.ctx(out_rows);
        let scale = self.embed_scale();
        let attention_scale = 1.0 / (config.d_head() as f32).sqrt();
        let l = &self.plan.layout;
        let work = if prefix.is_some() { l.wide } else { l.narrow };
        let [hidden, normed, qkv, q, attn, ffn, logits, cross_kv, self_k, self_v, scratch, staged] =
            carve(
                self.arena.as_mut_slice(),
                [
                    work.hidden,
                    work.normed,
                    work.qkv,
                    work.q,
                    work.attn,
                    work.ffn,
                    l.logits,
                    l.cross_kv,
                    l.self_k,
                    l.self_v,
                    l.scratch,
                    l.step_tokens,
                ],
            );
        let tokens: &[u32] = match prefix {
            Some(tokens) => tokens,
            None => bytemuck::cast_slice(&staged[..rows]),
        };
        embed(
            model.tgt_embed.as_slice(),
            model.tgt_pos.as_slice(),
            tokens,
            position,
            prefix.is_some(),
            scale,
            d,
            hidden,
        );
        let cache_layer = max_beam * max_tgt * d;
        let cache_beam = max_tgt * d;
        let heads = config.heads;
        let d_head = config.d_head();
        for (index, layer) in model.decoder.iter().enumerate() {
            // Masked self-attention: the new rows are appended to the cache in place.
            let input = c.sublayer_input(hidden, normed, &layer.norm1)?;
            linear(
                c.isa,
                rows,
                input,
                d,
                &layer.self_qkv,
                qkv,
                3 * d,
                Epilogue::PLAIN,
                scratch,
                &*c.pool,
            )?;
            for r in 0..rows {
                let (beam, pos) = match prefix {
                    Some(_) => (0, position + r),
                    None => (r, position),
                };
                let at = index * cache_layer + beam * cache_beam + pos * d;
                let row = &qkv[r * 3 * d..(r + 1) * 3 * d];
                self_k[at..at + d].copy_from_slice(&row[d..2 * d]);
                self_v[at..at + d].copy_from_slice(&row[2 * d..]);
            }
            // Prefix: all rows at once over beam 0, causally. Steps: one query per beam.
            let (groups, q_rows, kv_len, causal_offset) = match prefix {
                Some(_) => (1, rows, position + rows, Some(position)),
                None => (rows, 1, position + 1, None),
            };
            for g in 0..groups {
                let base = index * cache_layer + g * cache_beam;
                attention(
                    c.isa,
                    AttentionShape {
                        heads,
                        d_head,
                        q_rows,
                        kv_len,
                        causal_offset,
                    },
                    Rows {
                        data: &qkv[g * 3 * d..],
                        stride: 3 * d,
                    },
                    Rows {
                        data: &self_k[base..base + cache_beam],
                        stride: d,
                    },
                    Rows {
                        data: &self_v[base..base + cache_beam],
                        stride: d,
                    },
                    &mut attn[g * d..],
                    d,
                    attention_scale,
                    scratch,
                )?;
            }
            c.sublayer_output(
                attn,
                d,
                &layer.self_out,
                hidden,
                normed,
                &layer.norm1,
                scratch,
            )?;

            // Cross-attention: queries from the decoder, K/V projected once at encode time and
            // shared by every beam.
            let input = c.sublayer_input(hidden, normed, &layer.norm2)?;
            linear(
                c.isa,
                rows,
                input,
                d,
                &layer.cross_q,
                q,
                d,
                Epilogue::PLAIN,
                scratch,
                &*c.pool,
            )?;
            let kv = &cross_kv[index * max_src * 2 * d..(index + 1) * max_src * 2 * d];
            attention(
                c.isa,
                AttentionShape {
                    heads,
                    d_head,
                    q_rows: rows,
                    kv_len: src_len,
                    causal_offset: None,
                },
                Rows { data: q, stride: d },
                Rows {
                    data: kv,
                    stride: 2 * d,
                },
                Rows {
                    data: &kv[d..],
                    stride: 2 * d,
                },
                attn,
                d,
                attention_scale,
                scratch,
            )?;
            c.sublayer_output(
                attn,
                d,
                &layer.cross_out,
                hidden,
                normed,
                &layer.norm2,
                scratch,
            )?;

            c.feed_forward(
                config,
                &layer.ff1,
                &layer.ff2,
                &layer.norm3,
                hidden,
                normed,
                ffn,
                scratch,
            )?;
        }
        // Logits of every beam, or of the last prefix row only.
        let c = c_out;
        let hidden = &hidden[first * d..];
        let output: &[f32] = match &model.decoder_norm {
            Some(norm) => {
                c.layer_norm(hidden, norm, normed)?;
                normed
            }
            None => hidden,
        };
        linear(
            c.isa,
            out_rows,
            output,
            d,
            &model.generator,
            logits,
            config.tgt_vocab,
            Epilogue::PLAIN,
            scratch,
            &*c.pool,
        )?;
        Ok(())
    }

    /// Makes beam `i` continue the history of beam `parents[i]` (the number of beams becomes
    /// `parents.len()`), by copying cache rows within the arena.
    pub fn reorder_beams(&mut self, parents: &[u32]) -> Result<(), RunError> {
        let max = self.plan.limits.max_beam;
        if parents.is_empty() || parents.len() > max {
            return Err(RunError::BadBeam {
                beam: parents.len(),
                max,
            });
        }
        if self.src_len.is_none() {
            return Err(RunError::NotEncoded);
        }
        if let Some(&parent) = parents.iter().find(|&&p| p as usize >= self.active) {
            return Err(RunError::BadParent {
                parent,
                active: self.active,
            });
        }
        let span = self.plan.layout.parents;
        let staged: &mut [u32] =
            bytemuck::cast_slice_mut(&mut self.arena.as_mut_slice()[span.range()]);
        staged[..parents.len()].copy_from_slice(parents);
        self.run_reorder(parents.len());
        Ok(())
    }

    /// Reorders the cache by the `beams` parents staged in the arena (already validated).
    pub(crate) fn run_reorder(&mut self, beams: usize) {
        let config = &self.model.config;
        let d = config.d_model;
        let limits = self.plan.limits;
        let beam_stride = limits.max_tgt_len * d;
        let used = self.position * d;
        let layer_stride = limits.max_beam * beam_stride;
        let l = &self.plan.layout;
        let [self_k, self_v, stage, parents] = carve(
            self.arena.as_mut_slice(),
            [l.self_k, l.self_v, l.stage, l.parents],
        );
        let parents: &[u32] = bytemuck::cast_slice(&parents[..beams]);
        let overwritten = |slot: usize| slot < beams && parents[slot] as usize != slot;
        for cache in [self_k, self_v] {
            for layer in cache.chunks_exact_mut(layer_stride) {
                // Sources that are themselves overwritten are staged first.
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if overwritten(b) && overwritten(p) {
                        stage[b * beam_stride..b * beam_stride + used]
                            .copy_from_slice(&layer[p * beam_stride..p * beam_stride + used]);
                    }
                }
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if !overwritten(b) {
                        continue;
                    }
                    let dst = b * beam_stride;
                    if overwritten(p) {
                        layer[dst..dst + used].copy_from_slice(&stage[dst..dst + used]);
                    } else {
                        layer.copy_within(p * beam_stride..p * beam_stride + used, dst);
                    }
                }
            }
        }
        self.active = beams;
    }
}
