//! Writing CTranslate2 `model.bin` files: edited copies of fixtures for error tests, and the
//! conversions of the published-layout rows (`published_ct2`).

use std::io::Write;

use tessel_model::load::ct2::{Dtype, ModelBin};

/// One stored variable: name, shape, dtype, little-endian bytes.
pub type Entry = (String, Vec<usize>, Dtype, Vec<u8>);

fn string(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    out.write_all(&(s.len() as u16 + 1).to_le_bytes())?;
    out.write_all(s.as_bytes())?;
    out.write_all(&[0])
}

/// Serialises variables and aliases in the `model.bin` layout of `version` (spec revision 7;
/// item sizes instead of dtype ids before version 4).
pub fn write(version: u32, spec: &str, vars: &[Entry], aliases: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    let header = Header {
        version,
        spec,
        revision: 7,
    };
    let vars = vars
        .iter()
        .map(|(name, shape, dtype, data)| Ok((name.as_str(), &shape[..], *dtype, data.clone())));
    write_into(&mut out, &header, vars, aliases).expect("writing to memory");
    out
}

/// What precedes a `model.bin`'s variables.
pub struct Header<'a> {
    /// Binary version.
    pub version: u32,
    /// Spec name (versions 2 and later).
    pub spec: &'a str,
    /// Spec revision (versions 2 and later).
    pub revision: u32,
}

/// A variable to write: name, shape, dtype and its bytes, or why they could not be made.
pub type Variable<'a> = std::io::Result<(&'a str, &'a [usize], Dtype, Vec<u8>)>;

/// Writes a `model.bin` of `header`'s layout to `out`, each variable's bytes made as it is
/// written (so that a file of gigabytes needs one variable's bytes at a time).
pub fn write_into<'a>(
    out: &mut impl Write,
    header: &Header<'_>,
    vars: impl ExactSizeIterator<Item = Variable<'a>>,
    aliases: &[(String, String)],
) -> std::io::Result<()> {
    out.write_all(&header.version.to_le_bytes())?;
    if header.version >= 2 {
        string(out, header.spec)?;
        out.write_all(&header.revision.to_le_bytes())?;
    }
    out.write_all(&(vars.len() as u32).to_le_bytes())?;
    for var in vars {
        let (name, shape, dtype, data) = var?;
        string(out, name)?;
        out.write_all(&[shape.len() as u8])?;
        for d in shape {
            out.write_all(&(*d as u32).to_le_bytes())?;
        }
        let id = if header.version >= 4 {
            dtype.id()
        } else {
            dtype.size() as u8
        };
        out.write_all(&[id])?;
        out.write_all(&(data.len() as u32).to_le_bytes())?;
        out.write_all(&data)?;
    }
    if header.version >= 3 {
        out.write_all(&(aliases.len() as u32).to_le_bytes())?;
        for (a, t) in aliases {
            string(out, a)?;
            string(out, t)?;
        }
    }
    Ok(())
}

/// The stored variables and the aliases of a parsed file.
pub fn entries(file: &ModelBin<'_>) -> (Vec<Entry>, Vec<(String, String)>) {
    let mut vars = Vec::new();
    let mut aliases = Vec::new();
    for (name, v) in &file.variables {
        if &v.canonical == name {
            vars.push((name.clone(), v.shape.clone(), v.dtype, v.data.to_vec()));
        } else {
            aliases.push((name.clone(), v.canonical.clone()));
        }
    }
    (vars, aliases)
}

/// `model_bin` rewritten after `edit` of its variables and aliases.
pub fn edited(
    model_bin: &[u8],
    edit: impl FnOnce(&mut Vec<Entry>, &mut Vec<(String, String)>),
) -> Vec<u8> {
    let file = tessel_model::load::ct2::parse(model_bin).expect("fixture parses");
    let (mut vars, mut aliases) = entries(&file);
    edit(&mut vars, &mut aliases);
    write(file.version, &file.spec, &vars, &aliases)
}
