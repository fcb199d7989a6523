//! The passes a session runs over its arena: the encoder (and the projection of its output for
//! every decoder layer's cross-attention), the decoder over one new position per beam or over
//! a forced prefix, and the reordering of the cache between beam-search steps.
//!
//! Each pass carves the arena into its named regions ([`crate::plan`]'s `Layout::carve`, one
//! phase's working buffers and every other region) and takes the ones its layers need;
//! validation of the caller's input happens before, in [`crate::Session`].

use tessel_kernels::activation::Activation;
use tessel_kernels::{KernelError, View, ViewMut};

use crate::layers::{CrossAttention, CrossKv, KvCache, Run, SelfMode, Work};
use crate::model::{Model, Source};
use crate::plan::{ArenaPlan, Carved, Phase};

/// Where a session stands between calls.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct State {
    /// Length of the encoded source, `None` before a successful encode.
    pub src_len: Option<usize>,
    /// Target positions decoded.
    pub position: usize,
    /// Beams held by the cache.
    pub active: usize,
    /// Rows of valid logits from the last step.
    pub logits_rows: usize,
}

impl State {
    pub fn reset_decoder(&mut self) {
        self.position = 0;
        self.active = 0;
        self.logits_rows = 0;
    }

    /// After a pass that decoded `positions` positions of `beams` beams.
    pub fn advance(&mut self, positions: usize, beams: usize, logits_rows: usize) {
        self.position += positions;
        self.active = beams;
        self.logits_rows = logits_rows;
    }
}

/// Token ids of a pass: given by the caller, or the first `n` of the arena's staged tokens
/// (written there by a search).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tokens<'t> {
    Given(&'t [u32]),
    Staged(usize),
}

impl Tokens<'_> {
    pub fn len(&self) -> usize {
        match self {
            Tokens::Given(t) => t.len(),
            Tokens::Staged(n) => *n,
        }
    }

    fn resolve<'a>(&'a self, staged: &'a [f32]) -> &'a [u32] {
        match *self {
            Tokens::Given(t) => t,
            Tokens::Staged(n) => &bytemuck::cast_slice(staged)[..n],
        }
    }
}

/// How the rows of a decoder pass relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rows {
    /// One new position per beam.
    Beams,
    /// Consecutive positions of beam 0.
    Prefix,
}

/// Runs the encoder over `src` (validated) and writes every decoder layer's cross-attention
/// K/V of its output.
pub(crate) fn encode(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    src: &[u32],
) -> Result<(), KernelError> {
    let Source::Tokens(embedding) = &model.source else {
        return Err(KernelError::InvalidArgument(
            "this model reads audio frames, not tokens",
        ));
    };
    let carved = plan.layout.carve(arena, Phase::Wide);
    embedding.forward(run.isa, src, 0, true, carved.work.hidden)?;
    encoder_stack(model, run, plan, src.len(), carved, &mut || {})
}

/// Runs Whisper's convolutional front end over `frames` frames of `mel` (`n_mels × frames`,
/// validated), then the encoder, calls `encoded`, then projects the cross-attention K/V of its
/// output.
pub(crate) fn encode_audio(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    (mel, frames): (&[f32], usize),
    encoded: &mut dyn FnMut(),
) -> Result<(), KernelError> {
    let Source::Audio(stem) = &model.source else {
        return Err(KernelError::InvalidArgument(
            "this model reads tokens, not audio frames",
        ));
    };
    let mut carved = plan.layout.carve(arena, Phase::Wide);
    let (work, r) = (&mut carved.work, &mut carved.regions);
    stem.stage_input(mel, frames, r.stem_input);
    let (input, middle) = (&*r.stem_input, &mut *r.stem_middle);
    stem.forward(run, frames, input, middle, work.hidden, r.scratch)?;
    encoder_stack(model, run, plan, frames / 2, carved, encoded)
}

/// The encoder blocks over the `s` rows of the carved `work.hidden` and its final norm, then
/// (after calling `encoded`) every decoder layer's cross-attention K/V of the result.
fn encoder_stack(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    s: usize,
    carved: Carved<'_>,
    encoded: &mut dyn FnMut(),
) -> Result<(), KernelError> {
    let d = model.config.d_model;
    let Carved {
        mut work,
        regions: r,
    } = carved;
    let bias = match &model.encoder.position_bias {
        Some(table) => Some(table.fill(0, s, s, r.position_bias)?),
        None => None,
    };
    for block in model.encoder.blocks() {
        let mode = SelfMode::Bidirectional { bias };
        block.forward(run, s, &mut work, r.scratch, mode, None)?;
    }
    let Work {
        hidden,
        normed,
        ffn,
        ..
    } = work;
    let hidden = View::new(&*hidden, s, d, d)?;
    let memory = match &model.encoder.final_norm {
        Some(norm) => {
            let mut normed = ViewMut::new(normed, s, d, d)?;
            norm.forward(run.isa, hidden, normed.reborrow())?;
            normed.into_view()
        }
        None => hidden,
    };
    encoded();
    let kind = plan.limits.cross_kv;
    let a = model.config.attention_width();
    let mut cross = CrossKv::new(r.cross_kv, plan.limits.max_src_len, a, kind);
    for (i, block) in model.decoder.blocks().iter().enumerate() {
        if let Some(attention) = block.cross_attention() {
            project_memory(run, attention, &mut cross, i, memory, ffn, r.scratch)?;
        }
    }
    Ok(())
}

