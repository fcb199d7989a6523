//! The passes a session runs over its arena: the encoder (and the projection of its output for
//! every decoder layer's cross-attention), the decoder over one new position per beam or over
//! a forced prefix, and the reordering of the cache between beam-search steps.
//!
//! Each pass carves the arena into its named regions ([`crate::plan`]'s `Layout::carve`, one
//! phase's working buffers and every other region) and takes the ones its layers need;
//! validation of the caller's input happens before, in [`crate::Session`].

use tessel_kernels::activation::Activation;
use tessel_kernels::attention::SideBias;
use tessel_kernels::{KernelError, View, ViewMut};

use crate::config::StackKind;
use crate::layers::{
    CrossAttention, CrossKv, CrossLayout, CrossMemory, Group, KvCache, LayerMemory, RelativeBias,
    Run, SelfMode, StepBias, Work,
};
use crate::model::{Model, Source};
use crate::plan::{ArenaPlan, Carved, Phase, SearchParts};

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
    /// Its decoder pass of `rows` rows in slot `slot`, once encoded.
    pub fn group(&self, slot: usize, rows: usize) -> Result<Group, KernelError> {
        let src_len = self
            .src_len
            .ok_or(KernelError::InvalidArgument("decode before encode"))?;
        Ok(Group {
            slot,
            rows,
            position: self.position,
            src_len,
            global: 0,
        })
    }

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

/// Token ids of a pass: given by the caller (every group's, one after the other), or each
/// group's first `rows` of its slot's staged tokens (written there by a search).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tokens<'t> {
    Given(&'t [u32]),
    Staged,
}

impl Tokens<'_> {
    /// The ids of `group`, whose rows start at row `row0` of the pass; the staged tokens are
    /// `stride` apart per slot.
    fn of<'a>(
        &'a self,
        staged: &'a [f32],
        (group, row0): (&Group, usize),
        stride: usize,
    ) -> Result<&'a [u32], KernelError> {
        let ids = match *self {
            Tokens::Given(t) => t.get(row0..row0 + group.rows),
            Tokens::Staged => bytemuck::cast_slice::<f32, u32>(staged)
                .get(group.slot * stride..)
                .and_then(|slot| slot.get(..group.rows)),
        };
        ids.ok_or(KernelError::InvalidArgument("tokens missing for a group"))
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

/// Runs the encoder over `sources` (each validated, their rows together at most the plan's
/// [`Limits::encode_rows`](crate::Limits::encode_rows)), packed one after the other into one
/// pass, and writes every decoder layer's cross-attention K/V of each one's output into its
/// slot. Every product computes a row as it would alone and attention runs per source, so
/// each source's memory is the one it gets encoded alone. The first `global` positions of
/// each source have global attention in a Longformer encoder.
pub(crate) fn encode(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    (sources, global): (&[(usize, &[u32])], usize),
    groups: &mut [Group],
) -> Result<(), KernelError> {
    let Source::Tokens(embedding) = &model.source else {
        return Err(KernelError::InvalidArgument(
            "this model reads audio frames, not tokens",
        ));
    };
    let (groups, rows) = source_groups(sources, global, groups)?;
    if rows > plan.limits.encode_rows() {
        return Err(KernelError::InvalidArgument(
            "the sources of an encoder pass exceed its rows",
        ));
    }
    let carved = plan.layout.carve(arena, Phase::Wide);
    let d = model.config.d_model;
    let mut row0 = 0;
    for (_, src) in sources {
        let hidden = &mut carved.work.hidden[row0 * d..(row0 + src.len()) * d];
        embedding.forward(run.isa, src, 0, true, hidden)?;
        row0 += src.len();
    }
    encoder_stack(model, run, plan, groups, carved, &mut || {})
}

/// Each source's group (its slot and its rows, at position 0, its first `global` positions
/// global) in `groups`, and their rows.
fn source_groups<'g>(
    sources: &[(usize, &[u32])],
    global: usize,
    groups: &'g mut [Group],
) -> Result<(&'g [Group], usize), KernelError> {
    let groups = groups
        .get_mut(..sources.len())
        .ok_or(KernelError::InvalidArgument("more sources than slots"))?;
    let mut rows = 0usize;
    for (group, &(slot, src)) in groups.iter_mut().zip(sources) {
        *group = Group::source(slot, src.len()).with_global(global);
        rows = rows.saturating_add(src.len());
    }
    Ok((groups, rows))
}

