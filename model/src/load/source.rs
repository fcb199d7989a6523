//! Where the loader's tensors come from: a safetensors file (`F32`, `F16` or `BF16` tensors,
//! borrowed from the mapped bytes whenever their alignment allows), seeded random values, or
//! zeros that record what was asked for.

use std::borrow::Cow;
use std::collections::HashSet;

use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use safetensors::{Dtype, SafeTensors};

use super::error::LoadError;

/// A tensor as stored: `f32` or one of the 16-bit float types.
pub(crate) enum Tensor<'a> {
    /// 32-bit floats.
    F32(Cow<'a, [f32]>),
    /// IEEE half precision.
    F16(Cow<'a, [f16]>),
    /// bfloat16.
    Bf16(Cow<'a, [bf16]>),
}

impl<'a> Tensor<'a> {
    /// The values as `f32` (exact for every stored type).
    pub fn into_f32(self) -> Cow<'a, [f32]> {
        match self {
            Tensor::F32(values) => values,
            Tensor::F16(values) => Cow::Owned(values.iter().map(|v| v.to_f32()).collect()),
            Tensor::Bf16(values) => Cow::Owned(values.iter().map(|v| v.to_f32()).collect()),
        }
    }

    /// The same values, owned.
    pub fn into_owned(self) -> Tensor<'static> {
        match self {
            Tensor::F32(v) => Tensor::F32(Cow::Owned(v.into_owned())),
            Tensor::F16(v) => Tensor::F16(Cow::Owned(v.into_owned())),
            Tensor::Bf16(v) => Tensor::Bf16(Cow::Owned(v.into_owned())),
        }
    }

    /// The tensors' values one after the other: in their type when they all share it, else
    /// as `f32` (exact).
    pub fn concat(parts: Vec<Tensor<'_>>) -> Tensor<'static> {
        let first = parts.first().map(Tensor::weight_type);
        let same = parts.iter().all(|t| Some(t.weight_type()) == first);
        match (same, parts.first()) {
            (true, Some(Tensor::F16(_))) => {
                Tensor::F16(parts.iter().flat_map(Tensor::f16_values).copied().collect())
            }
            (true, Some(Tensor::Bf16(_))) => Tensor::Bf16(
                parts
                    .iter()
                    .flat_map(Tensor::bf16_values)
                    .copied()
                    .collect(),
            ),
            _ => Tensor::F32(Cow::Owned(
                parts
                    .into_iter()
                    .flat_map(|t| t.into_f32().into_owned())
                    .collect(),
            )),
        }
    }

    /// The values of an `f16` tensor (none of another).
    fn f16_values(&self) -> &[f16] {
        match self {
            Tensor::F16(values) => values,
            _ => &[],
        }
    }

    /// The values of a `bf16` tensor (none of another).
    fn bf16_values(&self) -> &[bf16] {
        match self {
            Tensor::Bf16(values) => values,
            _ => &[],
        }
    }

    /// The weight type of the stored values.
    pub fn weight_type(&self) -> crate::layers::WeightType {
        match self {
            Tensor::F32(_) => crate::layers::WeightType::F32,
            Tensor::F16(_) => crate::layers::WeightType::F16,
            Tensor::Bf16(_) => crate::layers::WeightType::Bf16,
        }
    }

    /// Whether every value is finite.
    pub fn all_finite(&self) -> bool {
        match self {
            Tensor::F32(values) => values.iter().all(|v| v.is_finite()),
            Tensor::F16(values) => values.iter().all(|v| v.is_finite()),
            Tensor::Bf16(values) => values.iter().all(|v| v.is_finite()),
        }
    }
}

/// Supplies tensors by name and shape.
pub(crate) trait TensorSource {
    /// The tensor `name`, which must have exactly `shape`, as stored.
    fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'_>, LoadError>;

    /// The first (by name) tensor the source holds that was never asked for, if any.
    fn first_unused(&self) -> Option<String> {
        None
    }

    /// Refuses a source holding a tensor that was never asked for, naming the first by name.
    fn check_all_used(&self) -> Result<(), LoadError> {
        match self.first_unused() {
            Some(name) => Err(LoadError::Unexpected { name }),
            None => Ok(()),
        }
    }
}

/// The first of `names`, in sorted order, not in `used`.
fn first_unused<'a>(
    names: impl Iterator<Item = &'a String>,
    used: &HashSet<String>,
) -> Option<String> {
    names.filter(|n| !used.contains(*n)).min().cloned()
}

