//! 16-bit weights in the model: safetensors `F16`/`BF16` tensors load as their exact values, a
//! model whose linear layers are stored in 16 bits computes exactly what the same model packed
//! from `f32` values rounded the same way computes (whether the file or the loader rounded
//! them), and a decode step reads about half the bytes.

use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tessel_kernels::gemm::{bf16, f16};
use tessel_kernels::Isa;
use tessel_model::{Config, LoadOptions, Model, Session, WeightType};

fn fixture() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/golden/pre_gelu"))
}

fn config() -> Config {
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    Config::from_json(&text).unwrap()
}

/// The tensors of the fixture's f32 file that `round` selects (by name and shape) rounded to
/// `dtype` (`F16` or `BF16`), the others kept: the file with the rounded ones stored in that
/// dtype, and the same values all stored as `F32`.
fn rounded_files(dtype: Dtype, round: impl Fn(&str, &[usize]) -> bool) -> (Vec<u8>, Vec<u8>) {
    let bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut narrow = Vec::new();
    let mut wide = Vec::new();
    for (name, view) in file.tensors() {
        assert_eq!(view.dtype(), Dtype::F32, "{name}");
        if !round(&name, view.shape()) {
            narrow.push((
                name.clone(),
                view.shape().to_vec(),
                view.data().to_vec(),
                Dtype::F32,
            ));
            wide.push((
                name,
                view.shape().to_vec(),
                view.data().to_vec(),
                Dtype::F32,
            ));
            continue;
        }
        let (mut n, mut w) = (Vec::new(), Vec::new());
        for c in view.data().chunks_exact(4) {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let (bits, value) = match dtype {
                Dtype::F16 => (f16::from_f32(x).to_bits(), f16::from_f32(x).to_f32()),
                _ => (bf16::from_f32(x).to_bits(), bf16::from_f32(x).to_f32()),
            };
            n.extend_from_slice(&bits.to_le_bytes());
            w.extend_from_slice(&value.to_le_bytes());
        }
        narrow.push((name.clone(), view.shape().to_vec(), n, dtype));
        wide.push((name, view.shape().to_vec(), w, Dtype::F32));
    }
    (serialize(&narrow), serialize(&wide))
}

type Tensors = [(String, Vec<usize>, Vec<u8>, Dtype)];

fn serialize(tensors: &Tensors) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, shape, data, dtype)| {
            let view = TensorView::new(*dtype, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize(views, &None).unwrap()
}

/// Every tensor.
fn all(_: &str, _: &[usize]) -> bool {
    true
}

/// The weights of the linear layers (what `LoadOptions::weights` stores in 16 bits).
fn linear_weights(name: &str, shape: &[usize]) -> bool {
    shape.len() == 2 && !name.contains("embed") && !name.contains("_pos")
}

/// Logits of teacher-forced decode steps of a fixed source and target at `isa`.
fn logits(model: &Model, isa: Isa) -> Vec<f32> {
    let mut session = Session::new(model, isa).expect("session");
    session.encode(&[3, 9, 4, 17, 5]).expect("encode");
    let mut out = Vec::new();
    for token in [1, 6, 8, 2] {
        out.extend_from_slice(session.decode_step(&[token]).expect("step"));
    }
    out
}

fn load(bytes: &[u8], weights: WeightType) -> Model<'static> {
    Model::from_safetensors_bytes_with(config(), bytes, &LoadOptions::weights(weights))
        .unwrap_or_else(|e| panic!("{weights}: {e}"))
}

#[test]
fn sixteen_bit_tensors_load_as_their_exact_values() {
    for dtype in [Dtype::F16, Dtype::BF16] {
        let (narrow, wide) = rounded_files(dtype, all);
        for isa in Isa::supported() {
            assert_eq!(
                logits(&load(&narrow, WeightType::F32), isa),
                logits(&load(&wide, WeightType::F32), isa),
                "{dtype:?} at {isa}"
            );
        }
    }
}

#[test]
fn sixteen_bit_storage_equals_f32_rounded_by_the_file_or_by_the_loader() {
    let original = std::fs::read(fixture().join("model.safetensors")).unwrap();
    for (dtype, storages) in [
        (Dtype::F16, &[WeightType::F16][..]),
        (Dtype::BF16, &[WeightType::Bf16, WeightType::Bf16Dot][..]),
    ] {
        let (narrow, wide) = rounded_files(dtype, linear_weights);
        for &weights in storages {
            for isa in Isa::supported() {
                let from_file = logits(&load(&narrow, weights), isa);
                assert_eq!(
                    from_file,
                    logits(&load(&wide, weights), isa),
                    "{weights} at {isa}: 16-bit tensors vs the same values as f32"
                );
                assert_eq!(
                    from_file,
                    logits(&load(&original, weights), isa),
                    "{weights} at {isa}: rounded by the file vs rounded by the loader"
                );
            }
        }
    }
}

#[test]
fn sixteen_bit_storage_halves_the_bytes_of_the_linear_layers() {
    let bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    let f32_model = load(&bytes, WeightType::F32);
    for weights in [WeightType::F16, WeightType::Bf16, WeightType::Bf16Dot] {
        let model = load(&bytes, weights);
        // Norms, biases, embedding rows stay f32; the linear layers, nearly all the bytes of a
        // step, halve (an odd k pads one row per panel in 16 bits).
        let ratio =
            model.decode_step_weight_bytes() as f64 / f32_model.decode_step_weight_bytes() as f64;
        assert!(
            (0.5..0.56).contains(&ratio),
            "{weights}: step bytes ratio {ratio}"
        );
    }
}

#[test]
fn weight_types_parse_and_print_their_names() {
    for weights in WeightType::ALL {
        assert_eq!(weights.name().parse::<WeightType>(), Ok(weights));
    }
    assert!("fp16".parse::<WeightType>().is_err());
}