/// Runs Whisper's convolutional front end over `frames` frames of `mel` (`n_mels × frames`,
/// validated), then the encoder, calls `encoded`, then projects the cross-attention K/V of its
/// output into slot `slot`.
pub(crate) fn encode_audio(
    model: &Model<'_>,
    run: Run<'_>,
    (plan, slot): (&ArenaPlan, usize),
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
    let group = Group::source(slot, frames / 2);
    encoder_stack(model, run, plan, &[group], carved, encoded)
}

/// The encoder blocks over the rows of the carved `work.hidden` (`groups`' rows, one after the
/// other) and its final norm, then (after calling `encoded`) every decoder layer's
/// cross-attention K/V of each group's result, into its slot.
fn encoder_stack(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    groups: &[Group],
    carved: Carved<'_>,
    encoded: &mut dyn FnMut(),
) -> Result<(), KernelError> {
    let d = model.config.d_model;
    let Carved {
        mut work,
        regions: r,
    } = carved;
    let s: usize = groups.iter().map(|g| g.rows).sum();
    let longest = groups.iter().map(|g| g.rows).max().unwrap_or(0);
    let (local, side_region) = match model.config.global_block_size {
        Some(_) => {
            let heads = model.config.heads_in(StackKind::Encoder);
            let local = RelativeBias::elements(heads, longest, longest);
            r.position_bias
                .split_at_mut(local.min(r.position_bias.len()))
        }
        None => (&mut *r.position_bias, &mut [][..]),
    };
    let bias = match &model.encoder.position_bias {
        Some(table) => Some(table.fill(0, longest, longest, local)?),
        None => None,
    };
    // The side bias over the longest source's blocks: a table of the block distance.
    let side = match (&model.encoder.side_bias, model.config.global_block_size) {
        (Some(table), Some(size)) => {
            let blocks = longest / size;
            let table = table.fill(0, blocks, blocks, side_region)?;
            Some(SideBias::new(table.data, table.head_stride, size))
        }
        _ => None,
    };
    for block in model.encoder.blocks() {
        let mode = SelfMode::Bidirectional { groups, bias, side };
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
    let mut pass = PassMemory {
        memory,
        groups,
        cross: (r.cross_kv, plan.cross),
    };
    for (i, block) in model.decoder.blocks().iter().enumerate() {
        if let Some(attention) = block.cross_attention() {
            project_memory(run, attention, &mut pass, i, ffn, r.scratch)?;
        }
    }
    Ok(())
}

/// The memory of the pass's sources (`groups`, their rows one after the other in `memory`)
/// and where its projection goes.
struct PassMemory<'a, 'm> {
    memory: View<'m>,
    groups: &'a [Group],
    /// The arena region of every slot's projected memory, and its layout.
    cross: (&'a mut [f32], CrossLayout),
}

/// Projects `pass`'s memory to layer `layer`'s cross-attention K/V of each source's slot:
/// one source's `f32` memory in place, else every source's rows together through `staging`
/// (as many rows at a time as it holds), stored into each slot as the slots store them.
fn project_memory(
    run: Run<'_>,
    attention: &CrossAttention<'_>,
    pass: &mut PassMemory<'_, '_>,
    layer: usize,
    staging: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (region, layout) = (&mut *pass.cross.0, pass.cross.1);
    let (s, width) = (pass.memory.rows(), 2 * attention.heads().width());
    if let [group] = pass.groups {
        let mut cross = slot_memory(region, layout, group.slot)?;
        if let Some(kv) = cross.layer_mut(layer) {
            let kv = ViewMut::new(kv, s, width, width)?;
            return attention.project_memory(run, pass.memory, kv, scratch);
        }
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
        let part = pass.memory.slice_rows(first, rows)?;
        let view = ViewMut::new(&mut *staged, rows, width, width)?;
        attention.project_memory(run, part, view, scratch)?;
        store_rows(run, (region, layout), pass.groups, layer, (first, staged))?;
        first += rows;
    }
    Ok(())
}

/// Stores the projected rows `staged` (pass rows from `first` on, `2 · width` each) of layer
/// `layer` into the slots of the groups they belong to.
fn store_rows(
    run: Run<'_>,
    (region, layout): (&mut [f32], CrossLayout),
    groups: &[Group],
    layer: usize,
    (first, staged): (usize, &[f32]),
) -> Result<(), KernelError> {
    let width = 2 * layout.width;
    let end = first + staged.len() / width.max(1);
    let mut row0 = 0;
    for group in groups {
        let (from, to) = (row0.max(first), (row0 + group.rows).min(end));
        if from < to {
            let rows = &staged[(from - first) * width..(to - first) * width];
            let mut cross = slot_memory(region, layout, group.slot)?;
            cross.store(run.isa, layer, from - row0, rows)?;
        }
        row0 += group.rows;
    }
    Ok(())
}

/// Slot `slot`'s projected memory in `region`.
fn slot_memory(
    region: &mut [f32],
    layout: CrossLayout,
    slot: usize,
) -> Result<CrossKv<'_>, KernelError> {
    CrossKv::slot(region, layout, slot)
        .ok_or(KernelError::InvalidArgument("memory slot out of range"))
}

/// One decoder pass over `groups`, their rows one after the other: one row per beam of each
/// sequence ([`Rows::Beams`], logits for every row), or a chunk of one sequence's forced
/// prefix ([`Rows::Prefix`], one group, logits for its last row).
pub(crate) fn decode(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    groups: &[Group],
    (tokens, rows_are): (Tokens<'_>, Rows),
) -> Result<(), KernelError> {
    let prefix = rows_are == Rows::Prefix;
    let rows: usize = groups.iter().map(|g| g.rows).sum();
    if rows == 0 || (prefix && groups.len() != 1) {
        return Err(KernelError::InvalidArgument(
            "a decoder pass needs its rows",
        ));
    }
    let phase = if prefix { Phase::Wide } else { Phase::Narrow };
    let Carved {
        mut work,
        regions: r,
    } = plan.layout.carve(arena, phase);
    let d = model.config.d_model;
    let mut row0 = 0;
    for group in groups {
        let ids = tokens.of(r.step_tokens, (group, row0), plan.limits.max_beam)?;
        let hidden = &mut work.hidden[row0 * d..(row0 + group.rows) * d];
        model
            .target
            .forward(run.isa, ids, group.position, prefix, hidden)?;
        row0 += group.rows;
    }
    let mut cache = KvCache::new(r.k_cache, r.v_cache, plan.kv);
    let memory = CrossMemory::new(r.cross_kv, plan.cross);
    let bias = position_bias(model, plan, groups, prefix, r.position_bias)?;
    for (i, block) in model.decoder.blocks().iter().enumerate() {
        let cache = cache.layer(i);
        let mode = match bias {
            Bias::Prefix(bias) => SelfMode::Prefix {
                cache,
                group: groups[0],
                bias,
            },
            Bias::Step(bias) => SelfMode::Step {
                cache,
                groups,
                bias,
            },
        };
        let memory = LayerMemory::of(block, memory, i);
        block.forward(run, rows, &mut work, r.scratch, mode, memory)?;
    }
    // A prefix's logits are its last row's; a step's, every beam's.
    let out = if prefix { (rows - 1, 1) } else { (0, rows) };
    project_logits(model, run, out, work, r.logits, r.scratch)
}

/// The decoder's relative position bias of a pass, when it has one.
enum Bias<'a> {
    Prefix(Option<tessel_kernels::attention::Bias<'a>>),
    Step(Option<StepBias<'a>>),
}

/// Fills `region` with the decoder's relative position bias for `groups`: a prefix chunk's
/// queries over the target positions up to each, or each group's one query per step.
fn position_bias<'a>(
    model: &Model<'_>,
    plan: &ArenaPlan,
    groups: &[Group],
    prefix: bool,
    region: &'a mut [f32],
) -> Result<Bias<'a>, KernelError> {
    let Some(table) = &model.decoder.position_bias else {
        return Ok(if prefix {
            Bias::Prefix(None)
        } else {
            Bias::Step(None)
        });
    };
    if prefix {
        let (position, rows) = (groups[0].position, groups[0].rows);
        let bias = table.fill(position, rows, position + rows, region)?;
        return Ok(Bias::Prefix(Some(bias)));
    }
    let heads = model.config.heads_in(StackKind::Decoder);
    let stride = heads * plan.limits.max_tgt_len;
    for (index, group) in groups.iter().enumerate() {
        let out = region
            .get_mut(index * stride..)
            .ok_or(KernelError::InvalidArgument(
                "more groups than the plan holds",
            ))?;
        table.fill(group.position, 1, group.position + 1, out)?;
    }
    Ok(Bias::Step(Some(StepBias {
        data: region,
        stride,
        heads,
    })))
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
    let output = final_norm(model, run, hidden, normed)?;
    let vocab = model.config.tgt_vocab;
    let logits = ViewMut::new(logits, out_rows, vocab, vocab)?;
    let identity = Activation::Identity;
    model
        .generator
        .forward(run, output, logits, identity, None, scratch)
}

/// The decoder's output rows `hidden` after its final norm (into `normed`), if it has one.
fn final_norm<'a>(
    model: &Model<'_>,
    run: Run<'_>,
    hidden: View<'a>,
    normed: &'a mut [f32],
) -> Result<View<'a>, KernelError> {
    let Some(norm) = &model.decoder.final_norm else {
        return Ok(hidden);
    };
    let d = model.config.d_model;
    let mut normed = ViewMut::new(normed, hidden.rows(), d, d)?;
    norm.forward(run.isa, hidden, normed.reborrow())?;
    Ok(normed.into_view())
}

