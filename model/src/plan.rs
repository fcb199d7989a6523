//! The arena plan: every buffer a session needs, sized from the config before anything runs.
//!
//! The arena is one 64-byte aligned block of `f32`. Its regions are what the layers state they
//! need ([`BlockShape::work`] and [`BlockShape::scratch`], the KV cache's [`KvLayout`], the
//! output projection's scratch), at the most rows each runs with. Two sets of block buffers
//! ([`WorkBuffers`]) share the same bytes, never being live at once: `wide.*` (the encoder's
//! `encode_sources · max_src_len` rows, whose output is consumed by the cross-attention K/V
//! projection before encode returns, and decoder prefixes of up to `max_src_len` rows) and `narrow.*` (one row per beam:
//! decoder steps). Everything else (`Regions`: logits, the caches, scratch and search state)
//! has its own region. Both sets are declared once, with `named_set!`: the plan places their
//! fields in declaration order, names each region after its field, and `Layout::carve`
//! splits an arena into the same fields, so a pass takes the regions it needs by name.

use crate::config::{Config, ConfigError, StackKind};
use crate::layers::{
    linear, BlockShape, ConvStem, CrossKv, CrossLayout, Heads, KvLayout, MemoryType, RelativeBias,
    Work, WorkBuffers, WorkSizes,
};
use crate::named::named_set;
use tessel_kernels::ScratchSpec;

/// Elements per alignment unit: every region starts on a 64-byte boundary.
const ALIGN_F32: usize = 16;

/// Most sequences one session decodes together.
pub const MAX_BATCH: usize = 1024;

/// Rows a batch's encoder pass holds, about, unless told otherwise
/// ([`Limits::with_encode_rows`]): its sources are packed into products of this many rows,
/// which run near the compute peak from about 64 rows on (`report gemm`); more rows only cost
/// arena.
pub const ENCODE_ROWS: usize = 1024;

/// A run of arena elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub start: usize,
    pub len: usize,
}

impl Span {
    pub fn range(self) -> core::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// The sizes a session plans for: at most the config's maxima, possibly less (a smaller arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest source.
    pub max_src_len: usize,
    /// Most target positions.
    pub max_tgt_len: usize,
    /// Widest beam.
    pub max_beam: usize,
    /// Sequences decoded together, each with up to `max_beam` beams (1 for a plain session;
    /// see [`crate::Batch`]).
    pub max_batch: usize,
    /// Longest sources one encoder pass holds: a pass has room for `encode_sources ·
    /// max_src_len` rows, and a batch packs as many sources into it as fit
    /// ([`crate::Batch::encode_all`]); 1 encodes one source at a time.
    pub encode_sources: usize,
    /// Threads the session's GEMMs run on, the caller's included (scratch is planned per
    /// thread; workers are started once with the session).
    pub threads: usize,
    /// How the encoder memory's cross-attention K/V are stored.
    pub cross_kv: MemoryType,
}

impl Limits {
    /// The config's own maxima.
    pub fn of(config: &Config) -> Limits {
        Limits {
            max_src_len: config.max_src_len,
            max_tgt_len: config.max_tgt_len,
            max_beam: config.max_beam,
            max_batch: 1,
            encode_sources: 1,
            threads: 1,
            cross_kv: MemoryType::F32,
        }
    }

    /// The same limits, the encoder memory stored as `kind`.
    pub fn with_cross_kv(self, kind: MemoryType) -> Limits {
        Limits {
            cross_kv: kind,
            ..self
        }
    }

    /// The same limits, running on `threads` threads.
    pub fn with_threads(self, threads: usize) -> Limits {
        Limits { threads, ..self }
    }

    /// The same limits, decoding up to `max_batch` sequences together.
    pub fn with_batch(self, max_batch: usize) -> Limits {
        Limits { max_batch, ..self }
    }

    /// The same limits, an encoder pass holding `encode_sources` longest sources.
    pub fn with_encode_sources(self, encode_sources: usize) -> Limits {
        Limits {
            encode_sources,
            ..self
        }
    }

    /// The same limits, an encoder pass holding about `rows` rows: as many longest sources
    /// as fit, at least one and at most `max_batch`.
    pub fn with_encode_rows(self, rows: usize) -> Limits {
        let sources = rows / self.max_src_len.max(1);
        self.with_encode_sources(sources.clamp(1, self.max_batch.max(1)))
    }

    /// Rows of an encoder pass at the most.
    pub fn encode_rows(&self) -> usize {
        self.encode_sources.saturating_mul(self.max_src_len)
    }

