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
use crate::load::source::{cast_le, Tensor};
use crate::load::{out_of_memory, LoadError};

/// The file's variables, recording which ones the mapping used.
pub(super) struct Vars<'f, 'a> {
    pub(super) file: &'f ModelBin<'a>,
    pub(super) used: BTreeSet<String>,
}

impl<'f, 'a> Vars<'f, 'a> {
    /// The variables of `file`, none read yet.
    pub(super) fn new(file: &'f ModelBin<'a>) -> Vars<'f, 'a> {
        Vars {
            file,
            used: BTreeSet::new(),
        }
    }

    pub(super) fn get(&mut self, name: &str) -> Option<&'f Variable<'a>> {
        let v = self.file.variables.get(name)?;
        self.used.insert(name.to_owned());
        Some(v)
    }

    /// The variable `name`, which must have `shape`.
    fn shaped(&mut self, name: &str, shape: &[usize]) -> Result<&'f Variable<'a>, Ct2Error> {
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
        Ok(v)
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
        let v = self.shaped(name, shape)?;
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
        let v = self.shaped(name, shape)?;
        let len = v.len();
        let total = len.saturating_add(extra);
        let mut table = AlignedBuf::zeros(total).map_err(out_of_memory(name))?;
        let out = &mut table.as_mut_slice()[..len];
        let finite = match v.dtype {
            Dtype::F32 => widen(v.data, out, f32::from_le_bytes),
            Dtype::F16 => widen_f16(v.data, out),
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

    /// A finite `float16` tensor of `shape` in aligned memory, as stored (one copy of its
    /// bytes, no widening). Non-finite values are an error.
    pub(super) fn table_f16(
        &mut self,
        name: &str,
        shape: &[usize],
    ) -> Result<AlignedBuf<f16>, Ct2Error> {
        let v = self.shaped(name, shape)?;
        if v.dtype != Dtype::F16 || v.data.len() != 2 * v.len() {
            return Err(Ct2Error::UnsupportedDtype {
                name: name.to_owned(),
                dtype: v.dtype,
            });
        }
        let mut table = AlignedBuf::<f16>::zeros(v.len()).map_err(out_of_memory(name))?;
        let out = table.as_mut_slice();
        let mut finite = true;
        if cfg!(target_endian = "little") {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
            bytes.copy_from_slice(v.data);
            for x in out.iter() {
                finite &= x.to_bits() & 0x7c00 != 0x7c00;
            }
        } else {
            for (x, b) in out.iter_mut().zip(v.data.chunks_exact(2)) {
                *x = f16::from_bits(u16::from_le_bytes([b[0], b[1]]));
                finite &= x.is_finite();
            }
        }
        if !finite {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(table)
    }

    /// The type `name` is stored in, if the file has it.
    pub(super) fn dtype(&self, name: &str) -> Option<Dtype> {
        self.file.variables.get(name).map(|v| v.dtype)
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

    /// Refuses the file if the mapping of `model` ("Transformer", "Whisper") has not read one
    /// of its variables (or aliases), naming the first by name.
    pub(super) fn check_all_used(&self, model: &str) -> Result<(), Ct2Error> {
        match self.file.variables.keys().find(|n| !self.used.contains(*n)) {
            Some(unused) => Err(Ct2Error::UnsupportedFeature {
                feature: format!("a variable tessel's {model} does not use"),
                variable: unused.clone(),
            }),
            None => Ok(()),
        }
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

/// [`widen`] for `float16`: with F16C eight values per instruction (exact, as the scalar
/// conversion), finiteness read from the exponent bits.
fn widen_f16(bytes: &[u8], out: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has F16C and AVX (detected just above).
        return unsafe { widen_f16_f16c(bytes, out) };
    }
    widen(bytes, out, |b| {
        f16::from_bits(u16::from_le_bytes(b)).to_f32()
    })
}

/// [`widen_f16`] with `vcvtph2ps`.
///
/// # Safety
/// The CPU must have F16C and AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx")]
unsafe fn widen_f16_f16c(bytes: &[u8], out: &mut [f32]) -> bool {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let n = out.len().min(bytes.len() / 2);
    let whole = n - n % 8;
    let mut finite = true;
    for (src, dst) in bytes[..2 * whole]
        .chunks_exact(16)
        .zip(out[..whole].chunks_exact_mut(8))
    {
        // SAFETY: 16 bytes read from `src` and 8 floats written to `dst`, both exactly that
        // long; unaligned load and store.
        unsafe {
            let halves = _mm_loadu_si128(src.as_ptr().cast::<__m128i>());
            _mm256_storeu_ps(dst.as_mut_ptr(), _mm256_cvtph_ps(halves));
        }
        for pair in src.chunks_exact(2) {
            finite &= u16::from_le_bytes([pair[0], pair[1]]) & 0x7c00 != 0x7c00;
        }
    }
    let tail = widen(&bytes[2 * whole..2 * n], &mut out[whole..n], |b| {
        f16::from_bits(u16::from_le_bytes(b)).to_f32()
    });
    finite && tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `values` as little-endian `float16` bytes.
    fn bytes(values: &[f16]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect()
    }

    #[test]
    fn float16_tables_widen_exactly_and_refuse_any_non_finite_value() {
        // Every bit pattern but the non-finite ones, as 8-wide vectors and a 5-value tail.
        let finite: Vec<f16> = (0..=u16::MAX)
            .map(f16::from_bits)
            .filter(|v| v.is_finite())
            .collect();
        let len = finite.len() / 8 * 8 - 3;
        let mut out = vec![0.0f32; len];
        assert!(widen_f16(&bytes(&finite[..len]), &mut out));
        for (x, v) in out.iter().zip(&finite) {
            assert_eq!(x.to_bits(), v.to_f32().to_bits(), "{v}");
        }
        for bad in [f16::INFINITY, f16::NEG_INFINITY, f16::NAN] {
            for at in [0, 7, 8, 20, 22] {
                let mut values = vec![f16::from_f32(0.5); 23];
                values[at] = bad;
                let mut out = vec![0.0f32; 23];
                assert!(!widen_f16(&bytes(&values), &mut out), "{bad} at {at}");
            }
        }
    }
}
