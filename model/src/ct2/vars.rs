//! Access to the variables of a parsed `model.bin`: by name, as scalar attributes (scoped or
//! at the root, as older files kept them), as tensors in their stored type or converted to
//! `f32`, recording every name the mapping reads so that a variable nobody used can be
//! reported (a feature tessel would otherwise silently drop).

use std::borrow::Cow;
use std::collections::BTreeSet;

use half::{bf16, f16};

use super::binary::{Dtype, ModelBin, Variable};
use super::Ct2Error;
use crate::aligned::AlignedBuf;
use crate::weights::source::{cast_le, Tensor};
use crate::weights::{out_of_memory, LoadError};

/// The file's variables, recording which ones the mapping used.
pub(super) struct Vars<'f, 'a> {
    pub(super) file: &'f ModelBin<'a>,
    pub(super) used: BTreeSet<String>,
}

impl<'f, 'a> Vars<'f, 'a> {
    pub(super) fn get(&mut self, name: &str) -> Option<&'f Variable<'a>> {
        let v = self.file.variables.get(name)?;
        self.used.insert(name.to_owned());
        Some(v)
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.file.variables.contains_key(name)
    }

    /// The stored variable `name` is (itself, or the target of its alias).
    pub(super) fn canonical(&self, name: &str) -> Option<&'f str> {
        self.file.variables.get(name).map(|v| v.canonical.as_str())
    }

    /// A scalar attribute, looked up as `{scope}/{name}` then `{name}` (older files kept
    /// attributes at the root).
    pub(super) fn attribute(&mut self, scope: &str, name: &str) -> Result<Option<f32>, Ct2Error> {
        let scoped = format!("{scope}/{name}");
        let key = if self.has(&scoped) {
            scoped
        } else {
            name.to_owned()
        };
        let Some(v) = self.get(&key) else {
            return Ok(None);
        };
        if v.len() != 1 {
            return Err(Ct2Error::Attribute {
                name: key,
                reason: format!("expected a scalar, got shape {:?}", v.shape),
            });
        }
        Ok(v.to_f32().first().copied())
    }

    /// An attribute that must be absent or zero (a feature tessel does not implement).
    pub(super) fn require_off(
        &mut self,
        scope: &str,
        name: &str,
        feature: &str,
    ) -> Result<(), Ct2Error> {
        match self.attribute(scope, name)? {
            Some(v) if v != 0.0 => Err(Ct2Error::UnsupportedFeature {
                feature: feature.to_owned(),
                variable: format!("{scope}/{name}"),
            }),
            _ => Ok(()),
        }
    }

    /// A float tensor of `shape` in the type it is stored in; quantised weights are dequantised
    /// to `f32` with their `{prefix}/weight_scale`. Non-finite values are an error.
    pub(super) fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'a>, Ct2Error> {
        let v = self
            .get(name)
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))?;
        let tensor = match v.dtype {
            Dtype::F32 if v.shape == shape => Tensor::F32(cast_le(v.data, f32::from_le_bytes)),
            Dtype::F16 if v.shape == shape => {
                Tensor::F16(cast_le(v.data, |b| f16::from_bits(u16::from_le_bytes(b))))
            }
            Dtype::Bf16 if v.shape == shape => {
                Tensor::Bf16(cast_le(v.data, |b| bf16::from_bits(u16::from_le_bytes(b))))
            }
            _ => Tensor::F32(Cow::Owned(self.tensor(name, shape)?)),
        };
        if !tensor.all_finite() {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(tensor)
    }

    /// A float tensor of `shape`, converted to `f32` (quantised weights dequantised with their
    /// `{prefix}/weight_scale`).
    pub(super) fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, Ct2Error> {
        let v = self
            .get(name)
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))?;
        if v.shape != shape {
            return Err(Ct2Error::Shape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                got: v.shape.clone(),
            });
        }
        let mut values = v.to_f32();
        match v.dtype {
            Dtype::F32 | Dtype::F16 | Dtype::Bf16 => {}
            Dtype::I8 | Dtype::I16 => {
                let scale_name = match name.strip_suffix("weight") {
                    Some(prefix) => format!("{prefix}weight_scale"),
                    None => {
                        return Err(Ct2Error::UnsupportedDtype {
                            name: name.to_owned(),
                            dtype: v.dtype,
                        })
                    }
                };
                let scales = self
                    .get(&scale_name)
                    .ok_or_else(|| Ct2Error::Missing(scale_name.clone()))?
                    .to_f32();
                let rows = shape.first().copied().unwrap_or(1);
                let cols = values.len() / rows.max(1);
                let per_row = match scales.len() {
                    1 => false,
                    n if n == rows => true,
                    _ => {
                        return Err(Ct2Error::Shape {
                            name: scale_name,
                            expected: vec![rows],
                            got: vec![scales.len()],
                        })
                    }
                };
                for (r, row) in values.chunks_mut(cols.max(1)).enumerate() {
                    let s = if per_row { scales[r] } else { scales[0] };
                    if !(s.is_finite() && s != 0.0) {
                        return Err(Ct2Error::Attribute {
                            name: scale_name,
                            reason: format!("scale {s} is not finite and non-zero"),
                        });
                    }
                    row.iter_mut().for_each(|x| *x /= s);
                }
            }
            Dtype::I32 => {
                return Err(Ct2Error::UnsupportedDtype {
                    name: name.to_owned(),
                    dtype: v.dtype,
                })
            }
        }
        Ok(values)
    }

    /// A finite float tensor of `shape` as `f32` in aligned memory, followed by `extra` zero
    /// elements: float types are widened straight into the buffer (one pass over the stored
    /// bytes), quantised ones go through [`Vars::tensor`]. Non-finite values are an error.
    pub(super) fn table(
        &mut self,
        name: &str,
        shape: &[usize],
        extra: usize,
    ) -> Result<AlignedBuf, Ct2Error> {
        let v = self
            .get(name)
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))?;
        if v.shape != shape {
            return Err(Ct2Error::Shape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                got: v.shape.clone(),
            });
        }
        let len = v.len();
        let total = len.saturating_add(extra);
        let mut table = AlignedBuf::zeros(total).map_err(out_of_memory(name))?;
        let out = &mut table.as_mut_slice()[..len];
        let finite = match v.dtype {
            Dtype::F32 => widen(v.data, out, f32::from_le_bytes),
            Dtype::F16 => widen(v.data, out, |b| {
                f16::from_bits(u16::from_le_bytes(b)).to_f32()
            }),
            Dtype::Bf16 => widen(v.data, out, |b| {
                bf16::from_bits(u16::from_le_bytes(b)).to_f32()
            }),
            _ => {
                out.copy_from_slice(&self.tensor(name, shape)?);
                out.iter().all(|x| x.is_finite())
            }
        };
        if !finite {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(table)
    }

    pub(super) fn shape(&self, name: &str) -> Result<&'f [usize], Ct2Error> {
        self.file
            .variables
            .get(name)
            .map(|v| v.shape.as_slice())
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))
    }

    /// Rows (first dimension) of `name`, if the file has it.
    pub(super) fn rows(&self, name: &str) -> Option<usize> {
        self.file.variables.get(name)?.shape.first().copied()
    }

    /// The first variable (or alias) the mapping has not read, by name.
    pub(super) fn first_unused(&self) -> Option<&'f String> {
        self.file
            .variables
            .keys()
            .find(|name| !self.used.contains(*name))
    }
}

/// Decodes the little-endian values of `bytes` (`N` bytes each) into `out` as `f32`; whether
/// every value is finite.
fn widen<const N: usize>(bytes: &[u8], out: &mut [f32], decode: impl Fn([u8; N]) -> f32) -> bool {
    let mut finite = true;
    for (x, b) in out.iter_mut().zip(bytes.chunks_exact(N)) {
        *x = decode(b.try_into().unwrap_or([0; N]));
        finite &= x.is_finite();
    }
    finite
}
