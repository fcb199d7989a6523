//! The decoder's self-attention cache and the encoder memory projected for cross-attention.
//!
//! A session decodes up to `slots` sequences together, each with up to `beams` beams.
//! Self-attention keys and values live in `[layer][slot][beam][position][width]` (one K and
//! one V block): a step appends each beam's new row in place, and a beam's history is one
//! strided run that attention reads directly. Beam search reorders a slot's beams by copying
//! the used rows within the cache, staging the rows a copy would overwrite before they are
//! read. Cross-attention K/V live in `[slot][layer][source position][2 · width]` (K then V),
//! projected once per source and shared by the slot's beams.

use half::f16;
use tessel_kernels::error::check_dim;
use tessel_kernels::KernelError;
use tessel_kernels::View;

/// The shape of a self-attention cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Decoder layers.
    pub layers: usize,
    /// Sequences held.
    pub slots: usize,
    /// Beams held per sequence.
    pub beams: usize,
    /// Positions per beam.
    pub positions: usize,
    /// Values per row (`heads × d_head`).
    pub width: usize,
}

impl KvLayout {
    /// Elements of one beam's history.
    pub fn beam_len(&self) -> usize {
        self.positions * self.width
    }

    /// Elements of one sequence's beams in one layer.
    pub fn slot_len(&self) -> usize {
        self.beams * self.beam_len()
    }

    /// Elements of one layer (every sequence).
    pub fn layer_len(&self) -> usize {
        self.slots * self.slot_len()
    }

    /// Where beam `beam` of slot `slot` starts in a layer, if both are in range.
    fn beam_start(&self, slot: usize, beam: usize) -> Option<usize> {
        (slot < self.slots && beam < self.beams)
            .then(|| slot * self.slot_len() + beam * self.beam_len())
    }

    /// Elements of the K (or V) block of the whole cache.
    pub fn len(&self) -> usize {
        self.layers * self.layer_len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The whole self-attention cache over arena memory.
pub struct KvCache<'a> {
    k: &'a mut [f32],
    v: &'a mut [f32],
    layout: KvLayout,
}

impl<'a> KvCache<'a> {
    /// A cache of `layout` over `k` and `v` (each at least `layout.len()` long).
    pub fn new(k: &'a mut [f32], v: &'a mut [f32], layout: KvLayout) -> KvCache<'a> {
        KvCache { k, v, layout }
    }

    /// Layer `index`'s part of the cache.
    pub fn layer(&mut self, index: usize) -> LayerCache<'_> {
        let len = self.layout.layer_len();
        let at = index * len;
        LayerCache {
            k: &mut self.k[at..at + len],
            v: &mut self.v[at..at + len],
            layout: self.layout,
        }
    }

    /// Makes beam `i` of slot `slot` continue the history of its beam `parents[i]` for the
    /// first `used` positions of every layer. `differing(i, parents[i])` says how many of the
    /// last positions a moved beam must take (`None`: all `used`), when the caller knows the
    /// rest already agree. `stage` holds at least `parents.len() · positions · width` elements;
    /// `slot` must be `< layout.slots` and parents `< layout.beams` (checked by the caller).
    pub fn reorder(
        &mut self,
        slot: usize,
        parents: &[u32],
        used: usize,
        stage: &mut [f32],
        differing: &mut dyn FnMut(usize, usize) -> Option<usize>,
    ) {
        let (beam, width) = (self.layout.beam_len(), self.layout.width);
        let moved = |b: usize| b < parents.len() && parents[b] as usize != b;
        let (layer_len, slot_len) = (self.layout.layer_len(), self.layout.slot_len());
        // Each moved beam's span of elements to take: its differing positions, up to `used`.
        let span = |differing: &mut dyn FnMut(usize, usize) -> Option<usize>, b: usize| {
            let p = parents[b] as usize;
            let from = differing(b, p).map_or(0, |tail| used - tail.min(used));
            from * width..used * width
        };
        for block in [&mut *self.k, &mut *self.v] {
            for layer in block.chunks_exact_mut(layer_len) {
                let layer = &mut layer[slot * slot_len..(slot + 1) * slot_len];
                // Sources that are themselves overwritten are staged first.
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if moved(b) && moved(p) {
                        let span = span(differing, b);
                        let (dst, src) = (b * beam, p * beam);
                        stage[dst + span.start..dst + span.end]
                            .copy_from_slice(&layer[src + span.start..src + span.end]);
                    }
                }
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if !moved(b) {
                        continue;
                    }
                    let span = span(differing, b);
                    let (dst, src) = (b * beam, p * beam);
                    let to = dst + span.start..dst + span.end;
                    if moved(p) {
                        layer[to.clone()].copy_from_slice(&stage[to]);
                    } else {
                        layer.copy_within(src + span.start..src + span.end, to.start);
                    }
                }
            }
        }
    }
}

