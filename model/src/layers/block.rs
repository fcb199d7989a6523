//! One layer of either stack: self-attention, optional cross-attention, feed-forward, each a
//! sublayer wrapped in a norm and a residual connection.
//!
//! Pre-LN (`x = x + f(N(x))`, Whisper and most modern models): the sublayer reads `N(x)` from
//! `normed`; its output projection adds `x` in the GEMM's epilogue and writes `spare`, which
//! then becomes the residual stream (the two buffers swap; nothing is copied back).
//! Post-LN (`x = N(x + f(x))`, the 2017 paper): the sublayer reads `x`; the output projection
//! writes `x + f(x)` into `spare`, and the norm writes it back into the stream.
//!
//! The same block serves the encoder (bidirectional self-attention, no cross-attention) and
//! the decoder (causal self-attention over the [`LayerCache`], cross-attention over the
//! projected encoder memory).

use tessel_kernels::activation::Activation;
use tessel_kernels::attention::{Bias, BiasLayout, Mask, SideBias};
use tessel_kernels::{KernelError, ScratchSpec};
use tessel_kernels::{View, ViewMut};

use super::attention::{attend_units, Spread};
use super::{
    CrossAttention, CrossMemory, FeedForward, Group, Heads, LayerCache, Linear, Norm, Run,
    SelfAttention, StepBias,
};
use crate::config::NormPlacement;
use crate::named::named_set;

/// One block's layers.
#[derive(Clone, Debug)]
pub struct Block<'w> {
    placement: NormPlacement,
    attention_norm: Norm<'w>,
    attention: SelfAttention<'w>,
    cross: Option<(Norm<'w>, CrossAttention<'w>)>,
    ffn_norm: Norm<'w>,
    feed_forward: FeedForward<'w>,
}

/// The sizes that shape a block's working buffers and scratch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockShape {
    /// Head layout (`heads × d_head` is the attention width, usually the model width).
    pub heads: Heads,
    /// Model width.
    pub d_model: usize,
    /// Feed-forward inner width.
    pub d_ff: usize,
    /// Whether the block has cross-attention (a decoder block).
    pub cross: bool,
    /// Whether the feed-forward is gated (a second inner buffer).
    pub gated: bool,
}

named_set! {
    /// One value per working buffer of a block, in arena order: their sizes ([`WorkSizes`]),
    /// where the plan puts them (named `wide.*` for up to `max_src_len` rows and `narrow.*`
    /// for one row per beam), or the buffers themselves ([`Work`]).
    pub struct WorkBuffers<T> names ["wide", "narrow"] {
        /// The residual stream.
        hidden,
        /// The residual stream's second buffer (output projections write it).
        spare,
        /// A sublayer's normalised input (pre-LN) and the stack's normalised output.
        normed,
        /// Fused Q/K/V rows.
        qkv,
        /// Cross-attention queries (empty without cross-attention).
        cross_q (optional),
        /// Attention output rows.
        attn,
        /// Feed-forward inner rows.
        ffn,
        /// The gated feed-forward's second inner rows (empty when not gated).
        gate (optional),
    }
}

/// Elements of each working buffer of a block for some number of rows.
pub type WorkSizes = WorkBuffers<usize>;

/// A block's working buffers, carved from the arena; `hidden` holds the residual stream
/// between blocks.
pub type Work<'a> = WorkBuffers<&'a mut [f32]>;

impl BlockShape {
    /// The working buffers for `rows` rows.
    pub fn work(&self, rows: usize) -> WorkSizes {
        let (d, a) = (self.d_model, self.heads.width());
        WorkSizes {
            hidden: rows * d,
            spare: rows * d,
            normed: rows * d,
            qkv: rows * 3 * a,
            cross_q: if self.cross { rows * a } else { 0 },
            attn: rows * a,
            ffn: rows * self.d_ff,
            gate: if self.gated { rows * self.d_ff } else { 0 },
        }
    }

