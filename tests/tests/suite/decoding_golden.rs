//! Decoding options against `transformers.generate` and CTranslate2's `translate_batch` on the
//! random-weight Marian and NLLB models of `tests/decoding/` (made by
//! `tools/make_decoding_golden.py`): repetition penalty, no-repeat n-grams, min length, forced
//! BOS and EOS, target prefixes, suppressed tokens and sequences, length limits, n-best lists
//! with their scores, `early_stopping` (True, False and "never" under length penalties 0, 1
//! and 2; the steps each search ran equal to `transformers`'), CTranslate2's `patience` (2, and
//! 0.5 at beam 3, which rounds to 2 hypotheses; refused under `transformers`' rules), at every
//! ISA level.
//!
//! Each case runs under [`Convention::Transformers`] against `transformers` and, where
//! CTranslate2 has the option, under [`Convention::CTranslate2`] against CTranslate2. The two
//! references differ (and so do the two conventions) where beam search edits log-probabilities
//! instead of logits; the fixture's cases include such differences.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tessel_model::load::hf::bart;
use tessel_model::{
    Convention, DecodeOptions, EarlyStopping, Generation, LoadOptions, Model, RunError, Session,
};
use tessel_tests::for_each_isa;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("decoding")
        .join(name)
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("a list of ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

/// The case's options over the model's generation defaults (start token, bad words).
fn options(defaults: &DecodeOptions, opts: &Value, convention: Convention) -> DecodeOptions {
    let count = |key: &str, default: usize| opts[key].as_u64().map_or(default, |v| v as usize);
    let mut o = defaults.clone();
    o.search.beam = count("beam", 1);
    o.max_new_tokens = Some(count("max_new_tokens", 20));
    o.num_hypotheses = count("num_hypotheses", 1);
    o.search.length_penalty = opts["length_penalty"].as_f64().unwrap_or(1.0) as f32;
    o.search.patience = opts["patience"].as_f64().unwrap_or(1.0) as f32;
    o.repetition_penalty = opts["repetition_penalty"].as_f64().unwrap_or(1.0) as f32;
    o.no_repeat_ngram_size = count("no_repeat_ngram_size", 0);
    o.min_length = count("min_length", 0);
    o.forced_bos = opts["forced_bos_token_id"].as_u64().map(|v| v as u32);
    o.forced_eos = opts["forced_eos_token_id"].as_u64().map(|v| v as u32);
    o.prefix = opts.get("prefix").map(u32s).unwrap_or_default();
    o.suppress_tokens = opts.get("suppress_tokens").map(u32s).unwrap_or_default();
    if let Some(words) = opts.get("bad_words").and_then(Value::as_array) {
        o.bad_words.extend(words.iter().map(u32s));
    }
    // The fixtures' cases pass `early_stopping=True` unless they name it.
    o.early_stopping = match &opts["early_stopping"] {
        Value::Null | Value::Bool(true) => EarlyStopping::WhenFull,
        Value::Bool(false) => EarlyStopping::Heuristic,
        v if v == "never" => EarlyStopping::Never,
        v => panic!("early_stopping {v}"),
    };
    o.renormalize_logits = opts["renormalize_logits"].as_bool().unwrap_or(false);
    o.convention = convention;
    o
}

/// The best `num_hypotheses` tokens and scores, and the decoder steps the search ran.
fn run(session: &mut Session<&Model>, options: &DecodeOptions) -> (Vec<Vec<u32>>, Vec<f32>, usize) {
    let mut steps = 0;
    let hyps = session
        .generate(
            options
                .request(session)
                .expect("a request")
                .on_step(|_| steps += 1),
        )
        .unwrap();
    let n = options.num_hypotheses;
    (
        hyps.iter().take(n).map(|h| h.tokens.to_vec()).collect(),
        hyps.iter().take(n).map(|h| h.score).collect(),
        steps,
    )
}

/// Scores within `2e-5` per summed log-probability of the reference's (f32 logits against
/// float64 for `transformers`, float32 for CTranslate2), relative to the score's size.
fn check_scores(got: &[f32], tokens: &[Vec<u32>], want: &Value, what: &str) {
    let Some(want) = want.as_array() else { return };
    assert_eq!(got.len(), want.len(), "{what}: number of scores");
    for ((g, w), t) in got.iter().zip(want).zip(tokens) {
        let w = w.as_f64().unwrap() as f32;
        let tol = 2e-5 * t.len() as f32 * w.abs().max(1.0);
        assert!((g - w).abs() <= tol, "{what}: score {g} against {w}");
    }
}

#[test]
fn decoding_options_match_transformers_and_ctranslate2() {
    for name in ["marian", "nllb"] {
        let dir = fixture(name).join("hf");
        let (_, model) = bart::load_hf_dir(&dir, 4, &LoadOptions::default()).unwrap();
        let text = std::fs::read_to_string(dir.join("generation_config.json")).unwrap();
        let mut defaults = Generation::from_json(&text).unwrap().options;
        // The reference runs disable the generation config's forced EOS unless a case asks.
        defaults.forced_eos = None;
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(name).join("expected.json")).unwrap(),
        )
        .unwrap();
        let src = u32s(&expected["src_ids"]);
        let cases = expected["cases"].as_array().unwrap();
        for_each_isa(|isa| {
            let mut session = Session::new(&model, isa).unwrap();
            for case in cases {
                let what = format!("{name} {} at {isa}", case["name"].as_str().unwrap());
                session
                    .encode(&case.get("src_ids").map_or_else(|| src.clone(), u32s))
                    .unwrap();
                if let Some(hf_tokens) = case.get("hf_tokens") {
                    let o = options(&defaults, &case["options"], Convention::Transformers);
                    check_transformers(&mut session, &o, case, hf_tokens, &what);
                } else {
                    // CTranslate2's options alone (patience): transformers refuses them.
                    let o = options(&defaults, &case["options"], Convention::Transformers);
                    let refused = o.request(&session).map(|r| session.generate(r).err());
                    assert!(
                        matches!(refused, Ok(Some(RunError::BadOption(_)))),
                        "{what}: transformers' rules take no patience"
                    );
                }
                // CTranslate2's n-best lists follow its own rules (no EOS below the best
                // candidate right after a forced BOS, registering past `beam` finished ones).
                if let Some(ct2) = case.get("ct2_tokens") {
                    let o = options(&defaults, &case["options"], Convention::CTranslate2);
                    let (tokens, scores, _) = run(&mut session, &o);
                    let want: Vec<Vec<u32>> = ct2.as_array().unwrap().iter().map(u32s).collect();
                    assert_eq!(tokens, want, "{what}: CTranslate2");
                    check_scores(&scores, &tokens, &case["ct2_scores"], &what);
                }
            }
        });
    }
}

