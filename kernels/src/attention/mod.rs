//! Multi-head scaled dot-product attention, flash style: the `q_len × kv_len` score matrix is
//! never materialised. Scores are computed a tile of keys at a time and folded into the output
//! with an online softmax (running maximum and running sum per query), so the scratch is a few
//! tiles whose size does not depend on the sequence lengths ([`attention_scratch`]).
//!
//! Layout, per position, heads side by side: Q is a [`View`] of `q_len` rows of `heads × d_head`
//! elements, K and V of `kv_len` such rows, the output a [`ViewMut`] like Q. Each has its own
//! row (position) stride, so a slice of a KV cache or of a fused QKV projection output is passed
//! without copying.
//!
//! Two paths, chosen per call:
//! - **prefill** (many queries): queries are packed transposed (`d_head × tile`) so that SIMD
//!   lanes run across queries; `QKᵀ` and `PV` are register-blocked microkernels (a tile of keys
//!   or head dimensions × a tile of queries, accumulated over the reduction dimension), and the
//!   softmax of a query is lane-wise (no horizontal reductions). Key tiles outside a query tile's
//!   visible band (causal, key padding, sliding window, symmetric radius) are skipped whole; on a
//!   band edge (the causal diagonal, a window's edges) each query vector of the tile computes
//!   only the keys it sees, so causal attention costs about half the unmasked one, and a radius
//!   `r` costs `O(q_len · (2r + 1))`, not `O(q_len · kv_len)`. Global keys ([`Mask`]) are a
//!   second range every query sees, computed before the query's own range and without
//!   overlapping it: `g` of them add `O(q_len · g)`. LongT5's transient-global side keys
//!   are such global keys placed before the queries' own keys ([`Mask::local_origin`] centres
//!   each query's radius past them), with their own bias by the distance between the key's
//!   block and the query's ([`SideBias`], `2g - 1` entries a head): `q_len / G` of them add
//!   `O(q_len² / G)`, and no bias larger than `heads × (q_len + kv_len + 2g)` is stored.
//! - **decode** (up to 8 queries, e.g. one per beam or a short forced prefix, over a long KV
//!   cache): lanes run along `d_head` for the products, and a transpose-and-add tree turns a
//!   vector's worth of keys' partial products into one vector of scores; every K and V vector is
//!   loaded once and used by all the queries of the call from a register.
//!
//! K and V are `f32`, or `f16` ([`KvElement`]), widened as they are loaded: the decode path reads
//! either; calls with `f16` K/V and more queries run the decode path on runs of 8 queries.
//!
//! Scores, running maxima and sums are `f32`. Every exponent is a score or an old maximum minus
//! the running maximum, never positive, so exponentials use [`crate::math::exp_non_positive`]
//! (about half the operations of [`crate::math::exp`], the same error bound). A query that
//! sees no key gets a zero output row, not NaN; scores of any finite magnitude (±1e4 and beyond)
//! do not overflow, since every exponent is taken relative to the running maximum. NaN in an
//! input propagates to the outputs it reaches (a NaN in the V row of a key masked inside a
//! computed tile may reach the query too: its weight is 0, and 0 · NaN is NaN).
//!
//! Error: an output element is within about `(4δ + 2e + (kv_len + d_head + 8)·ε) · max |v|`
//! of the exact result, where `δ` bounds the rounding error of a score (an f32 dot product of
//! `d_head` terms, the scale and the bias, whichever bias covers the key), `e` is
//! [`crate::math::EXP_MAX_RELATIVE_ERROR`] and `ε` f32's epsilon; side keys count in `kv_len`
//! like any other. The tests hold every mask to twice that.
//!
//! Tile sizes per level (queries × register tile, from `tiling.rs`): AVX-512 48 queries,
//! 8 × 3 zmm accumulators; AVX2 16 queries, 6 × 2 ymm; NEON 12 queries, 8 × 3; scalar 4
//! queries, 4 × 4. Calls with at most 8 queries (a beam of up to 8) take the decode path at
//! every level.

mod band;
mod decode;
mod kv;
mod lanes;
mod parallel;
mod prefetch;
mod prefill;
mod tile;

use crate::error::{check_dim, check_view, KernelError};
use crate::isa::Isa;
use crate::scratch::{Scratch, ScratchSpec};
use crate::view::{View, ViewMut};
use band::Band;
use core::ops::Range;
pub use kv::KvElement;
pub use parallel::{
    attention_parallel, attention_parallel_scratch, attention_parallel_scratch_kv, attention_split,
    per_unit, Split, UnitCall, MIN_TASK_WORK,
};