/// One layer's self-attention cache.
pub struct LayerCache<'a> {
    k: &'a mut [f32],
    v: &'a mut [f32],
    layout: KvLayout,
}

impl LayerCache<'_> {
    /// Stores the first row of `k` and of `v` at `position` of beam `beam` of slot `slot`.
    pub fn write(
        &mut self,
        (slot, beam): (usize, usize),
        position: usize,
        k: View<'_>,
        v: View<'_>,
    ) -> Result<(), KernelError> {
        let width = self.layout.width;
        let start = self.layout.beam_start(slot, beam);
        let Some(start) = start.filter(|_| position < self.layout.positions) else {
            return Err(KernelError::InvalidArgument("cache position out of range"));
        };
        let (Some(k), Some(v)) = (k.row(0), v.row(0)) else {
            return Err(KernelError::InvalidArgument("no key or value row to cache"));
        };
        check_dim("cached key width", width, k.len())?;
        check_dim("cached value width", width, v.len())?;
        let at = start + position * width;
        self.k[at..at + width].copy_from_slice(k);
        self.v[at..at + width].copy_from_slice(v);
        Ok(())
    }

    /// The keys and values of beam `beam` of slot `slot` at positions `0..len`.
    pub fn beam(
        &self,
        (slot, beam): (usize, usize),
        len: usize,
    ) -> Result<(View<'_>, View<'_>), KernelError> {
        let start = self.layout.beam_start(slot, beam);
        let Some(start) = start.filter(|_| len <= self.layout.positions) else {
            return Err(KernelError::InvalidArgument("cache beam out of range"));
        };
        let width = self.layout.width;
        Ok((
            View::new(&self.k[start..], len, width, width)?,
            View::new(&self.v[start..], len, width, width)?,
        ))
    }
}

/// How the projected encoder memory is stored: `f32`, or `f16` for half its bytes (the
/// cross-attention of every decoder step reads all of it, and it is the largest part of a
/// Whisper session's arena). `f16` rounds each key and value once, a relative change of at most
/// `2^-11`; scores and sums stay `f32`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryType {
    /// 4 bytes per element, exact.
    #[default]
    F32,
    /// 2 bytes per element.
    F16,
}

/// One layer's projected memory as attention reads it.
#[derive(Clone, Copy, Debug)]
pub enum MemoryKv<'a> {
    /// `f32` keys and values.
    F32(View<'a>, View<'a>),
    /// `f16` keys and values.
    F16(View<'a, f16>, View<'a, f16>),
}

/// The shape of the projected encoder memory of every sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossLayout {
    /// Sequences held.
    pub slots: usize,
    /// Decoder layers with cross-attention K/V.
    pub layers: usize,
    /// Source positions per sequence.
    pub positions: usize,
    /// Width of K (and of V).
    pub width: usize,
    /// How the values are stored.
    pub kind: MemoryType,
}

impl CrossLayout {
    /// Values of one layer of one sequence.
    fn layer_len(&self) -> usize {
        self.positions * 2 * self.width
    }

    /// Values of one sequence.
    fn slot_len(&self) -> usize {
        self.layers * self.layer_len()
    }

    /// `f32` elements of the arena region it takes (16-bit values two to an element, each
    /// sequence's part starting on a whole element).
    pub fn elements(&self) -> usize {
        self.slots * self.slot_elements()
    }

    /// `f32` elements of one sequence's part.
    fn slot_elements(&self) -> usize {
        match self.kind {
            MemoryType::F32 => self.slot_len(),
            MemoryType::F16 => self.slot_len().div_ceil(2),
        }
    }
}

/// One sequence's encoder memory projected to cross-attention K/V,
/// `[layer][position][K | V]`, as [`MemoryType`] says.
pub struct CrossKv<'a> {
    data: &'a mut [f32],
    positions: usize,
    width: usize,
    kind: MemoryType,
}

