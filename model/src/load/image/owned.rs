//! A copy of a model that owns every tensor (`Model<'static>`): what a host keeps when the
//! bytes a model borrows from go away (a packed file read into a buffer).

use std::sync::Arc;

use tessel_kernels::gemm::int8::PackedI8;
use tessel_kernels::gemm::PackedB;

use crate::aligned::AlignedBuf;
use crate::layers::linear::PackedWeight;
use crate::layers::{
    Block, ConvStem, CrossAttention, Embedding, EmbeddingTable, FeedForward, GlobalProjections,
    Linear, LinearError, LocalAttention, Norm, RelativeBias, SelfAttention, TransientGlobal,
};
use crate::model::{Model, Source, Stack};
use crate::storage::Weights;

fn owned<T: bytemuck::Pod>(values: &[T]) -> Result<Weights<'static, T>, LinearError> {
    Ok(Weights::Owned(AlignedBuf::from_slice(values)?))
}

fn linear(layer: &Linear<'_>) -> Result<Linear<'static>, LinearError> {
    let weight = match layer.weight() {
        PackedWeight::F32(b) => {
            PackedWeight::F32(PackedB::from_packed(owned(b.as_slice())?, b.k(), b.n())?)
        }
        PackedWeight::F16(b) => {
            PackedWeight::F16(PackedB::from_packed(owned(b.as_slice())?, b.k(), b.n())?)
        }
        PackedWeight::Bf16(b) => PackedWeight::Bf16(
            PackedB::from_packed(owned(b.as_slice())?, b.k(), b.n())?.with_bf16_dot(b.bf16_dot()),
        ),
        PackedWeight::I8(b) => {
            PackedWeight::I8(PackedI8::from_packed(owned(b.as_slice())?, b.k(), b.n())?)
        }
    };
    let bias = layer.bias().map(owned).transpose()?;
    Ok(Linear::from_parts(weight, bias)?)
}

fn norm(layer: &Norm<'_>) -> Result<Norm<'static>, LinearError> {
    let gamma = owned(layer.gamma())?;
    Ok(match layer.beta() {
        Some(beta) => Norm::layer(gamma, owned(beta)?, layer.epsilon()),
        None => Norm::rms(gamma, layer.epsilon()),
    })
}

/// A copy of `table` the model shares between its embeddings (`Shared`).
fn shared_table(table: &EmbeddingTable<'_>) -> Result<EmbeddingTable<'static>, LinearError> {
    Ok(match table {
        EmbeddingTable::F32(values) => EmbeddingTable::F32(Weights::Shared(Arc::new(
            AlignedBuf::from_slice(values.as_slice())?,
        ))),
        EmbeddingTable::F16(values) => EmbeddingTable::F16(Weights::Shared(Arc::new(
            AlignedBuf::from_slice(values.as_slice())?,
        ))),
        EmbeddingTable::F16Panels(panels) => {
            // Rows gathered from the panels, exact: the table as stored.
            let (width, rows) = (panels.k(), panels.n());
            let values: Vec<half::f16> = (0..rows)
                .flat_map(|t| (0..width).map(move |j| panels.get(j, t).unwrap_or_default()))
                .collect();
            EmbeddingTable::F16(Weights::Shared(Arc::new(AlignedBuf::from_slice(&values)?)))
        }
    })
}

fn embedding(
    layer: &Embedding<'_>,
    table: EmbeddingTable<'static>,
) -> Result<Embedding<'static>, LinearError> {
    let mut copy = Embedding::with_table(table, layer.width(), layer.scale());
    if let Some((positions, offset)) = layer.positions() {
        copy = copy.with_positions(owned(positions)?, offset);
    }
    if let Some(n) = layer.norm() {
        copy = copy.with_norm(norm(n)?);
    }
    Ok(copy)
}

fn block(layer: &Block<'_>) -> Result<Block<'static>, LinearError> {
    let (attention_norm, attention) = layer.self_attention_layer();
    let mut copy = SelfAttention::new(
        linear(attention.qkv())?,
        linear(attention.output())?,
        *attention.heads(),
    )?;
    if let Some(local) = attention.local() {
        let global = match local.global() {
            Some((query, kv)) => Some(GlobalProjections::new(linear(query)?, linear(kv)?)),
            None => None,
        };
        let mut owned_local = LocalAttention::new(local.radius(), global);
        if let Some(t) = local.transient() {
            let transient = TransientGlobal::new(t.block_size(), norm(t.norm())?)?;
            owned_local = owned_local.with_transient(transient);
        }
        copy = copy.with_local(owned_local)?;
    }
    let attention = copy;
    let cross = match layer.cross_attention_layer() {
        Some((n, c)) => Some((
            norm(n)?,
            CrossAttention::new(
                linear(c.query())?,
                linear(c.memory())?,
                linear(c.output())?,
                *c.heads(),
            )?,
        )),
        None => None,
    };
    let (ffn_norm, ffn) = layer.feed_forward_layer();
    let (up, down) = (linear(ffn.up())?, linear(ffn.output())?);
    let feed_forward = match ffn.gate() {
        Some(gate) => FeedForward::gated(linear(gate)?, up, down, ffn.activation())?,
        None => FeedForward::new(up, down, ffn.activation())?,
    };
    Ok(Block::new(
        layer.placement(),
        (norm(attention_norm)?, attention),
        cross,
        (norm(ffn_norm)?, feed_forward),
    )?)
}

fn relative_bias(bias: &RelativeBias<'_>) -> Result<RelativeBias<'static>, LinearError> {
    let (heads, buckets, max_distance, bidirectional) = bias.shape();
    let table = owned(bias.table())?;
    Ok(RelativeBias::new(
        table,
        heads,
        buckets,
        max_distance,
        bidirectional,
    )?)
}

fn stack(layer: &Stack<'_>) -> Result<Stack<'static>, LinearError> {
    let blocks = layer.blocks().iter().map(block).collect::<Result<_, _>>()?;
    let final_norm = layer.final_norm().map(norm).transpose()?;
    let mut copy = Stack::new(blocks, final_norm);
    if let Some(bias) = layer.position_bias() {
        copy = copy.with_position_bias(relative_bias(bias)?);
    }
    if let Some(bias) = layer.side_bias() {
        copy = copy.with_side_bias(relative_bias(bias)?);
    }
    Ok(copy)
}

/// A copy of `model` owning every tensor; a table both embeddings read stays one table.
pub fn to_owned(model: &Model<'_>) -> Result<Model<'static>, LinearError> {
    let target_layer = model.target_embedding();
    let target_table = shared_table(target_layer.table())?;
    let source = match model.source() {
        Source::Tokens(e) => {
            let table = if e.table().same_as(target_layer.table()) {
                target_table.clone()
            } else {
                shared_table(e.table())?
            };
            Source::Tokens(embedding(e, table)?)
        }
        Source::Audio(stem) => {
            let (conv1, conv2) = stem.convolutions();
            Source::Audio(ConvStem::new(
                linear(conv1)?,
                linear(conv2)?,
                owned(stem.positions())?,
                stem.n_mels(),
            )?)
        }
    };
    let target = embedding(target_layer, target_table)?;
    Ok(Model::from_parts(
        model.config().clone(),
        source,
        target,
        (stack(model.encoder())?, stack(model.decoder())?),
        linear(model.generator())?,
    ))
}