    /// Scratch for `rows` rows attending over at most `kv_len` own positions and `src_len`
    /// source positions, on `threads` threads: what each of its layers states it needs.
    pub fn scratch(
        &self,
        rows: usize,
        kv_len: usize,
        src_len: usize,
        threads: usize,
    ) -> ScratchSpec {
        let cross = if self.cross {
            CrossAttention::scratch(&self.heads, self.d_model, rows, src_len, threads)
        } else {
            ScratchSpec::EMPTY
        };
        SelfAttention::scratch(&self.heads, self.d_model, rows, kv_len, threads)
            .or(cross)
            .or(FeedForward::scratch(self.d_model, self.d_ff, rows, threads))
    }
}

/// What the self-attention of a block attends to, and the stack's relative position bias
/// (`[head][query][key]` over exactly the queries and keys of the call) when it has one.
pub enum SelfMode<'c> {
    /// Each row sees every row of its group (the encoder over one or more sources, packed
    /// group after group; a group's `rows` are its source's positions `0..rows`).
    Bidirectional {
        /// The sources, in row order.
        groups: &'c [Group],
        /// Position bias over the longest group's queries and keys (a relative-position
        /// table, or a `[head][query][key]` matrix); a group reads the part of its length.
        bias: Option<Bias<'c>>,
        /// LongT5's transient-global side bias over the longest group's blocks (a
        /// relative-position table of the block distance); a group reads the part of its
        /// blocks.
        side: Option<SideBias<'c>>,
    },
    /// Each row is the next position of one beam of its group (the groups' rows follow each
    /// other; row `i` of a group is its beam `i`), appended to the group's slot of the cache
    /// at the group's position; each sees its beam's positions `0..=position`.
    Step {
        /// The layer's cache.
        cache: LayerCache<'c>,
        /// The sequences of the step, in row order.
        groups: &'c [Group],
        /// Each group's position bias (every beam of a group has the same).
        bias: Option<StepBias<'c>>,
    },
    /// The rows are consecutive positions of beam 0 of `group`'s slot from its position (a
    /// forced prefix), each seeing the cache up to itself.
    Prefix {
        /// The layer's cache.
        cache: LayerCache<'c>,
        /// The sequence and its first position.
        group: Group,
        /// Position bias.
        bias: Option<Bias<'c>>,
    },
}

/// What a decoder layer's cross-attention reads: layer `layer` of every slot's memory.
#[derive(Clone, Copy)]
pub struct LayerMemory<'c> {
    /// Every slot's projected encoder memory.
    pub memory: CrossMemory<'c>,
    /// The decoder layer.
    pub layer: usize,
}

impl<'c> LayerMemory<'c> {
    /// What `block`, layer `layer` of the decoder, reads of `memory`: nothing when it has no
    /// cross-attention.
    pub fn of(block: &Block<'_>, memory: CrossMemory<'c>, layer: usize) -> Option<Self> {
        block
            .cross_attention()
            .map(|_| LayerMemory { memory, layer })
    }
}

/// A pass of a block: `rows` rows of its working buffers, on `run`, with kernel scratch.
struct Pass<'p, 'a> {
    run: Run<'p>,
    rows: usize,
    work: &'p mut Work<'a>,
    scratch: &'p mut [f32],
}

impl<'p, 'a> Pass<'p, 'a> {
    /// Its parts, the buffers reborrowed.
    fn parts(&mut self) -> (Run<'p>, usize, &mut Work<'a>, &mut [f32]) {
        (self.run, self.rows, &mut *self.work, &mut *self.scratch)
    }
}

/// The sublayer input, `rows` rows: `N(hidden)` written to `normed` (pre-LN) or `hidden`
/// itself (post-LN).
fn sublayer_input<'w>(
    run: Run<'_>,
    placement: NormPlacement,
    norm: &Norm<'_>,
    rows: usize,
    hidden: &'w [f32],
    normed: &'w mut [f32],
) -> Result<View<'w>, KernelError> {
    let d = norm.width();
    let hidden = View::new(hidden, rows, d, d)?;
    match placement {
        NormPlacement::Pre => {
            let mut normed = ViewMut::new(normed, rows, d, d)?;
            norm.forward(run.isa, hidden, normed.reborrow())?;
            Ok(normed.into_view())
        }
        NormPlacement::Post => Ok(hidden),
    }
}

