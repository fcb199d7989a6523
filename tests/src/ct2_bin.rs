//! Writing CTranslate2 `model.bin` files, to make edited copies of fixtures for error tests.

use tessel_model::load::ct2::{Dtype, ModelBin};

/// One stored variable: name, shape, dtype, little-endian bytes.
pub type Entry = (String, Vec<usize>, Dtype, Vec<u8>);

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Serialises variables and aliases in the `model.bin` layout of `version` (spec revision 7;
/// item sizes instead of dtype ids before version 4).
pub fn write(version: u32, spec: &str, vars: &[Entry], aliases: &[(String, String)]) -> Vec<u8> {
    let mut out = version.to_le_bytes().to_vec();
    if version >= 2 {
        string(&mut out, spec);
        out.extend_from_slice(&7u32.to_le_bytes());
    }
    out.extend_from_slice(&(vars.len() as u32).to_le_bytes());
    for (name, shape, dtype, data) in vars {
        string(&mut out, name);
        out.push(shape.len() as u8);
        for d in shape {
            out.extend_from_slice(&(*d as u32).to_le_bytes());
        }
        let id = match dtype {
            Dtype::F32 => 0,
            Dtype::I8 => 1,
            Dtype::I16 => 2,
            Dtype::I32 => 3,
            Dtype::F16 => 4,
            Dtype::Bf16 => 5,
        };
        out.push(if version >= 4 { id } else { dtype.size() as u8 });
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    if version >= 3 {
        out.extend_from_slice(&(aliases.len() as u32).to_le_bytes());
        for (a, t) in aliases {
            string(&mut out, a);
            string(&mut out, t);
        }
    }
    out
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
