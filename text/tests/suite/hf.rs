//! `tokenizer.json` through the `tokenizers` crate against the Python `tokenizers` library: a
//! byte-level BPE trained on the multi-script corpus (fixtures: tools/make_text_golden.py).

use crate::common;

use common::{fixture, json, Cases, Mismatches};
use tessel_text::hf::HfTokenizer;
use tessel_text::TextError;

#[test]
fn byte_level_bpe_matches_tokenizers() {
    let tok = HfTokenizer::from_file(&fixture("bytebpe/tokenizer.json")).unwrap();
    let cases: Cases = json("bytebpe/expected.json");
    let mut m = Mismatches::default();
    for case in &cases.encode {
        m.check(
            format!("encode {:?}", case.text),
            tok.encode(&case.text, true).unwrap(),
            case.ids.clone(),
        );
        let want = case.decoded.clone().unwrap();
        m.check(
            format!("decode {:?}", case.ids),
            tok.decode(&case.ids, false).unwrap(),
            want,
        );
    }
    for case in &cases.decode {
        m.check(
            format!("decode {:?}", case.ids),
            tok.decode(&case.ids, false).unwrap(),
            case.text.clone(),
        );
    }
    m.finish();
}

#[test]
fn unknown_ids_and_malformed_files_are_typed_errors() {
    let tok = HfTokenizer::from_file(&fixture("bytebpe/tokenizer.json")).unwrap();
    let n = tok.vocab_size() as u32;
    assert!(matches!(tok.decode(&[1, n], true), Err(TextError::UnknownId { id, .. }) if id == n));
    assert!(matches!(
        HfTokenizer::from_bytes(b"{}", "t.json"),
        Err(TextError::Malformed { .. })
    ));
    assert!(matches!(
        HfTokenizer::from_bytes(b"\xff", "t.json"),
        Err(TextError::Malformed { .. })
    ));
}

#[test]
fn a_corrupt_precompiled_charsmap_is_refused_at_load() {
    let text = std::fs::read_to_string(fixture("t5/tokenizer.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(HfTokenizer::from_bytes(text.as_bytes(), "t5").is_ok());
    // A trie whose root state leads outside the array: `tokenizers` would index past it.
    let blob = [8u8, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0, b'a', 0];
    json["normalizer"]["precompiled_charsmap"] = serde_json::Value::String(base64::encode(blob));
    let bytes = serde_json::to_vec(&json).unwrap();
    let err = HfTokenizer::from_bytes(&bytes, "t5").err().unwrap();
    assert!(
        matches!(err, TextError::Malformed { ref reason, .. } if reason.contains("charsmap")),
        "{err}"
    );
}

#[test]
fn inputs_that_make_tokenizers_panic_are_refused_first() {
    let text = std::fs::read_to_string(fixture("bytebpe/tokenizer.json")).unwrap();
    // An invalid escape inside the decoder: `tokenizers` panics with `expect("Helper")`
    // (found by the tokenizer_files fuzz target).
    let bad_escape = text.replacen(r#""decoder": {"#, r#""decoder": {"x":"\ud800","#, 1);
    assert_ne!(bad_escape, text);
    let err = HfTokenizer::from_bytes(bad_escape.as_bytes(), "t")
        .err()
        .unwrap();
    assert!(matches!(err, TextError::Malformed { .. }), "{err}");
    // A Precompiled normalizer `tokenizers` cannot read panics with `expect("Precompiled")`.
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for charsmap in [
        serde_json::json!(""),
        serde_json::json!("!!"),
        serde_json::json!(5),
    ] {
        json["normalizer"] =
            serde_json::json!({"type": "Precompiled", "precompiled_charsmap": charsmap});
        let bytes = serde_json::to_vec(&json).unwrap();
        let err = HfTokenizer::from_bytes(&bytes, "t").err().unwrap();
        assert!(matches!(err, TextError::Malformed { .. }), "{err}");
    }
}

#[test]
fn a_template_naming_ids_outside_the_vocabulary_is_malformed() {
    let text = std::fs::read_to_string(fixture("nllb/tokenizer.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["post_processor"]["special_tokens"]["</s>"]["ids"] = serde_json::json!([999_999]);
    let tok = HfTokenizer::from_bytes(&serde_json::to_vec(&json).unwrap(), "t").unwrap();
    assert!(tok.encode("hello", false).is_ok());
    let err = tok.encode("hello", true).err().unwrap();
    assert!(
        matches!(err, TextError::Malformed { ref reason, .. } if reason.contains("999999")),
        "{err}"
    );
}

#[test]
fn vocab_size_covers_the_largest_id_of_a_sparse_vocabulary() {
    let text = std::fs::read_to_string(fixture("bytebpe/tokenizer.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["model"]["vocab"]["Ġzzqq"] = serde_json::json!(5000);
    let tok = HfTokenizer::from_bytes(&serde_json::to_vec(&json).unwrap(), "t").unwrap();
    assert_eq!(tok.vocab_size(), 5001);
    assert_eq!(tok.token_to_id("Ġzzqq"), Some(5000));
    assert_eq!(tok.decode(&[5000], false).unwrap(), " zzqq");
    assert!(matches!(
        tok.decode(&[4999], false),
        Err(TextError::UnknownId { id: 4999, .. })
    ));
}

#[test]
fn a_template_naming_an_undefined_special_token_is_malformed() {
    let text = std::fs::read_to_string(fixture("nllb/tokenizer.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let specials = json["post_processor"]["special_tokens"]
        .as_object_mut()
        .unwrap();
    specials.remove("</s>");
    let err = HfTokenizer::from_bytes(&serde_json::to_vec(&json).unwrap(), "t")
        .err()
        .unwrap();
    assert!(
        matches!(err, TextError::Malformed { ref reason, .. } if reason.contains("</s>")),
        "{err}"
    );
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["post_processor"]["special_tokens"]["</s>"]["ids"] = serde_json::json!([2, 2]);
    let err = HfTokenizer::from_bytes(&serde_json::to_vec(&json).unwrap(), "t")
        .err()
        .unwrap();
    assert!(matches!(err, TextError::Malformed { .. }), "{err}");
}
