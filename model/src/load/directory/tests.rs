//! What [`Directory::open`] tells from small files alone, on directories written here.

use std::path::{Path, PathBuf};

use super::registry::{self, FAMILIES};
use super::{Directory, Format, Modality, OpenError};

/// A fresh directory under the system's temporary directory holding `files`.
fn dir_with(name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessel-directory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    dir
}

/// The start of a CTranslate2 `model.bin` of binary version 6 naming `spec`.
fn model_bin(spec: &str) -> Vec<u8> {
    let mut bytes = 6u32.to_le_bytes().to_vec();
    let name = format!("{spec}\0");
    bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
    bytes.extend_from_slice(name.as_bytes());
    bytes
}

fn open(dir: &Path) -> Directory {
    Directory::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

#[test]
fn every_model_type_names_one_family() {
    let types: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|row| row.model_types)
        .copied()
        .collect();
    for model_type in &types {
        let rows = FAMILIES
            .iter()
            .filter(|row| row.model_types.contains(model_type));
        assert_eq!(rows.count(), 1, "{model_type}");
        assert!(registry::supported_model_types().contains(model_type));
    }
    assert_eq!(registry::family("mt5").map(|row| row.name), Some("T5"));
    assert_eq!(
        registry::family("whisper").map(|row| row.modality),
        Some(Modality::Speech)
    );
}

#[test]
fn each_format_is_told_from_its_small_files() {
    let hf = dir_with(
        "hf",
        &[(
            "config.json",
            br#"{"model_type": "m2m_100", "decoder_start_token_id": 2, "num_beams": 5}"#,
        )],
    );
    let opened = open(&hf);
    assert_eq!(opened.family().map(|row| row.name), Some("M2M100/NLLB"));
    assert_eq!(opened.modality(), Some(Modality::Text));
    // Without generation_config.json, config.json's keys are the defaults.
    assert_eq!(opened.generation().options.search.beam, 5);
    assert_eq!(opened.generation().options.decoder_start, Some(2));
    assert_eq!(
        opened.describe(),
        "a Hugging Face M2M100/NLLB model (translation)"
    );

    let ct2 = dir_with(
        "ct2",
        &[
            ("model.bin", &model_bin("WhisperSpec")),
            (
                "generation_config.json",
                br#"{"decoder_start_token_id": 7}"#,
            ),
        ],
    );
    let opened = open(&ct2);
    assert_eq!(
        *opened.format(),
        Format::CTranslate2 {
            spec: "WhisperSpec".into()
        }
    );
    assert_eq!(opened.modality(), Some(Modality::Speech));
    // CTranslate2 keeps the start token in its own config.
    assert_eq!(opened.generation().options.decoder_start, None);

    let old_ct2 = dir_with("ct2-v1", &[("model.bin", &1u32.to_le_bytes())]);
    assert_eq!(open(&old_ct2).modality(), Some(Modality::Text));

    let tessel = dir_with("tessel", &[("config.json", br#"{"d_model": 8}"#)]);
    assert_eq!(*open(&tessel).format(), Format::Tessel);

    let image = hf.join("model.tsl");
    std::fs::write(&image, b"TESSELPK and the rest").unwrap();
    assert_eq!(*open(&image).format(), Format::Image);
    assert_eq!(open(&image).modality(), None);
    for dir in [hf, ct2, old_ct2, tessel] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn what_cannot_be_opened_says_why() {
    let moe = dir_with("moe", &[("config.json", br#"{"model_type": "nllb-moe"}"#)]);
    let err = Directory::open(&moe).unwrap_err();
    assert!(
        matches!(&err, OpenError::UnknownModelType { model_type, .. } if model_type == "nllb-moe")
    );
    let message = err.to_string();
    for row in FAMILIES {
        for model_type in row.model_types {
            assert!(message.contains(model_type), "{message}");
        }
    }
    let empty = dir_with("empty", &[]);
    let err = Directory::open(&empty).unwrap_err();
    assert!(matches!(err, OpenError::MissingFile { .. }), "{err}");
    assert!(err.to_string().contains("model.bin"), "{err}");
    let text = empty.join("notes.txt");
    std::fs::write(&text, b"not a model").unwrap();
    assert!(matches!(
        Directory::open(&text),
        Err(OpenError::NotAModel(_))
    ));
    let short = dir_with("short", &[("model.bin", &[2, 0])]);
    assert!(matches!(
        Directory::open(&short),
        Err(OpenError::Truncated { .. })
    ));
    let bad_json = dir_with("bad-json", &[("config.json", b"{")]);
    assert!(matches!(
        Directory::open(&bad_json),
        Err(OpenError::Json { .. })
    ));
    let truncated = dir_with(
        "truncated",
        &[
            ("config.json", br#"{"model_type": "bart"}"#),
            ("model.safetensors", &[200, 0, 0, 0, 0, 0, 0, 0, b'{']),
        ],
    );
    assert!(matches!(
        Directory::open(&truncated),
        Err(OpenError::Truncated { .. })
    ));
    let gone = moe.join("missing");
    assert!(matches!(
        Directory::open(&gone),
        Err(OpenError::NotFound(_))
    ));
    for dir in [moe, empty, short, bad_json, truncated] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}