/// Most queries a call may have to take the few-query decode path (a beam of up to 8); more
/// take the tiled prefill path.
pub const MAX_DECODE_QUERIES: usize = decode::MAX_QUERIES;

/// Sizes of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Number of heads.
    pub heads: usize,
    /// Size of one head's query, key and value vectors.
    pub d_head: usize,
    /// Number of queries (positions of Q and of the output).
    pub q_len: usize,
    /// Number of keys and values (positions of K and V).
    pub kv_len: usize,
}

impl AttentionShape {
    /// `heads × d_head`, the number of elements of one position (row) of every operand.
    pub fn row_width(&self) -> Result<usize, KernelError> {
        self.heads
            .checked_mul(self.d_head)
            .ok_or(KernelError::Overflow("heads × d_head"))
    }
}

/// An additive bias on the scores, added after scaling: the score of query `i`, key `j`, head `h`
/// gets `data[h * head_stride + e]`, where the entry `e` depends on the [`BiasLayout`]:
/// - [`BiasLayout::Dense`], a `[q_len × kv_len]` matrix per head: `e = i * row_stride + j`;
/// - [`BiasLayout::Toeplitz`], a relative-position bias whose value depends only on `j - i`
///   (T5's and LongT5's bucketed bias, ALiBi): a table of `q_len + kv_len - 1` entries per head,
///   `e = j - i + q_len - 1` (entry 0 is `j - i = -(q_len - 1)`, the last `j - i = kv_len - 1`);
///   `row_stride` is not read. Nothing `q_len × kv_len` is stored.
///
/// `head_stride = 0` shares one matrix (or table) between all heads (an ALiBi-free padding or
/// structure mask, the common case); a non-zero `head_stride` gives each head its own. Entries
/// may be `-inf` (the key is masked for that query); `+inf` and NaN are not meaningful and make
/// the row NaN. Too short a `data` is [`KernelError::BufferTooSmall`] (`what: "bias"`).
#[derive(Clone, Copy, Debug)]
pub struct Bias<'a> {
    /// The bias elements.
    pub data: &'a [f32],
    /// Dense: elements from one query row to the next (at least `kv_len` when `q_len > 1`).
    pub row_stride: usize,
    /// Elements from one head's matrix or table to the next; 0 shares one between heads.
    pub head_stride: usize,
    /// How the entries of a head are laid out.
    pub layout: BiasLayout,
}

/// How the entries of one head of a [`Bias`] are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BiasLayout {
    /// A `q_len × kv_len` matrix, rows `row_stride` apart.
    #[default]
    Dense,
    /// A relative-position (Toeplitz) table of `q_len + kv_len - 1` entries: query `i`, key `j`
    /// at `j - i + q_len - 1`.
    Toeplitz,
}

