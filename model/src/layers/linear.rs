//! Linear layers: a weight packed once at load into the GEMM's panel layout, stored as `f32`,
//! `f16`, `bf16` or `int8` ([`WeightType`]), and the fused bias/activation/residual epilogue.
//!
//! Activations and accumulation are `f32` whatever the weight type: 16-bit weights halve the
//! bytes a decode step reads (decoding at batch 1 is bound by reading the weights) and are
//! widened exactly in registers. With [`WeightType::Bf16Dot`] the activations are also rounded
//! to `bf16` so AVX-512 BF16's dot-product instruction can run (where the CPU has it; elsewhere
//! it behaves as [`WeightType::Bf16`]). [`WeightType::Int8`] stores symmetric int8 weights with
//! one scale per output channel and quantises the activations per row as it runs (`int8`
//! submodule, `linear_int8.rs`). What a layer does with its weight is written once, over a
//! private `Packed` trait that says what sets each weight type apart.

#[cfg(feature = "std")]
use serde::{Deserialize, Serialize};
use tessel_kernels::activation::Activation;
use tessel_kernels::error::check_dim;
use tessel_kernels::gemm::Parallel;
use tessel_kernels::gemm::{self, bf16, f16, Element, PackedB};
use tessel_kernels::{Isa, KernelError, ScratchSpec, View, ViewMut};

use super::Run;
#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;
use crate::aligned::AllocError;
#[cfg(feature = "std")]
use crate::storage::pool::PooledWeight;
#[cfg(feature = "std")]
use crate::storage::PoolSlice;
use crate::storage::Weights;
#[cfg(feature = "std")]
use std::sync::Arc;

#[path = "linear_int8.rs"]
mod int8;

/// How the weights of the linear layers are stored in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "kebab-case"))]
pub enum WeightType {
    /// 32-bit floats (the default): the file's values exactly.
    #[default]
    F32,
    /// IEEE half precision (values rounded to nearest even on load unless stored so).
    F16,
    /// bfloat16 (values rounded to nearest even on load unless stored so).
    Bf16,
    /// bfloat16 weights, and activations rounded to bfloat16 inside each product so AVX-512
    /// BF16 `vdpbf16ps` can run where the CPU has it.
    Bf16Dot,
    /// Symmetric int8 with one `f32` scale per output channel (CTranslate2's layout),
    /// activations quantised per row at run time, exact `i32` sums.
    Int8,
}

impl WeightType {
    /// Every weight type, in the order of their names.
    pub const ALL: [WeightType; 5] = [
        WeightType::F32,
        WeightType::F16,
        WeightType::Bf16,
        WeightType::Bf16Dot,
        WeightType::Int8,
    ];

    /// The name used on the command line and in reports: `f32`, `f16`, `bf16`, `bf16-dot`,
    /// `int8`.
    pub const fn name(self) -> &'static str {
        match self {
            WeightType::F32 => "f32",
            WeightType::F16 => "f16",
            WeightType::Bf16 => "bf16",
            WeightType::Bf16Dot => "bf16-dot",
            WeightType::Int8 => "int8",
        }
    }
}

impl core::fmt::Display for WeightType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`WeightType`].
#[cfg(feature = "std")]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown weight type `{0}` (expected f32, f16, bf16, bf16-dot or int8)")]
pub struct UnknownWeightType(pub String);

#[cfg(feature = "std")]
impl core::str::FromStr for WeightType {
    type Err = UnknownWeightType;

    fn from_str(name: &str) -> Result<WeightType, UnknownWeightType> {
        WeightType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| UnknownWeightType(name.to_owned()))
    }
}

