//! Parsing an image into a [`Model`] that borrows every tensor from the image's bytes, without
//! allocating: the blocks go into storage the host provides.

use core::mem::MaybeUninit;

use tessel_kernels::gemm::int8::{packed_i8_len, PackedI8};
use tessel_kernels::gemm::{self, Element, PackedB};

use half::{bf16, f16};

use super::header::{truncated, ImageHeader};
use super::names::SlotNames;
use super::record::{Kind, Layout, TensorRecord, RECORD_BYTES};
use super::{ImageError, DATA_ALIGN};
use crate::config::{Config, FrontEnd, StackKind};
use crate::layers::linear::PackedWeight;
use crate::layers::{
    Block, ConvStem, CrossAttention, Embedding, FeedForward, Heads, Linear, Norm, RelativeBias,
    SelfAttention,
};
use crate::model::{Blocks, Model, Source, Stack};
use crate::storage::Weights;

/// The model an image holds, every tensor borrowed from `bytes`, its blocks written into
/// `blocks` (at least [`blocks_needed`](super::blocks_needed) slots; encoder blocks first). Allocates nothing.
///
/// `bytes` must start on a [`DATA_ALIGN`]-byte boundary (see [`super::Aligned`]). Anything
/// malformed is an [`ImageError`].
pub fn parse<'w>(
    bytes: &'w [u8],
    blocks: &'w mut [MaybeUninit<Block<'w>>],
) -> Result<Model<'w>, ImageError> {
    if !(bytes.as_ptr() as usize).is_multiple_of(DATA_ALIGN) {
        return Err(ImageError::Misaligned(DATA_ALIGN));
    }
    let header = ImageHeader::read(bytes)?;
    let config = header.config;
    let needed = config.encoder_layers + config.decoder_layers;
    if blocks.len() < needed {
        return Err(ImageError::BlockStorage {
            needed,
            got: blocks.len(),
        });
    }
    let mut r = Reader {
        bytes,
        directory: header.directory,
        data: header.data,
        next: 0,
        names: SlotNames::of(&config),
    };
    let d = config.d_model;
    let source = match config.front_end {
        FrontEnd::Tokens => Source::Tokens(r.embedding(config.src_vocab, d)?),
        FrontEnd::Conv { n_mels } => {
            let conv1 = r.linear(3 * n_mels, d)?;
            let conv2 = r.linear(3 * d, d)?;
            let (positions, _) = r.table(None, d)?;
            Source::Audio(ConvStem::new(conv1, conv2, positions, n_mels)?)
        }
    };
    let target = r.embedding(config.tgt_vocab, d)?;
    let (encoder_slots, rest) = blocks.split_at_mut(config.encoder_layers);
    let decoder_slots = &mut rest[..config.decoder_layers];
    let encoder = r.stack(&config, encoder_slots, false)?;
    let decoder = r.stack(&config, decoder_slots, true)?;
    let generator = r.linear(d, config.tgt_vocab)?;
    Ok(Model::from_parts(
        config,
        source,
        target,
        (encoder, decoder),
        generator,
    ))
}

/// A cursor over the directory.
struct Reader<'w> {
    bytes: &'w [u8],
    directory: usize,
    data: usize,
    next: usize,
    names: SlotNames,
}

/// A float element type whose NaN and infinities a reader refuses.
trait Finite: Copy {
    /// Whether the value is neither NaN nor infinite (a test of the exponent bits).
    fn finite(self) -> bool;
}

impl Finite for f32 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Finite for f16 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl Finite for bf16 {
    fn finite(self) -> bool {
        self.is_finite()
    }
}

impl<'w> Reader<'w> {
    /// The next record and its slot.
    fn record(&mut self) -> Result<(usize, TensorRecord), ImageError> {
        let slot = self.next;
        self.next += 1;
        let at = self.directory + slot * RECORD_BYTES;
        let bytes: &[u8; RECORD_BYTES] = self
            .bytes
            .get(at..at + RECORD_BYTES)
            .and_then(|b| b.try_into().ok())
            .ok_or(truncated(
                "the directory",
                at + RECORD_BYTES,
                self.bytes.len(),
            ))?;
        let record = TensorRecord::from_bytes(bytes).ok_or(ImageError::Tensor {
            slot,
            problem: "unknown kind, layout or flag",
        })?;
        Ok((slot, record))
    }