/// How many of its last cache positions beam `b` must take from beam `p` to hold what `p`
/// holds, given the slot's search state (`None`: all of them).
pub(crate) type Differing<'a> = dyn FnMut(&mut [f32], usize, usize) -> Option<usize> + 'a;

/// Makes beam `i` of slot `slot` continue its beam `parents[i]`'s first `position` positions
/// in every layer; `parents` as the tokens of a pass of one group; `differing` as the search
/// tells it from its state.
pub(crate) fn reorder(
    plan: &ArenaPlan,
    arena: &mut [f32],
    (slot, position): (usize, usize),
    parents: (Tokens<'_>, usize),
    differing: &mut Differing<'_>,
) -> Result<(), KernelError> {
    let r = plan.layout.carve(arena, Phase::Narrow).regions;
    let group = Group {
        slot,
        rows: parents.1,
        ..Group::default()
    };
    let parents = parents
        .0
        .of(r.beam_parents, (&group, 0), plan.limits.max_beam)?;
    let (beams, tgt) = (plan.limits.max_beam, plan.limits.max_tgt_len);
    let state = SearchParts::sizes(beams, tgt).total();
    let search = &mut r.search[slot * state..(slot + 1) * state];
    let mut per_beam = |b: usize, p: usize| differing(&mut *search, b, p);
    let mut cache = KvCache::new(r.k_cache, r.v_cache, plan.kv);
    cache.reorder(slot, parents, position, r.reorder_stage, &mut per_beam);
    Ok(())
}

/// The regions a search works in between passes.
pub(crate) struct SearchBuffers<'a> {
    /// The last pass's logits of the sequence.
    pub logits: &'a mut [f32],
    /// The next step's tokens, one per beam.
    pub step_tokens: &'a mut [u32],
    /// The next reordering's parents, one per beam.
    pub parents: &'a mut [u32],
    /// The search state (`plan::SearchParts`).
    pub search: &'a mut [f32],
}