/// A packed weight in one of the storage types, owned or borrowed ([`Weights`]): the one
/// dispatch point of every linear layer.
#[derive(Clone, Debug)]
pub enum PackedWeight<'w> {
    /// `f32` panels.
    F32(PackedB<Weights<'w, f32>>),
    /// IEEE half panels.
    F16(PackedB<Weights<'w, f16>, f16>),
    /// bfloat16 panels (with or without the bf16 dot-product mode).
    Bf16(PackedB<Weights<'w, bf16>, bf16>),
    /// Symmetric int8 panels with one scale per output channel.
    I8(int8::PackedInt8<'w>),
}

/// A linear layer `y = x·W + b`, its weight packed once at load into the GEMM's panel layout
/// (valid at every ISA level), 64-byte aligned when owned.
#[derive(Clone, Debug)]
pub struct Linear<'w> {
    weight: PackedWeight<'w>,
    bias: Option<Weights<'w, f32>>,
}

impl<'w> Linear<'w> {
    /// A layer over an already packed weight and an optional bias of `out_features` values.
    pub fn from_parts(
        weight: PackedWeight<'w>,
        bias: Option<Weights<'w, f32>>,
    ) -> Result<Linear<'w>, KernelError> {
        let layer = Linear { weight, bias };
        if let Some(b) = &layer.bias {
            check_dim("linear bias elements", layer.out_features(), b.len())?;
        }
        Ok(layer)
    }

    /// The packed weight.
    pub fn weight(&self) -> &PackedWeight<'w> {
        &self.weight
    }

    /// The bias, if any.
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_ref().map(Weights::as_slice)
    }

    /// From PyTorch's layout: `weight` is `[out × in]` row-major, `bias` has `out` elements;
    /// stored as `f32`.
    #[cfg(feature = "std")]
    pub fn from_out_in(
        out_features: usize,
        in_features: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Linear<'w>, LinearError> {
        Linear::packed(WeightType::F32, out_features, in_features, weight, bias)
    }

    /// From PyTorch's layout, `weight` given in any element type (`f32`, `f16`, `bf16`: for
    /// example a 16-bit tensor straight from a file) and stored as `storage` (converted
    /// exactly when it widens, rounded to nearest even when it narrows, quantised per output
    /// channel for int8).
    #[cfg(feature = "std")]
    pub fn packed<S: Element>(
        storage: WeightType,
        out_features: usize,
        in_features: usize,
        weight: &[S],
        bias: Option<&[f32]>,
    ) -> Result<Linear<'w>, LinearError> {
        check_shape(out_features, in_features, weight.len(), bias)?;
        let (n, k) = (out_features, in_features);
        let weight = match storage {
            WeightType::F32 => PackedWeight::F32(pack(weight, n, k)?),
            WeightType::F16 => PackedWeight::F16(pack(weight, n, k)?),
            WeightType::Bf16 => PackedWeight::Bf16(pack(weight, n, k)?),
            WeightType::Bf16Dot => PackedWeight::Bf16(pack(weight, n, k)?.with_bf16_dot(true)),
            WeightType::Int8 => PackedWeight::I8(int8::quantize(weight, n, k)?),
        };
        Linear::owning_bias(weight, bias)
    }

    /// A layer over `weight` and a copy of `bias` it owns.
    #[cfg(feature = "std")]
    fn owning_bias(
        weight: PackedWeight<'w>,
        bias: Option<&[f32]>,
    ) -> Result<Linear<'w>, LinearError> {
        let bias = bias.map(AlignedBuf::from_slice).transpose()?;
        Ok(Linear {
            weight,
            bias: bias.map(Weights::Owned),
        })
    }

    /// How the weight is stored.
    pub fn weight_type(&self) -> WeightType {
        self.weight.get().weight_type()
    }

    /// Input width `k`.
    pub fn in_features(&self) -> usize {
        self.weight.get().k()
    }

    /// Output width `n`.
    pub fn out_features(&self) -> usize {
        self.weight.get().n()
    }

    /// Whether a bias is added.
    pub fn has_bias(&self) -> bool {
        self.bias.is_some()
    }

    /// Bytes of packed weight and bias: what one pass over the layer reads.
    pub fn bytes(&self) -> usize {
        self.weight.get().bytes() + self.bias.as_ref().map_or(0, Weights::bytes)
    }
}

