//! The BART-derived translation families (Marian, BART, mBART, M2M100) from Hugging Face
//! directories against `transformers` (float64) and CTranslate2, on random-weight models of
//! their real graphs (`tests/translation/*`, made by `tools/make_translation_golden.py`):
//! teacher-forced logits within 1e-4 of the logit scale, greedy and beam-4 tokens identical to
//! both references, at every ISA level. The layouts of published checkpoints that the first
//! fixtures do not have (`tools/make_zoo_golden.py`: untied Marian as `transformers` 5 and 4
//! save it, Marian with separate vocabularies, T5 v1.1 with 6 heads of 16 over a width of 32
//! and its untied, copied and ignored tensors) are held to `transformers` the same way.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_model::load::hf::bart::{self, Family};
use tessel_model::load::hf::t5;
use tessel_model::{LoadOptions, Model, Request, SearchOptions, Session};
use tessel_tests::for_each_isa;
use tessel_tests::golden::{assert_teacher_forced_logits, ids, values};

const FIXTURES: [(&str, Family); 4] = [
    ("marian", Family::Marian),
    ("bart", Family::Bart),
    ("mbart", Family::MBart),
    ("m2m100", Family::M2m100),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("translation")
        .join(name)
}

/// Fixtures of published layouts: name, family (`None`: T5).
const LAYOUTS: [(&str, Option<Family>); 4] = [
    ("marian_untied", Some(Family::Marian)),
    ("marian_untied_v4", Some(Family::Marian)),
    ("marian_separate", Some(Family::Marian)),
    ("t5_v1_1", None),
];

struct Expected {
    src: Vec<u32>,
    forced: Vec<u32>,
    logits: Vec<f64>,
    greedy: Vec<u32>,
    beam4: Vec<u32>,
    /// CTranslate2's tokens, where the fixture has a CTranslate2 directory.
    ct2_greedy: Option<Vec<u32>>,
    ct2_beam4: Option<Vec<u32>>,
}

fn expected(name: &str) -> Expected {
    let bytes = std::fs::read(fixture(name).join("expected.safetensors")).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let ids = |n: &str| ids(&file, n);
    Expected {
        src: ids("src_ids"),
        forced: ids("decoder_input_ids"),
        logits: values(&file, "logits"),
        greedy: ids("greedy_tokens"),
        beam4: ids("beam4_tokens"),
        ct2_greedy: file
            .tensor("ct2_greedy_tokens")
            .ok()
            .map(|_| ids("ct2_greedy_tokens")),
        ct2_beam4: file
            .tensor("ct2_beam4_tokens")
            .ok()
            .map(|_| ids("ct2_beam4_tokens")),
    }
}

/// The decoder prompt (start, then the forced BOS where the generation config has one) and the
/// tokens the generation config bans.
fn generation(name: &str) -> (Vec<u32>, Vec<u32>) {
    let path = fixture(name).join("hf").join("generation_config.json");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let id = |key: &str| value[key].as_u64().map(|v| v as u32);
    let mut prompt = vec![id("decoder_start_token_id").unwrap()];
    prompt.extend(id("forced_bos_token_id"));
    let banned = value["bad_words_ids"]
        .as_array()
        .map(|words| {
            words
                .iter()
                .filter_map(|w| w.as_array().filter(|w| w.len() == 1))
                .map(|w| w[0].as_u64().unwrap() as u32)
                .collect()
        })
        .unwrap_or_default();
    (prompt, banned)
}

fn search(
    session: &mut Session<&Model>,
    prompt: &[u32],
    banned: &[u32],
    beam: usize,
    total: usize,
) -> Vec<u32> {
    let steps = total - prompt.len();
    let hyps = session
        .generate(
            Request::new(SearchOptions::beam(beam, steps))
                .prefix(prompt)
                .process(|step| {
                    for b in 0..step.beams {
                        let row = step.row_mut(b);
                        for &t in banned {
                            row[t as usize] = f32::NEG_INFINITY;
                        }
                    }
                }),
        )
        .unwrap();
    let mut tokens = prompt.to_vec();
    tokens.extend_from_slice(hyps.best().unwrap().tokens);
    tokens
}

#[test]
fn hugging_face_bart_family_matches_transformers_and_ctranslate2() {
    for (name, family) in FIXTURES {
        let (loaded, model) =
            bart::load_hf_dir(&fixture(name).join("hf"), 4, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(loaded, family);
        let expected = expected(name);
        assert_eq!(
            Some(&expected.greedy),
            expected.ct2_greedy.as_ref(),
            "{name}: references agree"
        );
        assert_eq!(
            Some(&expected.beam4),
            expected.ct2_beam4.as_ref(),
            "{name}: references agree"
        );
        check(name, &model);
    }
}

/// Teacher-forced logits, greedy and beam-4 tokens of `model` against the fixture's
/// `transformers` references, at every ISA level.
fn check(name: &str, model: &Model) {
    let expected = expected(name);
    let (prompt, banned) = generation(name);
    for_each_isa(|isa| {
        let what = format!("{name} at {isa}");
        let mut session = Session::new(model, isa).unwrap();
        session.encode(&expected.src).unwrap();
        assert_teacher_forced_logits(&mut session, &expected.forced, &expected.logits, &what);
        let total = expected.greedy.len();
        assert_eq!(
            search(&mut session, &prompt, &banned, 1, total),
            expected.greedy,
            "{what}: greedy"
        );
        assert_eq!(
            search(&mut session, &prompt, &banned, 4, total),
            expected.beam4,
            "{what}: beam 4"
        );
    });
}

#[test]
fn published_layouts_read_the_tensors_transformers_reads() {
    for (name, family) in LAYOUTS {
        let dir = fixture(name).join("hf");
        let model = match family {
            Some(family) => {
                let (loaded, model) = bart::load_hf_dir(&dir, 4, &LoadOptions::default())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(loaded, family);
                model
            }
            None => t5::load_hf_dir(&dir, 32, 4, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        };
        check(name, &model);
    }
}

#[test]
fn hugging_face_t5_matches_transformers_and_ctranslate2() {
    for name in ["t5", "t5_tied"] {
        let model = t5::load_hf_dir(&fixture(name).join("hf"), 32, 4, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(name);
        assert_eq!(
            Some(&expected.greedy),
            expected.ct2_greedy.as_ref(),
            "{name}: references agree"
        );
        check(name, &model);
    }
}

#[test]
fn stack_shapes_tessel_cannot_run_are_refused_naming_the_feature() {
    let path = fixture("bart").join("hf").join("config.json");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (key, value, feature) in [
        ("decoder_ffn_dim", 96, "feed-forward widths"),
        ("decoder_attention_heads", 2, "attention heads"),
    ] {
        let mut config = base.clone();
        config[key] = value.into();
        let err = bart::config_from_hf(&config.to_string(), 4).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("unsupported model") && text.contains(feature),
            "{key}: {text}"
        );
    }
    let mut moe = base.clone();
    moe["model_type"] = "nllb-moe".into();
    let err = bart::config_from_hf(&moe.to_string(), 4).unwrap_err();
    assert!(err.to_string().contains("nllb-moe"), "{err}");
}
