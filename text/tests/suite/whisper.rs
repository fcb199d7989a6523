//! Whisper's tokenizer against `tiktoken` (ids) and openai-whisper's `Tokenizer` (text, start
//! sequences, prompts, non-speech tokens) for the multilingual (99 languages) and large-v3
//! (100 languages) layouts (fixtures: tools/make_text_golden.py).

use crate::common;

use std::collections::BTreeMap;

use common::{fixture, json, EncodeCase, Mismatches};
use serde::Deserialize;
use tessel_text::hf::HfTokenizer;
use tessel_text::whisper::{Task, WhisperTokenizer};
use tessel_text::TextError;

#[derive(Deserialize)]
struct Decode {
    ids: Vec<u32>,
    text: String,
    with_timestamps: String,
}

#[derive(Deserialize)]
struct Sot {
    language: String,
    task: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct Prompt {
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct Expected {
    num_languages: usize,
    special: BTreeMap<String, u32>,
    english_only_sot: Vec<u32>,
    encode: Vec<EncodeCase>,
    decode: Vec<Decode>,
    sot: Vec<Sot>,
    prompts: Vec<Prompt>,
    non_speech_tokens: Vec<u32>,
}

fn load(layout: &str) -> WhisperTokenizer {
    let path = fixture(&format!("whisper/{layout}/tokenizer.json"));
    WhisperTokenizer::new(HfTokenizer::from_file(&path).unwrap(), "tokenizer.json").unwrap()
}

fn golden(layout: &str) {
    let tok = load(layout);
    let want: Expected = json(&format!("whisper/{layout}/expected.json"));
    let mut m = Mismatches::default();
    let special = [
        ("<|endoftext|>", tok.eot()),
        ("<|startoftranscript|>", tok.sot()),
        ("<|translate|>", tok.translate()),
        ("<|transcribe|>", tok.transcribe()),
        ("<|startoflm|>", tok.sot_lm()),
        ("<|startofprev|>", tok.sot_prev()),
        ("<|nospeech|>", tok.no_speech()),
        ("<|notimestamps|>", tok.no_timestamps()),
        ("<|0.00|>", tok.timestamp_begin()),
        ("<|30.00|>", tok.timestamp_begin() + 1500),
    ];
    for (name, id) in special {
        m.check(name, Some(id), want.special.get(name).copied());
    }
    m.check("languages", tok.language_tokens().len(), want.num_languages);
    for case in &want.encode {
        m.check(
            format!("encode {:?}", case.text),
            tok.encode(&case.text).unwrap(),
            case.ids.clone(),
        );
        let text = case.decoded.clone().unwrap();
        m.check(
            format!("decode {:?}", case.ids),
            tok.decode(&case.ids).unwrap(),
            text,
        );
    }
    for case in &want.decode {
        m.check(
            format!("decode {:?}", case.ids),
            tok.decode(&case.ids).unwrap(),
            case.text.clone(),
        );
        let with = tok.decode_with_timestamps(&case.ids).unwrap();
        m.check(
            format!("with timestamps {:?}", case.ids),
            with,
            case.with_timestamps.clone(),
        );
    }
    for case in &want.sot {
        let task = if case.task == "translate" {
            Task::Translate
        } else {
            Task::Transcribe
        };
        let got = tok.sot_sequence(Some(&case.language), Some(task)).unwrap();
        m.check(
            format!("sot {} {}", case.language, case.task),
            got,
            case.ids.clone(),
        );
    }
    m.check(
        "english-only sot",
        tok.sot_sequence(None, None).unwrap(),
        want.english_only_sot,
    );
    for case in &want.prompts {
        m.check(
            format!("prompt {:?}", case.text),
            tok.encode_prompt(&case.text).unwrap(),
            case.ids.clone(),
        );
    }
    m.check(
        "non-speech tokens",
        tok.non_speech_tokens().unwrap(),
        want.non_speech_tokens,
    );
    m.finish();
}

#[test]
fn multilingual_layout_matches_tiktoken_and_openai_whisper() {
    golden("multilingual");
}

#[test]
fn large_v3_layout_matches_tiktoken_and_openai_whisper() {
    golden("v3");
}

#[test]
fn timestamp_text_matches_the_file_tokens() {
    let tok = load("multilingual");
    for step in 0..1501u32 {
        let id = tok.timestamp_begin() + step;
        let text = tok.decode_with_timestamps(&[id]).unwrap();
        assert_eq!(Some(text), tok.hf().id_to_token(id), "timestamp {step}");
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let tok = load("multilingual");
    assert!(matches!(
        tok.encode("a <|endoftext|> b"),
        Err(TextError::SpecialTokenInText { .. })
    ));
    assert!(matches!(
        tok.sot_sequence(Some("yue"), None),
        Err(TextError::UnknownLanguage { .. })
    ));
    assert!(matches!(
        tok.sot_sequence(Some("klingon"), None),
        Err(TextError::UnknownLanguage { .. })
    ));
    assert_eq!(
        tok.sot_sequence(Some("German"), None).unwrap(),
        tok.sot_sequence(Some("de"), None).unwrap()
    );
    let past = tok.vocab_size() as u32;
    assert!(matches!(
        tok.decode(&[past]),
        Err(TextError::UnknownId { .. })
    ));
    assert!(load("v3").sot_sequence(Some("yue"), None).is_ok());
}
