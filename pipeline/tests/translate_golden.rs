//! Text to text through [`Translator`] against the Python pipeline (`tokenizer(text)`,
//! `model.generate` with the directory's generation config, `tokenizer.decode`) on the
//! random-weight Marian (SentencePiece through `vocab.json`) and NLLB (`tokenizer.json`)
//! models of `tests/decoding/` (made by `tools/make_decoding_golden.py`); and the typed errors
//! of the model-directory loader and the translator.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tessel_kernels::Isa;
use tessel_pipeline::model_dir::{HfFamily, Kind};
use tessel_pipeline::{LoadSettings, ModelDir, ModelDirError, TranslateError, Translator};
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

#[test]
fn text_to_text_matches_the_python_pipeline() {
    for name in ["marian", "nllb"] {
        let dir = model_dir(name);
        let expected = expected(name);
        let (src, tgt) = languages(&expected);
        let translator = Translator::load(
            &dir,
            LoadSettings::default(),
            src.as_deref(),
            tgt.as_deref(),
        )
        .unwrap();
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
fn model_dir_detects_the_family_and_reads_generation_defaults() {
    let dir = model_dir("marian");
    let loaded = ModelDir::load(&dir, LoadSettings::default()).unwrap();
    assert_eq!(loaded.kind, Kind::HuggingFace(HfFamily::Marian));
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
    // An unknown language code.
    let err = Translator::load(&dir, settings, Some("eng_Latn"), Some("xx_Fake"))
        .err()
        .unwrap();
    assert!(
        matches!(&err, TranslateError::Tokenizer(TextError::UnknownLanguage { code, .. }) if code == "xx_Fake"),
        "{err}"
    );
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
        matches!(&err, ModelDirError::UnknownModelType { model_type, .. } if model_type == "nllb-moe"),
        "{err}"
    );
    std::fs::write(&config, text).unwrap();
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(matches!(err, ModelDirError::MissingFile { .. }), "{err}");
    std::fs::remove_file(&config).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(matches!(err, ModelDirError::MissingFile { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
    let err = ModelDir::load(&dir, settings).err().unwrap();
    assert!(matches!(err, ModelDirError::NotADirectory(_)), "{err}");
}