impl<'a> Bias<'a> {
    /// A dense bias: query `i`, key `j`, head `h` at `h * head_stride + i * row_stride + j`.
    pub const fn dense(data: &'a [f32], row_stride: usize, head_stride: usize) -> Bias<'a> {
        Bias {
            data,
            row_stride,
            head_stride,
            layout: BiasLayout::Dense,
        }
    }

    /// A relative-position (Toeplitz) bias: query `i`, key `j`, head `h` at
    /// `h * head_stride + j - i + q_len - 1`.
    pub const fn toeplitz(data: &'a [f32], head_stride: usize) -> Bias<'a> {
        Bias {
            data,
            row_stride: 0,
            head_stride,
            layout: BiasLayout::Toeplitz,
        }
    }

    /// Where the entries of head `h`, query `i` start (key 0's), in a call of `q_len` queries
    /// (`i < q_len`).
    #[inline(always)]
    pub(crate) fn row_start(&self, h: usize, i: usize, q_len: usize) -> usize {
        h * self.head_stride
            + match self.layout {
                BiasLayout::Dense => i * self.row_stride,
                BiasLayout::Toeplitz => q_len - 1 - i,
            }
    }

    /// The bias of the queries `rows` of a call of `q_len` queries, as queries `0..` of a call
    /// of their own (the same entry for every query and key).
    pub(crate) fn rows(&self, rows: Range<usize>, q_len: usize) -> Bias<'a> {
        let offset = match self.layout {
            BiasLayout::Dense => rows.start * self.row_stride,
            // Entry `j - i + q_len - 1` is `j - (i - start) + len - 1 + (q_len - end)`.
            BiasLayout::Toeplitz => q_len - rows.end,
        };
        Bias {
            data: self.data.get(offset..).unwrap_or(&[]),
            ..*self
        }
    }

    /// Checks that the entries of `heads` heads of a call of `q_len` queries over `kv_len`
    /// keys lie in `data`.
    fn check(&self, heads: usize, q_len: usize, kv_len: usize) -> Result<(), KernelError> {
        let per_head = match self.layout {
            BiasLayout::Dense => {
                check_view("bias", self.data.len(), q_len, kv_len, self.row_stride)?;
                if heads <= 1 || q_len == 0 || kv_len == 0 {
                    return Ok(());
                }
                (q_len - 1)
                    .checked_mul(self.row_stride)
                    .and_then(|n| n.checked_add(kv_len))
            }
            BiasLayout::Toeplitz => {
                if q_len == 0 || kv_len == 0 {
                    return Ok(());
                }
                q_len.checked_add(kv_len - 1)
            }
        };
        let needed = heads
            .saturating_sub(1)
            .checked_mul(self.head_stride)
            .zip(per_head)
            .and_then(|(a, b)| a.checked_add(b))
            .ok_or(KernelError::Overflow("bias"))?;
        if self.data.len() < needed {
            return Err(KernelError::BufferTooSmall {
                what: "bias",
                needed,
                got: self.data.len(),
            });
        }
        Ok(())
    }
}

/// The bias of the global keys of a LongT5 transient-global call (`Mask::side_bias`): the
/// global keys are the `g = global_keys` aggregates of consecutive blocks of `block_size`
/// queries ("side keys"), and the bias of query `i`, side key `s`, head `h` depends only on
/// `s - block(i)`, where `block(i) = min(i / block_size, g - 1)` (the queries of a short last
/// block belong to the block before it, as in `transformers`' `_make_global_fixed_block_ids`):
/// `data[h * head_stride + s - block(i) + g - 1]`, a table of `2g - 1` entries per head (entry 0
/// is `s - block(i) = -(g - 1)`). Nothing `q_len × g` is stored. `head_stride = 0` shares one
/// table between heads. Too short a `data` is [`KernelError::BufferTooSmall`] (`what: "side
/// bias"`), a `block_size` of 0 [`KernelError::InvalidArgument`].
#[derive(Clone, Copy, Debug)]
pub struct SideBias<'a> {
    /// The table entries.
    pub data: &'a [f32],
    /// Elements from one head's table to the next; 0 shares one between heads.
    pub head_stride: usize,
    /// Queries per block (LongT5's `global_block_size`), at least 1.
    pub block_size: usize,
}