/// Closes a sublayer over the rows of `inner`: `spare = inner·W + b + hidden`, then the stream
/// becomes `spare` (pre-LN, by swapping the buffers) or `N(spare)` (post-LN, written into
/// `hidden`).
fn residual<'a>(
    run: Run<'_>,
    placement: NormPlacement,
    norm: &Norm<'_>,
    inner: View<'_>,
    projection: &Linear<'_>,
    (hidden, spare): (&mut &'a mut [f32], &mut &'a mut [f32]),
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (rows, d) = (inner.rows(), projection.out_features());
    let stream = View::new(hidden, rows, d, d)?;
    let out = ViewMut::new(spare, rows, d, d)?;
    let identity = Activation::Identity;
    projection.forward(run, inner, out, identity, Some(stream), scratch)?;
    match placement {
        NormPlacement::Pre => {
            core::mem::swap(hidden, spare);
            Ok(())
        }
        NormPlacement::Post => {
            let sum = View::new(spare, rows, d, d)?;
            norm.forward(run.isa, sum, ViewMut::new(hidden, rows, d, d)?)
        }
    }
}

impl<'w> Block<'w> {
    /// Its linear layers, in the order the forward pass reads them.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> impl Iterator<Item = &mut Linear<'w>> {
        let cross = self
            .cross
            .iter_mut()
            .flat_map(|(_, cross)| cross.linears_mut());
        self.attention
            .linears_mut()
            .chain(cross)
            .chain(self.feed_forward.linears_mut())
    }

    /// A block from its layers; `cross` is the decoder's cross-attention with its norm.
    pub fn new(
        placement: NormPlacement,
        (attention_norm, attention): (Norm<'w>, SelfAttention<'w>),
        cross: Option<(Norm<'w>, CrossAttention<'w>)>,
        (ffn_norm, feed_forward): (Norm<'w>, FeedForward<'w>),
    ) -> Result<Block<'w>, KernelError> {
        let d = attention.output().out_features();
        let widths = [
            attention_norm.width(),
            ffn_norm.width(),
            feed_forward.output().out_features(),
        ];
        let cross_widths = cross
            .as_ref()
            .map(|(n, c)| [n.width(), c.output().out_features()]);
        if widths
            .iter()
            .chain(cross_widths.iter().flatten())
            .any(|&w| w != d)
        {
            return Err(KernelError::InvalidArgument(
                "every layer of a block must have the model width",
            ));
        }
        Ok(Block {
            placement,
            attention_norm,
            attention,
            cross,
            ffn_norm,
            feed_forward,
        })
    }

    /// Its buffer shape.
    pub fn shape(&self) -> BlockShape {
        BlockShape {
            heads: *self.attention.heads(),
            d_model: self.attention.output().out_features(),
            d_ff: self.feed_forward.inner_width(),
            cross: self.cross.is_some(),
            gated: self.feed_forward.is_gated(),
        }
    }

    /// The cross-attention layer, when the block has one.
    pub fn cross_attention(&self) -> Option<&CrossAttention<'w>> {
        self.cross.as_ref().map(|(_, c)| c)
    }

    /// Where its norms sit.
    pub fn placement(&self) -> NormPlacement {
        self.placement
    }

    /// The self-attention layer and its norm.
    pub fn self_attention_layer(&self) -> (&Norm<'w>, &SelfAttention<'w>) {
        (&self.attention_norm, &self.attention)
    }

    /// The cross-attention layer and its norm, when the block has one.
    pub fn cross_attention_layer(&self) -> Option<(&Norm<'w>, &CrossAttention<'w>)> {
        self.cross.as_ref().map(|(n, c)| (n, c))
    }

    /// The feed-forward layer and its norm.
    pub fn feed_forward_layer(&self) -> (&Norm<'w>, &FeedForward<'w>) {
        (&self.ffn_norm, &self.feed_forward)
    }

    /// Bytes a pass over `rows` rows reads (the memory projection of cross-attention excluded:
    /// it runs once per source).
    pub fn step_bytes(&self) -> usize {
        let cross = self
            .cross
            .as_ref()
            .map_or(0, |(n, c)| n.bytes() + c.step_bytes());
        self.attention_norm.bytes()
            + self.attention.bytes()
            + cross
            + self.ffn_norm.bytes()
            + self.feed_forward.bytes()
    }

    /// Runs the block over the `rows` rows of `work.hidden` with kernel scratch `scratch`
    /// (what [`BlockShape::scratch`] states). `memory` is the projected encoder memory, read
    /// for each sequence of a decoder pass (`mode`'s groups); required exactly when the block
    /// has cross-attention.
    pub fn forward(
        &self,
        run: Run<'_>,
        rows: usize,
        work: &mut Work<'_>,
        scratch: &mut [f32],
        mode: SelfMode<'_>,
        memory: Option<LayerMemory<'_>>,
    ) -> Result<(), KernelError> {
        let prefix_group;
        let groups: &[Group] = match &mode {
            SelfMode::Bidirectional { .. } => &[],
            SelfMode::Step { groups, .. } => groups,
            SelfMode::Prefix { group, .. } => {
                prefix_group = *group;
                core::slice::from_ref(&prefix_group)
            }
        };
        let mut pass = Pass {
            run,
            rows,
            work,
            scratch,
        };
        self.self_attention(&mut pass, mode)?;
        match (&self.cross, memory) {
            (Some(cross), Some(memory)) => {
                self.attend_memory(&mut pass, cross, (memory, groups))?
            }
            (None, None) => {}
            _ => {
                return Err(KernelError::InvalidArgument(
                    "encoder memory given exactly to blocks with cross-attention",
                ))
            }
        }
        let norm = &self.ffn_norm;
        let input = sublayer_input(run, self.placement, norm, rows, work.hidden, work.normed)?;
        let f = self.feed_forward.inner_width();
        let inner = ViewMut::new(&mut *work.ffn, rows, f, f)?;
        self.feed_forward
            .inner(run, input, (inner, work.gate), scratch)?;
        let inner = View::new(&*work.ffn, rows, f, f)?;
        let down = self.feed_forward.output();
        let streams = (&mut work.hidden, &mut work.spare);
        residual(run, self.placement, norm, inner, down, streams, scratch)
    }

    /// The cross-attention sublayer: every row's query in one product, then each group's
    /// queries over its own slot's memory.
    fn attend_memory(
        &self,
        pass: &mut Pass<'_, '_>,
        (norm, cross): &(Norm<'_>, CrossAttention<'_>),
        (memory, groups): (LayerMemory<'_>, &[Group]),
    ) -> Result<(), KernelError> {
        let (run, rows, work, scratch) = pass.parts();
        let input = sublayer_input(run, self.placement, norm, rows, work.hidden, work.normed)?;
        let a = cross.heads().width();
        let q = ViewMut::new(&mut *work.cross_q, rows, a, a)?;
        cross.project_query(run, input, q, scratch)?;
        let q = View::new(&*work.cross_q, rows, a, a)?;
        let out = ViewMut::new(&mut *work.attn, rows, a, a)?;
        check_rows(groups.iter().map(|g| g.rows).sum(), rows)?;
        // Each sequence attends its own encoder memory: one call a group.
        let beams = groups.iter().map(|g| g.rows).max().unwrap_or(0);
        let longest = groups.iter().map(|g| g.src_len).max().unwrap_or(0);
        let part = cross.heads().unit_scratch(beams, longest);
        let first_row = |unit: usize| groups.iter().take(unit).map(|g| g.rows).sum();
        let units = (groups.len(), &first_row as _, Spread::Even);
        attend_units(run, units, out, (scratch, part), &|unit, run, out, own| {
            let group = groups.get(unit).ok_or(KernelError::InvalidArgument(
                "a unit outside the step's groups",
            ))?;
            let kv = memory
                .memory
                .layer(group.slot, memory.layer, group.src_len)?;
            let q = q.slice_rows(first_row(unit), group.rows)?;
            cross.attend_memory(run, q, kv, out, own)
        })?;
        self.close_attention(pass, (norm, cross.output()))
    }

    /// Closes an attention sublayer: its output projection over the `rows` attended rows of
    /// `work.attn`, with the residual connection.
    fn close_attention(
        &self,
        pass: &mut Pass<'_, '_>,
        (norm, output): (&Norm<'_>, &Linear<'_>),
    ) -> Result<(), KernelError> {
        let (run, rows, work, scratch) = pass.parts();
        let a = output.in_features();
        let attended = View::new(&*work.attn, rows, a, a)?;
        let streams = (&mut work.hidden, &mut work.spare);
        residual(
            run,
            self.placement,
            norm,
            attended,
            output,
            streams,
            scratch,
        )
    }

    fn self_attention(
        &self,
        pass: &mut Pass<'_, '_>,
        mode: SelfMode<'_>,
    ) -> Result<(), KernelError> {
        let (run, rows, work, scratch) = pass.parts();
        let norm = &self.attention_norm;
        let a = self.attention.heads().width();
        let input = sublayer_input(run, self.placement, norm, rows, work.hidden, work.normed)?;
        if let SelfMode::Bidirectional { groups, bias, side } = &mode {
            let local = self.attention.local();
            if let Some((local, transient)) = local.and_then(|l| l.transient().map(|t| (l, t))) {
                let attn = ViewMut::new(&mut *work.attn, rows, a, a)?;
                let buffers = (&mut *work.qkv, &mut *work.ffn, attn);
                let layer = (&self.attention, local.radius());
                let biases = (*bias, *side);
                transient.attend(run, layer, input, groups, biases, buffers, scratch)?;
                check_rows(groups.iter().map(|g| g.rows).sum(), rows)?;
                let output = self.attention.output();
                return self.close_attention(pass, (norm, output));
            }
        }
        let qkv = ViewMut::new(&mut *work.qkv, rows, 3 * a, 3 * a)?;
        self.attention.project(run, input, qkv, scratch)?;
        let heads = self.attention.heads();
        let qkv = View::new(&*work.qkv, rows, 3 * a, 3 * a)?;
        let [q, k, v] = SelfAttention::split(qkv, a)?;
        let mut attn = ViewMut::new(&mut *work.attn, rows, a, a)?;
        match mode {
            SelfMode::Bidirectional { groups, bias, .. } => {
                let local = self.attention.local();
                let longest = groups.iter().map(|g| g.rows).max().unwrap_or(0);
                let mut row0 = 0;
                for group in groups {
                    let bias = bias.map(|b| corner(b, longest, group.rows));
                    let mask = match local {
                        Some(local) => local.mask(group, bias),
                        None => Mask { bias, ..Mask::NONE },
                    };
                    let [q, k, v] = [q, k, v].map(|x| x.slice_rows(row0, group.rows));
                    let out = attn.reborrow().slice_rows(row0, group.rows)?;
                    heads.attend(run, (q?, k?, v?), &mask, out, scratch)?;
                    row0 += group.rows;
                }
                check_rows(row0, rows)?;
                if let Some(local) = local {
                    let qkv = &mut *work.qkv;
                    local.attend_global(run, (heads, input), groups, (qkv, attn), scratch)?;
                }
            }
            SelfMode::Step {
                cache,
                groups,
                bias,
            } => attend_step(
                run,
                (heads, [q, k, v]),
                (cache, groups, bias),
                (attn, scratch),
            )?,
            SelfMode::Prefix { cache, group, bias } => attend_prefix(
                run,
                (heads, [q, k, v]),
                (cache, group, bias),
                (attn, scratch),
            )?,
        }
        self.close_attention(pass, (norm, self.attention.output()))
    }
}

