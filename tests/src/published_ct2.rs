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
//!
//! Some rows also have `ct2_int8.json`, the `--quantization int8` conversion of the same
//! weights: a quantised variable is its float32 source elements (`parts`) quantised per row as
//! CTranslate2's converter does (`"quantize": "int8_rows"`, [`quantize_rows`]), its
//! `weight_scale` the scales of that quantisation (`"scale_of"`); the rest is described as in
//! `ct2.json`, whose header, config, vocabularies and aliases the int8 conversion shares.
//! [`convert`] rebuilds it too, with every digest checked.

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
    runs: Vec<Run>,
}

/// A CTranslate2 run on the int8 conversion (`ct2_int8.json`), as the script recorded it.
#[derive(Clone, Debug)]
pub struct Run {
    /// CTranslate2's `compute_type`: `int8` (its int8 GEMMs) or `float32` (the int8 weights
    /// dequantised).
    pub compute_type: String,
    /// The first teacher-forced step recorded (Whisper: the step after the prompt).
    pub first_step: usize,
    /// Per teacher-forced step from `first_step`, the logits at expected.json's columns of
    /// that step, in its order.
    pub logits: Vec<Vec<f64>>,
    /// Its greedy tokens, decoder start first.
    pub greedy: Vec<u32>,
    /// Per generated token, its top-1 minus top-2 logit.
    pub margins: Vec<f64>,
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