impl<'a> SideBias<'a> {
    /// A side bias: query `i`, side key `s`, head `h` at `h * head_stride + s - block(i) + g - 1`.
    pub const fn new(data: &'a [f32], head_stride: usize, block_size: usize) -> SideBias<'a> {
        SideBias {
            data,
            head_stride,
            block_size,
        }
    }

    /// Checks the block size and that the tables of `heads` heads over `keys` side keys lie in
    /// `data`.
    fn check(&self, heads: usize, keys: usize) -> Result<(), KernelError> {
        if self.block_size == 0 {
            return Err(KernelError::InvalidArgument("side_bias.block_size is 0"));
        }
        if heads == 0 || keys == 0 {
            return Ok(());
        }
        let needed = (heads - 1)
            .checked_mul(self.head_stride)
            .zip(keys.checked_mul(2))
            .and_then(|(a, b)| a.checked_add(b - 1))
            .ok_or(KernelError::Overflow("side bias"))?;
        if self.data.len() < needed {
            return Err(KernelError::BufferTooSmall {
                what: "side bias",
                needed,
                got: self.data.len(),
            });
        }
        Ok(())
    }
}

/// Which keys each query sees, and an optional additive bias.
///
/// Query `i` sees key `j < key_len` (key padding; `None` means `kv_len`) when it is one of the
/// first `global_keys` keys, or when all of these hold (the query's own range):
/// - with `causal_offset = Some(past)`: `j <= past + i` (decoder self-attention over a KV cache
///   holding `past` earlier positions; `Some(0)` is the plain causal mask),
/// - with `window = Some(w)` (needs `causal_offset`): `j + w > past + i`, i.e. the last `w`
///   keys up to the query's own position (Mistral-style local attention; `w = 0` sees nothing),
/// - with `radius = Some(r)`: `p - r <= j <= p + r` where `p = local_origin + i`, the keys
///   within `r` of the query's own position, on both sides (the query at row `i` is at
///   position `i` when `local_origin` is 0): Longformer's local
///   attention (`r = attention_window / 2`) and LongT5's (`r = local_radius`). `r = 0` sees the
///   query's own key only; `r >= max(q_len, kv_len)` every key. It excludes `causal_offset`
///   (and so `window`): a one-sided window is `window` with `causal_offset`.
///
/// The global keys are seen by every query: Longformer's and LED's global tokens, which the
/// layer places first (its global queries, which see every key, are a separate call without a
/// mask); with `causal_offset` and `window`, the attention sinks of streaming decoders. A
/// global key inside a query's own range is counted once. `global_keys` above `kv_len` is an
/// error; keys at or beyond `key_len` are hidden, global or not.
///
/// LongT5's transient-global attention lays K and V out as `[side keys | the queries' own
/// keys]`: `global_keys = g` side keys first, then one key per query, with `local_origin = g`
/// so that query `i`'s radius is centred on its own key `g + i`, and the side keys' bias in
/// `side_bias` ([`SideBias`]).
///
/// The bias is added to the scores of visible keys; a `-inf` bias entry hides that key. With
/// a `side_bias`, the global keys take their bias from it and `bias` covers only the keys from
/// `global_keys` on, laid out as for a call over those `kv_len - global_keys` keys (key `j`'s
/// entries are those of key `j - global_keys`).
///
/// Cost: each query computes only the key tiles its ranges touch, the global keys `0..g` and its
/// own range above them, so a call with a radius and `g` global keys does `O(q_len · (2r + 1 +
/// g))` work rather than `O(q_len · kv_len)` (for transient-global attention, `g = q_len /
/// block_size`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mask<'a> {
    /// `Some(past)`: causal masking with the queries at positions `past..past + q_len`.
    pub causal_offset: Option<usize>,
    /// Keys at or beyond this index are ignored; `None` means all `kv_len` keys.
    pub key_len: Option<usize>,
    /// Sliding window width in keys; requires `causal_offset`.
    pub window: Option<usize>,
    /// Symmetric local window: query `i` sees the keys `i - r ..= i + r`; excludes
    /// `causal_offset`.
    pub radius: Option<usize>,
    /// Keys `0..global_keys` are seen by every query (below `key_len`); at most `kv_len`.
    pub global_keys: usize,
    /// With `radius`: the key index of query 0's own position, query `i`'s range is centred on
    /// key `local_origin + i` (0 but for keys placed before the queries' own, LongT5's
    /// transient-global side keys); non-zero needs `radius`.
    pub local_origin: usize,
    /// Additive bias on the scores.
    pub bias: Option<Bias<'a>>,
    /// The bias of the global keys, by query block ([`SideBias`]); `bias` then covers the
    /// other keys only.
    pub side_bias: Option<SideBias<'a>>,
}

impl Mask<'_> {
    /// No mask: every query sees every key.
    pub const NONE: Mask<'static> = Mask {
        causal_offset: None,
        key_len: None,
        window: None,
        radius: None,
        global_keys: 0,
        local_origin: 0,
        bias: None,
        side_bias: None,
    };
}

/// The default score scale, `1 / sqrt(d_head)` (1 for `d_head = 0`).
pub fn default_scale(d_head: usize) -> f32 {
    if d_head == 0 {
        1.0
    } else {
        (1.0 / libm::sqrt(d_head as f64)) as f32
    }
}

/// The scratch [`attention`] needs for `shape` at `isa` with `f32` K and V: a few tiles,
/// independent of `q_len` and `kv_len` (it grows with `d_head`, and for the few-query decode path
/// with `heads`).
pub fn attention_scratch(isa: Isa, shape: &AttentionShape) -> ScratchSpec {
    attention_scratch_kv::<f32>(isa, shape)
}

/// [`attention_scratch`] for K and V stored as `E`.
pub fn attention_scratch_kv<E: KvElement>(isa: Isa, shape: &AttentionShape) -> ScratchSpec {
    let lanes = isa.level().f32_lanes();
    if takes_decode::<E>(shape.q_len) {
        decode::scratch(lanes, shape.heads, shape.d_head)
    } else {
        prefill::scratch(lanes, shape.d_head)
    }
}

