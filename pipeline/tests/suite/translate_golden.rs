//! Text to text through [`Translator`] against the Python pipeline (`tokenizer(text)`,
//! `model.generate` with the directory's generation config, `tokenizer.decode`) on the
//! random-weight Marian (SentencePiece through `vocab.json`) and NLLB (`tokenizer.json`)
//! models of `tests/decoding/` (made by `tools/make_decoding_golden.py`); and the typed errors
//! of the model-directory loader and the translator.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tessel_kernels::Isa;
use tessel_model::load::directory::{registry, Format, OpenError};
use tessel_pipeline::{
    LoadSettings, ModelDir, ModelDirError, TranslateError, TranslateOptions, Translator,
};
use tessel_tests::for_each_isa;
use tessel_text::TextError;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A temporary copy of a fixture model directory, with Marian's source.spm copied in: one of
/// its own for every call, since the tests run in parallel and each removes its copy.
fn model_dir(name: &str) -> PathBuf {
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let copy = COPIES.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tessel-translate-{name}-{}-{copy}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = root().join("tests/decoding").join(name).join("hf");
    for entry in std::fs::read_dir(&hf).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    if name == "marian" {
        let spm = root().join("text/tests/fixtures/spm/unigram.model");
        std::fs::copy(spm, dir.join("source.spm")).unwrap();
    }
    dir
}