/// One case against `transformers`' tokens, decoder steps and scores.
fn check_transformers(
    session: &mut Session<&Model>,
    o: &DecodeOptions,
    case: &Value,
    hf_tokens: &Value,
    what: &str,
) {
    let (tokens, scores, steps) = run(session, o);
    let want: Vec<Vec<u32>> = hf_tokens.as_array().unwrap().iter().map(u32s).collect();
    assert_eq!(tokens, want, "{what}: transformers");
    // When the search stopped: transformers runs no step for a target prefix (a
    // decoder prompt, the forced BOS moved into it), tessel forces it one step per
    // token.
    let prompt = if o.prefix.is_empty() {
        0
    } else {
        o.prefix.len() + usize::from(o.forced_bos.is_some())
    };
    let hf_steps = case["hf_steps"].as_u64().unwrap() as usize;
    assert_eq!(steps - prompt, hf_steps, "{what}: steps");
    // transformers takes a target prefix as a decoder prompt and leaves it out of
    // the length that divides the score; tessel counts it, as CTranslate2 does
    // (length penalty 1 in these cases): convert.
    let p = o.prefix.len() + usize::from(o.forced_bos.is_some());
    let hf_scores = match case["hf_scores"].as_array() {
        Some(s) if !o.prefix.is_empty() => Value::from(
            s.iter()
                .zip(&tokens)
                .map(|(x, t)| {
                    let len = t.len() as f64;
                    x.as_f64().unwrap() * (len - p as f64) / len
                })
                .collect::<Vec<f64>>(),
        ),
        _ => case["hf_scores"].clone(),
    };
    check_scores(&scores, &tokens, &hf_scores, what);
    if o.renormalize_logits {
        // The option moves the scores: the same search without it is farther off.
        let plain = DecodeOptions {
            renormalize_logits: false,
            ..o.clone()
        };
        let (_, plain_scores, _) = run(session, &plain);
        assert!(
            plain_scores.iter().zip(&scores).any(|(a, b)| a != b),
            "{what}: renormalize_logits changes no score"
        );
    }
}

