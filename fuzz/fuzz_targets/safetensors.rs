//! `Model::from_safetensors_bytes_with` on arbitrary bytes and on edited valid files (`F32`,
//! `F16` or `BF16` tensors; header bytes, data bytes, truncation, a forged header length,
//! another config), stored as any `WeightType`: `Ok` or a typed `LoadError`, never a panic, and
//! (under `-malloc_limit_mb`) never an allocation the file's size does not justify.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::tiny_config;
use tessel_model::{LoadOptions, Model, Session, WeightType};

#[derive(Arbitrary, Debug)]
enum Input {
    /// The bytes as they are.
    Raw {
        config: u8,
        weights: u8,
        bytes: Vec<u8>,
    },
    /// A valid file for one config, edited, loaded with possibly another config.
    Edited {
        file_config: u8,
        /// The file's tensors' dtype: F32, F16 or BF16.
        dtype: u8,
        weights: u8,
        load_config: u8,
        header_length: Option<u64>,
        edits: Vec<(u16, u8)>,
        truncate: Option<u16>,
        /// Four bytes written over the data (NaN, inf, ... in any dtype).
        poison: Option<(u16, u32)>,
    },
}

/// Tensor dtypes of the valid files.
const DTYPES: [&str; 3] = ["F32", "F16", "BF16"];

/// A valid file for every tiny config variant and dtype: the tensors `expected_tensors` lists,
/// each filled with a small ramp.
fn valid_files() -> &'static Vec<Vec<u8>> {
    static FILES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FILES.get_or_init(|| {
        (0..8)
            .flat_map(|variant| DTYPES.map(|dtype| valid_file(variant, dtype)))
            .collect()
    })
}

fn valid_file(variant: u8, dtype: &str) -> Vec<u8> {
    let tensors = Model::expected_tensors(&tiny_config(variant)).expect("tiny config is valid");
    let mut header = String::from("{");
    let mut data: Vec<u8> = Vec::new();
    for (i, (name, shape)) in tensors.iter().enumerate() {
        let count: usize = shape.iter().product();
        let start = data.len();
        for e in 0..count {
            let x = ((e * 7 + i) % 13) as f32 / 13.0 - 0.5;
            match dtype {
                "F16" => {
                    data.extend_from_slice(&tessel_kernels::gemm::f16::from_f32(x).to_le_bytes())
                }
                "BF16" => {
                    data.extend_from_slice(&tessel_kernels::gemm::bf16::from_f32(x).to_le_bytes())
                }
                _ => data.extend_from_slice(&x.to_le_bytes()),
            }
        }
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{start},{}]}}",
            data.len()
        ));
    }
    header.push('}');
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    file
}

fuzz_target!(|input: Input| {
    let (config, weights, bytes) = match input {
        Input::Raw {
            config,
            weights,
            bytes,
        } => (tiny_config(config), weights, bytes),
        Input::Edited {
            file_config,
            dtype,
            weights,
            load_config,
            header_length,
            edits,
            truncate,
            poison,
        } => {
            let index = (file_config as usize % 8) * DTYPES.len() + dtype as usize % DTYPES.len();
            let mut file = valid_files()[index].clone();
            let header_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
            if let Some((at, bits)) = poison {
                let words = (file.len() - 8 - header_len) / 4;
                if words > 0 {
                    let at = 8 + header_len + (at as usize % words) * 4;
                    file[at..at + 4].copy_from_slice(&bits.to_le_bytes());
                }
            }
            for (at, byte) in edits {
                let at = at as usize % file.len();
                file[at] = byte;
            }
            if let Some(h) = header_length {
                file[..8].copy_from_slice(&h.to_le_bytes());
            }
            if let Some(t) = truncate {
                file.truncate(t as usize % (file.len() + 1));
            }
            let load = if load_config % 4 == 0 {
                load_config / 4
            } else {
                file_config
            };
            (tiny_config(load), weights, file)
        }
    };
    let options = LoadOptions::weights(WeightType::ALL[weights as usize % WeightType::ALL.len()]);
    if let Ok(model) = Model::from_safetensors_bytes_with(config, &bytes, &options) {
        // What loads must run: one encode and one step.
        let isa = tessel_kernels::Isa::scalar();
        let mut session = Session::new(&model, isa).expect("tiny arena");
        session.encode(&[3, 4, 5]).expect("valid source");
        let logits = session.decode_step(&[1]).expect("valid step");
        assert_eq!(logits.len(), model.config().tgt_vocab);
    }
});
