//! CTranslate2's `model.bin`: a little-endian container of named, typed, shaped variables.
//!
//! Layout (binary versions 1 to 6), every integer little-endian:
//!
//! | field | encoding | versions |
//! |---|---|---|
//! | binary version | `u32` | all |
//! | spec name, spec revision | string, `u32` | ≥ 2 |
//! | variable count | `u32` | all |
//! | per variable: name | string | all |
//! | rank, dims | `u8`, `rank × u32` | all |
//! | dtype | `u8` id: 0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16 | ≥ 4 |
//! | item size | `u8` (1 i8, 2 i16, 4 f32) | < 4 |
//! | byte count, bytes | `u32`, the raw little-endian values | all |
//! | alias count, per alias: alias name, target name | `u32`, string, string | ≥ 3 |
//!
//! A string is a `u16` length counting a terminating NUL, then that many bytes (UTF-8, NUL
//! last). Every length is checked against the input before it is used: any byte string either
//! parses or yields a [`Ct2Error`], never a panic.

use std::collections::BTreeMap;

use super::Ct2Error;

/// Newest binary version this reader understands.
pub const MAX_BINARY_VERSION: u32 = 6;

/// Element type of a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE binary32.
    F32,
    /// Signed 8-bit integer (quantised weights with a `weight_scale`, or attributes).
    I8,
    /// Signed 16-bit integer (quantised weights with a `weight_scale`, or attributes).
    I16,
    /// Signed 32-bit integer (attributes).
    I32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    Bf16,
}

impl Dtype {
    /// The id `model.bin` stores it as (binary version 4 and later).
    pub fn id(self) -> u8 {
        match self {
            Dtype::F32 => 0,
            Dtype::I8 => 1,
            Dtype::I16 => 2,
            Dtype::I32 => 3,
            Dtype::F16 => 4,
            Dtype::Bf16 => 5,
        }
    }

    fn from_id(id: u8) -> Option<Dtype> {
        Some(match id {
            0 => Dtype::F32,
            1 => Dtype::I8,
            2 => Dtype::I16,
            3 => Dtype::I32,
            4 => Dtype::F16,
            5 => Dtype::Bf16,
            _ => return None,
        })
    }

    fn from_item_size(size: u8) -> Option<Dtype> {
        Some(match size {
            1 => Dtype::I8,
            2 => Dtype::I16,
            4 => Dtype::F32,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::I8 => 1,
            Dtype::I16 | Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
        }
    }
}

/// One variable, borrowing its bytes from the file.
#[derive(Clone, Debug)]
pub struct Variable<'a> {
    /// Dimensions (empty for a scalar attribute).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: Dtype,
    /// Raw little-endian values, `shape.product() × dtype.size()` bytes.
    pub data: &'a [u8],
    /// The stored name this variable's bytes belong to (differs from its own name for an alias).
    pub canonical: String,
}

impl Variable<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values as `f32`: floats converted exactly, integers as their value (unscaled).
    pub fn to_f32(&self) -> Vec<f32> {
        let d = self.data;
        match self.dtype {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::I32 => d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            Dtype::I16 => d
                .chunks_exact(2)
                .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])))
                .collect(),
            Dtype::F16 => d
                .chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::Bf16 => d
                .chunks_exact(2)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::I8 => d.iter().map(|&b| f32::from(b as i8)).collect(),
        }
    }
}

/// A parsed `model.bin`.
#[derive(Clone, Debug)]
pub struct ModelBin<'a> {
    /// Binary format version.
    pub version: u32,
    /// Spec name (`TransformerSpec`, …; empty before version 2).
    pub spec: String,
    /// Spec revision (1 before version 2).
    pub revision: u32,
    /// Every variable and alias by name.
    pub variables: BTreeMap<String, Variable<'a>>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Ct2Error> {
        let end = self
            .offset
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Ct2Error::Truncated {
                what: what.to_owned(),
                offset: self.offset,
            });
        };
        let out = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(out)
    }

    fn u8(&mut self, what: &str) -> Result<u8, Ct2Error> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, Ct2Error> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, Ct2Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: &str) -> Result<String, Ct2Error> {
        let offset = self.offset;
        let len = usize::from(self.u16(what)?);
        let raw = self.take(len, what)?;
        let text = match raw.split_last() {
            Some((0, text)) => std::str::from_utf8(text).ok(),
            _ => None,
        };
        text.map(str::to_owned).ok_or_else(|| Ct2Error::BadString {
            what: what.to_owned(),
            offset,
        })
    }
}