impl<'a> CrossKv<'a> {
    /// Slot `slot`'s memory in `data` (an `f32` arena region of [`CrossLayout::elements`]);
    /// `None` when the slot is out of range or the region too short.
    pub fn slot(data: &'a mut [f32], layout: CrossLayout, slot: usize) -> Option<Self> {
        let len = layout.slot_elements();
        let data = data.get_mut(slot.checked_mul(len)?..)?.get_mut(..len)?;
        (slot < layout.slots).then_some(CrossKv {
            data,
            positions: layout.positions,
            width: layout.width,
            kind: layout.kind,
        })
    }

    /// `f32` elements [`CrossKv::store`]'s caller stages projected rows in: at least one
    /// `width`-wide K|V row (one source's `f32` memory is projected in place instead).
    pub fn staging_elements(width: usize) -> usize {
        2 * width
    }

    /// The storage type.
    pub fn kind(&self) -> MemoryType {
        self.kind
    }

    /// Values of one layer.
    fn layer_len(&self) -> usize {
        self.positions * 2 * self.width
    }

    /// Layer `layer`'s K|V rows as `f32`, to be written by the projection (row stride
    /// `2 · width`); `None` when they are stored as `f16` ([`CrossKv::store`]).
    pub fn layer_mut(&mut self, layer: usize) -> Option<&mut [f32]> {
        let len = self.layer_len();
        match self.kind {
            MemoryType::F32 => self.data.get_mut(layer * len..(layer + 1) * len),
            MemoryType::F16 => None,
        }
    }

    /// Stores `rows` projected K|V rows (`2 · width` each) of layer `layer` from row `first` on,
    /// as they are stored: copied, or rounded to `f16`.
    pub fn store(
        &mut self,
        isa: tessel_kernels::Isa,
        layer: usize,
        first: usize,
        rows: &[f32],
    ) -> Result<(), KernelError> {
        let len = self.layer_len();
        let start = layer * len + first * 2 * self.width;
        let range =
            Some(start..start + rows.len()).filter(|_| first * 2 * self.width + rows.len() <= len);
        let outside = KernelError::InvalidArgument("memory rows outside the layer");
        match self.kind {
            MemoryType::F32 => {
                let dst = range.and_then(|r| self.data.get_mut(r)).ok_or(outside)?;
                dst.copy_from_slice(rows);
                Ok(())
            }
            MemoryType::F16 => {
                let halves: &mut [f16] = bytemuck::cast_slice_mut(&mut *self.data);
                let dst = range.and_then(|r| halves.get_mut(r)).ok_or(outside)?;
                tessel_kernels::convert::narrow_to_f16(isa, rows, dst)
            }
        }
    }
}

/// Every sequence's projected encoder memory, as the decoder reads it.
#[derive(Clone, Copy)]
pub struct CrossMemory<'a> {
    data: &'a [f32],
    layout: CrossLayout,
}

impl<'a> CrossMemory<'a> {
    /// The memory of `layout` in `data` (an `f32` arena region of [`CrossLayout::elements`]).
    pub fn new(data: &'a [f32], layout: CrossLayout) -> Self {
        CrossMemory { data, layout }
    }