    /// CTranslate2's runs on the int8 conversion (empty for the float32 conversion).
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The run with `compute_type`.
    pub fn run(&self, compute_type: &str) -> Option<&Run> {
        self.runs.iter().find(|r| r.compute_type == compute_type)
    }
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

fn run(value: &Value) -> Run {
    Run {
        compute_type: value["compute_type"].as_str().expect("compute_type").into(),
        first_step: value["first_step"].as_u64().expect("first_step") as usize,
        logits: value["logits"]
            .as_array()
            .expect("logits")
            .iter()
            .map(floats)
            .collect(),
        greedy: usizes(&value["greedy_tokens"])
            .into_iter()
            .map(|t| t as u32)
            .collect(),
        margins: floats(&value["greedy_margins"]),
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

/// The rows of `cols` float32 elements a `parts` list names, in order, each passed to `each`
/// (float16 sources widened, exactly as the converter's `to("float32")`; a part named null is
/// that many zeros). A row never spans two parts: each part is whole rows.
fn source_rows(
    parts: &[Value],
    tensors: &SafeTensors<'_>,
    cols: usize,
    mut each: impl FnMut(&[f32]),
) {
    let mut row = vec![0.0f32; cols];
    for part in parts {
        let (start, end) = (part[1].as_u64().unwrap(), part[2].as_u64().unwrap());
        let (start, end) = (start as usize, end as usize);
        assert_eq!(
            (end - start) % cols,
            0,
            "ct2_int8.json: a part of partial rows"
        );
        let Some(name) = part[0].as_str() else {
            row.fill(0.0);
            (0..(end - start) / cols).for_each(|_| each(&row));
            continue;
        };
        let view = tensors
            .tensor(name)
            .unwrap_or_else(|e| panic!("ct2_int8.json part {name}: {e}"));
        let size = view.dtype().size();
        let bytes = &view.data()[start * size..end * size];
        for chunk in bytes.chunks_exact(cols * size) {
            match view.dtype() {
                safetensors::Dtype::F32 => {
                    for (v, b) in row.iter_mut().zip(chunk.chunks_exact(4)) {
                        *v = f32::from_le_bytes(b.try_into().unwrap());
                    }
                }
                safetensors::Dtype::F16 => {
                    for (v, b) in row.iter_mut().zip(chunk.chunks_exact(2)) {
                        *v = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                    }
                }
                other => panic!("ct2_int8.json part {name}: {other:?} source"),
            }
            each(&row);
        }
    }
}

/// CTranslate2's int8 quantisation (`ModelSpec._quantize`, quantization `int8`) of one row (a
/// convolution's other axes flattened), in the converter's float32 operations: `amax` = the
/// largest magnitude, 127 where the row is zero, at least `127 / f32::MAX`; the scale
/// `127 / amax`; each value times the scale, rounded half to even (numpy's `rint`). Appends
/// the int8 values to `quantized` and the scale's bytes to `scales`.
fn quantize_row(row: &[f32], quantized: &mut Vec<u8>, scales: &mut Vec<u8>) {
    let mut amax = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        amax = 127.0;
    }
    let scale = 127.0f32 / amax.max(127.0f32 / f32::MAX);
    quantized.extend(
        row.iter()
            .map(|v| (v * scale).round_ties_even() as i8 as u8),
    );
    scales.extend_from_slice(&scale.to_le_bytes());
}

/// [`quantize_row`] over `rows` rows of `values`: the int8 values and the scales, as bytes.
pub fn quantize_rows(values: &[f32], rows: usize) -> (Vec<u8>, Vec<u8>) {
    assert!(
        rows > 0 && values.len().is_multiple_of(rows),
        "{} values in {rows} rows",
        values.len()
    );
    let (mut quantized, mut scales) = (Vec::with_capacity(values.len()), Vec::new());
    for row in values.chunks_exact(values.len() / rows) {
        quantize_row(row, &mut quantized, &mut scales);
    }
    (quantized, scales)
}

/// The bytes of one variable as its recipe says. A quantised variable leaves its scales in
/// `scales` for its `weight_scale` (written after it: the converter sorts by name).
fn bytes_of(
    var: &Value,
    tensors: &SafeTensors<'_>,
    scales: &mut BTreeMap<String, Vec<u8>>,
) -> Vec<u8> {
    if let Some(inline) = var["inline"].as_str() {
        return unhex(inline);
    }
    if let Some(base) = var["scale_of"].as_str() {
        return scales
            .remove(base)
            .unwrap_or_else(|| panic!("ct2_int8.json: the scales of {base} before it"));
    }
    if let Some(parts) = var["parts"].as_array() {
        if let Some(kind) = var["quantize"].as_str() {
            assert_eq!(kind, "int8_rows", "ct2_int8.json: quantize {kind}");
            let shape = usizes(&var["shape"]);
            let cols = shape[1..].iter().product();
            let (mut quantized, mut scale) = (Vec::new(), Vec::new());
            source_rows(parts, tensors, cols, |row| {
                quantize_row(row, &mut quantized, &mut scale)
            });
            scales.insert(var["name"].as_str().expect("name").into(), scale);
            return quantized;
        }
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

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The CTranslate2 directory of `row` rebuilt under `cache` from the Hugging Face directory
/// `hf` (its generated `model.safetensors`), and its int8 conversion where the row has
/// `ct2_int8.json`. Panics when the row has no `ct2.json` or a rebuilt variable or vocabulary
/// differs from the converter's (a broken fixture).
pub fn convert(row: &Path, hf: &Path, cache: &Path) -> (Converted, Option<Converted>) {
    let weights = std::fs::read(hf.join("model.safetensors")).expect("model.safetensors");
    let tensors = SafeTensors::deserialize(&weights).expect("model.safetensors parses");
    let float32 = rebuild(row, &tensors, cache, None);
    let path = row.join("ct2_int8.json");
    let int8 = path
        .is_file()
        .then(|| rebuild(row, &tensors, cache, Some(&read_json(&path))));
    (float32, int8)
}

/// `ct2.json`'s directory, with `int8`'s variables and runs when given.
fn rebuild(row: &Path, tensors: &SafeTensors<'_>, cache: &Path, int8: Option<&Value>) -> Converted {
    let record = read_json(&row.join("ct2.json"));
    let name = row.file_name().expect("row name").to_string_lossy();
    let suffix = if int8.is_some() { "ct2-int8" } else { "ct2" };
    let dir = cache.join(format!("{name}-{suffix}"));
    std::fs::create_dir_all(&dir).expect("ct2 directory");
    let converted = Converted {
        dir,
        runtime: int8.map_or_else(|| runtime(&record["ctranslate2"]), |_| None),
        runs: int8.map_or_else(Vec::new, |int8| {
            int8["ctranslate2"]
                .as_array()
                .expect("ctranslate2 runs")
                .iter()
                .map(run)
                .collect()
        }),
    };
    let vars = int8.unwrap_or(&record)["variables"]
        .as_array()
        .expect("variables");
    let shapes: Vec<Vec<usize>> = vars.iter().map(|v| usizes(&v["shape"])).collect();
    let mut scales = BTreeMap::new();
    let items = vars
        .iter()
        .zip(&shapes)
        .map(|(var, shape)| -> Variable<'_> {
            let name = var["name"].as_str().expect("name");
            let bytes = bytes_of(var, tensors, &mut scales);
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

    #[test]
    fn int8_rows_round_half_to_even() {
        // Row 0: amax 127, scale 1: 0.5 → 0, 1.5 → 2, -2.5 → -2. Row 1: all zero, scale 1.
        // Row 2: amax 254, scale 0.5: 3 · 0.5 = 1.5 → 2, 5 · 0.5 = 2.5 → 2.
        let values = [
            127.0, 0.5, 1.5, -2.5, 0.0, 0.0, 0.0, 0.0, -254.0, 3.0, 5.0, 1.0,
        ];
        let (q, scales) = quantize_rows(&values, 3);
        let q: Vec<i8> = q.iter().map(|&b| b as i8).collect();
        assert_eq!(q, [127, 0, 2, -2, 0, 0, 0, 0, -127, 2, 2, 0]);
        let scales: Vec<f32> = scales
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(scales, [1.0, 1.0, 0.5]);
    }
}