    /// Decoder rows of a step at the most: every beam of every sequence.
    pub fn step_rows(&self) -> usize {
        self.max_batch.saturating_mul(self.max_beam)
    }

    fn check(&self, config: &Config) -> Result<(), ConfigError> {
        for (what, value, max) in [
            ("max_src_len", self.max_src_len, config.max_src_len),
            ("max_tgt_len", self.max_tgt_len, config.max_tgt_len),
            ("max_beam", self.max_beam, config.max_beam),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero(what));
            }
            if value > max {
                return Err(ConfigError::LimitAboveConfig { what, value, max });
            }
        }
        for (what, value) in [
            ("max_batch", self.max_batch),
            ("encode_sources", self.encode_sources),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero(what));
            }
            if value > MAX_BATCH {
                return Err(ConfigError::LimitAboveConfig {
                    what,
                    value,
                    max: MAX_BATCH,
                });
            }
        }
        Ok(())
    }
}

/// One named region of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Region {
    /// What the region holds.
    pub name: &'static str,
    /// Byte offset from the start of the arena.
    pub offset_bytes: usize,
    /// Size in bytes.
    pub bytes: usize,
}

named_set! {
    /// One value per part of the arena's `search` region, in the order the parts follow each
    /// other there (unpadded; `u32` parts are stored as `f32` bit patterns of the same size):
    /// their sizes ([`SearchParts::sizes`]) or the parts themselves ([`SearchParts::carve`]).
    pub(crate) struct SearchParts<T> {
        /// Tokens of the live hypotheses at even steps, `beam × tgt`.
        history_even,
        /// Tokens of the live hypotheses at odd steps, `beam × tgt`.
        history_odd,
        /// Tokens of the finished hypotheses, `beam × tgt`.
        finished,
        /// Length of each finished hypothesis, `beam`.
        finished_len,
        /// Normalised score of each finished hypothesis, `beam`.
        finished_score,
        /// Summed log-probability of each live hypothesis, `beam`.
        beam_score,
        /// A step's candidates, `2 · beam`: summed log-probability,
        cand_score,
        /// the live hypothesis each continues,
        cand_beam,
        /// and the token each adds.
        cand_token,
    }
}

impl SearchParts<usize> {
    /// The parts' sizes for up to `beam` hypotheses of up to `tgt` tokens.
    pub(crate) fn sizes(beam: usize, tgt: usize) -> SearchParts<usize> {
        SearchParts {
            history_even: beam * tgt,
            history_odd: beam * tgt,
            finished: beam * tgt,
            finished_len: beam,
            finished_score: beam,
            beam_score: beam,
            cand_score: 2 * beam,
            cand_beam: 2 * beam,
            cand_token: 2 * beam,
        }
    }

    /// The size of the whole `search` region.
    pub(crate) fn total(self) -> usize {
        let mut total = 0;
        self.map(|len| total += len);
        total
    }
}

impl<'a> SearchParts<&'a mut [f32]> {
    /// Splits `search` (at least `sizes.total()` elements) into the parts, one after the other.
    pub(crate) fn carve(search: &'a mut [f32], sizes: SearchParts<usize>) -> Self {
        let mut rest = search;
        sizes.map(|len| {
            let (part, tail) = core::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            part
        })
    }
}

/// Where a block's working buffers live for some number of rows.
pub(crate) type WorkSpans = WorkBuffers<Span>;

named_set! {
    /// One value per region of the arena after the block's working buffers, in arena order:
    /// their sizes, where they live ([`Layout::regions`]) or the carved regions themselves.
    pub(crate) struct Regions<T> {
        /// The last pass's logits, one row per beam of every sequence.
        logits,
        /// Every decoder layer's cross-attention K/V of the encoded source ([`CrossKv`]).
        cross_kv,
        /// The decoder's self-attention keys ([`KvLayout`]).
        k_cache,
        /// The decoder's self-attention values.
        v_cache,
        /// One sequence's part of one layer's cache, staged while its beams are reordered.
        reorder_stage,
        /// Kernel scratch, the most any layer states it needs.
        scratch,
        /// The next step's tokens, one per beam of every sequence (`u32` stored as `f32` bit
        /// patterns), `max_beam` apart.
        step_tokens,
        /// The next reordering's parent beams, as the tokens.
        beam_parents,
        /// The search state of every sequence ([`SearchParts`] each).
        search,
        /// A convolutional front end's padded input (empty for token models).
        stem_input (optional),
        /// The front end's first convolution's output.
        stem_middle (optional),
        /// A relative position bias, `[head][query][key]` (empty without one).
        position_bias (optional),
        /// Cross-attention probabilities of the heads a forced pass reports
        /// ([`crate::Session::align`]), `[head][target position][source position]`: planned
        /// only for a session created for them ([`ArenaPlan::with_alignment`]).
        align_probs (optional),
    }
}

