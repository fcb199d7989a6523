//! int8 storage of a [`Linear`] layer ([`WeightType::Int8`]).
//!
//! The weight is symmetric int8 with one `f32` scale per output channel, CTranslate2's layout
//! ([`PackedI8`]): quantised at load from any float type (`scale = 127 / max |w|` per channel,
//! `q = round(w · scale)`), or taken as it is from CTranslate2's `int8` variables and their
//! `weight_scale` ([`Linear::from_ct2_int8`], nothing dequantised). At run time each row of the
//! activations is quantised on its own (dynamic, symmetric, no offset: `d = max |x| / 127`),
//! the products are summed exactly in `i32` and the bias, activation and residual are applied
//! in `f32` by the same epilogue as the float weights (see [`tessel_kernels::gemm::int8`]).
//!
//! # Error bound
//!
//! Per product `|x·w - x̂·ŵ| <= |x|·e_w + |w|·e_x + e_x·e_w` with `e_x <= max|x_row| / 254` and
//! `e_w <= max|w_channel| / 254`, so one output `y_j = Σ_p x_p w_jp` moves by at most
//! `(‖x‖₁ · max|w_j| + max|x| · ‖w_j‖₁) / 254` (plus a second-order term); for rows and channels
//! without outliers this is about `2/254 ≈ 0.8 %` of `‖x‖₁ · max|w_j|`, and the errors of
//! different terms are independent, so the typical error is far smaller. The model-level drift
//! this gives is bounded and tested on the golden fixtures (`tests/tests/suite/int8_accuracy.rs`).
//!
//! The quantised rows need scratch ([`scratch`]), which [`super::scratch`] includes whatever
//! the weight type, so a plan made from the config alone covers int8 layers too.
//!
//! int8 rows must not overlap (`x_stride >= in_features`); Whisper's convolution stem, which
//! reads overlapping windows, keeps float weights ([`WeightType::for_conv_stem`]).

use tessel_kernels::gemm::int8::{gemm_i8, gemm_i8_scratch, PackedI8};
#[cfg(feature = "std")]
use tessel_kernels::gemm::{int8::packed_i8_len, Element};
use tessel_kernels::ScratchSpec;

#[cfg(feature = "std")]
use super::LinearError;
use super::{GemmFn, Linear, Packed, PackedWeight, WeightType};
#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;
use crate::storage::Weights;

/// A packed int8 weight in fresh aligned storage.
pub(super) type PackedInt8<'w> = PackedI8<Weights<'w, i8>>;

/// Quantises an `n × k` (`nn.Linear`) weight of element type `S` per output channel.
#[cfg(feature = "std")]
pub(super) fn quantize<'w, S: Element>(
    weight: &[S],
    n: usize,
    k: usize,
) -> Result<PackedInt8<'w>, LinearError> {
    let storage = AlignedBuf::zeros(packed_i8_len(k, n)?)?;
    owned(PackedI8::quantize_nk(storage, weight, n, k, k)?)
}

/// The same packed weight, held as the layer's own [`Weights`].
#[cfg(feature = "std")]
fn owned<'w>(packed: PackedI8<AlignedBuf<i8>>) -> Result<PackedInt8<'w>, LinearError> {
    let (k, n) = (packed.k(), packed.n());
    Ok(PackedI8::from_packed(
        Weights::Owned(packed.into_inner()),
        k,
        n,
    )?)
}

impl<'w> Packed<'w> for PackedInt8<'w> {
    type Elem = i8;
    const GEMM: GemmFn<Self> = gemm_i8;

    fn parts(&self) -> (usize, usize, &Weights<'_, i8>) {
        (PackedI8::k(self), PackedI8::n(self), self.storage())
    }

    fn weight_type(&self) -> WeightType {
        WeightType::Int8
    }

    #[cfg(feature = "std")]
    fn with_values(&self, weights: Weights<'w, i8>) -> Option<PackedWeight<'w>> {
        let packed = PackedI8::from_packed(weights, PackedI8::k(self), PackedI8::n(self)).ok()?;
        Some(PackedWeight::I8(packed))
    }
}

/// Scratch of the int8 GEMM for up to `rows` rows of depth `in_features`: the quantised rows
/// and their factors (the same at every level and thread count).
pub(super) fn scratch(rows: usize, in_features: usize) -> ScratchSpec {
    gemm_i8_scratch(rows, in_features)
}

impl<'w> Linear<'w> {
    /// From CTranslate2's int8 variables, kept as they are: `weight` is `[out × in]` row-major
    /// `int8` (no `-128`), `weight_scale` has `out` finite positive values with
    /// `w ≈ q / scale`, `bias` has `out` elements. Stored as [`WeightType::Int8`].
    #[cfg(feature = "std")]
    pub fn from_ct2_int8(
        out_features: usize,
        in_features: usize,
        weight: &[i8],
        weight_scale: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Linear<'w>, LinearError> {
        super::check_shape(out_features, in_features, weight.len(), bias)?;
        let (n, k) = (out_features, in_features);
        let storage = AlignedBuf::zeros(packed_i8_len(k, n)?)?;
        let packed = owned(PackedI8::from_ct2(storage, weight, weight_scale, n, k)?)?;
        Linear::owning_bias(PackedWeight::I8(packed), bias)
    }

    /// The int8 weight, when the layer stores one (tests read its values and scales).
    pub fn int8_weight(&self) -> Option<&PackedInt8<'w>> {
        match &self.weight {
            PackedWeight::I8(b) => Some(b),
            _ => None,
        }
    }
}

impl WeightType {
    /// The storage of a convolution stem's weights when the model's linear layers are stored
    /// as `self`: the same, except that int8 (whose kernel quantises whole, non-overlapping
    /// rows) keeps `f32` for the stem's overlapping windows.
    pub fn for_conv_stem(self) -> WeightType {
        match self {
            WeightType::Int8 => WeightType::F32,
            other => other,
        }
    }
}