/// A decoder step's self-attention: each row's key and value written to its beam's slot of
/// the cache at its group's position, then one call a row over that beam's positions, the
/// rows spread over the threads.
fn attend_step(
    run: Run<'_>,
    (heads, [q, k, v]): (&Heads, [View<'_>; 3]),
    (mut cache, groups, bias): (LayerCache<'_>, &[Group], Option<StepBias<'_>>),
    (attn, scratch): (ViewMut<'_>, &mut [f32]),
) -> Result<(), KernelError> {
    let rows = q.rows();
    let mut row0 = 0;
    for group in groups {
        for beam in 0..group.rows {
            let (k, v) = (k.slice_rows(row0 + beam, 1)?, v.slice_rows(row0 + beam, 1)?);
            cache.write((group.slot, beam), group.position, k, v)?;
        }
        row0 += group.rows;
    }
    check_rows(row0, rows)?;
    // Each row attends its own beam's cache: one call a row.
    let cache = &cache;
    let longest = groups.iter().map(|g| g.position + 1).max().unwrap_or(0);
    let part = heads.unit_scratch(1, longest);
    let row = |r: usize| r;
    attend_units(
        run,
        (rows, &row, Spread::Always),
        attn,
        (scratch, part),
        &|r, run, out, own| {
            let (index, beam, group) = locate(groups, r)?;
            let Group { slot, position, .. } = group;
            let bias = bias.map(|b| b.group(index, position + 1)).transpose()?;
            let mask = Mask { bias, ..Mask::NONE };
            let (k, v) = cache.beam((slot, beam), position + 1)?;
            heads.attend(run, (q.slice_rows(r, 1)?, k, v), &mask, out, own)
        },
    )
}

/// A forced prefix's self-attention: its rows' keys and values written to beam 0 of the
/// group's slot from its position, then one causal call over the cache up to the last.
fn attend_prefix(
    run: Run<'_>,
    (heads, [q, k, v]): (&Heads, [View<'_>; 3]),
    (mut cache, group, bias): (LayerCache<'_>, Group, Option<Bias<'_>>),
    (attn, scratch): (ViewMut<'_>, &mut [f32]),
) -> Result<(), KernelError> {
    let (slot, position, rows) = (group.slot, group.position, q.rows());
    for r in 0..rows {
        let (k, v) = (k.slice_rows(r, 1)?, v.slice_rows(r, 1)?);
        cache.write((slot, 0), position + r, k, v)?;
    }
    let (k, v) = cache.beam((slot, 0), position + rows)?;
    let mask = Mask {
        causal_offset: Some(position),
        bias,
        ..Mask::NONE
    };
    heads.attend(run, (q, k, v), &mask, attn, scratch)
}

/// The bias of a source of `rows` positions from a relative-position bias written for the
/// longest source of its pass, `longest` positions: the same distances, the table's entries
/// `longest - rows` on (a dense bias's top-left corner).
pub(super) fn corner(bias: Bias<'_>, longest: usize, rows: usize) -> Bias<'_> {
    match bias.layout {
        BiasLayout::Toeplitz => Bias {
            data: bias.data.get(longest - rows..).unwrap_or(&[]),
            ..bias
        },
        BiasLayout::Dense => bias,
    }
}

/// The group of `groups` that row `row` of a step belongs to: its index, the row's beam in it,
/// and the group.
fn locate(groups: &[Group], row: usize) -> Result<(usize, usize, Group), KernelError> {
    let mut first = 0;
    for (index, group) in groups.iter().enumerate() {
        if row < first + group.rows {
            return Ok((index, row - first, *group));
        }
        first += group.rows;
    }
    Err(KernelError::InvalidArgument(
        "a row outside the step's groups",
    ))
}

/// A pass's groups must cover its rows exactly.
fn check_rows(covered: usize, rows: usize) -> Result<(), KernelError> {
    if covered == rows {
        Ok(())
    } else {
        Err(KernelError::InvalidArgument(
            "the groups of a decoder pass must cover its rows",
        ))
    }
}
