//! The `load` suite: loading a CTranslate2 `WhisperSpec` directory (`ct2::load_dir`, what
//! `tessel transcribe` does before it reads a sample), next to a stream read of as many bytes.
//!
//! The suite writes the directories itself, under the system's temporary directory: a
//! `model.bin` (binary version 6) in the layout `ct2-transformers-converter --quantization
//! float16` writes for openai/whisper-tiny.en and -small.en (every weight `float16`, seeded
//! values; biases and norms stored once per variable rather than deduplicated into aliases) and
//! a `vocabulary.json` of their 51864 tokens. Cases: `whisper-tiny.en-f16` and
//! `whisper-small.en-f16` (`tessel`: GB/s of `model.bin` bytes loaded; ratio = this rate / the
//! stream read's), `stream-read-<case>` (summing a resident buffer of the same bytes once), the
//! load again against `copy-fresh-<case>` (ratio = copy time / load time: reading `model.bin`
//! once into fresh mapped memory, first-touch page faults included, the floor of any load into
//! memory of its own). `--quick` loads tiny.en only.

use std::path::{Path, PathBuf};

use tessel_kernels::Isa;
use tessel_model::aligned::AlignedBuf;
use tessel_model::isa_env::isa_from_env;
use tessel_model::load::ct2::{self, Ct2Options, Dtype};

use super::Suite;
use crate::{median_ns, Budget, Record, Work};

/// The `load` suite.
pub const SUITE: Suite = Suite {
    name: "load",
    about: "CTranslate2 Whisper f16 directories (tiny.en, small.en) loaded vs a stream read",
    run,
};

/// The dimensions of a published Whisper checkpoint.
struct Layout {
    name: &'static str,
    d_model: usize,
    layers: usize,
    heads: usize,
    d_ff: usize,
}

const TINY_EN: Layout = Layout {
    name: "whisper-tiny.en-f16",
    d_model: 384,
    layers: 4,
    heads: 6,
    d_ff: 1536,
};

const SMALL_EN: Layout = Layout {
    name: "whisper-small.en-f16",
    d_model: 768,
    layers: 12,
    heads: 12,
    d_ff: 3072,
};

/// The `.en` vocabulary: 50256 text tokens, `<|endoftext|>`, `<|startoftranscript|>`, 99
/// languages, 6 task tokens, 1501 timestamps.
const VOCAB: usize = 51864;
const MELS: usize = 80;
const SOURCE_POSITIONS: usize = 1500;
const TARGET_POSITIONS: usize = 448;

fn run(budget: Budget, emit: &mut dyn FnMut(Record)) {
    let Ok(isa) = isa_from_env() else {
        return;
    };
    let layouts: &[Layout] = if budget.min_samples <= Budget::QUICK.min_samples {
        &[TINY_EN]
    } else {
        &[TINY_EN, SMALL_EN]
    };
    for layout in layouts {
        let dir = scratch_dir(layout.name);
        let written = write_dir(&dir, layout);
        if let Ok(bytes) = written {
            measure(budget, isa, &dir, layout, bytes, emit);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Times loads of `dir` (`bytes` of `model.bin`) and a stream read of as many bytes.
fn measure(
    budget: Budget,
    isa: Isa,
    dir: &Path,
    layout: &Layout,
    bytes: usize,
    emit: &mut dyn FnMut(Record),
) {
    let options = Ct2Options {
        max_src_len: SOURCE_POSITIONS,
        max_tgt_len: TARGET_POSITIONS,
        max_beam: 5,
        weights: None,
    };
    if ct2::load_dir(dir, options).is_err() {
        return;
    }
    let load_ns = median_ns(budget, || {
        std::hint::black_box(ct2::load_dir(dir, options).is_ok());
    });
    let copy_ns = median_ns(budget, || {
        std::hint::black_box(copy_fresh(dir).is_some());
    });
    let level = isa.level().to_string();
    let copy = Record::new(
        "load",
        &format!("copy-fresh-{}", layout.name),
        "copy-fresh",
        &level,
        1,
        copy_ns,
        Work::bytes(bytes as f64),
    );
    let load = Record::new(
        "load",
        layout.name,
        "tessel",
        &level,
        1,
        load_ns,
        Work::bytes(bytes as f64),
    );
    let stream_case = format!("stream-read-{}", layout.name);
    match super::e2e::stream_record(budget, isa, bytes, &stream_case) {
        Some(mut stream) => {
            stream.suite = "load".to_owned();
            emit(load.clone().against_rate(&stream));
            emit(stream);
        }
        None => emit(load.clone()),
    }
    emit(load.against(&copy));
    emit(copy);
}

/// `dir`'s `model.bin` read once into fresh memory (mapped, like the model's buffers): the
/// floor of any load into memory of its own, first-touch page faults included.
fn copy_fresh(dir: &Path) -> Option<AlignedBuf<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(dir.join("model.bin")).ok()?;
    let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
    let mut fresh = AlignedBuf::<u8>::zeros(len).ok()?;
    file.read_exact(fresh.as_mut_slice()).ok()?;
    Some(fresh)
}

/// Writes `model.bin` and `vocabulary.json` of `layout` into `dir`; the bytes of `model.bin`.
fn write_dir(dir: &Path, layout: &Layout) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let bin = model_bin(layout);
    std::fs::write(dir.join("model.bin"), &bin)?;
    let tokens: Vec<String> = (0..VOCAB)
        .map(|i| match i {
            50256 => "<|endoftext|>".to_owned(),
            50257 => "<|startoftranscript|>".to_owned(),
            _ => format!("t{i}"),
        })
        .collect();
    let json = serde_json::to_string(&tokens).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("vocabulary.json"), json)?;
    Ok(bin.len())
}