/// The search regions of slot `slot`; its logits are the `rows` rows from row `first` of the
/// last pass.
pub(crate) fn search_buffers<'a>(
    plan: &ArenaPlan,
    arena: &'a mut [f32],
    slot: usize,
    (first, rows): (usize, usize),
    vocab: usize,
) -> SearchBuffers<'a> {
    let r = plan.layout.carve(arena, Phase::Narrow).regions;
    let limits = plan.limits;
    let (beams, state) = (
        limits.max_beam,
        SearchParts::sizes(limits.max_beam, limits.max_tgt_len).total(),
    );
    let tokens = |region: &'a mut [f32]| -> &'a mut [u32] {
        bytemuck::cast_slice_mut(&mut region[slot * beams..(slot + 1) * beams])
    };
    SearchBuffers {
        logits: &mut r.logits[first * vocab..(first + rows) * vocab],
        step_tokens: tokens(r.step_tokens),
        parents: tokens(r.beam_parents),
        search: &mut r.search[slot * state..(slot + 1) * state],
    }
}

/// What a forced pass reports besides the cache: the cross-attention probabilities of chosen
/// heads, and every row's logits.
pub(crate) struct AlignOutputs<'h, 'f> {
    /// The (decoder layer, head) pairs, in the order their probabilities are written.
    pub heads: &'h [(usize, usize)],
    /// Source positions the probabilities are taken over (the first ones).
    pub frames: usize,
    /// Called with the first row of each run of rows and their logits (`rows × tgt_vocab`),
    /// in row order.
    pub on_logits: &'f mut dyn FnMut(usize, &[f32]),
}