#[test]
fn generation_config_reads_renormalize_logits_and_refuses_zero_beams() {
    let read = |text: &str| Generation::from_json(text).map(|g| g.options.renormalize_logits);
    assert_eq!(read("{}"), Ok(false));
    assert_eq!(read(r#"{"renormalize_logits": true}"#), Ok(true));
    let err = read(r#"{"renormalize_logits": 1}"#).unwrap_err();
    assert!(err.to_string().contains("renormalize_logits"), "{err}");
    let err = read(r#"{"num_beams": 0}"#).unwrap_err();
    assert!(err.to_string().contains("num_beams"), "{err}");
}

#[test]
fn generation_config_reads_early_stopping() {
    let read = |text: &str| Generation::from_json(text).map(|g| g.options.early_stopping);
    assert_eq!(read("{}"), Ok(EarlyStopping::Heuristic));
    assert_eq!(
        read(r#"{"early_stopping": null}"#),
        Ok(EarlyStopping::Heuristic)
    );
    assert_eq!(
        read(r#"{"early_stopping": false}"#),
        Ok(EarlyStopping::Heuristic)
    );
    assert_eq!(
        read(r#"{"early_stopping": true}"#),
        Ok(EarlyStopping::WhenFull)
    );
    assert_eq!(
        read(r#"{"early_stopping": "never"}"#),
        Ok(EarlyStopping::Never)
    );
    for bad in [r#""always""#, "1", "[true]"] {
        let err = read(&format!(r#"{{"early_stopping": {bad}}}"#)).unwrap_err();
        assert!(err.to_string().contains("early_stopping"), "{bad}: {err}");
    }
}

/// tessel's own beam rules (the ones Whisper's windows use) with a patience: the search waits
/// for `round(beam · patience)` finished hypotheses, so it runs at least as many steps as with
/// patience 1, holds the best `beam` of a superset of what patience 1 finished, and on NLLB's
/// fixture (where hypotheses end early) runs longer. A patience under 1 stops sooner.
#[test]
fn tessel_rules_wait_for_beam_times_patience_hypotheses() {
    let dir = fixture("nllb").join("hf");
    let (_, model) = bart::load_hf_dir(&dir, 4, &LoadOptions::default()).unwrap();
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("nllb").join("expected.json")).unwrap(),
    )
    .unwrap();
    let src = u32s(&expected["src_ids"]);
    let forced = expected["cases"][0]["options"]["forced_bos_token_id"]
        .as_u64()
        .unwrap() as u32;
    let prefix = [expected["decoder_start"].as_u64().unwrap() as u32, forced];
    let mut session = Session::new(&model, tessel_kernels::Isa::scalar()).unwrap();
    session.encode(&src).unwrap();
    let mut search = |patience: f32| {
        let options = tessel_model::SearchOptions {
            patience,
            ..tessel_model::SearchOptions::beam(4, 20)
        };
        let mut steps = 0;
        let hyps = session
            .generate(
                tessel_model::Request::new(options)
                    .prefix(&prefix)
                    .on_step(|_| steps += 1),
            )
            .unwrap();
        let found: Vec<(Vec<u32>, f32)> =
            hyps.iter().map(|h| (h.tokens.to_vec(), h.score)).collect();
        (found, steps)
    };
    let (one, one_steps) = search(1.0);
    let (two, two_steps) = search(2.0);
    let (half, half_steps) = search(0.5);
    assert!(
        two_steps > one_steps,
        "patience 2 ran {two_steps} steps, 1 ran {one_steps}"
    );
    assert!(
        half_steps <= one_steps,
        "patience 0.5 ran {half_steps} steps, 1 ran {one_steps}"
    );
    assert!(half.len() <= 2 && one.len() == 4 && two.len() == 4);
    assert!(
        two[0].1 >= one[0].1,
        "the best of more finished hypotheses is no worse"
    );
    // Every hypothesis patience 1 finished early is offered again at patience 2: the best
    // four of a superset score at least as well, rank by rank.
    for (a, b) in two.iter().zip(&one) {
        assert!(a.1 >= b.1, "rank scores {} against {}", a.1, b.1);
    }
    assert_ne!(one, two, "patience 2 changes the hypotheses");
}
