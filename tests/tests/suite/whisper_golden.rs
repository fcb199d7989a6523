//! Whisper against Hugging Face `transformers` (float64) and CTranslate2 on random-weight
//! models of Whisper's graph (`tests/whisper/*`, made by `tools/make_whisper_golden.py`):
//! teacher-forced logits of every step within 1e-4 of the logit scale, and greedy tokens
//! identical to `transformers.generate` and `ctranslate2.models.Whisper.generate`, at every
//! ISA level.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_model::load::hf::whisper;
use tessel_model::{
    ArenaPlan, Limits, LoadOptions, MemoryType, Model, Request, SearchOptions, Session, WeightType,
};
use tessel_tests::for_each_isa;
use tessel_tests::golden::{assert_teacher_forced_logits, ids, values};

const FIXTURES: [&str; 2] = ["tiny_like_80", "odd_128"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("whisper")
        .join(name)
}

struct Expected {
    mel: Vec<f32>,
    forced: Vec<u32>,
    logits: Vec<f64>,
    prompt: Vec<u32>,
    greedy: Vec<u32>,
    ct2_greedy: Vec<u32>,
}

fn expected(name: &str) -> Expected {
    let bytes = std::fs::read(fixture(name).join("expected.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let ids = |n: &str| ids(&file, n);
    Expected {
        mel: values(&file, "mel").iter().map(|&v| v as f32).collect(),
        forced: ids("decoder_input_ids"),
        logits: values(&file, "logits"),
        prompt: ids("prompt"),
        greedy: ids("greedy_tokens"),
        ct2_greedy: ids("ct2_greedy_tokens"),
    }
}

fn greedy(session: &mut Session<&Model>, expected: &Expected) -> Vec<u32> {
    let generated = expected.greedy.len() - expected.prompt.len();
    let hyps = session
        .generate(Request::new(SearchOptions::greedy(generated)).prefix(&expected.prompt))
        .unwrap();
    let mut tokens = expected.prompt.clone();
    tokens.extend_from_slice(hyps.best().unwrap().tokens);
    tokens
}

#[test]
fn hugging_face_whisper_matches_transformers_and_ctranslate2() {
    for name in FIXTURES {
        let model = whisper::load_hf_dir(&fixture(name).join("hf"), 2, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(name);
        assert_eq!(
            expected.greedy, expected.ct2_greedy,
            "{name}: the references agree"
        );
        for_each_isa(|isa| {
            let what = format!("{name} at {isa}");
            let mut session = Session::new(&model, isa).unwrap();
            session.encode_audio(&expected.mel).unwrap();
            assert_teacher_forced_logits(&mut session, &expected.forced, &expected.logits, &what);
            assert_eq!(
                greedy(&mut session, &expected),
                expected.greedy,
                "{what}: greedy"
            );
        });
    }
}

#[test]
fn ctranslate2_whisper_matches_transformers_and_ctranslate2() {
    use tessel_model::load::ct2::{self, Ct2Options};
    for name in FIXTURES {
        let expected = expected(name);
        for (dir, exact) in [("ct2", true), ("ct2_f16", false)] {
            let options = Ct2Options {
                max_beam: 2,
                ..Ct2Options::default()
            };
            let loaded = ct2::load_dir(&fixture(name).join(dir), options)
                .unwrap_or_else(|e| panic!("{name}/{dir}: {e}"));
            let model = &loaded.model;
            let stored = if exact {
                WeightType::F32
            } else {
                WeightType::F16
            };
            assert_eq!(model.generator().weight_type(), stored, "{name}/{dir}");
            for_each_isa(|isa| {
                let what = format!("{name}/{dir} at {isa}");
                let mut session = Session::new(model, isa).unwrap();
                session.encode_audio(&expected.mel).unwrap();
                if exact {
                    assert_teacher_forced_logits(
                        &mut session,
                        &expected.forced,
                        &expected.logits,
                        &what,
                    );
                }
                // f16 weights: CTranslate2's f16 model gives the f64 tokens too.
                assert_eq!(
                    greedy(&mut session, &expected),
                    expected.ct2_greedy,
                    "{what}"
                );
            });
        }
    }
}

#[test]
fn whisper_sessions_refuse_tokens_and_misshapen_frames() {
    let model =
        whisper::load_hf_dir(&fixture(FIXTURES[0]).join("hf"), 1, &LoadOptions::default()).unwrap();
    let mut session = Session::new(&model, tessel_kernels::Isa::scalar()).unwrap();
    let n_mels = 80;
    assert!(matches!(
        session.encode(&[1, 2, 3]),
        Err(tessel_model::RunError::WrongInput { .. })
    ));
    for len in [0, n_mels * 3, n_mels * 2 + 1, n_mels * 202] {
        assert!(
            matches!(
                session.encode_audio(&vec![0.0; len]),
                Err(tessel_model::RunError::BadFrames { .. })
            ),
            "{len} values"
        );
    }
    assert!(session.decode_step(&[1]).is_err(), "nothing encoded yet");
    // A shorter window than the model's longest is fine (fewer encoder positions).
    session.encode_audio(&vec![0.25; n_mels * 64]).unwrap();
    assert_eq!(session.source_len(), Some(32));
    assert!(session
        .decode_step(&[1])
        .unwrap()
        .iter()
        .all(|v| v.is_finite()));
}

#[test]
fn staged_audio_encoding_calls_its_hook_once_and_decodes_the_same() {
    let model =
        whisper::load_hf_dir(&fixture(FIXTURES[0]).join("hf"), 1, &LoadOptions::default()).unwrap();
    let expected = expected(FIXTURES[0]);
    let mut session = Session::new(&model, tessel_kernels::Isa::best()).unwrap();
    session.encode_audio(&expected.mel).unwrap();
    let plain = session.decode_step(&expected.prompt[..1]).unwrap().to_vec();
    let mut calls = 0;
    session
        .encode_audio_staged(&expected.mel, || calls += 1)
        .unwrap();
    assert_eq!(calls, 1);
    let staged = session.decode_step(&expected.prompt[..1]).unwrap();
    assert_eq!(plain, staged, "the same logits, bit for bit");
    // Rejected input never reaches the encoder, nor the hook.
    let result = session.encode_audio_staged(&expected.mel[..81], || calls += 1);
    assert!(matches!(
        result,
        Err(tessel_model::RunError::BadFrames { .. })
    ));
    assert_eq!(calls, 1);
}

/// Reads the integer list `key` of a fixture's `ct2/config.json`.
fn config_ids(name: &str, key: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(fixture(name).join("ct2").join("config.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn decoding_rules_match_ctranslate2_greedy_and_beam() {
    use tessel_model::load::ct2::{self, Ct2Options};
    use tessel_model::processors::whisper::{WhisperRules, MAX_INITIAL_TIMESTAMP_INDEX};
    for name in FIXTURES {
        let expected = self::expected(name);
        let bytes = std::fs::read(fixture(name).join("rules.safetensors")).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let ids = |n: &str| ids(&file, n);
        let options = Ct2Options {
            max_beam: 5,
            ..Ct2Options::default()
        };
        let loaded = ct2::load_dir(&fixture(name).join("ct2"), options).unwrap();
        let vocab = &loaded.vocab.target;
        let (suppress, blank) = (
            config_ids(name, "suppress_ids"),
            config_ids(name, "suppress_ids_begin"),
        );
        for (prompt, beam, want, timestamps) in [
            ("prompt_timestamps", 1, "greedy_timestamps", true),
            ("prompt_timestamps", 5, "beam5_timestamps", true),
            ("prompt_plain", 5, "beam5_plain", false),
        ] {
            let rules = WhisperRules {
                eot: vocab.id("<|endoftext|>").unwrap(),
                no_timestamps: vocab.id("<|notimestamps|>").unwrap(),
                timestamp_begin: vocab.id("<|0.00|>").unwrap(),
                blank: &blank,
                suppress: &suppress,
                timestamps,
                max_initial_timestamp_index: Some(MAX_INITIAL_TIMESTAMP_INDEX),
            };
            let want = ids(want);
            for_each_isa(|isa| {
                let mut session = Session::new(&loaded.model, isa).unwrap();
                session.encode_audio(&expected.mel).unwrap();
                let search = SearchOptions::beam(beam, want.len());
                let hyps = session
                    .generate(
                        Request::new(search)
                            .prefix(&ids(prompt))
                            .process(|step| rules.apply(isa, step)),
                    )
                    .unwrap();
                let got = hyps.best().unwrap().tokens;
                assert_eq!(got, &want[..], "{name} {prompt} beam {beam} at {isa}");
            });
        }
    }
}

/// The largest `|tessel - reference|` over every teacher-forced step's logits, relative to the
/// reference's logit scale.
fn worst_relative_logit_error(session: &mut Session<&Model>, expected: &Expected) -> f64 {
    let vocab = session.model().config().tgt_vocab;
    let scale = expected.logits.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (step, &token) in expected.forced.iter().enumerate() {
        let logits = session.decode_step(&[token]).unwrap();
        let want = &expected.logits[step * vocab..(step + 1) * vocab];
        for (&g, &w) in logits.iter().zip(want) {
            worst = worst.max((g as f64 - w).abs() / scale);
        }
    }
    worst
}

/// The encoder memory's K/V stored as `f16`: half the arena bytes of that region, and every
/// step's logits still within 1e-4 of the float64 reference's logit scale, the bound the `f32`
/// memory is held to (each key and value rounded once, by at most 2^-11 relative; measured
/// 1.5e-5 at every level on both fixtures), and the reference's greedy tokens.
#[test]
fn half_cross_attention_memory_stays_near_the_reference() {
    for name in FIXTURES {
        let model = whisper::load_hf_dir(&fixture(name).join("hf"), 1, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(name);
        let config = model.config();
        let full = Limits::of(config);
        let half = full.with_cross_kv(MemoryType::F16);
        let region = |limits: Limits| {
            let plan = ArenaPlan::with_limits(config, limits).unwrap();
            (plan.region("cross_kv").unwrap().bytes, plan.total_bytes())
        };
        let values = config.decoder_layers * config.max_src_len * 2 * config.d_model;
        let ((full_region, full_total), (half_region, half_total)) = (region(full), region(half));
        assert_eq!(
            (full_region, half_region),
            (4 * values, 2 * values),
            "{name}"
        );
        assert!(
            full_total - half_total >= 2 * values - 64,
            "{name}: the arena shrinks"
        );
        for_each_isa(|isa| {
            let what = format!("{name} at {isa}, f16 memory");
            let mut session = Session::with_limits(&model, isa, half).unwrap();
            session.encode_audio(&expected.mel).unwrap();
            let worst = worst_relative_logit_error(&mut session, &expected);
            assert!(worst <= 1e-4, "{what}: logits {worst:e} of the scale away");
            assert_eq!(greedy(&mut session, &expected), expected.greedy, "{what}");
        });
    }
}

/// `tiny_like_80`'s `model.safetensors` with tensors added (name, bytes of the tensor named).
fn with_tensors(added: &[(&str, &str, Option<f32>)]) -> Vec<u8> {
    use safetensors::tensor::{serialize, TensorView};
    let bytes =
        std::fs::read(fixture("tiny_like_80").join("hf").join("model.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, t)| (name, t.dtype(), t.shape().to_vec(), t.data().to_vec()))
        .collect();
    for &(name, from, first) in added {
        let t = file.tensor(from).unwrap();
        let mut data = t.data().to_vec();
        if let Some(value) = first {
            data[..4].copy_from_slice(&value.to_le_bytes());
        }
        owned.push((name.to_string(), t.dtype(), t.shape().to_vec(), data));
    }
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    serialize(views, &None).unwrap()
}

#[test]
fn a_stored_projection_is_read_only_as_a_copy_of_the_table() {
    let text = std::fs::read_to_string(fixture("tiny_like_80").join("hf").join("config.json"));
    let config = whisper::config_from_hf(&text.unwrap(), 1).unwrap();
    let load =
        |bytes: &[u8]| whisper::from_hf_safetensors(config.clone(), bytes, &LoadOptions::default());
    let table = "model.decoder.embed_tokens.weight";
    // A byte copy of the tied table loads.
    assert!(load(&with_tensors(&[("proj_out.weight", table, None)])).is_ok());
    // A different projection is refused: tessel would otherwise project with the table.
    let untied = load(&with_tensors(&[("proj_out.weight", table, Some(7.0))]));
    assert!(
        matches!(&untied, Err(e) if e.to_string().contains("proj_out.weight")),
        "{untied:?}"
    );
    // An unread tensor sorting after the projection is still named.
    let extra = load(&with_tensors(&[
        ("proj_out.weight", table, None),
        ("zz.unread", table, None),
    ]));
    assert!(
        matches!(&extra, Err(e) if e.to_string().contains("zz.unread")),
        "{extra:?}"
    );
}