/// A forced decoder pass over all of `tokens` from position 0 of beam 0 of `group`'s slot
/// (its cache and its encoder memory; one chunk: validated to fit the wide buffers and the
/// cache), as [`decode`] runs a prefix, that also writes the softmax of `scale · q·kᵀ` of
/// each of `out.heads` over its layer's first `out.frames` source positions into
/// `align_probs` (`[pair][row][frame]`, dense), and projects the logits of every row, as many
/// rows at a time as the logits region holds.
pub(crate) fn align(
    model: &Model<'_>,
    run: Run<'_>,
    plan: &ArenaPlan,
    arena: &mut [f32],
    group: Group,
    tokens: &[u32],
    out: AlignOutputs<'_, '_>,
) -> Result<(), KernelError> {
    let rows = tokens.len();
    let frames = out.frames;
    if rows == 0 || rows != group.rows || group.position != 0 || frames > group.src_len {
        return Err(KernelError::InvalidArgument(
            "a forced pass covers its rows from position 0 over encoded frames",
        ));
    }
    let Carved {
        mut work,
        regions: r,
    } = plan.layout.carve(arena, Phase::Wide);
    let d = model.config.d_model;
    let hidden = work
        .hidden
        .get_mut(..rows * d)
        .ok_or(KernelError::InvalidArgument(
            "forced pass longer than planned",
        ))?;
    model.target.forward(run.isa, tokens, 0, true, hidden)?;
    let mut cache = KvCache::new(r.k_cache, r.v_cache, plan.kv);
    let memory = CrossMemory::new(r.cross_kv, plan.cross);
    let groups = [group];
    let bias = position_bias(model, plan, &groups, true, r.position_bias)?;
    let Bias::Prefix(bias) = bias else {
        return Err(KernelError::InvalidArgument("a forced pass is a prefix"));
    };
    let probs = r
        .align_probs
        .get_mut(..out.heads.len() * rows * frames)
        .ok_or(KernelError::InvalidArgument(
            "more alignment heads or positions than planned",
        ))?;
    for (i, block) in model.decoder.blocks().iter().enumerate() {
        let mode = SelfMode::Prefix {
            cache: cache.layer(i),
            group,
            bias,
        };
        let layer = LayerMemory::of(block, memory, i);
        block.forward(run, rows, &mut work, r.scratch, mode, layer)?;
        // The block's cross-attention left its projected queries in `cross_q`.
        for (pair, _) in out.heads.iter().enumerate().filter(|(_, h)| h.0 == i) {
            let cross = block.cross_attention().ok_or(KernelError::InvalidArgument(
                "alignment head of a layer without cross-attention",
            ))?;
            let a = cross.heads().width();
            let q = View::new(&*work.cross_q, rows, a, a)?;
            let kv = memory.layer(group.slot, i, group.src_len)?;
            let at = pair * rows * frames;
            let dst = ViewMut::new(&mut probs[at..at + rows * frames], rows, frames, frames)?;
            cross.probabilities(run.isa, out.heads[pair].1, q, kv, dst)?;
        }
    }
    let Work { hidden, normed, .. } = work;
    let hidden = View::new(&*hidden, rows, d, d)?;
    let output = final_norm(model, run, hidden, normed)?;
    let vocab = model.config.tgt_vocab;
    let chunk = (r.logits.len() / vocab.max(1)).max(1);
    let mut first = 0;
    while first < rows {
        let n = chunk.min(rows - first);
        let logits = r
            .logits
            .get_mut(..n * vocab)
            .ok_or(KernelError::InvalidArgument("no room for a row of logits"))?;
        let view = ViewMut::new(&mut *logits, n, vocab, vocab)?;
        let input = output.slice_rows(first, n)?;
        let identity = Activation::Identity;
        model
            .generator
            .forward(run, input, view, identity, None, r.scratch)?;
        (out.on_logits)(first, logits);
        first += n;
    }
    Ok(())
}