/// Whether a call of `q_len` queries over `E` keys and values runs the decode path (in runs of
/// [`MAX_DECODE_QUERIES`] when it has more).
pub(crate) fn takes_decode<E: KvElement>(q_len: usize) -> bool {
    decode::handles(q_len) || !E::PREFILL
}

/// Every argument of an attention call, checked.
#[derive(Clone, Copy)]
pub(crate) struct Checked {
    pub shape: AttentionShape,
    pub width: usize,
    pub band: Band,
    pub scale: f32,
}

/// Validates the views' dimensions against `shape`, every mask field and the scale; nothing is
/// read or written yet.
pub(crate) fn check<E: KvElement>(
    shape: &AttentionShape,
    q: &View<'_>,
    k: &View<'_, E>,
    v: &View<'_, E>,
    out: &ViewMut<'_>,
    mask: &Mask<'_>,
    scale: Option<f32>,
) -> Result<Checked, KernelError> {
    let width = shape.row_width()?;
    check_dim("q.rows (q_len)", shape.q_len, q.rows)?;
    check_dim("q.cols (heads × d_head)", width, q.cols)?;
    check_dim("k.rows (kv_len)", shape.kv_len, k.rows)?;
    check_dim("k.cols (heads × d_head)", width, k.cols)?;
    check_dim("v.rows (kv_len)", shape.kv_len, v.rows)?;
    check_dim("v.cols (heads × d_head)", width, v.cols)?;
    check_dim("out.rows (q_len)", shape.q_len, out.rows)?;
    check_dim("out.cols (heads × d_head)", width, out.cols)?;
    let key_len = mask.key_len.unwrap_or(shape.kv_len);
    if key_len > shape.kv_len {
        return Err(KernelError::InvalidArgument("mask.key_len exceeds kv_len"));
    }
    if let Some(past) = mask.causal_offset {
        past.checked_add(shape.q_len)
            .ok_or(KernelError::Overflow("causal_offset + q_len"))?;
    }
    if mask.window.is_some() && mask.causal_offset.is_none() {
        return Err(KernelError::InvalidArgument(
            "mask.window needs mask.causal_offset",
        ));
    }
    if mask.radius.is_some() && mask.causal_offset.is_some() {
        return Err(KernelError::InvalidArgument(
            "mask.radius excludes mask.causal_offset",
        ));
    }
    if mask.global_keys > shape.kv_len {
        return Err(KernelError::InvalidArgument(
            "mask.global_keys exceeds kv_len",
        ));
    }
    if mask.local_origin != 0 {
        if mask.radius.is_none() {
            return Err(KernelError::InvalidArgument(
                "mask.local_origin needs mask.radius",
            ));
        }
        mask.local_origin
            .checked_add(shape.q_len)
            .ok_or(KernelError::Overflow("local_origin + q_len"))?;
    }
    let bias_keys = match &mask.side_bias {
        Some(side) => {
            side.check(shape.heads, mask.global_keys)?;
            shape.kv_len - mask.global_keys
        }
        None => shape.kv_len,
    };
    if let Some(bias) = &mask.bias {
        bias.check(shape.heads, shape.q_len, bias_keys)?;
    }
    let scale = scale.unwrap_or_else(|| default_scale(shape.d_head));
    if !scale.is_finite() {
        return Err(KernelError::InvalidArgument("scale is not finite"));
    }
    Ok(Checked {
        shape: *shape,
        width,
        band: Band {
            global: mask.global_keys.min(key_len),
            origin: mask.local_origin,
            ..Band::new(key_len, mask.causal_offset, mask.window, mask.radius)
        },
        scale,
    })
}

/// Multi-head attention `out = softmax(scale · Q Kᵀ + bias, masked) V`, per head, with K and V
/// stored as `f32` or `f16` ([`KvElement`]).
///
/// `scale` defaults to `1 / sqrt(d_head)`. `scratch` must hold [`attention_scratch_kv`]`::<E>(isa,
/// shape)` floats ([`attention_scratch`] for `f32`). Every view's dimensions (Q and the output
/// `q_len × heads · d_head`, K and V `kv_len × heads · d_head`) and every mask field are
/// validated first; on error nothing is written. Rows of the output whose query sees no key are zero. Deterministic: the same inputs
/// give the same bits at a given ISA level.
#[allow(clippy::too_many_arguments)]
pub fn attention<E: KvElement>(
    isa: Isa,
    shape: &AttentionShape,
    q: View<'_>,
    k: View<'_, E>,
    v: View<'_, E>,
    out: ViewMut<'_>,
    mask: &Mask<'_>,
    scale: Option<f32>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let checked = check(shape, &q, &k, &v, &out, mask, scale)?;
    run_checked(isa, &checked, Operands::new(q, k, v, mask), out, scratch)
}

