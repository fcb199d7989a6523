//! The direct BPE reader of `tokenizer.json` against `tokenizers`' own reading: on every
//! `tokenizer.json` the repository's fixtures hold (Whisper, BART, LED, Marian, mBART, M2M100,
//! NLLB, T5, LongT5 and the trained byte-level BPE), and on variants of them it must leave to
//! the library.

use std::path::{Path, PathBuf};

use tessel_text::hf::HfTokenizer;

/// Every `tokenizer.json` under `text/tests/fixtures` and the workspace's `tests/`.
fn tokenizer_files() -> Vec<PathBuf> {
    let text = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for root in [text.join("tests/fixtures"), text.join("../tests")] {
        collect(&root, &mut files);
    }
    files.sort();
    files
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.file_name().is_some_and(|n| n == "tokenizer.json") {
            files.push(path);
        }
    }
}

/// The library's reading of `bytes`, serialised.
fn library(bytes: &[u8]) -> String {
    HfTokenizer::read_library(bytes)
        .expect("the library reads it")
        .to_string(false)
        .expect("serialises")
}

#[test]
fn direct_reading_builds_what_the_library_builds() {
    let files = tokenizer_files();
    assert!(
        files.len() >= 30,
        "found only {} tokenizer.json files",
        files.len()
    );
    let mut direct = 0;
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let reference = library(&bytes);
        match HfTokenizer::read_direct(&bytes) {
            Some(tokenizer) => {
                direct += 1;
                let built = tokenizer.to_string(false).unwrap();
                assert!(
                    built == reference,
                    "{}: direct reading differs",
                    path.display()
                );
            }
            // Only a model of another type may be left to the library.
            None => assert!(
                !reference.contains(r#""type":"BPE""#),
                "{}: a BPE file left to the library",
                path.display()
            ),
        }
        let loaded = HfTokenizer::from_bytes(&bytes, "tokenizer.json").unwrap();
        let library = HfTokenizer::read_library(&bytes).unwrap();
        let max_id = library.get_vocab(true).values().copied().max();
        assert_eq!(
            loaded.vocab_size(),
            max_id.map_or(0, |id| id as usize + 1),
            "{}",
            path.display()
        );
    }
    // The fixtures hold sixteen BPE files (Whisper, BART, NLLB, the trained byte-level BPE).
    assert!(direct >= 16, "only {direct} files read directly");
}

/// A Whisper `tokenizer.json` (BPE, 1,600 added tokens) as a JSON value.
fn whisper() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/whisper/multilingual/tokenizer.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Two tokens of one id (found by the `tokenizer_files` fuzz target): the library's reading
/// keeps either, differently from one reading to the next, so the direct reader leaves the file
/// to it.
#[test]
fn tokens_sharing_an_id_are_left_to_the_library() {
    let mut v = whisper();
    let vocab = v["model"]["vocab"].as_object_mut().unwrap();
    let (first, id) = vocab
        .iter()
        .find(|(_, id)| id.as_u64() == Some(300))
        .map(|(t, id)| (t.clone(), id.clone()))
        .unwrap();
    let other = vocab
        .iter()
        .find(|(t, id)| **t != first && id.as_u64() == Some(301))
        .map(|(t, _)| t.clone())
        .unwrap();
    vocab.insert(other, id);
    let text = v.to_string();
    assert!(HfTokenizer::read_direct(text.as_bytes()).is_none());
    assert!(HfTokenizer::from_bytes(text.as_bytes(), "tokenizer.json").is_ok());
}

#[test]
fn unusual_files_are_left_to_the_library() {
    let base = whisper();
    let variants: Vec<(&str, String)> = vec![
        ("a repeated top-level key", {
            let text = serde_json::to_string(&base).unwrap();
            text.replacen('{', r#"{"decoder":null,"#, 1)
        }),
        ("an unknown field of the model", {
            let mut v = base.clone();
            v["model"]["extra"] = serde_json::json!({"type": "Precompiled"});
            v.to_string()
        }),
        ("another version", {
            let mut v = base.clone();
            v["version"] = "2.0".into();
            v.to_string()
        }),
        ("a top-level type", {
            let mut v = base.clone();
            v["type"] = "TemplateProcessing".into();
            v.to_string()
        }),
        ("a merge line of three parts", {
            let mut v = base.clone();
            v["model"]["merges"] = serde_json::json!(["a b c"]);
            v.to_string()
        }),
        ("a post-processor naming an undefined special token", {
            let mut v = base.clone();
            v["post_processor"] = serde_json::json!({
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<nope>", "type_id": 0}}],
                "pair": [],
                "special_tokens": {}
            });
            v.to_string()
        }),
        ("a model of another type", {
            let mut v = base.clone();
            v["model"]["type"] = "WordLevel".into();
            v.to_string()
        }),
        ("an array", "[]".to_owned()),
    ];
    for (what, text) in variants {
        assert!(
            HfTokenizer::read_direct(text.as_bytes()).is_none(),
            "{what}: read directly"
        );
        // What the library makes of it is what `from_bytes` returns.
        let library =
            HfTokenizer::read_library(text.as_bytes()).map(|t| t.to_string(false).unwrap());
        let loaded = HfTokenizer::from_bytes(text.as_bytes(), "tokenizer.json")
            .map(|t| t.inner().to_string(false).unwrap());
        assert_eq!(
            library.map_err(|e| e.to_string()),
            loaded.map_err(|e| e.to_string()),
            "{what}"
        );
    }
}

#[test]
fn legacy_merge_lines_read_directly() {
    let mut v = whisper();
    let merges = v["model"]["merges"].as_array().unwrap().clone();
    let lines: Vec<serde_json::Value> = merges
        .iter()
        .map(|pair| match pair {
            serde_json::Value::Array(p) => {
                format!("{} {}", p[0].as_str().unwrap(), p[1].as_str().unwrap()).into()
            }
            line => line.clone(),
        })
        .chain(std::iter::once("#version: 0.2".into()))
        .collect();
    v["model"]["merges"] = lines.into();
    let text = v.to_string();
    let direct = HfTokenizer::read_direct(text.as_bytes()).expect("read directly");
    assert!(direct.to_string(false).unwrap() == library(text.as_bytes()));
}