/// Which working buffers a pass carves: they overlay each other, never being live at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Up to `encode_sources · max_src_len` rows: the encoder, and decoder prefixes (up to
    /// `max_src_len` rows) fed in chunks.
    Wide,
    /// Up to `max_batch · max_beam` rows: one decoder step per beam of every sequence.
    Narrow,
}

/// Where every buffer of a session lives.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// The working buffers of [`Phase::Wide`].
    pub wide: WorkSpans,
    /// The working buffers of [`Phase::Narrow`], overlaying `wide`.
    pub narrow: WorkSpans,
    /// Every other region, after both.
    pub regions: Regions<Span>,
}

/// The arena carved into its regions, with one phase's working buffers.
pub(crate) struct Carved<'a> {
    pub work: Work<'a>,
    pub regions: Regions<&'a mut [f32]>,
}

impl Layout {
    /// Places the working buffers of both phases from the start of the arena and the other
    /// regions after the longer of the two, each in declaration order; with the arena's length.
    fn place(wide: WorkSizes, narrow: WorkSizes, regions: Regions<usize>) -> (Layout, usize) {
        let mut wide_end = Cursor(0);
        let wide = wide.map(|len| wide_end.take(len));
        let mut narrow_end = Cursor(0);
        let narrow = narrow.map(|len| narrow_end.take(len));
        let mut rest = Cursor(wide_end.0.max(narrow_end.0));
        let regions = regions.map(|len| rest.take(len));
        let layout = Layout {
            wide,
            narrow,
            regions,
        };
        (layout, rest.0)
    }

    /// Splits `arena` (at least the plan's length) into `phase`'s working buffers and every
    /// other region.
    pub fn carve<'a>(&self, arena: &'a mut [f32], phase: Phase) -> Carved<'a> {
        let mut carver = Carver {
            rest: arena,
            base: 0,
        };
        let work = match phase {
            Phase::Wide => self.wide,
            Phase::Narrow => self.narrow,
        };
        Carved {
            work: work.map(|span| carver.take(span)),
            regions: self.regions.map(|span| carver.take(span)),
        }
    }
}

/// Takes spans of an arena in increasing order (the order they were placed in).
struct Carver<'a> {
    rest: &'a mut [f32],
    /// Arena offset of `rest`.
    base: usize,
}

impl<'a> Carver<'a> {
    fn take(&mut self, span: Span) -> &'a mut [f32] {
        let rest = core::mem::take(&mut self.rest);
        let (_, tail) = rest.split_at_mut(span.start - self.base);
        let (head, tail) = tail.split_at_mut(span.len);
        self.rest = tail;
        self.base = span.start + span.len;
        head
    }
}

/// The memory plan of a session: named regions and the total, known before anything runs.
#[derive(Clone, Debug)]
pub struct ArenaPlan {
    pub(crate) layout: Layout,
    pub(crate) limits: Limits,
    pub(crate) kv: KvLayout,
    pub(crate) cross: CrossLayout,
    /// (Layer, head) pairs whose cross-attention probabilities `align_probs` holds.
    pub(crate) align_heads: usize,
    regions: RegionList,
    total_f32: usize,
}

/// Most regions a plan names: the working buffers of both phases and every other region.
const MAX_REGIONS: usize = 2 * WorkSpans::LEN + Regions::<Span>::LEN;

/// The named regions of a plan, in arena order, in a fixed array (no allocation).
#[derive(Clone, Debug)]
struct RegionList {
    list: [Region; MAX_REGIONS],
    len: usize,
}

impl RegionList {
    /// Names the working buffers of both phases and every other region, the optional ones
    /// only when the model has them.
    fn of(layout: &Layout) -> RegionList {
        let mut regions = RegionList {
            list: [Region::default(); MAX_REGIONS],
            len: 0,
        };
        let mut push = |name, span: &Span, optional: bool| {
            if span.len > 0 || !optional {
                regions.push(name, *span);
            }
        };
        // `WorkBuffers` names its first place `wide.*`, its second `narrow.*`.
        layout.wide.for_each_named(0, &mut push);
        layout.narrow.for_each_named(1, &mut push);
        layout.regions.for_each_named(0, &mut push);
        regions
    }

    fn push(&mut self, name: &'static str, span: Span) {
        self.list[self.len] = Region {
            name,
            offset_bytes: span.start * 4,
            bytes: span.len * 4,
        };
        self.len += 1;
    }
}

struct Cursor(usize);