/// The tensors of a safetensors file, borrowed from its bytes.
pub(crate) struct SafetensorsSource<'a> {
    pub file: SafeTensors<'a>,
    pub used: HashSet<String>,
}

impl<'a> SafetensorsSource<'a> {
    /// The tensors of the safetensors file `bytes`, none asked for yet.
    pub fn parse(bytes: &'a [u8]) -> Result<SafetensorsSource<'a>, LoadError> {
        let file =
            SafeTensors::deserialize(bytes).map_err(|e| LoadError::Malformed(e.to_string()))?;
        Ok(SafetensorsSource {
            file,
            used: HashSet::new(),
        })
    }
}

impl TensorSource for SafetensorsSource<'_> {
    fn first_unused(&self) -> Option<String> {
        first_unused(self.file.names().into_iter(), &self.used)
    }

    fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'_>, LoadError> {
        let view = self.file.tensor(name).map_err(|_| LoadError::Missing {
            name: name.to_owned(),
        })?;
        self.used.insert(name.to_owned());
        if view.shape() != shape {
            return Err(LoadError::Shape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                got: view.shape().to_vec(),
            });
        }
        let bytes = view.data();
        match view.dtype() {
            Dtype::F32 => Ok(Tensor::F32(cast_le(bytes, f32::from_le_bytes))),
            Dtype::F16 => Ok(Tensor::F16(cast_le(bytes, |b| {
                f16::from_bits(u16::from_le_bytes(b))
            }))),
            Dtype::BF16 => Ok(Tensor::Bf16(cast_le(bytes, |b| {
                bf16::from_bits(u16::from_le_bytes(b))
            }))),
            other => Err(LoadError::Dtype {
                name: name.to_owned(),
                dtype: format!("{other:?}"),
            }),
        }
    }
}

/// Little-endian `bytes` as `T`: borrowed in place when aligned on a little-endian target,
/// decoded element by element otherwise. `bytes.len()` is a multiple of `N` (safetensors
/// checked the byte length against the shape and dtype).
pub(crate) fn cast_le<T: bytemuck::Pod, const N: usize>(
    bytes: &[u8],
    decode: impl Fn([u8; N]) -> T,
) -> Cow<'_, [T]> {
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(values) if cfg!(target_endian = "little") => Cow::Borrowed(values),
        _ => Cow::Owned(
            bytes
                .chunks_exact(N)
                .map(|c| decode(c.try_into().unwrap_or([0; N])))
                .collect(),
        ),
    }
}

/// Seeded weights in the style of PyTorch's initialisers: Xavier-uniform matrices, biases
/// uniform in `±1/√fan_in`, LayerNorm at identity, embeddings uniform with variance `1/d`.
pub(crate) struct RandomSource {
    rng: ChaCha8Rng,
    d_model: usize,
}

impl RandomSource {
    /// Values drawn from `seed` for a model of width `d_model`.
    pub fn new(seed: u64, d_model: usize) -> RandomSource {
        RandomSource {
            rng: ChaCha8Rng::seed_from_u64(seed),
            d_model,
        }
    }
}

impl TensorSource for RandomSource {
    fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'_>, LoadError> {
        let len: usize = shape.iter().product();
        let is_norm = name.contains("norm");
        if is_norm {
            let value = if name.ends_with("weight") { 1.0 } else { 0.0 };
            return Ok(Tensor::F32(Cow::Owned(vec![value; len])));
        }
        let bound = if name.contains("embed") || name.contains("_pos") {
            (3.0 / self.d_model as f32).sqrt()
        } else if shape.len() == 2 {
            (6.0 / (shape[0] + shape[1]) as f32).sqrt()
        } else {
            // A bias: fan_in is d_model or d_ff; d_model is the common case and keeps it small.
            1.0 / (self.d_model as f32).sqrt()
        };
        let rng = &mut self.rng;
        Ok(Tensor::F32(Cow::Owned(
            (0..len).map(|_| rng.gen_range(-bound..bound)).collect(),
        )))
    }
}

/// Zeros of every requested shape, recording the names and shapes asked for.
#[derive(Default)]
pub(crate) struct RecordingSource {
    pub requested: Vec<(String, Vec<usize>)>,
}

impl TensorSource for RecordingSource {
    fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'_>, LoadError> {
        self.requested.push((name.to_owned(), shape.to_vec()));
        Ok(Tensor::F32(Cow::Owned(vec![0.0; shape.iter().product()])))
    }
}
