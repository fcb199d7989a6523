//! Token embeddings: a table row per token, times a scale, plus a position row, optionally
//! normalised (BART's `layernorm_embedding`).
//!
//! The table is `f32`, or `float16` as a checkpoint stores it: a `float16` row is widened to
//! `f32` as it is read (exact), so the two give the same bits at half the memory. A `float16`
//! table tied to the output projection can also be read straight from that projection's packed
//! panels ([`EmbeddingTable::F16Panels`]): the same values, with no copy of their own.

use half::f16;
use tessel_kernels::gemm::PackedB;
use tessel_kernels::{Isa, KernelError, ViewMut};

use super::Norm;
use crate::storage::Weights;

/// An embedding's token table, `vocab × width`.
#[derive(Clone, Debug)]
pub enum EmbeddingTable<'w> {
    /// `f32` rows.
    F32(Weights<'w, f32>),
    /// `float16` rows, widened as they are read.
    F16(Weights<'w, f16>),
    /// `float16` rows read from the packed weight of the tied output projection (`k` = the
    /// width, `n` = the vocabulary: row `t` of the table is column `t` of the panels), widened
    /// as they are read. The memory is the projection's.
    F16Panels(PackedB<Weights<'w, f16>, f16>),
}

impl EmbeddingTable<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            EmbeddingTable::F32(values) => values.len(),
            EmbeddingTable::F16(values) => values.len(),
            EmbeddingTable::F16Panels(panels) => panels.k() * panels.n(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the elements (for panels, the packed weight's, padding included).
    pub fn bytes(&self) -> usize {
        match self {
            EmbeddingTable::F32(values) => values.bytes(),
            EmbeddingTable::F16(values) => values.bytes(),
            EmbeddingTable::F16Panels(panels) => core::mem::size_of_val(panels.as_slice()),
        }
    }

    /// Whether the rows are read from the output projection's packed weight (whose bytes are
    /// the projection's).
    pub fn is_projection_panels(&self) -> bool {
        matches!(self, EmbeddingTable::F16Panels(_))
    }

    /// Element `j` of row `token`, widened to `f32`, or `None` outside the table
    /// (`width` values a row).
    pub fn get(&self, token: usize, j: usize, width: usize) -> Option<f32> {
        if j >= width {
            return None;
        }
        match self {
            EmbeddingTable::F32(values) => values.as_slice().get(token * width + j).copied(),
            EmbeddingTable::F16(values) => {
                values.as_slice().get(token * width + j).map(|h| h.to_f32())
            }
            EmbeddingTable::F16Panels(panels) => panels.get(j, token).map(f16::to_f32),
        }
    }

    /// The elements, if they are `f32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            EmbeddingTable::F32(values) => Some(values.as_slice()),
            EmbeddingTable::F16(_) | EmbeddingTable::F16Panels(_) => None,
        }
    }

    /// Whether `self` and `other` are the same elements in memory (one table read by two
    /// layers).
    pub fn same_as(&self, other: &EmbeddingTable<'_>) -> bool {
        match (self, other) {
            (EmbeddingTable::F32(a), EmbeddingTable::F32(b)) => a.same_as(b),
            (EmbeddingTable::F16(a), EmbeddingTable::F16(b)) => a.same_as(b),
            (EmbeddingTable::F16Panels(a), EmbeddingTable::F16Panels(b)) => {
                a.storage().same_as(b.storage())
            }
            _ => false,
        }
    }

    /// `out[j] = table[at + j] · scale` for every `j` of `out`; false (nothing written) when
    /// the range lies outside the table.
    fn scaled(&self, at: usize, scale: f32, out: &mut [f32]) -> bool {
        let end = at + out.len();
        match self {
            EmbeddingTable::F32(values) => match values.as_slice().get(at..end) {
                Some(row) => {
                    for (o, &e) in out.iter_mut().zip(row) {
                        *o = e * scale;
                    }
                    true
                }
                None => false,
            },
            EmbeddingTable::F16(values) => match values.as_slice().get(at..end) {
                Some(row) => {
                    for (o, &e) in out.iter_mut().zip(row) {
                        *o = e.to_f32() * scale;
                    }
                    true
                }
                None => false,
            },
            EmbeddingTable::F16Panels(panels) => {
                let width = panels.k();
                let token = at / width.max(1);
                if !at.is_multiple_of(width.max(1)) || out.len() != width || token >= panels.n() {
                    return false;
                }
                for (kk, o) in out.iter_mut().enumerate() {
                    *o = panels.get(kk, token).map_or(0.0, f16::to_f32) * scale;
                }
                true
            }
        }
    }
}

/// `out[i] = N(table[token_i] · scale + positions[offset + position_i])`, `N` optional.
#[derive(Clone, Debug)]
pub struct Embedding<'w> {
    table: EmbeddingTable<'w>,
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
        Embedding::with_table(EmbeddingTable::F32(table.into()), width, scale)
    }

    /// [`Embedding::new`] over a `float16` table.
    pub fn new_f16(table: impl Into<Weights<'w, f16>>, width: usize, scale: f32) -> Embedding<'w> {
        Embedding::with_table(EmbeddingTable::F16(table.into()), width, scale)
    }

    /// [`Embedding::new`] over `table`, whichever its type.
    pub fn with_table(table: EmbeddingTable<'w>, width: usize, scale: f32) -> Embedding<'w> {
        Embedding {
            table,
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
    pub fn table(&self) -> &EmbeddingTable<'w> {
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

    /// Bytes of the table (when not shared, and not the output projection's panels), the
    /// positions and the norm.
    pub fn bytes(&self, count_table: bool) -> usize {
        let own_table = count_table && !self.table.is_projection_panels();
        let table = if own_table { self.table.bytes() } else { 0 };
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
        for (i, (&token, row)) in tokens.iter().zip(out.chunks_exact_mut(d)).enumerate() {
            if !self.table.scaled(token as usize * d, self.scale, row) {
                return Err(KernelError::InvalidArgument(
                    "token outside the embedding table",
                ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_float16_table_embeds_as_its_f32_widening() {
        let (vocab, d) = (5, 8);
        let halves: Vec<f16> = (0..vocab * d)
            .map(|i| f16::from_f32(i as f32 * 0.37 - 3.1))
            .collect();
        let wide: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        let positions: Vec<f32> = (0..3 * d).map(|i| i as f32 * 0.01).collect();
        let f32_table = Embedding::new(&wide[..], d, 1.5).with_positions(&positions[..], 0);
        let f16_table = Embedding::new_f16(&halves[..], d, 1.5).with_positions(&positions[..], 0);
        assert_eq!(f16_table.vocab(), vocab);
        assert_eq!(f16_table.bytes(true), vocab * d * 2 + positions.len() * 4);
        assert!(f16_table.table().as_f32().is_none());
        let tokens = [4, 0, 2];
        let (mut a, mut b) = (vec![0.0; 3 * d], vec![1.0; 3 * d]);
        f32_table
            .forward(Isa::scalar(), &tokens, 0, true, &mut a)
            .unwrap();
        f16_table
            .forward(Isa::scalar(), &tokens, 0, true, &mut b)
            .unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
        assert!(f16_table
            .forward(Isa::scalar(), &[5], 0, true, &mut b)
            .is_err());

        // The same rows read from the panels of a projection packing the table.
        let len = tessel_kernels::gemm::packed_len_of::<f16>(d, vocab).unwrap();
        let mut storage = vec![f16::ZERO; len];
        let view = tessel_kernels::View::new(&halves, vocab, d, d).unwrap();
        PackedB::<_, f16>::from_nk(&mut storage[..], view).unwrap();
        let panels = PackedB::from_packed(Weights::Borrowed(&storage[..]), d, vocab).unwrap();
        let table = EmbeddingTable::F16Panels(panels);
        assert_eq!(table.len(), vocab * d);
        assert!(table.is_projection_panels() && table.as_f32().is_none());
        let from_panels = Embedding::with_table(table, d, 1.5).with_positions(&positions[..], 0);
        assert_eq!(from_panels.vocab(), vocab);
        assert_eq!(from_panels.bytes(true), positions.len() * 4);
        let mut c = vec![2.0; 3 * d];
        from_panels
            .forward(Isa::scalar(), &tokens, 0, true, &mut c)
            .unwrap();
        assert_eq!(bits(&a), bits(&c));
        assert!(from_panels
            .forward(Isa::scalar(), &[5], 0, true, &mut c)
            .is_err());
        for t in 0..vocab {
            for j in 0..d {
                let want = f16_table.table().get(t, j, d);
                assert_eq!(from_panels.table().get(t, j, d), want);
            }
        }
        assert_eq!(from_panels.table().get(vocab, 0, d), None);
    }
}
