//! The arena plan: every buffer a session needs, sized from the config before anything runs.
//!
//! The arena is one 64-byte aligned block of `f32`. Its regions are what the layers state they
//! need ([`BlockShape::work`] and [`BlockShape::scratch`], the KV cache's [`KvLayout`], the
//! output projection's scratch), at the most rows each runs with. Two sets of block buffers
//! share the same bytes, never being live at once: `work.wide.*` (up to `max_src_len` rows:
//! the encoder, whose output is consumed by the cross-attention K/V projection before encode
//! returns, and decoder prefixes) and `work.narrow.*` (one row per beam: decoder steps).
//! Everything else (logits, the caches, scratch and search state) has its own region.

use crate::config::{Config, ConfigError};
use crate::layers::{
    linear, BlockShape, ConvStem, CrossKv, Heads, KvLayout, MemoryType, RelativeBias, WorkSizes,
};
use tessel_kernels::ScratchSpec;

/// Elements per alignment unit: every region starts on a 64-byte boundary.
const ALIGN_F32: usize = 16;

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

/// Sizes of the search state parts, in the order they are carved (u32 parts are stored as
/// `f32` bit patterns of the same size).
pub(crate) fn search_parts(beam: usize, tgt: usize) -> [usize; 9] {
    [
        beam * tgt, // history, even steps
        beam * tgt, // history, odd steps
        beam * tgt, // finished tokens
        beam,       // finished lengths
        beam,       // finished scores
        beam,       // beam scores
        2 * beam,   // candidate scores
        2 * beam,   // candidate beams
        2 * beam,   // candidate tokens
    ]
}

/// Where a block's working buffers ([`WorkSizes`]) live for some number of rows.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WorkSpans {
    pub hidden: Span,
    pub spare: Span,
    pub normed: Span,
    pub qkv: Span,
    pub q: Span,
    pub attn: Span,
    pub ffn: Span,
    pub gate: Span,
}

impl WorkSpans {
    /// Region names of the buffers, in [`WorkSpans::spans`] order, for the wide and the narrow
    /// phase.
    const NAMES: [[&'static str; 8]; 2] = [
        [
            "work.wide.hidden",
            "work.wide.spare",
            "work.wide.normed",
            "work.wide.qkv",
            "work.wide.cross_q",
            "work.wide.attention",
            "work.wide.ffn",
            "work.wide.ffn_gate",
        ],
        [
            "work.narrow.hidden",
            "work.narrow.spare",
            "work.narrow.normed",
            "work.narrow.qkv",
            "work.narrow.cross_q",
            "work.narrow.attention",
            "work.narrow.ffn",
            "work.narrow.ffn_gate",
        ],
    ];

    fn plan(cursor: &mut Cursor, sizes: WorkSizes) -> WorkSpans {
        WorkSpans {
            hidden: cursor.take(sizes.hidden),
            spare: cursor.take(sizes.spare),
            normed: cursor.take(sizes.normed),
            qkv: cursor.take(sizes.qkv),
            q: cursor.take(sizes.q),
            attn: cursor.take(sizes.attn),
            ffn: cursor.take(sizes.ffn),
            gate: cursor.take(sizes.gate),
        }
    }

    fn spans(&self) -> [Span; 8] {
        [
            self.hidden,
            self.spare,
            self.normed,
            self.qkv,
            self.q,
            self.attn,
            self.ffn,
            self.gate,
        ]
    }
}

/// The larger of two sets of buffer sizes, buffer by buffer.
fn max_sizes(a: WorkSizes, b: WorkSizes) -> WorkSizes {
    WorkSizes {
        hidden: a.hidden.max(b.hidden),
        spare: a.spare.max(b.spare),
        normed: a.normed.max(b.normed),
        qkv: a.qkv.max(b.qkv),
        q: a.q.max(b.q),
        attn: a.attn.max(b.attn),
        ffn: a.ffn.max(b.ffn),
        gate: a.gate.max(b.gate),
    }
}

/// Where every buffer of a session lives.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// Up to `max_src_len` rows: the encoder, and decoder prefixes fed in chunks.
    pub wide: WorkSpans,
    /// Up to `max_beam` rows: one decoder step per beam. Overlays `wide`.
    pub narrow: WorkSpans,
    pub logits: Span,
    pub cross_kv: Span,
    pub self_k: Span,
    pub self_v: Span,
    pub stage: Span,
    pub scratch: Span,
    pub step_tokens: Span,
    pub parents: Span,
    pub search: Span,
    /// A convolutional front end's padded input and middle (empty for token models).
    pub stem_input: Span,
    pub stem_middle: Span,
    /// A relative position bias, `[head][query][key]` (empty without one).
    pub position_bias: Span,
}

/// The memory plan of a session: named regions and the total, known before anything runs.
#[derive(Clone, Debug)]
pub struct ArenaPlan {
    pub(crate) layout: Layout,
    pub(crate) limits: Limits,
    pub(crate) kv: KvLayout,
    regions: Regions,
    total_f32: usize,
}

/// Most regions a plan names: two phases of eight working buffers and twelve others.
const MAX_REGIONS: usize = 28;

