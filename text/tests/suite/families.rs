//! Family conventions against the `transformers` tokenizers (MarianTokenizer, M2M100Tokenizer,
//! NllbTokenizer, MBart50Tokenizer, MBartTokenizer, T5Tokenizer, BartTokenizer, PegasusTokenizer): source ids, target ids,
//! forced target-language token and decoded text with special tokens skipped, from model
//! directories laid out as the families ship them (fixtures: tools/make_text_golden.py).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{copy_into, fixture, json, temp_dir, DecodeCase, EncodeCase, Mismatches};
use serde::Deserialize;
use tessel_text::{Family, TextError, TextTokenizer};

#[derive(Deserialize)]
struct FamilyCases {
    encode: Vec<EncodeCase>,
    target: Vec<EncodeCase>,
    decode: Vec<DecodeCase>,
    #[serde(default)]
    forced_bos: Option<u32>,
}

fn check(tok: &TextTokenizer, cases: &FamilyCases, what: &str, m: &mut Mismatches) {
    for case in &cases.encode {
        m.check(
            format!("{what} encode {:?}", case.text),
            tok.encode(&case.text).unwrap(),
            case.ids.clone(),
        );
    }
    for case in &cases.target {
        let got = tok.encode_target(&case.text).unwrap();
        m.check(
            format!("{what} target {:?}", case.text),
            got,
            case.ids.clone(),
        );
    }
    for case in &cases.decode {
        m.check(
            format!("{what} decode {:?}", case.ids),
            tok.decode(&case.ids).unwrap(),
            case.text.clone(),
        );
    }
    if let Some(want) = cases.forced_bos {
        m.check(
            format!("{what} forced bos"),
            tok.forced_bos_id().unwrap(),
            Some(want),
        );
    }
}

/// Every language pair of a fixture, loaded from `dir` with that pair.
fn golden(dir: &Path, expected: &str, family: Family) {
    let all: BTreeMap<String, FamilyCases> = json(expected);
    let mut m = Mismatches::default();
    for (pair, cases) in &all {
        let tok = TextTokenizer::from_dir(dir).unwrap();
        assert_eq!(tok.family(), family);
        let tok = match pair.split_once('-') {
            Some((src, tgt)) => tok.with_languages(Some(src), Some(tgt)).unwrap(),
            None => tok,
        };
        check(&tok, cases, pair, &mut m);
    }
    m.finish();
}

#[test]
fn marian_matches_transformers() {
    let dir = temp_dir("marian");
    copy_into(
        &dir,
        &[
            ("spm/unigram.model", "source.spm"),
            ("spm/bpe.model", "target.spm"),
            ("marian/vocab.json", "vocab.json"),
        ],
    );
    let tok = TextTokenizer::from_dir(&dir).unwrap();
    assert_eq!(tok.family(), Family::Marian);
    let cases: FamilyCases = json("marian/expected.json");
    let mut m = Mismatches::default();
    check(&tok, &cases, "marian", &mut m);
    m.check("marian pad", tok.pad_id(), tok.token_to_id("<pad>"));
    m.finish();
}

#[test]
fn m2m100_matches_transformers() {
    let dir = temp_dir("m2m100");
    copy_into(
        &dir,
        &[
            ("spm/bpe.model", "sentencepiece.bpe.model"),
            ("m2m100/vocab.json", "vocab.json"),
        ],
    );
    golden(&dir, "m2m100/expected.json", Family::M2m100);
}

#[test]
fn nllb_matches_transformers() {
    golden(&fixture("nllb"), "nllb/expected.json", Family::Nllb);
}

#[test]
fn mbart50_matches_transformers() {
    golden(
        &fixture("mbart50"),
        "mbart50/expected.json",
        Family::Mbart50,
    );
}

#[test]
fn mbart_matches_transformers() {
    golden(&fixture("mbart"), "mbart/expected.json", Family::Mbart);
}