/// Serialises one variable: name, rank, dims, dtype id, byte count, bytes.
fn variable(out: &mut Vec<u8>, name: &str, shape: &[usize], dtype: Dtype, data: &[u8]) {
    string(out, name);
    out.push(shape.len() as u8);
    for &d in shape {
        out.extend_from_slice(&(d as u32).to_le_bytes());
    }
    out.push(dtype.id());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

/// A `model.bin` string: `u16` length counting the terminating NUL, the bytes, the NUL.
fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Seeded `float16` values of magnitude 2^-7 to 2^-1, little-endian (finite by construction).
struct Values(u64);

impl Values {
    fn f16(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 * len);
        for _ in 0..len {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (self.0 >> 33) as u16;
            let exponent = 8 + (r >> 10) % 7;
            let bits = (r & 0x8000) | (exponent << 10) | (r & 0x3ff);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        out
    }
}

/// The variables of `layout`'s `WhisperSpec`, as `(name, shape)`, every one `float16`.
fn tensors(layout: &Layout) -> Vec<(String, Vec<usize>)> {
    let (d, f) = (layout.d_model, layout.d_ff);
    let mut out: Vec<(String, Vec<usize>)> = vec![
        ("encoder/conv1/weight".into(), vec![d, MELS, 3]),
        ("encoder/conv1/bias".into(), vec![d]),
        ("encoder/conv2/weight".into(), vec![d, d, 3]),
        ("encoder/conv2/bias".into(), vec![d]),
        (
            "encoder/position_encodings/encodings".into(),
            vec![SOURCE_POSITIONS, d],
        ),
        ("decoder/embeddings/weight".into(), vec![VOCAB, d]),
        (
            "decoder/position_encodings/encodings".into(),
            vec![TARGET_POSITIONS, d],
        ),
    ];
    let linear = |out: &mut Vec<(String, Vec<usize>)>, scope: String, rows: usize, cols| {
        out.push((format!("{scope}/weight"), vec![rows, cols]));
        out.push((format!("{scope}/bias"), vec![rows]));
    };
    let norm = |out: &mut Vec<(String, Vec<usize>)>, scope: String| {
        out.push((format!("{scope}/gamma"), vec![d]));
        out.push((format!("{scope}/beta"), vec![d]));
    };
    for stack in ["encoder", "decoder"] {
        for i in 0..layout.layers {
            let l = format!("{stack}/layer_{i}");
            linear(&mut out, format!("{l}/self_attention/linear_0"), 3 * d, d);
            linear(&mut out, format!("{l}/self_attention/linear_1"), d, d);
            norm(&mut out, format!("{l}/self_attention/layer_norm"));
            if stack == "decoder" {
                linear(&mut out, format!("{l}/attention/linear_0"), d, d);
                linear(&mut out, format!("{l}/attention/linear_1"), 2 * d, d);
                linear(&mut out, format!("{l}/attention/linear_2"), d, d);
                norm(&mut out, format!("{l}/attention/layer_norm"));
            }
            linear(&mut out, format!("{l}/ffn/linear_0"), f, d);
            linear(&mut out, format!("{l}/ffn/linear_1"), d, f);
            norm(&mut out, format!("{l}/ffn/layer_norm"));
        }
        norm(&mut out, format!("{stack}/layer_norm"));
    }
    out
}

/// The whole `model.bin` of `layout`.
fn model_bin(layout: &Layout) -> Vec<u8> {
    let tensors = tensors(layout);
    let attributes: [(&str, Dtype, Vec<u8>); 2] = [
        (
            "encoder/num_heads",
            Dtype::I32,
            (layout.heads as i32).to_le_bytes().to_vec(),
        ),
        ("decoder/activation", Dtype::I8, vec![3]),
    ];
    let mut out = 6u32.to_le_bytes().to_vec();
    string(&mut out, "WhisperSpec");
    out.extend_from_slice(&3u32.to_le_bytes());
    let count = tensors.len() + attributes.len();
    out.extend_from_slice(&(count as u32).to_le_bytes());
    let mut values = Values(34);
    for (name, dtype, data) in &attributes {
        variable(&mut out, name, &[], *dtype, data);
    }
    for (name, shape) in &tensors {
        let data = values.f16(shape.iter().product());
        variable(&mut out, name, shape, Dtype::F16, &data);
    }
    let aliases: [(&str, &str); 1] = [("decoder/projection/weight", "decoder/embeddings/weight")];
    out.extend_from_slice(&(aliases.len() as u32).to_le_bytes());
    for (alias, target) in aliases {
        string(&mut out, alias);
        string(&mut out, target);
    }
    out
}

/// The directory the suite writes `tag`'s model to.
fn scratch_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tessel-bench-load-{tag}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_directory_loads_as_the_whisper_of_its_layout() {
        // tiny.en's layout narrowed (the vocabulary and positions as published), so it is quick.
        let layout = Layout {
            name: "narrow",
            d_model: 64,
            layers: 2,
            heads: 2,
            d_ff: 96,
        };
        let dir = scratch_dir("test");
        let bytes = write_dir(&dir, &layout).unwrap();
        let loaded = ct2::load_dir(&dir, Ct2Options::default());
        let _ = std::fs::remove_dir_all(&dir);
        let model = loaded.unwrap().model;
        let config = model.config();
        assert_eq!(
            (
                config.d_model,
                config.heads,
                config.encoder_layers,
                config.d_ff
            ),
            (64, 2, 2, 96)
        );
        assert_eq!(
            (config.tgt_vocab, config.max_src_len),
            (VOCAB, SOURCE_POSITIONS)
        );
        let values: usize = tensors(&layout)
            .iter()
            .map(|(_, shape)| shape.iter().product::<usize>())
            .sum();
        assert!(bytes > 2 * values, "{bytes} bytes for {values} values");
    }
}
