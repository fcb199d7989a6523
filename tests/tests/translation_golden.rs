//! The BART-derived translation families (Marian, BART, mBART, M2M100) from Hugging Face
//! directories against `transformers` (float64) and CTranslate2, on random-weight models of
//! their real graphs (`tests/translation/*`, made by `tools/make_translation_golden.py`):
//! teacher-forced logits within 1e-4 of the logit scale, greedy and beam-4 tokens identical to
//! both references, at every ISA level.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_model::families::bart::{self, Family};
use tessel_model::families::t5;
use tessel_model::{LoadOptions, Model, SearchOptions, Session};
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

struct Expected {
    src: Vec<u32>,
    forced: Vec<u32>,
    logits: Vec<f64>,
    greedy: Vec<u32>,
    beam4: Vec<u32>,
    ct2_greedy: Vec<u32>,
    ct2_beam4: Vec<u32>,
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
        ct2_greedy: ids("ct2_greedy_tokens"),
        ct2_beam4: ids("ct2_beam4_tokens"),
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
        .generate_with(prompt, &SearchOptions::beam(beam, steps), |step| {
            for b in 0..step.beams {
                let row = step.row_mut(b);
                for &t in banned {
                    row[t as usize] = f32::NEG_INFINITY;
                }
            }
        })
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
            expected.greedy, expected.ct2_greedy,
            "{name}: references agree"
        );
        assert_eq!(
            expected.beam4, expected.ct2_beam4,
            "{name}: references agree"
        );
        let (prompt, banned) = generation(name);
        for_each_isa(|isa| {
            let what = format!("{name} at {isa}");
            let mut session = Session::new(&model, isa).unwrap();
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
}

#[test]
fn hugging_face_t5_matches_transformers_and_ctranslate2() {
    for name in ["t5", "t5_tied"] {
        let model = t5::load_hf_dir(&fixture(name).join("hf"), 32, 4, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = expected(name);
        assert_eq!(
            expected.greedy, expected.ct2_greedy,
            "{name}: references agree"
        );
        let (prompt, banned) = generation(name);
        for_each_isa(|isa| {
            let what = format!("{name} at {isa}");
            let mut session = Session::new(&model, isa).unwrap();
            session.encode(&expected.src).unwrap();
            assert_teacher_forced_logits(&mut session, &expected.forced, &expected.logits, &what);
            let total = expected.greedy.len();
            let greedy = search(&mut session, &prompt, &banned, 1, total);
            assert_eq!(greedy, expected.greedy, "{what}: greedy");
            let beam = search(&mut session, &prompt, &banned, 4, total);
            assert_eq!(beam, expected.beam4, "{what}: beam 4");
        });
    }
}
