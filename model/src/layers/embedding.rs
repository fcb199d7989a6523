//! Token embeddings: a table row per token, times a scale, plus a position row, optionally
//! normalised (BART's `layernorm_embedding`).

use tessel_kernels::{Isa, KernelError, ViewMut};

use super::Norm;
use crate::storage::Weights;

/// `out[i] = N(table[token_i] · scale + positions[offset + position_i])`, `N` optional.
#[derive(Clone, Debug)]
pub struct Embedding<'w> {
    table: Weights<'w, f32>,
    width: usize,
    scale: f32,
    positions: Option<Weights<'w, f32>>,
    position_offset: usize,
    norm: Option<Norm<'w>>,
}

impl<'w> Embedding<'w> {
    /// Rows of `width` values from `table` (`vocab × width`, possibly shared with the other
    /// stack or the output projection), multiplied by `scale`, no positions, no norm.
    pub fn new(table: impl Into<Weights<'w, f32>>, width: usize, scale: f32) -> Embedding<'w> {
        Embedding {
            table: table.into(),
            width,
            scale,
            positions: None,
            position_offset: 0,
            norm: None,
        }
    }

    /// Adds row `offset + p` of `positions` (`rows × width`) at position `p`.
    pub fn with_positions(
        mut self,
        positions: impl Into<Weights<'w, f32>>,
        offset: usize,
    ) -> Embedding<'w> {
        self.positions = Some(positions.into());
        self.position_offset = offset;
        self
    }

    /// Normalises each embedded row.
    pub fn with_norm(mut self, norm: Norm<'w>) -> Embedding<'w> {
        self.norm = Some(norm);
        self
    }

    /// The token table.
    pub fn table(&self) -> &Weights<'w, f32> {
        &self.table
    }

    /// Width of a row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The factor each table row is multiplied by.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The position table and the row of position 0, if the embedding adds positions.
    pub fn positions(&self) -> Option<(&[f32], usize)> {
        let table = self.positions.as_ref()?;
        Some((table.as_slice(), self.position_offset))
    }

    /// The norm applied to each embedded row, if any.
    pub fn norm(&self) -> Option<&Norm<'w>> {
        self.norm.as_ref()
    }

    /// Tokens in the table.
    pub fn vocab(&self) -> usize {
        self.table.len() / self.width.max(1)
    }

    /// Bytes of the table (when not shared), the positions and the norm.
    pub fn bytes(&self, count_table: bool) -> usize {
        let table = if count_table { self.table.bytes() } else { 0 };
        table
            + self.positions.as_ref().map_or(0, Weights::bytes)
            + self.norm.as_ref().map_or(0, Norm::bytes)
    }

    /// Embeds `tokens` into consecutive rows of `out`: token `i` at position `first_position
    /// + i` when `advance`, else every token at `first_position` (one new position per beam).
    ///
    /// A token outside the table or a position outside the position table is an error.
    pub fn forward(
        &self,
        isa: Isa,
        tokens: &[u32],
        first_position: usize,
        advance: bool,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let d = self.width;
        if out.len() < tokens.len() * d {
            return Err(KernelError::BufferTooSmall {
                what: "embedding output",
                needed: tokens.len() * d,
                got: out.len(),
            });
        }
        let table = self.table.as_slice();
        for (i, (&token, row)) in tokens.iter().zip(out.chunks_exact_mut(d)).enumerate() {
            let t = token as usize * d;
            let values = table.get(t..t + d).ok_or(KernelError::InvalidArgument(
                "token outside the embedding table",
            ))?;
            for (o, &e) in row.iter_mut().zip(values) {
                *o = e * self.scale;
            }
            if let Some(positions) = &self.positions {
                let p = (self.position_offset + first_position + if advance { i } else { 0 }) * d;
                let values =
                    positions
                        .as_slice()
                        .get(p..p + d)
                        .ok_or(KernelError::InvalidArgument(
                            "position outside the position table",
                        ))?;
                for (o, &pe) in row.iter_mut().zip(values) {
                    *o += pe;
                }
            }
        }
        match &self.norm {
            Some(norm) => norm.forward_in_place(isa, ViewMut::new(out, tokens.len(), d, d)?),
            None => Ok(()),
        }
    }
}
