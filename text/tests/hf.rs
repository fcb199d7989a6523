//! `tokenizer.json` through the `tokenizers` crate against the Python `tokenizers` library: a
//! byte-level BPE trained on the multi-script corpus (fixtures: tools/make_text_golden.py).

mod common;

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