impl Cursor {
    fn take(&mut self, len: usize) -> Span {
        let span = Span { start: self.0, len };
        self.0 += len.div_ceil(ALIGN_F32) * ALIGN_F32;
        span
    }
}

/// The shapes of the encoder's and the decoder's blocks.
fn block_shapes(config: &Config) -> (BlockShape, BlockShape) {
    let shape = |stack| BlockShape {
        heads: Heads::of(config, stack),
        d_model: config.d_model,
        d_ff: config.d_ff_in(stack),
        cross: stack == StackKind::Decoder,
        gated: config.gated_ffn,
    };
    (shape(StackKind::Encoder), shape(StackKind::Decoder))
}

/// The sizes of the regions after the working buffers for `config` within `limits`, the
/// scratch the most any layer (or the front end, or the output projection) states it needs.
fn region_sizes(
    config: &Config,
    (limits, align_heads): (&Limits, usize),
    (encoder, decoder): (BlockShape, BlockShape),
    (kv, cross): (KvLayout, CrossLayout),
) -> Regions<usize> {
    let d = config.d_model;
    let (s, t, b) = (limits.max_src_len, limits.max_tgt_len, limits.max_beam);
    let (batch, rows) = (limits.max_batch, limits.step_rows());
    let threads = limits.threads;
    let stem = config
        .front_end
        .n_mels()
        .map(|n_mels| (n_mels, ConvStem::sizes(2 * s, n_mels, d)));
    let stem_scratch = stem.map_or(ScratchSpec::EMPTY, |(n_mels, _)| {
        ConvStem::scratch(2 * s, n_mels, d, threads)
    });
    let scratch = stem_scratch
        .or(encoder.scratch(limits.encode_rows(), s, s, threads))
        .or(decoder.scratch(s.max(rows), t, s, threads))
        .or(linear::scratch(s.max(rows), d, config.tgt_vocab, threads));
    Regions {
        logits: rows * config.tgt_vocab,
        cross_kv: cross.elements(),
        k_cache: kv.len(),
        v_cache: kv.len(),
        reorder_stage: kv.slot_len(),
        scratch: scratch.len(),
        step_tokens: rows,
        beam_parents: rows,
        search: batch * SearchParts::sizes(b, t).total(),
        stem_input: stem.map_or(0, |(_, sizes)| sizes.input),
        stem_middle: stem.map_or(0, |(_, sizes)| sizes.middle),
        // Encoder queries over the source, prefix chunks (up to `s` rows) over the target,
        // and a step's one query per sequence over its target positions.
        // A transient-global encoder's side bias follows, over the longest source's blocks.
        // Each holds the heads of its stack; the most of either bounds both.
        position_bias: config.relative_attention.map_or(0, |_| {
            let heads = config.most_heads();
            let step = batch * RelativeBias::elements(heads, 1, t);
            let side = config.global_block_size.map_or(0, |g| {
                let blocks = s / g;
                RelativeBias::elements(heads, blocks, blocks)
            });
            (RelativeBias::elements(heads, s, s.max(t)) + side).max(step)
        }),
        align_probs: align_heads * t * s,
    }
}

impl ArenaPlan {
    /// Plans the arena for `config` (its max lengths and beam).
    pub fn new(config: &Config) -> Result<ArenaPlan, ConfigError> {
        ArenaPlan::with_limits(config, Limits::of(config))
    }

    /// Plans the arena for `config` within `limits` (each at most the config's maximum): the
    /// working buffers and scratch every layer states it needs at the most rows it runs with,
    /// the caches, the logits and the search state.
    pub fn with_limits(config: &Config, limits: Limits) -> Result<ArenaPlan, ConfigError> {
        ArenaPlan::with_alignment(config, limits, 0)
    }