#[cfg(feature = "std")]
impl PooledWeight for Linear<'_> {
    fn weight_on_small_pages(&self) -> Option<&[u8]> {
        self.weight.get().small_page_bytes()
    }

    fn move_weight_to_pool(&mut self, pool: &Arc<AlignedBuf<u8>>, offset: usize) {
        if let Some(weight) = self.weight.get().moved_to(pool, offset) {
            self.weight = weight;
        }
    }
}

#[cfg(feature = "std")]
impl<'w> Linear<'w> {
    /// The packed `float16` weight as a handle to the same elements, for an embedding tied to
    /// this layer to read its rows from ([`crate::layers::EmbeddingTable::F16Panels`]): an
    /// owned weight is first moved into memory shared by reference counting (no copy).
    /// `Ok(None)`, the layer unchanged, for the other weight types.
    pub(crate) fn share_f16_panels(
        &mut self,
    ) -> Result<Option<PackedB<Weights<'w, f16>, f16>>, KernelError> {
        let PackedWeight::F16(packed) = &self.weight else {
            return Ok(None);
        };
        let (k, n) = (packed.k(), packed.n());
        if !matches!(packed.storage(), Weights::Owned(_)) {
            return PackedB::from_packed(packed.storage().clone(), k, n).map(Some);
        }
        let empty = PackedWeight::F16(PackedB::from_packed(Weights::Borrowed(&[]), 0, 0)?);
        let PackedWeight::F16(packed) = core::mem::replace(&mut self.weight, empty) else {
            return Ok(None);
        };
        let storage = match packed.into_inner() {
            Weights::Owned(buf) => Weights::Shared(Arc::new(buf)),
            other => other,
        };
        // The same elements and shape the layer held: neither call can fail.
        let handle = PackedB::from_packed(storage.clone(), k, n)?;
        self.weight = PackedWeight::F16(PackedB::from_packed(storage, k, n)?);
        Ok(Some(handle))
    }
}

/// Checks that a weight of `weight_len` elements is `out_features × in_features` and that
/// `bias`, if any, has `out_features` elements.
#[cfg(feature = "std")]
fn check_shape(
    out_features: usize,
    in_features: usize,
    weight_len: usize,
    bias: Option<&[f32]>,
) -> Result<(), KernelError> {
    let len = out_features
        .checked_mul(in_features)
        .ok_or(KernelError::Overflow("linear weight"))?;
    check_dim("linear weight elements", len, weight_len)?;
    if let Some(b) = bias {
        check_dim("linear bias elements", out_features, b.len())?;
    }
    Ok(())
}

/// Packs an `n × k` (`nn.Linear`) weight of element type `S` as `T`, in fresh aligned storage.
#[cfg(feature = "std")]
fn pack<'w, S: Element, T: Element + bytemuck::Pod>(
    weight: &[S],
    n: usize,
    k: usize,
) -> Result<PackedB<Weights<'w, T>, T>, LinearError> {
    let storage = AlignedBuf::zeros(gemm::packed_len_of::<T>(k, n)?)?;
    let packed = PackedB::from_nk(storage, View::new(weight, n, k, k)?)?;
    Ok(PackedB::from_packed(
        Weights::Owned(packed.into_inner()),
        k,
        n,
    )?)
}

