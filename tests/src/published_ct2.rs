//! The CTranslate2 conversion of a published-layout row, rebuilt at test time byte for byte.
//!
//! `tools/make_published_ct2.py` converts a row's regenerated Hugging Face directory with
//! CTranslate2's own converter and records, in the row's `ct2.json`, how each variable of the
//! converter's `model.bin` derives from the Hugging Face tensors (element ranges and zeros
//! concatenated, inline bytes, or a sinusoidal position table by formula) with the SHA-256 of its bytes, and
//! the converter's `config.json` and vocabularies. [`convert`] rebuilds the directory from the
//! generated `model.safetensors` and checks every digest: each variable is the converter's,
//! bit for bit, but the position tables the script reports within an ulp of it (transformers'
//! float32 sines, which the formula rounds correctly).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tessel_model::load::ct2::Dtype;
use tessel_model::load::hf::bart::marian_positions;

use crate::ct2_bin::{write_into, Header, Variable};

/// A row's rebuilt CTranslate2 directory; dropping it deletes the files.
pub struct Converted {
    dir: PathBuf,
    runtime: Option<Runtime>,
}

/// What CTranslate2 itself computed on the conversion (text rows), as the script recorded it.
#[derive(Clone, Debug)]
pub struct Runtime {
    /// The teacher-forced step it was run at (the reference's prompt past the decoder start).
    pub step: usize,
    /// `(column, logit)` at expected.json's columns of that step.
    pub columns: Vec<(usize, f64)>,
    /// Whether those logits are transformers' (within 1e-4 of the logit scale): false when
    /// the conversion is not the checkpoint.
    pub matches_transformers: bool,
}

impl Converted {
    /// The directory: `model.bin`, `config.json` and the vocabularies.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// CTranslate2's own logits on this conversion, when the script ran it.
    pub fn runtime(&self) -> Option<&Runtime> {
        self.runtime.as_ref()
    }
}

fn runtime(value: &Value) -> Option<Runtime> {
    let columns = value.get("columns")?.as_array()?;
    Some(Runtime {
        step: value["step"].as_u64().expect("step") as usize,
        columns: columns
            .iter()
            .map(|p| (p[0].as_u64().unwrap() as usize, p[1].as_f64().unwrap()))
            .collect(),
        matches_transformers: value["matches_transformers"].as_bool().expect("matches"),
    })
}

impl Drop for Converted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn dtype(name: &str) -> Dtype {
    match name {
        "float32" => Dtype::F32,
        "float16" => Dtype::F16,
        "bfloat16" => Dtype::Bf16,
        "int8" => Dtype::I8,
        "int16" => Dtype::I16,
        "int32" => Dtype::I32,
        other => panic!("ct2.json: dtype {other}"),
    }
}

fn usizes(value: &Value) -> Vec<usize> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_u64().expect("an integer") as usize)
        .collect()
}

/// transformers' M2M100 table from position `first`: the f32 angle `p · ω_i` (the frequencies
/// as the script recorded torch's), its sine and cosine correctly rounded; the padding
/// position's row zero.
fn m2m100_positions(spec: &Value, rows: usize, d: usize) -> Vec<f32> {
    let first = spec["first"].as_u64().expect("first") as usize;
    let padding = spec["padding"].as_u64().map(|p| p as usize);
    let frequencies: Vec<f32> = usizes(&spec["frequencies"])
        .into_iter()
        .map(|bits| f32::from_bits(bits as u32))
        .collect();
    let half = frequencies.len();
    assert_eq!(2 * half, d, "ct2.json: frequencies for {d} columns");
    let mut table = vec![0.0f32; rows * d];
    for (r, row) in table.chunks_exact_mut(d).enumerate() {
        if Some(first + r) == padding {
            continue;
        }
        for (i, &w) in frequencies.iter().enumerate() {
            let angle = ((first + r) as f32 * w) as f64;
            row[i] = angle.sin() as f32;
            row[half + i] = angle.cos() as f32;
        }
    }
    table
}