/// Runs a validated call (its scratch is checked here): the prefill or the decode path.
pub(crate) fn run_checked<E: KvElement>(
    isa: Isa,
    checked: &Checked,
    operands: Operands<'_, E>,
    out: ViewMut<'_>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let shape = &checked.shape;
    let spec = attention_scratch_kv::<E>(isa, shape);
    Scratch::new(&mut *scratch, spec)?;
    if shape.q_len == 0 || checked.width == 0 {
        return Ok(());
    }
    if !takes_decode::<E>(shape.q_len) {
        if let (Some(k), Some(v)) = (E::as_f32(operands.k), E::as_f32(operands.v)) {
            let operands = Operands {
                q: operands.q,
                k,
                v,
                bias: operands.bias,
                side: operands.side,
            };
            let mut scratch = Scratch::new(scratch, spec)?;
            return prefill::run(isa, checked, &operands, out, &mut scratch);
        }
    }
    decode::run_all(isa, checked, &operands, out, scratch, spec)
}

impl Checked {
    /// The call of the queries `rows` (inside the validated ones) alone: its own `q_len`, and
    /// the band of those queries.
    pub(crate) fn rows(&self, rows: Range<usize>) -> Checked {
        Checked {
            shape: AttentionShape {
                q_len: rows.len(),
                ..self.shape
            },
            band: self.band.after_rows(rows.start),
            ..*self
        }
    }
}

/// The validated read-only operands of a call.
pub(crate) struct Operands<'a, E = f32> {
    pub q: View<'a>,
    pub k: View<'a, E>,
    pub v: View<'a, E>,
    pub bias: Option<Bias<'a>>,
    pub side: Option<Side<'a>>,
}

/// A [`SideBias`] with what a part of a call needs to read it: the number of side keys and
/// the index of the part's first query in the whole call.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    pub bias: SideBias<'a>,
    pub keys: usize,
    pub first: usize,
}

impl Side<'_> {
    /// The table of head `h` from the entry of side key 0 of query `i` of the part on: side key
    /// `s` at `s`. `keys` must be at least 1 and the indices in the validated shape.
    #[inline(always)]
    fn row(&self, h: usize, i: usize) -> &[f32] {
        let block = ((self.first + i) / self.bias.block_size).min(self.keys - 1);
        &self.bias.data[h * self.bias.head_stride + self.keys - 1 - block..]
    }
}

impl<'a, E> Operands<'a, E> {
    /// The operands of a validated call with `mask`.
    pub(crate) fn new(q: View<'a>, k: View<'a, E>, v: View<'a, E>, mask: &Mask<'a>) -> Self {
        Operands {
            q,
            k,
            v,
            bias: mask.bias,
            side: mask.side_bias.map(|bias| Side {
                bias,
                keys: mask.global_keys,
                first: 0,
            }),
        }
    }

    /// The operands of the queries `rows` (inside the validated ones): their rows of Q and of
    /// the biases, every key.
    pub(crate) fn rows(&self, rows: Range<usize>) -> Result<Operands<'a, E>, KernelError> {
        Ok(Operands {
            q: self.q.slice_rows(rows.start, rows.len())?,
            k: self.k,
            v: self.v,
            bias: self.bias.map(|b| b.rows(rows.clone(), self.q.rows)),
            side: self.side.map(|side| Side {
                first: side.first + rows.start,
                ..side
            }),
        })
    }

    /// Whether the scores get a bias.
    #[inline(always)]
    pub fn has_bias(&self) -> bool {
        self.bias.is_some() || self.side.is_some_and(|side| side.keys > 0)
    }

    /// The bias of head `h`, query `i`, keys `keys` (all of them global keys or none), or
    /// `None` without a bias for them. Indices must be in the validated shape.
    #[inline(always)]
    pub fn bias_of(&self, h: usize, i: usize, keys: Range<usize>) -> Option<&[f32]> {
        let skip = match &self.side {
            Some(side) if keys.start < side.keys => return side.row(h, i).get(keys),
            Some(side) => side.keys,
            None => 0,
        };
        let bias = self.bias.as_ref()?;
        let row = &bias.data[bias.row_start(h, i, self.q.rows)..];
        row.get(keys.start - skip..keys.end - skip)
    }
}
