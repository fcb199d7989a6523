//! The decoder's self-attention cache and the encoder memory projected for cross-attention.
//!
//! Self-attention keys and values live in `[layer][beam][position][width]` (one K and one V
//! block): a step appends each beam's new row in place, and a beam's history is one strided
//! run that attention reads directly. Beam search reorders beams by copying the used rows
//! within the cache, staging the rows a copy would overwrite before they are read.
//! Cross-attention K/V live in `[layer][source position][2 · width]` (K then V), projected
//! once per source and shared by every beam.

use half::f16;
use tessel_kernels::error::check_dim;
use tessel_kernels::KernelError;
use tessel_kernels::View;

/// The shape of a self-attention cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Decoder layers.
    pub layers: usize,
    /// Beams held.
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

    /// Elements of one layer (every beam).
    pub fn layer_len(&self) -> usize {
        self.beams * self.beam_len()
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

    /// Makes beam `i` continue the history of beam `parents[i]` for the first `used`
    /// positions of every layer. `stage` holds at least `parents.len() · positions · width`
    /// elements; parents must be `< layout.beams` (checked by the caller).
    pub fn reorder(&mut self, parents: &[u32], used: usize, stage: &mut [f32]) {
        let beam = self.layout.beam_len();
        let used = used * self.layout.width;
        let moved = |slot: usize| slot < parents.len() && parents[slot] as usize != slot;
        let layer_len = self.layout.layer_len();
        for block in [&mut *self.k, &mut *self.v] {
            for layer in block.chunks_exact_mut(layer_len) {
                // Sources that are themselves overwritten are staged first.
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if moved(b) && moved(p) {
                        stage[b * beam..b * beam + used]
                            .copy_from_slice(&layer[p * beam..p * beam + used]);
                    }
                }
                for (b, &p) in parents.iter().enumerate() {
                    let p = p as usize;
                    if !moved(b) {
                        continue;
                    }
                    let dst = b * beam;
                    if moved(p) {
                        layer[dst..dst + used].copy_from_slice(&stage[dst..dst + used]);
                    } else {
                        layer.copy_within(p * beam..p * beam + used, dst);
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
    /// Stores the first row of `k` and of `v` at `position` of `beam`.
    pub fn write(
        &mut self,
        beam: usize,
        position: usize,
        k: View<'_>,
        v: View<'_>,
    ) -> Result<(), KernelError> {
        let width = self.layout.width;
        if beam >= self.layout.beams || position >= self.layout.positions {
            return Err(KernelError::InvalidArgument("cache position out of range"));
        }
        let (Some(k), Some(v)) = (k.row(0), v.row(0)) else {
            return Err(KernelError::InvalidArgument("no key or value row to cache"));
        };
        check_dim("cached key width", width, k.len())?;
        check_dim("cached value width", width, v.len())?;
        let at = beam * self.layout.beam_len() + position * width;
        self.k[at..at + width].copy_from_slice(k);
        self.v[at..at + width].copy_from_slice(v);
        Ok(())
    }

    /// Beam `beam`'s keys and values at positions `0..len`.
    pub fn beam(&self, beam: usize, len: usize) -> Result<(View<'_>, View<'_>), KernelError> {
        if beam >= self.layout.beams || len > self.layout.positions {
            return Err(KernelError::InvalidArgument("cache beam out of range"));
        }
        let start = beam * self.layout.beam_len();
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

/// The encoder memory projected to cross-attention K/V, `[layer][position][K | V]`, as
/// [`MemoryType`] says.
pub struct CrossKv<'a> {
    data: &'a mut [f32],
    positions: usize,
    width: usize,
    kind: MemoryType,
}

impl<'a> CrossKv<'a> {
    /// Memory for `positions` source positions of `width`-wide K and V per layer, stored as
    /// `kind` in `data` (an `f32` arena region of [`CrossKv::elements`]).
    pub fn new(data: &'a mut [f32], positions: usize, width: usize, kind: MemoryType) -> Self {
        CrossKv {
            data,
            positions,
            width,
            kind,
        }
    }

    /// `f32` elements of the arena region `layers` layers take.
    pub fn elements(layers: usize, positions: usize, width: usize, kind: MemoryType) -> usize {
        let values = layers * positions * 2 * width;
        match kind {
            MemoryType::F32 => values,
            MemoryType::F16 => values.div_ceil(2),
        }
    }

    /// `f32` elements [`CrossKv::store`]'s caller stages projected rows in before rounding
    /// them: at least one `width`-wide K|V row when they are stored as `f16`, none as `f32`
    /// (the projection writes them in place).
    pub fn staging_elements(width: usize, kind: MemoryType) -> usize {
        match kind {
            MemoryType::F32 => 0,
            MemoryType::F16 => 2 * width,
        }
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
    /// rounded to `f16`.
    pub fn store(
        &mut self,
        isa: tessel_kernels::Isa,
        layer: usize,
        first: usize,
        rows: &[f32],
    ) -> Result<(), KernelError> {
        let len = self.layer_len();
        let halves: &mut [f16] = bytemuck::cast_slice_mut(&mut *self.data);
        let start = layer * len + first * 2 * self.width;
        let dst = halves
            .get_mut(start..start + rows.len())
            .filter(|_| first * 2 * self.width + rows.len() <= len)
            .ok_or(KernelError::InvalidArgument(
                "memory rows outside the layer",
            ))?;
        tessel_kernels::convert::narrow_to_f16(isa, rows, dst)
    }

    /// Layer `layer`'s keys and values at positions `0..positions`.
    pub fn layer(&self, layer: usize, positions: usize) -> Result<MemoryKv<'_>, KernelError> {
        let len = self.layer_len();
        let stride = 2 * self.width;
        Ok(match self.kind {
            MemoryType::F32 => {
                let data = &self.data[layer * len..(layer + 1) * len];
                let kv =
                    View::new(data, self.positions, stride, stride)?.slice_rows(0, positions)?;
                MemoryKv::F32(
                    kv.slice_cols(0, self.width)?,
                    kv.slice_cols(self.width, self.width)?,
                )
            }
            MemoryType::F16 => {
                let halves: &[f16] = bytemuck::cast_slice(&*self.data);
                let data = &halves[layer * len..(layer + 1) * len];
                let kv =
                    View::new(data, self.positions, stride, stride)?.slice_rows(0, positions)?;
                MemoryKv::F16(
                    kv.slice_cols(0, self.width)?,
                    kv.slice_cols(self.width, self.width)?,
                )
            }
        })
    }
}