/// The named regions of a plan, in arena order, in a fixed array (no allocation).
#[derive(Clone, Debug)]
struct Regions {
    list: [Region; MAX_REGIONS],
    len: usize,
}

impl Regions {
    /// Names the non-empty working buffers of both phases and every other region (the front
    /// end's and the position bias only when the model has them).
    fn of(layout: &Layout) -> Regions {
        let mut regions = Regions {
            list: [Region::default(); MAX_REGIONS],
            len: 0,
        };
        for (names, spans) in WorkSpans::NAMES.iter().zip([layout.wide, layout.narrow]) {
            for (&name, span) in names.iter().zip(spans.spans()) {
                if span.len > 0 {
                    regions.push(name, span);
                }
            }
        }
        for (name, span) in [
            ("logits", layout.logits),
            ("cross_attention.kv", layout.cross_kv),
            ("self_attention.k_cache", layout.self_k),
            ("self_attention.v_cache", layout.self_v),
            ("beam_reorder.stage", layout.stage),
            ("scratch", layout.scratch),
            ("step_tokens", layout.step_tokens),
            ("beam_parents", layout.parents),
            ("search", layout.search),
            ("front_end.input", layout.stem_input),
            ("front_end.conv1", layout.stem_middle),
            ("position_bias", layout.position_bias),
        ] {
            if span.len == 0 && (name.starts_with("front_end") || name == "position_bias") {
                continue;
            }
            regions.push(name, span);
        }
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
    let heads = Heads::of(config);
    let shape = |cross| BlockShape {
        heads,
        d_model: config.d_model,
        d_ff: config.d_ff,
        cross,
        gated: config.gated_ffn,
    };
    (shape(false), shape(true))
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
        config.validate()?;
        limits.check(config)?;
        let (d, a) = (config.d_model, config.attention_width());
        let (s, t, b) = (limits.max_src_len, limits.max_tgt_len, limits.max_beam);
        let (encoder, decoder) = block_shapes(config);

        let mut wide_cursor = Cursor(0);
        let mut wide_sizes = max_sizes(encoder.work(s), decoder.work(s));
        // Encode stages the memory projection in the FFN buffer (free by then).
        let staging = CrossKv::staging_elements(a, limits.cross_kv);
        wide_sizes.ffn = wide_sizes.ffn.max(staging);
        let wide = WorkSpans::plan(&mut wide_cursor, wide_sizes);
        let mut narrow_cursor = Cursor(0);
        let narrow = WorkSpans::plan(&mut narrow_cursor, decoder.work(b));
        let mut rest = Cursor(wide_cursor.0.max(narrow_cursor.0));
        let kv = KvLayout {
            layers: config.decoder_layers,
            beams: b,
            positions: t,
            width: a,
        };
        let logits = rest.take(b * config.tgt_vocab);
        let cross_kv = rest.take(CrossKv::elements(
            config.decoder_layers,
            s,
            a,
            limits.cross_kv,
        ));
        let self_k = rest.take(kv.len());
        let self_v = rest.take(kv.len());
        let stage = rest.take(kv.layer_len());
        let threads = limits.threads;
        let stem = config
            .front_end
            .n_mels()
            .map(|n_mels| (n_mels, ConvStem::sizes(2 * s, n_mels, d)));
        let stem_scratch = stem.map_or(ScratchSpec::EMPTY, |(n_mels, _)| {
            ConvStem::scratch(2 * s, n_mels, d, threads)
        });
        let scratch_spec = stem_scratch
            .or(encoder.scratch(s, s, s, threads))
            .or(decoder.scratch(s.max(b), t, s, threads))
            .or(linear::scratch(s.max(b), d, config.tgt_vocab, threads));
        let scratch = rest.take(scratch_spec.len());
        let step_tokens = rest.take(b);
        let parents = rest.take(b);
        let search = rest.take(search_parts(b, t).iter().sum());
        let stem_input = rest.take(stem.map_or(0, |(_, sizes)| sizes.input));
        let stem_middle = rest.take(stem.map_or(0, |(_, sizes)| sizes.middle));
        // Encoder queries over the source, prefix chunks (up to `s` rows) over the target.
        let bias_len = config
            .relative_attention
            .map_or(0, |_| RelativeBias::elements(config.heads, s, s.max(t)));
        let position_bias = rest.take(bias_len);

        let layout = Layout {
            wide,
            narrow,
            logits,
            cross_kv,
            self_k,
            self_v,
            stage,
            scratch,
            step_tokens,
            parents,
            search,
            stem_input,
            stem_middle,
            position_bias,
        };
        let regions = Regions::of(&layout);
        Ok(ArenaPlan {
            layout,
            limits,
            kv,
            regions,
            total_f32: rest.0,
        })
    }

    /// The lengths and beam width this plan holds.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Every region, in arena order (`work.wide.*` and `work.narrow.*` overlap by design).
    pub fn regions(&self) -> &[Region] {
        &self.regions.list[..self.regions.len]
    }

    /// The region called `name`.
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions().iter().find(|r| r.name == name)
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
