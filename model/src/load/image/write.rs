//! Writing a model's image (the canonical walk of [`super`]), and loading an image file.

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use super::config_record::config_to_words;
use super::header::{offsets, slot_count};
use super::record::{Kind, Layout, TensorRecord};
use super::{ImageError, BYTE_ORDER_MARK, DATA_ALIGN, HEADER_BYTES, MAGIC, VERSION};
use crate::aligned::AlignedBuf;
use crate::config::{Config, FrontEnd, StackKind};
use crate::layers::linear::PackedWeight;
use crate::layers::{Block, Embedding, EmbeddingTable, Heads, Linear, LinearError, Norm};
use crate::model::{Model, Source, Stack};

/// Why a model could not be packed, or an image file loaded.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The model's layers disagree with its config (the image could not be read back).
    #[error("the model does not match its config: {0}")]
    Mismatch(&'static str),
    /// A size does not fit the format's 32-bit fields.
    #[error("{0} does not fit the image format")]
    TooLarge(&'static str),
    /// The model has a layer the format does not describe.
    #[error("the image format has no {0}")]
    Unsupported(&'static str),
    /// The image file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The image is malformed.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The model's owned copy could not be built.
    #[error(transparent)]
    Layer(#[from] LinearError),
}

/// The packed image of `model`.
pub fn write(model: &Model<'_>) -> Result<Vec<u8>, PackError> {
    let config = model.config();
    let count = slot_count(config);
    let (directory, data) = offsets(count).ok_or(PackError::TooLarge("the directory"))?;
    let mut w = Writer {
        records: Vec::with_capacity(count),
        data: Vec::new(),
        data_start: data,
        seen: Vec::new(),
    };
    w.model(model)?;
    if w.records.len() != count {
        return Err(PackError::Mismatch("slot count"));
    }
    let total = data + w.data.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    for word in [
        VERSION,
        BYTE_ORDER_MARK,
        super::CONFIG_WORDS as u32,
        count as u32,
    ] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for value in [directory, data, total] {
        out.extend_from_slice(&(value as u64).to_le_bytes());
    }
    out.resize(HEADER_BYTES, 0);
    for word in config_to_words(config) {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for record in &w.records {
        out.extend_from_slice(&record.to_bytes());
    }
    out.resize(data, 0);
    out.extend_from_slice(&w.data);
    Ok(out)
}

/// Reads the image file at `path` into an aligned buffer, parses it and returns a model that
/// owns its tensors (the buffer is dropped; read, not mapped, so the file may change after).
pub fn load(path: &Path) -> Result<Model<'static>, PackError> {
    let io = |source| PackError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let mut buf = AlignedBuf::<u8>::zeros(bytes.len()).map_err(LinearError::Alloc)?;
    buf.as_mut_slice().copy_from_slice(&bytes);
    drop(bytes);
    let needed = super::blocks_needed(buf.as_slice())?;
    let mut blocks: Vec<MaybeUninit<Block<'_>>> = Vec::new();
    blocks.resize_with(needed, MaybeUninit::uninit);
    let model = super::parse(buf.as_slice(), &mut blocks)?;
    Ok(super::to_owned(&model)?)
}

struct Writer {
    records: Vec<TensorRecord>,
    data: Vec<u8>,
    data_start: usize,
    /// Tensors already written: address, bytes, offset (a shared table is written once).
    seen: Vec<(usize, usize, u64)>,
}

fn dim(value: usize) -> Result<u32, PackError> {
    u32::try_from(value).map_err(|_| PackError::TooLarge("a tensor dimension"))
}

impl Writer {
    /// `slots` absent tensors.
    fn absent(&mut self, slots: usize) {
        for _ in 0..slots {
            self.records.push(TensorRecord::ABSENT);
        }
    }

    /// The table `values` (rows of `n`), or an absent slot.
    fn optional_table(&mut self, values: Option<&[f32]>, n: usize) -> Result<(), PackError> {
        match values {
            Some(values) => self.table(values, n, 0),
            None => {
                self.absent(1);
                Ok(())
            }
        }
    }

    /// Appends `values` to the data (once per distinct tensor) and returns their offset.
    fn place<T: bytemuck::Pod>(&mut self, values: &[T]) -> u64 {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let key = (values.as_ptr() as usize, bytes.len());
        if let Some(&(_, _, offset)) = self.seen.iter().find(|s| (s.0, s.1) == key) {
            return offset;
        }
        let pad = self.data.len().next_multiple_of(DATA_ALIGN);
        self.data.resize(pad, 0);
        let offset = (self.data_start + pad) as u64;
        self.data.extend_from_slice(bytes);
        self.seen.push((key.0, key.1, offset));
        offset
    }

    fn table(&mut self, values: &[f32], n: usize, param: u32) -> Result<(), PackError> {
        let k = values.len().checked_div(n).unwrap_or(0);
        if k * n != values.len() {
            return Err(PackError::Mismatch("a table is not whole rows"));
        }
        let offset = self.place(values);
        self.records.push(TensorRecord {
            kind: Kind::F32,
            layout: Layout::Plain,
            flags: 0,
            param,
            k: dim(k)?,
            n: dim(n)?,
            offset,
            len: std::mem::size_of_val(values) as u64,
        });
        Ok(())
    }

    fn packed<T: bytemuck::Pod>(
        &mut self,
        kind: Kind,
        values: &[T],
        (k, n): (usize, usize),
        flags: u16,
    ) -> Result<(), PackError> {
        let offset = self.place(values);
        self.records.push(TensorRecord {
            kind,
            layout: Layout::Packed,
            flags,
            param: 0,
            k: dim(k)?,
            n: dim(n)?,
            offset,
            len: std::mem::size_of_val(values) as u64,
        });
        Ok(())
    }

    fn linear(&mut self, layer: Option<&Linear<'_>>) -> Result<(), PackError> {
        let Some(layer) = layer else {
            self.absent(2);
            return Ok(());
        };
        match layer.weight() {
            PackedWeight::F32(b) => self.packed(Kind::F32, b.as_slice(), (b.k(), b.n()), 0)?,
            PackedWeight::F16(b) => self.packed(Kind::F16, b.as_slice(), (b.k(), b.n()), 0)?,
            PackedWeight::Bf16(b) => {
                let flags = if b.bf16_dot() {
                    TensorRecord::BF16_DOT
                } else {
                    0
                };
                self.packed(Kind::Bf16, b.as_slice(), (b.k(), b.n()), flags)?
            }
            PackedWeight::I8(b) => self.packed(Kind::I8, b.as_slice(), (b.k(), b.n()), 0)?,
        }
        let bias = layer.bias();
        self.optional_table(bias, bias.map_or(0, <[f32]>::len))
    }

    fn norm(&mut self, layer: Option<&Norm<'_>>) -> Result<(), PackError> {
        let Some(layer) = layer else {
            self.absent(2);
            return Ok(());
        };
        let d = layer.width();
        self.table(layer.gamma(), d, layer.epsilon().to_bits())?;
        self.optional_table(layer.beta(), d)
    }

    fn embedding(&mut self, layer: &Embedding<'_>) -> Result<(), PackError> {
        let d = layer.width();
        // Images hold `f32` tables: a `float16` one is widened (exact).
        let table = match layer.table() {
            EmbeddingTable::F32(values) => std::borrow::Cow::Borrowed(values.as_slice()),
            EmbeddingTable::F16(values) => {
                std::borrow::Cow::Owned(values.as_slice().iter().map(|v| v.to_f32()).collect())
            }
            table @ EmbeddingTable::F16Panels(_) => {
                let rows = table.len() / d.max(1);
                std::borrow::Cow::Owned(
                    (0..rows)
                        .flat_map(|t| (0..d).map(move |j| table.get(t, j, d).unwrap_or(0.0)))
                        .collect(),
                )
            }
        };
        self.table(&table, d, layer.scale().to_bits())?;
        match layer.positions() {
            Some((positions, offset)) => self.table(positions, d, dim(offset)?)?,
            None => self.absent(1),
        }
        self.norm(layer.norm())
    }

    fn block(
        &mut self,
        config: &Config,
        block: &Block<'_>,
        decoder: bool,
    ) -> Result<(), PackError> {
        let (norm, attention) = block.self_attention_layer();
        let heads = Heads::of(config, StackKind::decoder_if(decoder));
        if block.placement() != config.norm || *attention.heads() != heads {
            return Err(PackError::Mismatch("norm placement or heads"));
        }
        if attention.local().is_some() {
            return Err(PackError::Unsupported("local (Longformer) self-attention"));
        }
        self.norm(Some(norm))?;
        self.linear(Some(attention.qkv()))?;
        self.linear(Some(attention.output()))?;
        match (block.cross_attention_layer(), decoder) {
            (Some((norm, cross)), true) => {
                self.norm(Some(norm))?;
                self.linear(Some(cross.query()))?;
                self.linear(Some(cross.memory()))?;
                self.linear(Some(cross.output()))?;
            }
            (None, false) => self.absent(8),
            _ => return Err(PackError::Mismatch("cross-attention in the wrong stack")),
        }
        let (norm, ffn) = block.feed_forward_layer();
        if ffn.activation() != config.activation.kernel() || ffn.is_gated() != config.gated_ffn {
            return Err(PackError::Mismatch("feed-forward activation or gate"));
        }
        self.norm(Some(norm))?;
        self.linear(Some(ffn.up()))?;
        self.linear(ffn.gate())?;
        self.linear(Some(ffn.output()))
    }

    fn stack(
        &mut self,
        config: &Config,
        stack: &Stack<'_>,
        decoder: bool,
    ) -> Result<(), PackError> {
        let layers = if decoder {
            config.decoder_layers
        } else {
            config.encoder_layers
        };
        if stack.blocks().len() != layers {
            return Err(PackError::Mismatch("number of blocks"));
        }
        for block in stack.blocks() {
            self.block(config, block, decoder)?;
        }
        self.norm(stack.final_norm())?;
        let heads = config.heads_in(StackKind::decoder_if(decoder));
        match (stack.position_bias(), config.relative_attention) {
            (Some(bias), Some(r))
                if bias.shape() == (heads, r.buckets, r.max_distance, !decoder) =>
            {
                self.table(bias.table(), heads, 0)
            }
            (None, None) => {
                self.absent(1);
                Ok(())
            }
            _ => Err(PackError::Mismatch("relative position bias")),
        }
    }

    fn model(&mut self, model: &Model<'_>) -> Result<(), PackError> {
        let config = model.config();
        match (model.source(), config.front_end) {
            (Source::Tokens(embedding), FrontEnd::Tokens) => self.embedding(embedding)?,
            (Source::Audio(stem), FrontEnd::Conv { n_mels }) if stem.n_mels() == n_mels => {
                let (conv1, conv2) = stem.convolutions();
                self.linear(Some(conv1))?;
                self.linear(Some(conv2))?;
                self.table(stem.positions(), stem.width(), 0)?;
            }
            _ => return Err(PackError::Mismatch("front end")),
        }
        self.embedding(model.target_embedding())?;
        self.stack(config, model.encoder(), false)?;
        self.stack(config, model.decoder(), true)?;
        self.linear(Some(model.generator()))
    }
}