/// Why a [`Linear`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LinearError {
    /// The weight or bias does not have the stated shape.
    #[error(transparent)]
    Shape(#[from] KernelError),
    /// The packed weight could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// Scratch [`Linear::forward`] needs for up to `rows` rows of an `in_features → out_features`
/// layer run on `threads` threads, whatever its weight type (the float GEMM's packing buffers,
/// none for up to 16 rows; the int8 GEMM's quantised rows).
pub fn scratch(
    rows: usize,
    in_features: usize,
    out_features: usize,
    threads: usize,
) -> ScratchSpec {
    gemm::gemm_scratch(rows, in_features, out_features, threads)
        .or(int8::scratch(rows, in_features))
}

impl Linear<'_> {
    /// `out[r] = activation(x[r]·W + b) + residual[r]` for every row `r` of `x`: `x` is
    /// `rows × in_features()` (its rows may overlap), `out` and `residual` (when given)
    /// `rows × out_features()`. `out` is only written. `scratch` holds [`scratch`] for these
    /// sizes.
    pub fn forward(
        &self,
        run: Run<'_>,
        x: View<'_>,
        out: ViewMut<'_>,
        activation: Activation,
        residual: Option<View<'_>>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let epilogue = gemm::Epilogue {
            bias: self.bias(),
            activation,
            residual,
        };
        self.weight.get().gemm(Operands {
            run,
            a: x,
            c: out,
            epilogue: &epilogue,
            scratch,
        })
    }
}

/// What a linear layer does with its packed weight, written once over what sets the weight
/// types apart ([`Packed`]). [`PackedWeight::get`] is the one place that picks the type.
trait Weight<'w> {
    /// Input width `k`.
    fn k(&self) -> usize;
    /// Output width `n`.
    fn n(&self) -> usize;
    /// How the weight is stored.
    fn weight_type(&self) -> WeightType;
    /// Bytes of the packed weight.
    fn bytes(&self) -> usize;
    /// `c = epilogue(a · W)`.
    fn gemm(&self, operands: Operands<'_>) -> Result<(), KernelError>;
    /// The packed bytes, when they are owned on small pages.
    #[cfg(feature = "std")]
    fn small_page_bytes(&self) -> Option<&[u8]>;
    /// The same weight read from byte `offset` of `pool`, if a copy of it is there.
    #[cfg(feature = "std")]
    fn moved_to(&self, pool: &Arc<AlignedBuf<u8>>, offset: usize) -> Option<PackedWeight<'w>>;
}

/// What a product `c = epilogue(a · W)` takes besides the weight `W`.
struct Operands<'a> {
    run: Run<'a>,
    a: View<'a>,
    c: ViewMut<'a>,
    epilogue: &'a gemm::Epilogue<'a>,
    scratch: &'a mut [f32],
}

/// A kernel's GEMM over the packed weight type `B`.
type GemmFn<B> = fn(
    Isa,
    View<'_>,
    &B,
    ViewMut<'_>,
    &gemm::Epilogue<'_>,
    &mut [f32],
    &dyn Parallel,
) -> Result<(), KernelError>;

/// A packed weight type of the kernels, held in the layer's [`Weights`]: the float panels
/// ([`PackedB`] of any [`FloatWeight`]) here, int8 in the `int8` submodule.
trait Packed<'w>: Sized {
    /// The stored element.
    type Elem: bytemuck::Pod;
    /// The GEMM that multiplies by it.
    const GEMM: GemmFn<Self>;
    /// Input width `k`, output width `n` and the packed values.
    fn parts(&self) -> (usize, usize, &Weights<'_, Self::Elem>);
    /// How the weight is stored.
    fn weight_type(&self) -> WeightType;
    /// The same weight (same `k`, `n` and mode) over the values `weights`.
    #[cfg(feature = "std")]
    fn with_values(&self, weights: Weights<'w, Self::Elem>) -> Option<PackedWeight<'w>>;
}

impl<'w, P: Packed<'w>> Weight<'w> for P {
    fn k(&self) -> usize {
        self.parts().0
    }

    fn n(&self) -> usize {
        self.parts().1
    }

    fn weight_type(&self) -> WeightType {
        Packed::weight_type(self)
    }

    fn bytes(&self) -> usize {
        self.parts().2.bytes()
    }

    fn gemm(&self, o: Operands<'_>) -> Result<(), KernelError> {
        (P::GEMM)(
            o.run.isa,
            o.a,
            self,
            o.c,
            o.epilogue,
            o.scratch,
            o.run.parallel,
        )
    }

    #[cfg(feature = "std")]
    fn small_page_bytes(&self) -> Option<&[u8]> {
        let storage = self.parts().2;
        storage
            .is_owned_on_small_pages()
            .then(|| bytemuck::cast_slice(storage.as_slice()))
    }

    #[cfg(feature = "std")]
    fn moved_to(&self, pool: &Arc<AlignedBuf<u8>>, offset: usize) -> Option<PackedWeight<'w>> {
        self.with_values(moved(pool, offset, self.parts().2.as_slice())?)
    }
}