/// Parses a whole `model.bin`; aliases are resolved into [`ModelBin::variables`].
pub fn parse(bytes: &[u8]) -> Result<ModelBin<'_>, Ct2Error> {
    let mut r = Reader { bytes, offset: 0 };
    let (version, spec, revision) = r.header()?;
    let count = r.u32("variable count")?;
    let mut variables = BTreeMap::new();
    for _ in 0..count {
        let (name, variable) = r.variable(version)?;
        insert(&mut variables, name, variable)?;
    }
    if version >= 3 {
        r.aliases(&mut variables)?;
    }
    r.finish()?;
    Ok(ModelBin {
        version,
        spec,
        revision,
        variables,
    })
}

/// The stages of [`parse`], in the order of the file.
impl<'a> Reader<'a> {
    /// The binary version (refused when unsupported), then the spec name and revision (from
    /// version 2 on; an empty name and revision 1 before).
    fn header(&mut self) -> Result<(u32, String, u32), Ct2Error> {
        let version = self.u32("binary version")?;
        if version == 0 || version > MAX_BINARY_VERSION {
            return Err(Ct2Error::UnsupportedVersion(version));
        }
        let (spec, revision) = if version >= 2 {
            (self.string("spec name")?, self.u32("spec revision")?)
        } else {
            (String::new(), 1)
        };
        Ok((version, spec, revision))
    }

    /// One variable: its name, shape, dtype and bytes, the byte count checked against the
    /// shape and dtype.
    fn variable(&mut self, version: u32) -> Result<(String, Variable<'a>), Ct2Error> {
        let name = self.string("variable name")?;
        let rank = self.u8(&name)?;
        let mut shape = Vec::with_capacity(usize::from(rank));
        for _ in 0..rank {
            shape.push(self.u32(&name)? as usize);
        }
        let dtype = self.dtype(version, &name)?;
        let byte_count = self.u32(&name)? as usize;
        let expected = shape
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
        if expected != Some(byte_count) {
            return Err(Ct2Error::ByteCount {
                name,
                shape,
                bytes: byte_count,
            });
        }
        let data = self.take(byte_count, &name)?;
        let variable = Variable {
            shape,
            dtype,
            data,
            canonical: name.clone(),
        };
        Ok((name, variable))
    }

    /// The dtype of variable `name`: an id from version 4 on, an item size before.
    fn dtype(&mut self, version: u32, name: &str) -> Result<Dtype, Ct2Error> {
        let code = self.u8(name)?;
        let dtype = if version >= 4 {
            Dtype::from_id(code)
        } else {
            Dtype::from_item_size(code)
        };
        dtype.ok_or_else(|| Ct2Error::UnknownDtype {
            name: name.to_owned(),
            id: code,
        })
    }

    /// The aliases (version 3 on), each added to `variables` as a copy of its target.
    fn aliases(&mut self, variables: &mut BTreeMap<String, Variable<'a>>) -> Result<(), Ct2Error> {
        let count = self.u32("alias count")?;
        for _ in 0..count {
            let alias = self.string("alias name")?;
            let target = self.string("alias target")?;
            let Some(variable) = variables.get(&target).cloned() else {
                return Err(Ct2Error::DanglingAlias { alias, target });
            };
            insert(variables, alias, variable)?;
        }
        Ok(())
    }

    /// Refuses bytes after the last alias (or variable).
    fn finish(&self) -> Result<(), Ct2Error> {
        if self.offset != self.bytes.len() {
            return Err(Ct2Error::TrailingBytes {
                offset: self.offset,
                len: self.bytes.len(),
            });
        }
        Ok(())
    }
}

/// Adds `variable` as `name`, refusing a name already there.
fn insert<'a>(
    variables: &mut BTreeMap<String, Variable<'a>>,
    name: String,
    variable: Variable<'a>,
) -> Result<(), Ct2Error> {
    if variables.contains_key(&name) {
        return Err(Ct2Error::Duplicate(name));
    }
    variables.insert(name, variable);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Dtype;

    #[test]
    fn dtype_ids_round_trip() {
        for id in 0..=5 {
            assert_eq!(Dtype::from_id(id).map(Dtype::id), Some(id));
        }
        assert_eq!(Dtype::from_id(6), None);
    }
}