fn expected(name: &str) -> Value {
    let path = root()
        .join("tests/decoding")
        .join(name)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn languages(expected: &Value) -> (Option<String>, Option<String>) {
    let lang = |k: &str| expected["languages"][k].as_str().map(str::to_owned);
    (lang("src_lang"), lang("tgt_lang"))
}

/// A copy of fixture `name` ([`model_dir`]), its expected outputs, and its translator loaded
/// with default settings in the languages the expected outputs name.
fn golden(name: &str) -> (PathBuf, Value, Translator) {
    let dir = model_dir(name);
    let expected = expected(name);
    let (src, tgt) = languages(&expected);
    let settings = LoadSettings::default();
    let translator = Translator::load(&dir, settings, src.as_deref(), tgt.as_deref()).unwrap();
    (dir, expected, translator)
}

#[test]
fn text_to_text_matches_the_python_pipeline() {
    for name in ["marian", "nllb"] {
        let (dir, expected, translator) = golden(name);
        for_each_isa(|isa| {
            let mut session = translator.session(isa, 1).unwrap();
            for line in expected["pipeline"].as_array().unwrap() {
                let text = line["text"].as_str().unwrap();
                let what = format!("{name} at {isa}: {text:?}");
                let got = session.translate_with(text, translator.defaults()).unwrap();
                let ids: Vec<u32> = line["generated"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as u32)
                    .collect();
                assert_eq!(got[0].tokens, ids, "{what}: ids");
                assert_eq!(
                    got[0].text,
                    line["output"].as_str().unwrap(),
                    "{what}: text"
                );
                assert_eq!(session.translate(text).unwrap(), got[0].text, "{what}");
            }
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn other_languages_share_the_model_and_translate_as_if_loaded_with_them() {
    let (dir, expected, loaded_with) = golden("nllb");
    let (src, tgt) = languages(&expected);
    let default = Translator::load(&dir, LoadSettings::default(), None, None).unwrap();
    let switched = default
        .with_languages(src.as_deref(), tgt.as_deref())
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(switched.model(), default.model()));
    assert_eq!(switched.defaults(), loaded_with.defaults());
    assert_ne!(default.defaults(), loaded_with.defaults());
    let (mut a, mut b) = (
        loaded_with.session(Isa::best(), 1).unwrap(),
        switched.session(Isa::best(), 1).unwrap(),
    );
    for line in expected["pipeline"].as_array().unwrap() {
        let text = line["text"].as_str().unwrap();
        assert_eq!(a.translate(text).unwrap(), b.translate(text).unwrap());
        assert_eq!(b.translate(text).unwrap(), line["output"].as_str().unwrap());
    }
    let refused = default.with_languages(Some("xx_Nope"), None);
    assert!(
        matches!(refused, Err(TranslateError::Tokenizer(_))),
        "an unknown language code is a tokenizer error"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn model_dir_detects_the_family_and_reads_generation_defaults() {
    let dir = model_dir("marian");
    let loaded = ModelDir::load(&dir, LoadSettings::default()).unwrap();
    assert_eq!(
        *loaded.directory.format(),
        Format::HuggingFace(registry::family("marian").unwrap())
    );
    let options = &loaded.generation.options;
    assert_eq!(options.search.beam, 4);
    assert_eq!(options.max_length, 32);
    let pad = loaded.tokenizer.pad_id().unwrap();
    assert_eq!(options.decoder_start, Some(pad));
    assert_eq!(options.bad_words, vec![vec![pad]]);
    assert_eq!(options.forced_eos, loaded.tokenizer.eos_id());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_directories_and_inputs_are_typed_errors() {
    let dir = model_dir("nllb");
    let settings = LoadSettings::default();
    // An unknown language code, and a special token that is not a language code.
    for bad in ["xx_Fake", "</s>"] {
        let err = Translator::load(&dir, settings, Some("eng_Latn"), Some(bad))
            .err()
            .unwrap();
        assert!(
            matches!(&err, TranslateError::Tokenizer(TextError::UnknownLanguage { code, .. }) if code == bad),
            "{err}"
        );
    }
    // A language for a model without language codes.
    let marian = model_dir("marian");
    let err = Translator::load(&marian, settings, None, Some("de"))
        .err()
        .unwrap();
    assert!(
        matches!(&err, TranslateError::Tokenizer(TextError::NoLanguages { code, .. }) if code == "de"),
        "{err}"
    );
    std::fs::remove_dir_all(&marian).unwrap();
    // A source over the model's 64 positions, refused unless truncation is asked for.
    let translator = Translator::load(&dir, settings, None, Some("fra_Latn")).unwrap();
    let mut session = translator.session(Isa::best(), 1).unwrap();
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    let err = session.translate(&long).err().unwrap();
    assert!(
        matches!(err, TranslateError::SourceTooLong { max: 64, .. }),
        "{err}"
    );
    let mut options = translator.defaults().clone();
    options.truncate = true;
    let out = session.translate_with(&long, &options).unwrap();
    assert_eq!(out.len(), 1);
    // An unknown model type, and missing files.
    let config = dir.join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("\"m2m_100\"", "\"nllb-moe\"")).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(
        matches!(&err, ModelDirError::Open(OpenError::UnknownModelType { model_type, .. }) if model_type == "nllb-moe"),
        "{err}"
    );
    std::fs::write(&config, text).unwrap();
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(
        matches!(err, ModelDirError::Open(OpenError::MissingFile { .. })),
        "{err}"
    );
    std::fs::remove_file(&config).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(
        matches!(err, ModelDirError::Open(OpenError::MissingFile { .. })),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(
        matches!(err, ModelDirError::Open(OpenError::NotFound(_))),
        "{err}"
    );
}

/// A directory of a test's own holding text fixtures under new names.
fn text_fixture_dir(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessel-vocab-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in files {
        let from = root().join("text/tests/fixtures").join(from);
        std::fs::copy(&from, dir.join(to)).unwrap();
    }
    dir
}

/// The vocabulary `ct2-transformers-converter` wrote (tools/make_text_layouts_golden.py).
fn ct2_vocabulary(rel: &str) -> Vec<String> {
    let path = root().join("text/tests/fixtures/layouts").join(rel);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The vocabularies the CTranslate2 converter writes for T5 (spiece.model alone, and
/// tokenizer.json, in an embedding padded to a multiple of 128: rows named `<extra_id_N>`) and
/// M2M100 (`__xx__` language tokens, `madeupwordN` rows) agree with the copied tokenizers; a
/// vocabulary that does not is refused, naming the token.
#[test]
fn ct2_vocabularies_of_copied_tokenizers_pass_the_cross_check() {
    use tessel_model::load::ct2::Vocabulary;
    use tessel_pipeline::model_dir::check_vocabulary;
    use tessel_text::TextTokenizer;

    let t5 = text_fixture_dir("t5", &[("layouts/t5/spiece.model", "spiece.model")]);
    let m2m = text_fixture_dir(
        "m2m100",
        &[
            ("spm/bpe.model", "sentencepiece.bpe.model"),
            ("m2m100/vocab.json", "vocab.json"),
        ],
    );
    let t5_json = root().join("text/tests/fixtures/t5");
    let cases = [
        (&t5, "t5/ct2_spiece_vocabulary.json"),
        (&t5_json, "t5/ct2_json_vocabulary.json"),
        (&m2m, "m2m100/ct2_vocabulary.json"),
    ];
    for (dir, vocabulary) in cases {
        let tokenizer = TextTokenizer::from_dir(dir).unwrap();
        let tokens = ct2_vocabulary(vocabulary);
        assert!(
            tokens.len() > tokenizer.vocab_size(),
            "{vocabulary} is padded"
        );
        let result = check_vocabulary(&Vocabulary::new(tokens.clone()), &tokenizer);
        assert!(result.is_ok(), "{vocabulary}: {}", result.unwrap_err());

        // Two tokens swapped: refused at the first.
        let mut swapped = tokens.clone();
        swapped.swap(10, 11);
        let err = check_vocabulary(&Vocabulary::new(swapped), &tokenizer).unwrap_err();
        assert!(
            matches!(&err, ModelDirError::VocabularyMismatch { model: 10, token, .. } if *token == tokens[11]),
            "{vocabulary}: {err}"
        );
        // A padding row out of place, and one of another family's name.
        let size = tokenizer.vocab_size();
        for bad in ["<extra_id_7>", "madeupword3", "<pad>"] {
            let mut renamed = tokens.clone();
            renamed[size + 1] = bad.to_owned();
            let err = check_vocabulary(&Vocabulary::new(renamed), &tokenizer).unwrap_err();
            assert!(
                matches!(&err, ModelDirError::VocabularyMismatch { model, .. } if *model as usize == size + 1),
                "{vocabulary} with {bad}: {err}"
            );
        }
    }
    std::fs::remove_dir_all(&t5).unwrap();
    std::fs::remove_dir_all(&m2m).unwrap();
}

/// Texts submitted to a queue of two slots, some between its steps, with different options
/// (greedy, and beam 2 with both hypotheses), each come back once under their ticket with the
/// hypotheses a session gives them alone: tokens, score bits and text. An empty text finishes
/// with none; a text too long for the model is refused when submitted.
#[test]
fn a_queue_translates_texts_submitted_between_steps_as_alone() {
    let (dir, expected, translator) = golden("marian");
    let greedy = translator.defaults().clone();
    let mut beam = greedy.clone();
    beam.decode.search.beam = 2;
    beam.decode.num_hypotheses = 2;
    let texts = expected["pipeline"].as_array().unwrap().iter();
    let texts: Vec<&str> = texts.map(|line| line["text"].as_str().unwrap()).collect();
    let mut jobs: Vec<(&str, &TranslateOptions)> = Vec::new();
    for text in texts.iter().chain(&[""]) {
        jobs.push((*text, &greedy));
        jobs.push((*text, &beam));
    }
    for_each_isa(|isa| {
        let mut session = translator.session(isa, 1).unwrap();
        let alone: Vec<_> = (jobs.iter())
            .map(|(text, options)| session.translate_with(text, options).unwrap())
            .collect();
        let mut queue = translator.queue(isa, 1, 2).unwrap();
        let too_long = "fox ".repeat(1000);
        assert!(matches!(
            queue.submit(&too_long, &greedy),
            Err(TranslateError::SourceTooLong { .. })
        ));
        let mut tickets = Vec::new();
        let mut got = std::collections::HashMap::new();
        // Three texts first, then one more after each step.
        for (text, options) in &jobs[..3] {
            tickets.push(queue.submit(text, options).unwrap());
        }
        while queue.pending() > 0 || tickets.len() < jobs.len() {
            for (ticket, result) in queue.step() {
                assert!(
                    got.insert(ticket, result.unwrap()).is_none(),
                    "{ticket:?} twice"
                );
            }
            if let Some((text, options)) = jobs.get(tickets.len()) {
                tickets.push(queue.submit(text, options).unwrap());
            }
        }
        for ((ticket, want), (text, _)) in tickets.iter().zip(&alone).zip(&jobs) {
            assert_eq!(got.get(ticket), Some(want), "{text:?} at {isa}");
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}