impl<'w> PackedWeight<'w> {
    /// The weight's behaviour for its storage type.
    fn get(&self) -> &dyn Weight<'w> {
        match self {
            PackedWeight::F32(b) => b,
            PackedWeight::F16(b) => b,
            PackedWeight::Bf16(b) => b,
            PackedWeight::I8(b) => b,
        }
    }
}

/// The float element types a weight is stored as, and how [`PackedWeight`] holds each.
trait FloatWeight: Element + bytemuck::Pod {
    /// The storage type (without the bf16 dot-product mode).
    const TYPE: WeightType;
    /// Whether `packed` runs with AVX-512 BF16 dot products (only `bf16` can).
    fn dot(_packed: &PackedB<Weights<'_, Self>, Self>) -> bool {
        false
    }
    /// `packed` as a [`PackedWeight`], with the dot-product mode `dot` where it applies.
    #[cfg(feature = "std")]
    fn wrap(packed: PackedB<Weights<'_, Self>, Self>, dot: bool) -> PackedWeight<'_>;
}

impl FloatWeight for f32 {
    const TYPE: WeightType = WeightType::F32;
    #[cfg(feature = "std")]
    fn wrap(packed: PackedB<Weights<'_, f32>>, _: bool) -> PackedWeight<'_> {
        PackedWeight::F32(packed)
    }
}

impl FloatWeight for f16 {
    const TYPE: WeightType = WeightType::F16;
    #[cfg(feature = "std")]
    fn wrap(packed: PackedB<Weights<'_, f16>, f16>, _: bool) -> PackedWeight<'_> {
        PackedWeight::F16(packed)
    }
}

impl FloatWeight for bf16 {
    const TYPE: WeightType = WeightType::Bf16;
    fn dot(packed: &PackedB<Weights<'_, bf16>, bf16>) -> bool {
        packed.bf16_dot()
    }
    #[cfg(feature = "std")]
    fn wrap(packed: PackedB<Weights<'_, bf16>, bf16>, dot: bool) -> PackedWeight<'_> {
        PackedWeight::Bf16(packed.with_bf16_dot(dot))
    }
}

impl<'w, T: FloatWeight> Packed<'w> for PackedB<Weights<'w, T>, T> {
    type Elem = T;
    const GEMM: GemmFn<Self> = gemm::gemm;

    fn parts(&self) -> (usize, usize, &Weights<'_, T>) {
        (PackedB::k(self), PackedB::n(self), self.storage())
    }

    fn weight_type(&self) -> WeightType {
        if T::dot(self) {
            WeightType::Bf16Dot
        } else {
            T::TYPE
        }
    }

    #[cfg(feature = "std")]
    fn with_values(&self, weights: Weights<'w, T>) -> Option<PackedWeight<'w>> {
        let packed = PackedB::from_packed(weights, PackedB::k(self), PackedB::n(self)).ok()?;
        Some(T::wrap(packed, T::dot(self)))
    }
}

/// `old`'s copy at byte `offset` of `pool`, if it holds the same bytes.
#[cfg(feature = "std")]
fn moved<T: bytemuck::Pod>(
    pool: &Arc<AlignedBuf<u8>>,
    offset: usize,
    old: &[T],
) -> Option<Weights<'static, T>> {
    let slice = PoolSlice::new(Arc::clone(pool), offset, old.len())?;
    let same =
        bytemuck::cast_slice::<T, u8>(slice.as_slice()) == bytemuck::cast_slice::<T, u8>(old);
    same.then_some(Weights::Pooled(slice))
}
