//! Whisper with CTranslate2's own int8 weights against CTranslate2 int8 (`tests/whisper/*/ct2_int8`,
//! made by `tools/make_whisper_int8_golden.py`): the directory loads with its linear layers and
//! output projection kept int8, and tessel's logits along CTranslate2's greedy path equal
//! CTranslate2's.
//!
//! Both engines quantise each activation row to `round(x · 127 / max |x|)` and sum the int8
//! products exactly, so the only differences come from the float parts (convolutions, norms,
//! attention, GELU). At the scalar level those round as CTranslate2's do up to a few ulps where
//! every float product's reduction fits one depth block (`tiny_like_80`: the convolution's
//! `k = 3 · 80 = 240`), and the logits agree to [`SCALAR_TOLERANCE`]. tessel sums a longer
//! reduction in one chain, whatever the number of rows (so a batch computes each row as it would
//! alone), where CTranslate2 adds per-block partial sums: `odd_128`'s convolution (`k = 384`)
//! then differs by an ulp, and is held to the drift bound below. The SIMD levels add and fuse in another order; a
//! difference of one ulp that moves an activation across a rounding boundary of its int8 grid
//! changes that element by a whole quantisation step, so a step's logits can move by up to the
//! int8 noise itself (up to 1.1e-2 of the scale measured here; int8 against float32 is 1.0e-2 to
//! 3.3e-2). Those levels are held to [`INT8_DRIFT_BOUND`], the bound `int8_accuracy.rs` holds
//! Whisper's int8 to against float32, and to CTranslate2's greedy token wherever its top two
//! logits are further apart than twice that.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_kernels::Level;
use tessel_model::load::ct2::{self, Ct2Options};
use tessel_model::{Model, Session, WeightType};
use tessel_tests::for_each_isa;
use tessel_tests::golden::{ids, values};

/// The fixtures, and whether the scalar level rounds as CTranslate2 does throughout.
const FIXTURES: [(&str, bool); 2] = [("tiny_like_80", true), ("odd_128", false)];

/// Largest `|tessel - CTranslate2|` of any logit at the scalar level on x86-64, relative to the
/// logit scale (measured: 2.5e-7). Other targets may fuse multiply-adds in the scalar code.
const SCALAR_TOLERANCE: f64 = 2e-6;

/// Largest `|tessel - CTranslate2|` of any logit at every level, relative to the logit scale:
/// the Whisper int8 drift bound of `int8_accuracy.rs`.
const INT8_DRIFT_BOUND: f64 = 5e-2;

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("whisper")
        .join(name)
}

/// The fixture's mel, the prompt length, CTranslate2's tokens (prompt included) and its logits
/// for each generated token.
struct Expected {
    mel: Vec<f32>,
    prompt_len: usize,
    tokens: Vec<u32>,
    logits: Vec<Vec<f64>>,
}

fn expected(name: &str) -> Expected {
    let bytes = std::fs::read(dir(name).join("expected.safetensors")).unwrap();
    let fixture = SafeTensors::deserialize(&bytes).unwrap();
    let bytes = std::fs::read(dir(name).join("ct2_int8").join("expected.safetensors")).unwrap();
    let int8 = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = ids(&int8, "tokens");
    let prompt_len = ids(&fixture, "prompt").len();
    let flat = values(&int8, "logits");
    let steps = tokens.len() - prompt_len;
    assert_eq!(flat.len() % steps, 0, "{name}: logits of {steps} steps");
    Expected {
        mel: values(&fixture, "mel").iter().map(|&v| v as f32).collect(),
        prompt_len,
        tokens,
        logits: flat
            .chunks(flat.len() / steps)
            .map(<[f64]>::to_vec)
            .collect(),
    }
}

/// The best token of `row` and its lead over the second best.
fn top_and_margin(row: &[f64]) -> (u32, f64) {
    let (mut top, mut first, mut second) = (0, f64::NEG_INFINITY, f64::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > first {
            (top, first, second) = (i as u32, v, first);
        } else if v > second {
            second = v;
        }
    }
    (top, first - second)
}

/// Feeds CTranslate2's tokens one step at a time and returns the largest logit difference from
/// its rows, relative to their scale; asserts its greedy token wherever `bound` cannot flip it.
fn drift(model: &Model, expected: &Expected, isa: tessel_kernels::Isa, bound: f64) -> f64 {
    let scale = expected
        .logits
        .iter()
        .flatten()
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let mut session = Session::new(model, isa).unwrap();
    session.encode_audio(&expected.mel).unwrap();
    let (forced, generated) = expected.tokens.split_at(expected.prompt_len);
    session.prefill(&forced[..forced.len() - 1]).unwrap();
    let mut input = forced[forced.len() - 1];
    let mut worst = 0.0f64;
    for (step, (&token, want)) in generated.iter().zip(&expected.logits).enumerate() {
        let got = session.decode_step(&[input]).unwrap();
        assert_eq!(got.len(), want.len(), "step {step}: vocabulary");
        for (&g, &w) in got.iter().zip(want) {
            worst = worst.max((f64::from(g) - w).abs() / scale);
        }
        let (top, margin) = top_and_margin(want);
        assert_eq!(top, token, "step {step}: the fixture's greedy token");
        if margin > 2.0 * bound * scale {
            let got: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
            assert_eq!(top_and_margin(&got).0, token, "greedy token at step {step}");
        }
        input = token;
    }
    worst
}

#[test]
fn ctranslate2_int8_whisper_computes_as_ctranslate2_int8() {
    for (name, exact) in FIXTURES {
        let expected = expected(name);
        let options = Ct2Options {
            max_beam: 1,
            ..Ct2Options::default()
        };
        let loaded = ct2::load_dir(&dir(name).join("ct2_int8"), options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = &loaded.model;
        assert_eq!(model.generator().weight_type(), WeightType::Int8, "{name}");
        for_each_isa(|isa| {
            let what = format!("{name}/ct2_int8 at {isa}");
            let exact = exact && isa.level() == Level::Scalar && cfg!(target_arch = "x86_64");
            let bound = if exact {
                SCALAR_TOLERANCE
            } else {
                INT8_DRIFT_BOUND
            };
            let worst = drift(model, &expected, isa, bound);
            eprintln!("{what}: worst logit difference from CTranslate2 int8 {worst:.2e} of scale");
            assert!(worst <= bound, "{what}: {worst:e} over {bound:e}");
        });
    }
}

/// The same weights widened to `f32` are further from CTranslate2 int8 than tessel int8 is at
/// the scalar level: the comparison above sees int8 arithmetic, not only the weights' rounding.
#[test]
fn dequantised_weights_do_not_compute_as_ctranslate2_int8() {
    let isa = tessel_kernels::Isa::new(Level::Scalar).unwrap();
    for (name, _) in FIXTURES {
        let expected = expected(name);
        let options = Ct2Options {
            max_beam: 1,
            weights: Some(WeightType::F32),
            ..Ct2Options::default()
        };
        let loaded = ct2::load_dir(&dir(name).join("ct2_int8"), options).unwrap();
        assert_eq!(loaded.model.generator().weight_type(), WeightType::F32);
        let worst = drift(&loaded.model, &expected, isa, INT8_DRIFT_BOUND);
        eprintln!("{name}: f32 weights from CTranslate2 int8: {worst:.2e} of scale");
        assert!(
            worst > 100.0 * SCALAR_TOLERANCE && worst <= INT8_DRIFT_BOUND,
            "{name}: dequantised weights {worst:e} from CTranslate2 int8"
        );
    }
}