    /// The keys and values of layer `layer` of slot `slot` at positions `0..positions`.
    pub fn layer(
        &self,
        slot: usize,
        layer: usize,
        positions: usize,
    ) -> Result<MemoryKv<'a>, KernelError> {
        let out_of_range = KernelError::InvalidArgument("memory slot or layer out of range");
        let layout = self.layout;
        if slot >= layout.slots || layer >= layout.layers {
            return Err(out_of_range);
        }
        let elements = layout.slot_elements();
        let slot_data = self
            .data
            .get(slot * elements..(slot + 1) * elements)
            .ok_or(out_of_range)?;
        let (len, width) = (layout.layer_len(), layout.width);
        let stride = 2 * width;
        Ok(match layout.kind {
            MemoryType::F32 => {
                let data = &slot_data[layer * len..(layer + 1) * len];
                let kv =
                    View::new(data, layout.positions, stride, stride)?.slice_rows(0, positions)?;
                MemoryKv::F32(kv.slice_cols(0, width)?, kv.slice_cols(width, width)?)
            }
            MemoryType::F16 => {
                let halves: &[f16] = bytemuck::cast_slice(slot_data);
                let data = &halves[layer * len..(layer + 1) * len];
                let kv =
                    View::new(data, layout.positions, stride, stride)?.slice_rows(0, positions)?;
                MemoryKv::F16(kv.slice_cols(0, width)?, kv.slice_cols(width, width)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: KvLayout = KvLayout {
        layers: 2,
        slots: 2,
        beams: 4,
        positions: 6,
        width: 3,
    };

    /// A cache whose every element names its layer, slot, beam and position, except that
    /// beams 1 and 3 of slot 1 hold beam 2's first 4 positions (a shared history).
    fn filled() -> Vec<f32> {
        let mut cache = vec![0.0; LAYOUT.layers * LAYOUT.layer_len()];
        for (i, value) in cache.iter_mut().enumerate() {
            let column = i % LAYOUT.width;
            let position = i / LAYOUT.width % LAYOUT.positions;
            let beam = i / LAYOUT.beam_len() % LAYOUT.beams;
            let slot = i / LAYOUT.slot_len() % LAYOUT.slots;
            let layer = i / LAYOUT.layer_len();
            let shared = slot == 1 && (beam == 1 || beam == 3) && position < 4;
            let beam = if shared { 2 } else { beam };
            let name = (((layer * 10 + slot) * 10 + beam) * 10 + position) * 10 + column;
            *value = name as f32;
        }
        cache
    }

    /// Slot 1's cache after its beams continue `parents` as a full copy of `used` positions.
    fn copied(cache: &[f32], parents: &[u32], used: usize) -> Vec<f32> {
        let mut out = cache.to_vec();
        let (beam, slot_len) = (LAYOUT.beam_len(), LAYOUT.slot_len());
        for layer in 0..LAYOUT.layers {
            let base = layer * LAYOUT.layer_len() + slot_len;
            for (b, &p) in parents.iter().enumerate() {
                let (dst, src) = (base + b * beam, base + p as usize * beam);
                let n = used * LAYOUT.width;
                out[dst..dst + n].copy_from_slice(&cache[src..src + n]);
            }
        }
        out
    }

    /// [`filled`] K and V caches after slot 1's beams continue `parents` over `used`
    /// positions, as [`KvCache::reorder`] copies them with `differing`.
    fn reordered(
        parents: &[u32],
        used: usize,
        differing: &mut dyn FnMut(usize, usize) -> Option<usize>,
    ) -> (Vec<f32>, Vec<f32>) {
        let (mut k, mut v) = (filled(), filled());
        let mut stage = vec![f32::NAN; LAYOUT.slot_len()];
        KvCache::new(&mut k, &mut v, LAYOUT).reorder(1, parents, used, &mut stage, differing);
        (k, v)
    }

    #[test]
    fn reordering_only_the_differing_positions_equals_a_full_copy() {
        // Beam 0 takes beam 2's history (a cycle with beam 2 taking beam 3's: both staged),
        // beams 1 and 3 take beam 2's and differ only in their last position, beam 2 takes
        // beam 3's: they agree on the first 4 of the 5 used positions.
        let parents = [2, 2, 3, 2];
        let used = 5;
        let mut differing = |b: usize, p: usize| match (b, p) {
            (1 | 3, 2) | (2, 3) => Some(1),
            _ => None,
        };
        let (k, v) = reordered(&parents, used, &mut differing);
        let expected = copied(&filled(), &parents, used);
        assert_eq!(k, expected);
        assert_eq!(v, expected);
    }

    #[test]
    fn without_a_lineage_every_used_position_is_copied() {
        let parents = [1, 0, 0, 3];
        let (k, v) = reordered(&parents, 6, &mut |_, _| None);
        let expected = copied(&filled(), &parents, 6);
        assert_eq!(k, expected);
        assert_eq!(v, expected);
    }

    #[test]
    fn positions_the_lineage_calls_shared_are_left_as_they_are() {
        // Beam 0 takes beam 1 (which does not agree with it): told that only the last of 5
        // positions differs, it keeps its own first 4.
        let parents = [1, 1, 2, 3];
        let before = filled();
        let (k, v) = reordered(&parents, 5, &mut |_, _| Some(1));
        let full = copied(&before, &parents, 5);
        let row = LAYOUT.layer_len() + LAYOUT.slot_len();
        let (kept, taken) = (
            row..row + 4 * LAYOUT.width,
            row + 4 * LAYOUT.width..row + 15,
        );
        assert_eq!(k[kept.clone()], before[kept.clone()]);
        assert_ne!(k[kept.clone()], full[kept]);
        assert_eq!(k[taken.clone()], full[taken]);
        assert_eq!(k, v);
    }
}