/// The bytes of one variable as its recipe says.
fn bytes_of(var: &Value, tensors: &SafeTensors<'_>) -> Vec<u8> {
    if let Some(inline) = var["inline"].as_str() {
        return unhex(inline);
    }
    if let Some(parts) = var["parts"].as_array() {
        let mut out = Vec::new();
        let zero_size = dtype(var["dtype"].as_str().expect("dtype")).size() as u64;
        for part in parts {
            let (start, end) = (part[1].as_u64().unwrap(), part[2].as_u64().unwrap());
            let Some(name) = part[0].as_str() else {
                out.resize(out.len() + ((end - start) * zero_size) as usize, 0);
                continue;
            };
            let view = tensors
                .tensor(name)
                .unwrap_or_else(|e| panic!("ct2.json part {name}: {e}"));
            let size = view.dtype().size() as u64;
            out.extend_from_slice(&view.data()[(start * size) as usize..(end * size) as usize]);
        }
        return out;
    }
    let spec = &var["positions"];
    let shape = usizes(&var["shape"]);
    let (rows, d) = (shape[0], shape[1]);
    let table = match spec["kind"].as_str() {
        Some("marian") => marian_positions(rows, d),
        Some("m2m100") => m2m100_positions(spec, rows, d),
        other => panic!("ct2.json: positions {other:?}"),
    };
    match dtype(var["dtype"].as_str().expect("dtype")) {
        // A float16 checkpoint's table, rounded from float32 as numpy rounds it.
        Dtype::F16 => table
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        _ => table.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// The tokens of a vocabulary record: `w<id>`, but the listed specials and the timestamp
/// tokens from `timestamps_from`; checked against the recorded digest.
fn vocabulary(file: &str, record: &Value) -> Vec<String> {
    let size = record["size"].as_u64().expect("size") as usize;
    let special: BTreeMap<usize, &str> = record["special"]
        .as_array()
        .expect("special")
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as usize, p[1].as_str().unwrap()))
        .collect();
    let timestamps = record["timestamps_from"].as_u64().map(|t| t as usize);
    let tokens: Vec<String> = (0..size)
        .map(|i| match (special.get(&i), timestamps) {
            (Some(token), _) => (*token).to_owned(),
            (None, Some(first)) if i >= first => format!("<|{:.2}|>", (i - first) as f64 * 0.02),
            _ => format!("w{i}"),
        })
        .collect();
    assert_eq!(
        sha256(tokens.join("\n").as_bytes()),
        record["sha256"].as_str().unwrap(),
        "{file}: the rebuilt tokens differ from the converter's"
    );
    tokens
}

/// The CTranslate2 directory of `row` rebuilt under `cache` from the Hugging Face directory
/// `hf` (its generated `model.safetensors`). Panics when the row has no `ct2.json` or a
/// rebuilt variable or vocabulary differs from the converter's (a broken fixture).
pub fn convert(row: &Path, hf: &Path, cache: &Path) -> Converted {
    let path = row.join("ct2.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let record: Value = serde_json::from_str(&text).expect("ct2.json");
    let name = row.file_name().expect("row name").to_string_lossy();
    let dir = cache.join(format!("{name}-ct2"));
    std::fs::create_dir_all(&dir).expect("ct2 directory");
    let converted = Converted {
        dir,
        runtime: runtime(&record["ctranslate2"]),
    };
    let weights = std::fs::read(hf.join("model.safetensors")).expect("model.safetensors");
    let tensors = SafeTensors::deserialize(&weights).expect("model.safetensors parses");
    let vars = record["variables"].as_array().expect("variables");
    let shapes: Vec<Vec<usize>> = vars.iter().map(|v| usizes(&v["shape"])).collect();
    let items = vars
        .iter()
        .zip(&shapes)
        .map(|(var, shape)| -> Variable<'_> {
            let name = var["name"].as_str().expect("name");
            let bytes = bytes_of(var, &tensors);
            assert_eq!(
                sha256(&bytes),
                var["sha256"].as_str().expect("sha256"),
                "{name}: the rebuilt bytes differ from the converter's"
            );
            Ok((
                name,
                &shape[..],
                dtype(var["dtype"].as_str().unwrap()),
                bytes,
            ))
        });
    let aliases: Vec<(String, String)> = record["aliases"]
        .as_array()
        .expect("aliases")
        .iter()
        .map(|a| (a[0].as_str().unwrap().into(), a[1].as_str().unwrap().into()))
        .collect();
    let header = Header {
        version: record["binary_version"].as_u64().unwrap() as u32,
        spec: record["spec"].as_str().unwrap(),
        revision: record["revision"].as_u64().unwrap() as u32,
    };
    let mut out = BufWriter::new(File::create(converted.dir.join("model.bin")).unwrap());
    write_into(&mut out, &header, items, &aliases).expect("write model.bin");
    out.flush().expect("write model.bin");
    let config = serde_json::to_string_pretty(&record["config"]).unwrap();
    std::fs::write(converted.dir.join("config.json"), config).expect("config.json");
    for (file, vocab) in record["vocabularies"].as_object().expect("vocabularies") {
        let tokens = serde_json::to_string(&vocabulary(file, vocab)).unwrap();
        std::fs::write(converted.dir.join(file), tokens).expect("vocabulary");
    }
    converted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_tables_are_the_known_ones() {
        // SHA-256 of "abc" (FIPS 180-2's example).
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let table = marian_positions(3, 4);
        assert_eq!(&table[..4], &[0.0, 0.0, 1.0, 1.0]);
        assert_eq!(table[4], 1f64.sin() as f32);
        assert_eq!(table[6], 1f64.cos() as f32);
    }
}
