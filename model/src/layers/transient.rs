//! LongT5's transient-global encoder self-attention (`encoder_attention_type:
//! "transient-global"`, `google/long-t5-tglobal-*`): the local window of LongT5's local
//! attention, plus one "side" key per block of `block_size` positions of the source.
//!
//! For a source of `n` positions, `g = n / block_size` blocks (none when `n < block_size`);
//! position `i` belongs to block `min(i / block_size, g - 1)`, so a short last block joins the
//! block before it (`transformers`' `_make_global_fixed_block_ids`). Block `b`'s aggregate is
//! the sum of the layer's input rows (the normalised rows its Q/K/V projections read) of its
//! positions, normalised by the layer's own `global_input_layer_norm`; its side key and value
//! are the layer's own K and V projections of it (no bias, no scaling, as T5's). Row `i`:
//!
//! `softmax(q_i · [K_side | K_{i-r..=i+r}]ᵀ + [side(s - block(i)) | rel(j - i)]) · [V_side | V]`
//!
//! where `side` is the stack's `global_relative_attention_bias` (bidirectional T5 buckets of
//! the block distance, the first layer's table shared by every layer, as `transformers` passes
//! it along with the local position bias) and `rel` the stack's relative position bias.
//!
//! The side rows sit in the fused Q/K/V buffer just before their source's rows (`[g side rows
//! | n rows]` per source), so K and V are one strided view each and the kernel sees the side
//! keys as its global keys ([`tessel_kernels::attention::SideBias`]); the Q of the side rows is
//! computed and not read. Work is `O(n · (2r + 1 + g))`; nothing `n × g` is stored. Each source
//! of a batch is attended alone: `transformers` hides the side keys of blocks past a padded
//! source's length, which gives the same.

use tessel_kernels::attention::{Bias, Mask, SideBias};
use tessel_kernels::{KernelError, View, ViewMut};

use super::{Group, Norm, Run, SelfAttention};

/// The per-layer part of transient-global attention: the block size and the aggregates' norm.
#[derive(Clone, Debug)]
pub struct TransientGlobal<'w> {
    block_size: usize,
    norm: Norm<'w>,
}

/// The position biases of an encoder pass: the relative position bias over the longest
/// source's positions, and the side bias over its blocks (a relative-position table of the
/// block distance, `2g - 1` entries per head for the longest source's `g` blocks).
pub type PassBiases<'b> = (Option<Bias<'b>>, Option<SideBias<'b>>);

/// The working buffers of the attention: the fused Q/K/V rows (each source's side rows
/// before its rows), the aggregates, the attention output.
pub type TransientBuffers<'b> = (&'b mut [f32], &'b mut [f32], ViewMut<'b>);

impl<'w> TransientGlobal<'w> {
    /// Blocks of `block_size` positions (at least 1), aggregates normalised by `norm`.
    pub fn new(block_size: usize, norm: Norm<'w>) -> Result<TransientGlobal<'w>, KernelError> {
        if block_size == 0 {
            return Err(KernelError::InvalidArgument(
                "transient-global block size is 0",
            ));
        }
        Ok(TransientGlobal { block_size, norm })
    }

    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The aggregates' norm.
    pub fn norm(&self) -> &Norm<'w> {
        &self.norm
    }

    /// Side keys of a source of `rows` positions.
    pub fn side_keys(&self, rows: usize) -> usize {
        rows / self.block_size
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.norm.bytes()
    }

    /// Writes the `g` normalised block aggregates of the source rows `x` into `out` (`g × d`).
    fn aggregate(
        &self,
        run: Run<'_>,
        x: View<'_>,
        mut out: ViewMut<'_>,
    ) -> Result<(), KernelError> {
        let g = out.rows();
        let d = x.cols();
        if g == 0 {
            return Ok(());
        }
        let outside = KernelError::InvalidArgument("a block aggregate outside its buffer");
        for b in 0..g {
            out.row_mut(b).ok_or(outside)?[..d].fill(0.0);
        }
        for (i, row) in x.iter_rows().enumerate() {
            let block = (i / self.block_size).min(g - 1);
            let sums = out.row_mut(block).ok_or(outside)?;
            for (sum, &value) in sums[..d].iter_mut().zip(row) {
                *sum += value;
            }
        }
        self.norm.forward_in_place(run.isa, out)
    }

    /// Attends every source of `groups` (their rows of `input` one after the other) with
    /// `attention`'s projections and window `radius`, writing the output rows into `attn`.
    /// `qkv` holds every source's rows and side rows (`3a` wide); `sums` the most side rows
    /// of a source, `d` wide.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attend(
        &self,
        run: Run<'_>,
        (attention, radius): (&SelfAttention<'_>, usize),
        input: View<'_>,
        groups: &[Group],
        (bias, side): PassBiases<'_>,
        (qkv, sums, mut attn): TransientBuffers<'_>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        if side.is_some_and(|s| s.block_size != self.block_size) {
            return Err(KernelError::InvalidArgument(
                "the side bias's block size differs from the layer's",
            ));
        }
        let heads = attention.heads();
        let (a, d) = (heads.width(), input.cols());
        let longest = groups.iter().map(|g| g.rows).max().unwrap_or(0);
        let most = self.side_keys(longest);
        let (mut row0, mut at) = (0, 0);
        for group in groups {
            let (n, g) = (group.rows, self.side_keys(group.rows));
            let x = input.slice_rows(row0, n)?;
            let side_rows = {
                let mut view = ViewMut::new(&mut *sums, g, d, d)?;
                self.aggregate(run, x, view.reborrow())?;
                view.into_view()
            };
            let need = (at + g + n) * 3 * a;
            let short = KernelError::BufferTooSmall {
                what: "transient-global qkv",
                needed: need,
                got: qkv.len(),
            };
            let region = qkv.get_mut(at * 3 * a..need).ok_or(short)?;
            let (side_qkv, own_qkv) = region.split_at_mut(g * 3 * a);
            let side_qkv = ViewMut::new(side_qkv, g, 3 * a, 3 * a)?;
            attention.project(run, side_rows, side_qkv, scratch)?;
            let own_qkv = ViewMut::new(own_qkv, n, 3 * a, 3 * a)?;
            attention.project(run, x, own_qkv, scratch)?;
            let all = View::new(&qkv[at * 3 * a..need], g + n, 3 * a, 3 * a)?;
            let [q, k, v] = SelfAttention::split(all, a)?;
            let mask = Mask {
                radius: Some(radius),
                global_keys: g,
                local_origin: g,
                bias: bias.map(|b| super::block::corner(b, longest, n)),
                side_bias: side.map(|s| SideBias {
                    // The table of the longest source's blocks: this source's distances are
                    // its entries `most - g` on.
                    data: s.data.get(most - g..).unwrap_or(&[]),
                    ..s
                }),
                ..Mask::NONE
            };
            let out = attn.reborrow().slice_rows(row0, n)?;
            heads.attend(run, (q.slice_rows(g, n)?, k, v), &mask, out, scratch)?;
            row0 += n;
            at += g + n;
        }
        Ok(())
    }
}