    /// [`ArenaPlan::with_limits`] with room for the cross-attention probabilities of up to
    /// `heads` (layer, head) pairs over a forced target of up to `max_tgt_len` positions and
    /// `max_src_len` source positions (`align_probs`, `heads × max_tgt_len × max_src_len`
    /// values; none for 0 heads): what [`crate::Session::align`] reports.
    pub fn with_alignment(
        config: &Config,
        limits: Limits,
        heads: usize,
    ) -> Result<ArenaPlan, ConfigError> {
        config.validate()?;
        let most = config
            .decoder_layers
            .saturating_mul(config.heads_in(StackKind::Decoder));
        if heads > most {
            return Err(ConfigError::LimitAboveConfig {
                what: "alignment heads",
                value: heads,
                max: most,
            });
        }
        limits.check(config)?;
        // The decoder's caches and the cross K/V hold its attention's rows.
        let a = config.attention_width(StackKind::Decoder);
        let (s, t, b) = (limits.max_src_len, limits.max_tgt_len, limits.max_beam);
        let (encoder, decoder) = block_shapes(config);
        let kv = KvLayout {
            layers: config.decoder_layers,
            slots: limits.max_batch,
            beams: b,
            positions: t,
            width: a,
        };
        let cross = CrossLayout {
            slots: limits.max_batch,
            layers: config.decoder_layers,
            positions: s,
            width: a,
            kind: limits.cross_kv,
        };
        let encode = encoder.work(limits.encode_rows());
        let mut wide = encode.zip_with(decoder.work(s), usize::max);
        // Encode stages the memory projection in the FFN buffer (free by then).
        wide.ffn = wide.ffn.max(CrossKv::staging_elements(a));
        // A transient-global encoder's side rows: their Q/K/V before each source's rows, the
        // aggregates of a source in the FFN buffer (free during self-attention).
        if let Some(g) = config.global_block_size {
            let rows = limits.encode_rows();
            let a = config.attention_width(StackKind::Encoder);
            wide.qkv = wide.qkv.max((rows + rows / g) * 3 * a);
            wide.ffn = wide.ffn.max(s / g * config.d_model);
        }
        let regions = region_sizes(config, (&limits, heads), (encoder, decoder), (kv, cross));
        let narrow = decoder.work(limits.step_rows());
        let (layout, total_f32) = Layout::place(wide, narrow, regions);
        Ok(ArenaPlan {
            regions: RegionList::of(&layout),
            layout,
            limits,
            kv,
            cross,
            align_heads: heads,
            total_f32,
        })
    }

    /// The lengths and beam width this plan holds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Every region, in arena order (`wide.*` and `narrow.*` overlap by design).
    pub fn regions(&self) -> &[Region] {
        &self.regions.list[..self.regions.len]
    }

    /// The region called `name`.
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions().iter().find(|r| r.name == name)
    }

    /// Most (layer, head) pairs a forced pass reports the cross-attention probabilities of
    /// (0 unless planned with [`ArenaPlan::with_alignment`]).
    pub fn alignment_heads(&self) -> usize {
        self.align_heads
    }

    /// Size of the whole arena in bytes.
    pub fn total_bytes(&self) -> usize {
        self.total_f32 * 4
    }

    /// Size of the whole arena in `f32` elements.
    pub fn total_f32(&self) -> usize {
        self.total_f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FfnActivation, FrontEnd, RelativeAttention, Sizes, SpecialIds};

    /// Carving the two phases gives every region, by name, exactly where the plan lists it
    /// (and the regions it does not list empty), for a gated model with a relative bias and for one
    /// with a convolutional front end.
    #[test]
    fn carving_takes_every_region_where_the_plan_lists_it() {
        let sizes = Sizes {
            d_model: 32,
            heads: 4,
            encoder_layers: 1,
            decoder_layers: 2,
            d_ff: 48,
            src_vocab: 50,
            tgt_vocab: 40,
            max_src_len: 9,
            max_tgt_len: 7,
            max_beam: 3,
        };
        let ids = SpecialIds {
            bos: 1,
            eos: 2,
            pad: 0,
        };
        let relative = RelativeAttention {
            buckets: 8,
            max_distance: 16,
        };
        let gated = Config::builder(sizes, ids)
            .feed_forward(FfnActivation::Relu, true)
            .relative_attention(Some(relative));
        let audio = Config::builder(sizes, ids).front_end(FrontEnd::Conv { n_mels: 8 });
        for config in [gated.build().unwrap(), audio.build().unwrap()] {
            let plan = ArenaPlan::new(&config).unwrap();
            let mut arena = std::vec![0.0f32; plan.total_f32()];
            let base = arena.as_ptr() as usize;
            let mut checked = std::collections::BTreeSet::new();
            for (place, phase) in [Phase::Wide, Phase::Narrow].into_iter().enumerate() {
                let carved = plan.layout.carve(&mut arena, phase);
                let mut check = |name: &'static str, view: &&mut [f32], _: bool| {
                    let at = (view.as_ptr() as usize - base, view.len() * 4);
                    match plan.region(name) {
                        Some(region) => {
                            assert_eq!((region.offset_bytes, region.bytes), at, "{name}");
                            checked.insert(name);
                        }
                        None => assert!(view.is_empty(), "{name} is not listed"),
                    }
                };
                carved.work.for_each_named(place, &mut check);
                carved.regions.for_each_named(0, &mut check);
            }
            assert_eq!(checked.len(), plan.regions().len());
        }
    }
}