    /// The elements of `record`, which must hold `elements` values of `T`.
    fn elements<T: bytemuck::Pod>(
        &self,
        slot: usize,
        record: &TensorRecord,
        elements: usize,
    ) -> Result<&'w [T], ImageError> {
        let bad = |problem| ImageError::Tensor { slot, problem };
        let bytes = elements
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(bad("size overflows"))?;
        if record.len != bytes as u64 {
            return Err(bad("byte length does not match its shape"));
        }
        let start = usize::try_from(record.offset).map_err(|_| bad("offset out of range"))?;
        if !start.is_multiple_of(DATA_ALIGN) || start < self.data {
            return Err(bad("offset not 64-byte aligned inside the data"));
        }
        let data = start
            .checked_add(bytes)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or(bad("data outside the image"))?;
        bytemuck::try_cast_slice(data).map_err(|_| ImageError::Misaligned(DATA_ALIGN))
    }

    /// `values` of slot `slot`, refused with the slot's name when one is NaN or infinite.
    fn finite<T: Finite>(&self, slot: usize, values: &'w [T]) -> Result<&'w [T], ImageError> {
        // A branch-free fold per block, which the compiler vectorises, before the next.
        let all = values
            .chunks(1024)
            .all(|block| block.iter().fold(true, |all, v| all & v.finite()));
        if all {
            Ok(values)
        } else {
            Err(ImageError::NonFinite {
                slot,
                name: self.names.name(slot),
            })
        }
    }

    /// A plain `f32` table of `n` columns and `rows` rows (any positive number when `None`),
    /// or `None` when the slot is absent; with the record's parameter.
    fn optional_table(
        &mut self,
        rows: Option<usize>,
        n: usize,
    ) -> Result<Option<(Weights<'w, f32>, u32)>, ImageError> {
        let (slot, record) = self.record()?;
        let bad = |problem| ImageError::Tensor { slot, problem };
        match (record.kind, record.layout) {
            (Kind::Absent, _) => {
                return if record == TensorRecord::ABSENT {
                    Ok(None)
                } else {
                    Err(bad("absent slot with fields set"))
                };
            }
            (Kind::F32, Layout::Plain) if record.flags == 0 => {}
            _ => return Err(bad("expected a plain f32 table")),
        }
        let (k, cols) = (record.k as usize, record.n as usize);
        if cols != n || k == 0 || rows.is_some_and(|rows| rows != k) {
            return Err(bad("table shape does not match the config"));
        }
        let values = self.finite(slot, self.elements::<f32>(slot, &record, k * n)?)?;
        Ok(Some((Weights::Borrowed(values), record.param)))
    }

    /// A plain `f32` table that must be present.
    fn table(
        &mut self,
        rows: Option<usize>,
        n: usize,
    ) -> Result<(Weights<'w, f32>, u32), ImageError> {
        let slot = self.next;
        self.optional_table(rows, n)?.ok_or(ImageError::Tensor {
            slot,
            problem: "a required tensor is absent",
        })
    }

    /// A slot that must be absent.
    fn absent(&mut self) -> Result<(), ImageError> {
        let slot = self.next;
        match self.optional_table(None, 0)? {
            None => Ok(()),
            Some(_) => Err(ImageError::Tensor {
                slot,
                problem: "a tensor this config has no place for",
            }),
        }
    }

    fn packed<T: Element + Finite + bytemuck::Pod>(
        &self,
        slot: usize,
        record: &TensorRecord,
    ) -> Result<PackedB<Weights<'w, T>, T>, ImageError> {
        let (k, n) = (record.k as usize, record.n as usize);
        let len = gemm::packed_len_of::<T>(k, n).map_err(|_| ImageError::Tensor {
            slot,
            problem: "packed size overflows",
        })?;
        let values = self.finite(slot, self.elements::<T>(slot, record, len)?)?;
        Ok(PackedB::from_packed(Weights::Borrowed(values), k, n)?)
    }

    /// The int8 weight `record` places, its bytes checked as [`PackedI8::from_packed`] checks
    /// them (no `-128`), its dequantisation factors finite.
    fn packed_i8(
        &self,
        slot: usize,
        record: &TensorRecord,
    ) -> Result<PackedI8<Weights<'w, i8>>, ImageError> {
        let (k, n) = (record.k as usize, record.n as usize);
        let len = packed_i8_len(k, n).map_err(|_| ImageError::Tensor {
            slot,
            problem: "int8 depth above the kernels' limit, or its size overflows",
        })?;
        let values = self.elements::<i8>(slot, record, len)?;
        let weight = PackedI8::from_packed(Weights::Borrowed(values), k, n)?;
        if (0..n).any(|j| weight.dequant(j).is_none_or(|d| !d.is_finite())) {
            return Err(ImageError::NonFinite {
                slot,
                name: self.names.name(slot),
            });
        }
        Ok(weight)
    }

    /// A `k → n` linear layer (weight and bias slots), or `None` when both are absent.
    fn optional_linear(&mut self, k: usize, n: usize) -> Result<Option<Linear<'w>>, ImageError> {
        let (slot, record) = self.record()?;
        let bad = |problem| ImageError::Tensor { slot, problem };
        if record.kind == Kind::Absent {
            if record != TensorRecord::ABSENT {
                return Err(bad("absent slot with fields set"));
            }
            self.absent()?;
            return Ok(None);
        }
        if record.layout != Layout::Packed || (record.k as usize, record.n as usize) != (k, n) {
            return Err(bad("expected a packed weight of the config's shape"));
        }
        if record.flags != 0 && record.kind != Kind::Bf16 {
            return Err(bad("the bf16-dot flag on a weight that is not bf16"));
        }
        let weight = match record.kind {
            Kind::F32 => PackedWeight::F32(self.packed(slot, &record)?),
            Kind::F16 => PackedWeight::F16(self.packed(slot, &record)?),
            Kind::Bf16 => {
                let dot = record.flags & TensorRecord::BF16_DOT != 0;
                PackedWeight::Bf16(self.packed(slot, &record)?.with_bf16_dot(dot))
            }
            Kind::I8 => PackedWeight::I8(self.packed_i8(slot, &record)?),
            Kind::Absent => return Err(bad("an absent weight")),
        };
        let bias = self.optional_table(Some(1), n)?.map(|(b, _)| b);
        Ok(Some(Linear::from_parts(weight, bias)?))
    }

    /// A `k → n` linear layer that must be present.
    fn linear(&mut self, k: usize, n: usize) -> Result<Linear<'w>, ImageError> {
        let slot = self.next;
        self.optional_linear(k, n)?.ok_or(ImageError::Tensor {
            slot,
            problem: "a required linear layer is absent",
        })
    }

    /// A norm over `d` values (`γ`, then `β` for LayerNorm), or `None` when absent.
    fn optional_norm(&mut self, d: usize) -> Result<Option<Norm<'w>>, ImageError> {
        let slot = self.next;
        let Some((gamma, eps)) = self.optional_table(Some(1), d)? else {
            self.absent()?;
            return Ok(None);
        };
        let epsilon = f32::from_bits(eps);
        if !(epsilon.is_finite() && epsilon > 0.0) {
            return Err(ImageError::Tensor {
                slot,
                problem: "norm epsilon must be finite and positive",
            });
        }
        Ok(Some(match self.optional_table(Some(1), d)? {
            Some((beta, _)) => Norm::layer(gamma, beta, epsilon),
            None => Norm::rms(gamma, epsilon),
        }))
    }

    fn norm(&mut self, d: usize) -> Result<Norm<'w>, ImageError> {
        let slot = self.next;
        self.optional_norm(d)?.ok_or(ImageError::Tensor {
            slot,
            problem: "a required norm is absent",
        })
    }

    /// A token embedding of `vocab` rows of `d` (table, positions, norm).
    fn embedding(&mut self, vocab: usize, d: usize) -> Result<Embedding<'w>, ImageError> {
        let slot = self.next;
        let (table, scale) = self.table(Some(vocab), d)?;
        let scale = f32::from_bits(scale);
        if !scale.is_finite() {
            return Err(ImageError::Tensor {
                slot,
                problem: "embedding scale must be finite",
            });
        }
        let mut embedding = Embedding::new(table, d, scale);
        if let Some((positions, offset)) = self.optional_table(None, d)? {
            embedding = embedding.with_positions(positions, offset as usize);
        }
        if let Some(norm) = self.optional_norm(d)? {
            embedding = embedding.with_norm(norm);
        }
        Ok(embedding)
    }

    /// One block of the config's shape (with cross-attention in the decoder).
    fn block(&mut self, config: &Config, decoder: bool) -> Result<Block<'w>, ImageError> {
        let stack = StackKind::decoder_if(decoder);
        let (d, f) = (config.d_model, config.d_ff_in(stack));
        let (a, heads) = (config.attention_width(stack), Heads::of(config, stack));
        let attention_norm = self.norm(d)?;
        let attention = SelfAttention::new(self.linear(d, 3 * a)?, self.linear(a, d)?, heads)?;
        let cross = if decoder {
            let norm = self.norm(d)?;
            let (q, kv, out) = (
                self.linear(d, a)?,
                self.linear(d, 2 * a)?,
                self.linear(a, d)?,
            );
            Some((norm, CrossAttention::new(q, kv, out, heads)?))
        } else {
            for _ in 0..8 {
                self.absent()?;
            }
            None
        };
        let ffn_norm = self.norm(d)?;
        let up = self.linear(d, f)?;
        let slot = self.next;
        let gate = self.optional_linear(d, f)?;
        let down = self.linear(f, d)?;
        let activation = config.activation.kernel();
        let feed_forward = match gate {
            Some(gate) if config.gated_ffn => FeedForward::gated(gate, up, down, activation)?,
            None if !config.gated_ffn => FeedForward::new(up, down, activation)?,
            _ => {
                return Err(ImageError::Tensor {
                    slot,
                    problem: "the gate disagrees with the config's gated_ffn",
                })
            }
        };
        Ok(Block::new(
            config.norm,
            (attention_norm, attention),
            cross,
            (ffn_norm, feed_forward),
        )?)
    }

    /// A stack: its blocks written into `slots`, the final norm, the relative position bias.
    fn stack(
        &mut self,
        config: &Config,
        slots: &'w mut [MaybeUninit<Block<'w>>],
        decoder: bool,
    ) -> Result<Stack<'w>, ImageError> {
        for slot in slots.iter_mut() {
            slot.write(self.block(config, decoder)?);
        }
        let slots: &'w [MaybeUninit<Block<'w>>] = slots;
        // SAFETY: the loop above initialised every element of `slots` (it returns early
        // otherwise), and `MaybeUninit<T>` has the layout of `T`, so the slice is a valid
        // `[Block]` for as long as the storage is borrowed, `'w`.
        let blocks: &'w [Block<'w>] =
            unsafe { core::slice::from_raw_parts(slots.as_ptr().cast(), slots.len()) };
        let final_norm = self.optional_norm(config.d_model)?;
        let mut stack = Stack::over(Blocks::Borrowed(blocks), final_norm);
        let slot = self.next;
        let heads = config.heads_in(StackKind::decoder_if(decoder));
        let bias = match config.relative_attention {
            Some(r) => Some(self.table(Some(r.buckets), heads)?),
            None => self.optional_table(None, 0)?,
        };
        match (bias, config.relative_attention) {
            (Some((table, _)), Some(r)) => {
                let bias = RelativeBias::new(table, heads, r.buckets, r.max_distance, !decoder)?;
                stack = stack.with_position_bias(bias);
            }
            (None, None) => {}
            _ => {
                return Err(ImageError::Tensor {
                    slot,
                    problem: "a relative bias table the config has no place for",
                })
            }
        }
        Ok(stack)
    }
}
