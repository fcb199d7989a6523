//! CTranslate2 model directories: tiny models written by CTranslate2's own spec API
//! (`bench/peers/make_fixture.py`) load into tessel and reproduce, at every ISA level,
//! CTranslate2's greedy tokens and its logits at every step.
//!
//! Fixtures (`tests/ct2/`): post-norm ReLU with separate embeddings and CTranslate2's
//! sinusoidal positions (f32); pre-norm GELU with shared embeddings and stored position tables
//! (stored as float16); post-norm ReLU stored as int8 (dequantised by tessel when asked for
//! f32 weights, run by CTranslate2 with compute_type float32). EOS is masked by CTranslate2's
//! `min_decoding_length`, so its logit is skipped in the comparison.

use std::path::{Path, PathBuf};

use tessel_model::load::ct2::{self, Ct2Options};
use tessel_model::{Session, WeightType};
use tessel_tests::for_each_isa;

const FIXTURES: [&str; 4] = [
    "post_relu_sinusoidal_f32",
    "pre_gelu_shared_learned_f16",
    "post_relu_int8",
    "post_swish_f32",
];

/// Logits may differ from CTranslate2's by this much relative to the row's largest magnitude
/// (different summation orders in f32; d_model 16, d_ff 32).
const LOGIT_TOLERANCE: f32 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ct2").join(name)
}

struct Expected {
    source: Vec<u32>,
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

fn expected(name: &str) -> Expected {
    let text = std::fs::read_to_string(fixture(name).join("expected.txt")).unwrap();
    let mut lines = text.lines();
    let ids = |l: &str| {
        l.split(' ')
            .map(|x| x.parse().unwrap())
            .collect::<Vec<u32>>()
    };
    let source = ids(lines.next().unwrap());
    let tokens = ids(lines.next().unwrap());
    let logits = lines
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    Expected {
        source,
        tokens,
        logits,
    }
}

#[test]
fn tessel_reproduces_ctranslate2_greedy_tokens_and_logits() {
    for name in FIXTURES {
        // int8 weights are dequantised here, as CTranslate2 computed them (float32); kept as
        // int8 they are held to CTranslate2's int8 computation by `int8_accuracy.rs`.
        let options = Ct2Options {
            weights: name.ends_with("_int8").then_some(WeightType::F32),
            ..Ct2Options::default()
        };
        let loaded = ct2::load_dir(&fixture(name), options).unwrap();
        let want = expected(name);
        let config = loaded.model.config().clone();
        assert_eq!(want.logits.len(), want.tokens.len(), "{name}");
        for_each_isa(|isa| {
            let mut session = Session::new(&loaded.model, isa).unwrap();
            session.encode(&want.source).unwrap();
            let mut input = config.bos_id;
            for (step, (token, row)) in want.tokens.iter().zip(&want.logits).enumerate() {
                let logits = session.decode_step(&[input]).unwrap();
                assert_eq!(logits.len(), row.len(), "{name} step {step}");
                let eos = config.eos_id as usize;
                let scale = row
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != eos)
                    .fold(1.0f32, |m, (_, x)| m.max(x.abs()));
                for (i, (got, want)) in logits.iter().zip(row).enumerate() {
                    if i as u32 == config.eos_id {
                        continue;
                    }
                    assert!(
                        (got - want).abs() <= LOGIT_TOLERANCE * scale,
                        "{name} {isa:?} step {step} logit {i}: tessel {got}, CTranslate2 {want}"
                    );
                }
                let best = (0..logits.len())
                    .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
                    .unwrap() as u32;
                assert_eq!(best, *token, "{name} {isa:?} step {step}");
                input = best;
            }
        });
    }
}

#[test]
fn fixtures_map_to_the_expected_tessel_configs() {
    use tessel_model::{FfnActivation, NormPlacement};
    let post = ct2::load_dir(&fixture(FIXTURES[0]), Ct2Options::default()).unwrap();
    let c = post.model.config();
    assert_eq!((c.d_model, c.heads, c.d_ff), (16, 2, 32));
    assert_eq!((c.encoder_layers, c.decoder_layers), (2, 2));
    assert_eq!(c.norm, NormPlacement::Post);
    assert!(!c.final_norm && !c.share_embeddings && !c.tie_output);
    assert_eq!((c.bos_id, c.eos_id, c.pad_id), (1, 2, 0));
    // config.json's layer_norm_epsilon is null: CTranslate2's LayerNorm default.
    assert_eq!(c.layer_norm_eps, 1e-5);
    let pre = ct2::load_dir(&fixture(FIXTURES[1]), Ct2Options::default()).unwrap();
    let c = pre.model.config();
    assert_eq!(c.norm, NormPlacement::Pre);
    assert_eq!(c.activation, FfnActivation::Gelu);
    assert!(c.final_norm && c.share_embeddings);
    // The stored 24-row position tables cap the lengths.
    assert_eq!((c.max_src_len, c.max_tgt_len), (24, 24));
    assert_eq!(pre.vocab.source_ids(&["t5", "nope"]), vec![5, 0]);
    // Linear weights keep the type model.bin stores them in, unless asked otherwise.
    let f16 = tessel_model::WeightType::F16;
    assert_eq!(pre.model.generator().weight_type(), f16);
    assert_eq!(
        post.model.generator().weight_type(),
        tessel_model::WeightType::F32
    );
    let widened = Ct2Options {
        weights: Some(tessel_model::WeightType::F32),
        ..Ct2Options::default()
    };
    let pre_f32 = ct2::load_dir(&fixture(FIXTURES[1]), widened).unwrap();
    assert_eq!(
        pre_f32.model.generator().weight_type(),
        tessel_model::WeightType::F32
    );
    assert!(pre_f32.model.weight_bytes() > pre.model.weight_bytes());
    // CTranslate2's SWISH (OPUS-MT / Marian models) is SiLU.
    let swish = ct2::load_dir(&fixture(FIXTURES[3]), Ct2Options::default()).unwrap();
    assert_eq!(swish.model.config().activation, FfnActivation::Silu);
}