#[test]
fn t5_matches_transformers() {
    let mut all: BTreeMap<String, FamilyCases> = json("t5/expected.json");
    let clean_up = all.remove("clean_up").unwrap();
    let mut m = Mismatches::default();
    check(
        &TextTokenizer::from_dir(&fixture("t5")).unwrap(),
        &all["default"],
        "t5",
        &mut m,
    );
    // The same files with clean_up_tokenization_spaces set in tokenizer_config.json.
    let dir = temp_dir("t5-clean-up");
    copy_into(&dir, &[("t5/tokenizer.json", "tokenizer.json")]);
    let config = std::fs::read_to_string(fixture("t5/tokenizer_config.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["clean_up_tokenization_spaces"] = serde_json::Value::Bool(true);
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    check(
        &TextTokenizer::from_dir(&dir).unwrap(),
        &clean_up,
        "t5 clean_up",
        &mut m,
    );
    m.finish();
}

#[test]
fn bart_matches_transformers() {
    golden(&fixture("bart"), "bart/expected.json", Family::Bart);
}

#[test]
fn pegasus_matches_transformers() {
    golden(
        &fixture("pegasus"),
        "pegasus/expected.json",
        Family::Pegasus,
    );
}

/// A Pegasus directory with `spiece.model` but no `tokenizer.json` is refused: read as a bare
/// SentencePiece model (T5's convention for that file name) every id would be 103 too low.
#[test]
fn pegasus_without_tokenizer_json_is_refused() {
    let dir = temp_dir("pegasus-spiece");
    copy_into(
        &dir,
        &[
            ("spm/unigram.model", "spiece.model"),
            ("pegasus/tokenizer_config.json", "tokenizer_config.json"),
        ],
    );
    let err = TextTokenizer::from_dir(&dir).err().unwrap();
    assert!(
        matches!(
            err,
            TextError::MissingFile {
                family: "pegasus",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("103"), "{err}");
}

#[test]
fn unknown_languages_and_missing_files_are_typed_errors() {
    let nllb = TextTokenizer::from_dir(&fixture("nllb")).unwrap();
    let err = nllb.with_languages(Some("xx_Fake"), None).err().unwrap();
    assert!(
        matches!(err, TextError::UnknownLanguage { ref code, .. } if code == "xx_Fake"),
        "{err}"
    );

    let dir = temp_dir("m2m100-langs");
    copy_into(
        &dir,
        &[
            ("spm/bpe.model", "sentencepiece.bpe.model"),
            ("m2m100/vocab.json", "vocab.json"),
        ],
    );
    let m2m = TextTokenizer::from_dir(&dir).unwrap();
    assert!(matches!(
        m2m.with_languages(None, Some("tlh")),
        Err(TextError::UnknownLanguage { .. })
    ));

    let dir = temp_dir("marian-missing");
    copy_into(
        &dir,
        &[
            ("spm/unigram.model", "source.spm"),
            ("marian/vocab.json", "vocab.json"),
        ],
    );
    let err = TextTokenizer::from_dir(&dir).err().unwrap();
    assert!(
        matches!(err, TextError::MissingFile { ref path, .. } if path.ends_with("target.spm")),
        "{err}"
    );

    let empty = temp_dir("empty");
    assert!(matches!(
        TextTokenizer::from_dir(&empty),
        Err(TextError::NoTokenizer { .. })
    ));
    std::fs::write(
        empty.join("tokenizer_config.json"),
        r#"{"tokenizer_class": "NllbTokenizer"}"#,
    )
    .unwrap();
    let err = TextTokenizer::from_dir(&empty).err().unwrap();
    assert!(
        matches!(err, TextError::MissingFile { ref path, .. } if path.ends_with("tokenizer.json")),
        "{err}"
    );
    std::fs::write(empty.join("tokenizer_config.json"), "{not json").unwrap();
    assert!(matches!(
        TextTokenizer::from_dir(&empty),
        Err(TextError::Malformed { .. })
    ));
}

#[test]
fn t5_from_spiece_model_appends_eos_and_skips_sentinels() {
    let dir = temp_dir("t5-spiece");
    copy_into(&dir, &[("spm/unigram.model", "spiece.model")]);
    let config = r#"{"tokenizer_class": "T5Tokenizer", "extra_ids": 100}"#;
    std::fs::write(dir.join("tokenizer_config.json"), config).unwrap();
    let tok = TextTokenizer::from_dir(&dir).unwrap();
    assert_eq!(tok.family(), Family::T5);
    let eos = tok.eos_id().unwrap();
    let cases: common::Cases = json("spm/unigram.json");
    let n = tok.vocab_size() as u32;
    let mut m = Mismatches::default();
    for case in &cases.encode {
        if case.text.contains("</s>") {
            // Special-token text is split out as T5Tokenizer does (t5_layouts_match_t5_tokenizer),
            // not segmented as sentencepiece segments it.
            continue;
        }
        let mut want = case.ids.clone();
        want.push(eos);
        m.check(
            format!("encode {:?}", case.text),
            tok.encode(&case.text).unwrap(),
            want,
        );
        // The highest ids are the sentinels <extra_id_0>, <extra_id_1>, ...: skipped.
        let mut ids = vec![n - 1];
        ids.extend(&case.ids);
        ids.extend([n - 2, eos]);
        m.check(
            format!("decode {:?}", case.ids),
            tok.decode(&ids).unwrap(),
            tok.decode(&case.ids).unwrap(),
        );
    }
    m.finish();
    // Ids past the sentinels (a padded embedding's rows) have no token: skipped.
    assert_eq!(
        tok.decode(&[n, 5, n + 27]).unwrap(),
        tok.decode(&[5]).unwrap()
    );
}

#[test]
fn plain_directories_load_their_one_file() {
    let dir = temp_dir("plain-spm");
    copy_into(&dir, &[("spm/unigram.model", "sentencepiece.model")]);
    let tok = TextTokenizer::from_dir(&dir).unwrap();
    assert_eq!(tok.family(), Family::Plain);
    let cases: common::Cases = json("spm/unigram.json");
    let mut m = Mismatches::default();
    for case in &cases.encode {
        m.check(
            format!("encode {:?}", case.text),
            tok.encode(&case.text).unwrap(),
            case.ids.clone(),
        );
    }
    m.finish();

    let whisper = TextTokenizer::from_dir(&fixture("whisper/v3")).unwrap();
    assert_eq!(whisper.family(), Family::Whisper);
    let w = whisper.whisper().unwrap();
    assert_eq!(whisper.eos_id(), Some(w.eot()));
}

/// An OPUS-MT directory whose vocab.json holds both sides' pieces: characters the English
/// source.spm does not know ("ü", "ß") are looked up in vocab.json as MarianTokenizer does;
/// also with separate vocabularies (target_vocab.json).
#[test]
fn opus_mt_layouts_match_marian_tokenizer() {
    let all: BTreeMap<String, FamilyCases> = json("layouts/opus/expected.json");
    let mut m = Mismatches::default();
    let shared = temp_dir("opus-shared");
    copy_into(
        &shared,
        &[
            ("layouts/opus/source.spm", "source.spm"),
            ("layouts/opus/target.spm", "target.spm"),
            ("layouts/opus/vocab.json", "vocab.json"),
        ],
    );
    check(
        &TextTokenizer::from_dir(&shared).unwrap(),
        &all["shared"],
        "opus shared",
        &mut m,
    );
    let separate = temp_dir("opus-separate");
    copy_into(
        &separate,
        &[
            ("layouts/opus/source.spm", "source.spm"),
            ("layouts/opus/target.spm", "target.spm"),
            ("layouts/opus/separate_vocab.json", "vocab.json"),
            (
                "layouts/opus/separate_target_vocab.json",
                "target_vocab.json",
            ),
        ],
    );
    std::fs::write(
        separate.join("tokenizer_config.json"),
        r#"{"tokenizer_class": "MarianTokenizer", "separate_vocabs": true}"#,
    )
    .unwrap();
    check(
        &TextTokenizer::from_dir(&separate).unwrap(),
        &all["separate"],
        "opus separate",
        &mut m,
    );
    m.finish();
}

#[derive(Deserialize)]
struct T5Layout {
    #[serde(flatten)]
    cases: FamilyCases,
    vocab_size: u32,
    tokenizer_json_decode: Vec<common::DecodeCase>,
}

/// A T5 directory with only spiece.model (T5Tokenizer's layout: <pad> 0, </s> 1, <unk> 2,
/// 100 sentinels after the pieces): ids and text as T5Tokenizer, a generated <unk> and the
/// ids of a padded embedding's rows decode to nothing; with tokenizer.json too.
#[test]
fn t5_layouts_match_t5_tokenizer() {
    let layout: T5Layout = json("layouts/t5/expected.json");
    let dir = temp_dir("t5-layout");
    copy_into(&dir, &[("layouts/t5/spiece.model", "spiece.model")]);
    let tok = TextTokenizer::from_dir(&dir).unwrap();
    assert_eq!(tok.family(), Family::T5);
    let mut m = Mismatches::default();
    check(&tok, &layout.cases, "t5 spiece.model", &mut m);
    // The cases hold a generated <unk> and ids of the padding rows.
    let n = tok.vocab_size() as u32;
    let decoded = &layout.cases.decode;
    assert!(decoded.iter().any(|c| c.ids.contains(&2)));
    assert!(decoded.iter().any(|c| c.ids.iter().any(|&id| id >= n)));
    assert!(layout.vocab_size > n);
    let json_tok = TextTokenizer::from_dir(&fixture("t5")).unwrap();
    for case in &layout.tokenizer_json_decode {
        m.check(
            format!("t5 tokenizer.json decode {:?}", case.ids),
            json_tok.decode(&case.ids).unwrap(),
            case.text.clone(),
        );
    }
    m.finish();
}

/// M2M100's made-up words (the rows after the language tokens) decode as M2M100Tokenizer
/// decodes them: the text `<unk>`, between separately decoded runs of pieces.
#[test]
fn m2m100_made_up_words_decode_as_m2m100_tokenizer() {
    #[derive(Deserialize)]
    struct Layout {
        vocab_size: usize,
        decode: Vec<common::DecodeCase>,
    }
    let layout: Layout = json("layouts/m2m100/expected.json");
    let dir = temp_dir("m2m100-madeup");
    copy_into(
        &dir,
        &[
            ("spm/bpe.model", "sentencepiece.bpe.model"),
            ("m2m100/vocab.json", "vocab.json"),
        ],
    );
    let tok = TextTokenizer::from_dir(&dir).unwrap();
    assert_eq!(tok.vocab_size() + 8, layout.vocab_size);
    let mut m = Mismatches::default();
    for case in &layout.decode {
        m.check(
            format!("m2m100 decode {:?}", case.ids),
            tok.decode(&case.ids).unwrap(),
            case.text.clone(),
        );
    }
    m.finish();
}

/// Only the family's language codes are languages: other special tokens are refused with
/// examples of valid codes, and a model without language codes refuses any.
#[test]
fn language_codes_are_the_familys_own() {
    for (dir, family, code) in [
        ("nllb", "nllb", "</s>"),
        ("nllb", "nllb", "<unk>"),
        ("mbart50", "mbart50", "</s>"),
        ("mbart50", "mbart50", "<mask>"),
        ("mbart", "mbart", "<s>"),
    ] {
        let tok = TextTokenizer::from_dir(&fixture(dir)).unwrap();
        assert!(tok.token_to_id(code).is_some(), "{dir} has {code}");
        let err = tok.with_languages(None, Some(code)).err().unwrap();
        match &err {
            TextError::UnknownLanguage {
                family: f,
                code: c,
                examples,
            } => {
                assert_eq!((*f, c.as_str()), (family, code));
                let first = examples.split(", ").next().unwrap();
                let valid = TextTokenizer::from_dir(&fixture(dir)).unwrap();
                assert!(
                    valid.with_languages(Some(first), Some(first)).is_ok(),
                    "{err}"
                );
            }
            _ => panic!("{dir} {code}: {err}"),
        }
    }
    let nllb = TextTokenizer::from_dir(&fixture("nllb")).unwrap();
    assert_eq!(nllb.languages().len(), 202);
    assert!(nllb.languages().iter().all(|(c, _)| c.len() == 8));

    let marian = temp_dir("marian-no-languages");
    copy_into(
        &marian,
        &[
            ("layouts/opus/source.spm", "source.spm"),
            ("layouts/opus/target.spm", "target.spm"),
            ("layouts/opus/vocab.json", "vocab.json"),
        ],
    );
    for (dir, side) in [
        (&*marian, "target"),
        (&fixture("t5"), "target"),
        (&fixture("bart"), "source"),
    ] {
        let tok = TextTokenizer::from_dir(dir).unwrap();
        let (src, tgt) = if side == "source" {
            (Some("en"), None)
        } else {
            (None, Some("de"))
        };
        let err = tok.with_languages(src, tgt).err().unwrap();
        assert!(
            matches!(&err, TextError::NoLanguages { side: s, .. } if *s == side),
            "{}: {err}",
            dir.display()
        );
        assert!(err.to_string().contains("has no language codes"), "{err}");
        // No code at all is fine.
        let tok = TextTokenizer::from_dir(dir).unwrap();
        assert!(tok.with_languages(None, None).is_ok());
    }
}

/// Every id with a token maps back to itself (`id_to_token`, then `target_token_to_id`), for
/// a `tokenizer.json`, Marian and M2M100 piece vocabularies and T5 from `spiece.model` (its
/// sentinels `<extra_id_N>` after the pieces); at least nine ids in ten have one.
#[test]
fn every_id_names_a_token_that_maps_back() {
    let marian = temp_dir("marian-ids");
    copy_into(
        &marian,
        &[
            ("spm/unigram.model", "source.spm"),
            ("spm/bpe.model", "target.spm"),
            ("marian/vocab.json", "vocab.json"),
        ],
    );
    let m2m100 = temp_dir("m2m100-ids");
    copy_into(
        &m2m100,
        &[
            ("spm/bpe.model", "sentencepiece.bpe.model"),
            ("m2m100/vocab.json", "vocab.json"),
        ],
    );
    let t5 = temp_dir("t5-spiece-ids");
    copy_into(&t5, &[("spm/unigram.model", "spiece.model")]);
    let config = r#"{"tokenizer_class": "T5Tokenizer", "extra_ids": 100}"#;
    std::fs::write(t5.join("tokenizer_config.json"), config).unwrap();
    for dir in [
        marian.to_path_buf(),
        m2m100.to_path_buf(),
        t5.to_path_buf(),
        fixture("nllb"),
        fixture("t5"),
    ] {
        let tok = TextTokenizer::from_dir(&dir).unwrap();
        let mut named = 0;
        for id in 0..tok.vocab_size() as u32 {
            let Some(token) = tok.id_to_token(id) else {
                continue;
            };
            assert_eq!(
                tok.target_token_to_id(&token),
                Some(id),
                "{dir:?}: {token:?}"
            );
            named += 1;
        }
        assert!(
            named * 10 >= tok.vocab_size() * 9,
            "{dir:?}: {named} ids named"
        );
        assert_eq!(tok.id_to_token(tok.vocab_size() as u32 + 5), None);
    }
    let tok = TextTokenizer::from_dir(&t5).unwrap();
    let last = tok.vocab_size() as u32 - 1;
    assert_eq!(tok.id_to_token(last).as_deref(), Some("<extra_id_0>"));
}