/// Projects the rows of `memory` to layer `layer`'s cross-attention K/V: in place when they
/// are stored as `f32`, else through `staging` (as many rows at a time as it holds), rounded
/// as they are stored.
fn project_memory(
    run: Run<'_>,
    attention: &CrossAttention<'_>,
    cross: &mut CrossKv<'_>,
    layer: usize,
    memory: View<'_>,
    staging: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (s, width) = (memory.rows(), 2 * attention.heads().width());
    if let Some(kv) = cross.layer_mut(layer) {
        let kv = ViewMut::new(kv, s, width, width)?;
        return attention.project_memory(run, memory, kv, scratch);
    }
    let chunk = (staging.len() / width.max(1)).min(s);
    if chunk == 0 && s > 0 {
        return Err(KernelError::InvalidArgument(
            "no room to stage the memory projection",
        ));
    }
    let mut first = 0;
    while first < s {
        let rows = chunk.min(s - first);
        let staged = &mut staging[..rows * width];
        let part = memory.slice_rows(first, rows)?;
        let view = ViewMut::new(&mut *staged, rows, width, width)?;
        attention.project_memory(run, part, view, scratch)?;
        cross.store(run.isa, layer, first, staged)?;
        first += rows;
    }
    Ok(())
}

/// One decoder pass at the session's position: one row per beam ([`Rows::Beams`], logits for
/// every row) or a chunk of a forced prefix ([`Rows::Prefix`], logits for its last row).
pub(crate) fn decode(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    state: &State,
    tokens: Tokens<'_>,
    rows_are: Rows,
) -> Result<(), KernelError> {
    let src_len = state
        .src_len
        .ok_or(KernelError::InvalidArgument("decode before encode"))?;
    let rows = tokens.len();
    let position = state.position;
    let prefix = rows_are == Rows::Prefix;
    let phase = if prefix { Phase::Wide } else { Phase::Narrow };
    let Carved {
        mut work,
        regions: r,
    } = plan.layout.carve(arena, phase);
    let ids = tokens.resolve(r.step_tokens);
    model
        .target
        .forward(run.isa, ids, position, prefix, work.hidden)?;
    let mut cache = KvCache::new(r.k_cache, r.v_cache, plan.kv);
    let a = model.config.attention_width();
    let cross = CrossKv::new(r.cross_kv, plan.limits.max_src_len, a, plan.limits.cross_kv);
    // Every beam's query sits at the same position: one bias row serves them all.
    let q_len = if prefix { rows } else { 1 };
    let bias = match &model.decoder.position_bias {
        Some(table) => Some(table.fill(position, q_len, position + q_len, r.position_bias)?),
        None => None,
    };
    for (i, block) in model.decoder.blocks().iter().enumerate() {
        let cache = cache.layer(i);
        let mode = if prefix {
            SelfMode::Prefix {
                cache,
                position,
                bias,
            }
        } else {
            SelfMode::Step {
                cache,
                position,
                bias,
            }
        };
        let memory = match block.cross_attention() {
            Some(_) => Some(cross.layer(i, src_len)?),
            None => None,
        };
        block.forward(run, rows, &mut work, r.scratch, mode, memory)?;
    }
    // A prefix's logits are its last row's; a step's, every beam's.
    let out = if prefix { (rows - 1, 1) } else { (0, rows) };
    project_logits(model, run, out, work, r.logits, r.scratch)
}

/// The decoder's final norm and output projection over `out_rows` rows of `work.hidden` from
/// `first`, into `logits`.
fn project_logits(
    model: &Model<'_>,
    run: Run<'_>,
    (first, out_rows): (usize, usize),
    work: Work<'_>,
    logits: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let d = model.config.d_model;
    let Work { hidden, normed, .. } = work;
    let hidden = View::new(&*hidden, first + out_rows, d, d)?.slice_rows(first, out_rows)?;
    let output = match &model.decoder.final_norm {
        Some(norm) => {
            let mut normed = ViewMut::new(normed, out_rows, d, d)?;
            norm.forward(run.isa, hidden, normed.reborrow())?;
            normed.into_view()
        }
        None => hidden,
    };
    let vocab = model.config.tgt_vocab;
    let logits = ViewMut::new(logits, out_rows, vocab, vocab)?;
    let identity = Activation::Identity;
    model
        .generator
        .forward(run, output, logits, identity, None, scratch)
}

/// Makes beam `i` continue beam `parents[i]`'s first `position` positions in every layer.
pub(crate) fn reorder(plan: &ArenaPlan, arena: &mut [f32], position: usize, parents: Tokens<'_>) {
    let r = plan.layout.carve(arena, Phase::Narrow).regions;
    let parents = parents.resolve(r.beam_parents);
    KvCache::new(r.k_cache, r.v_cache, plan.kv).reorder(parents, position, r.reorder_stage);
}

/// The regions a search works in between passes.
pub(crate) struct SearchBuffers<'a> {
    /// The last pass's logits.
    pub logits: &'a mut [f32],
    /// The next step's tokens, one per beam.
    pub step_tokens: &'a mut [u32],
    /// The next reordering's parents, one per beam.
    pub parents: &'a mut [u32],
    /// The search state (`plan::SearchParts`).
    pub search: &'a mut [f32],
}

/// The search regions of the arena; `logits` holds the first `logits_len` logits.
pub(crate) fn search_buffers<'a>(
    plan: &ArenaPlan,
    arena: &'a mut [f32],
    logits_len: usize,
) -> SearchBuffers<'a> {
    let r = plan.layout.carve(arena, Phase::Narrow).regions;
    SearchBuffers {
        logits: &mut r.logits[..logits_len],
        step_tokens: bytemuck::cast_slice_mut(r.step_tokens),
        parents: bytemuck::cast_slice_mut(r.beam_parents),
        search: r.search,
    }
}
