//! SentencePiece models against the Python `sentencepiece` library: ids of a multi-script
//! corpus and decoded text, for unigram and BPE models with and without byte fallback and with
//! the nmt_nfkc, a custom and the identity normalization (fixtures: tools/make_text_golden.py).

use crate::common;

use common::{fixture, json, Cases, Mismatches};
use tessel_text::spm::SentencePiece;
use tessel_text::TextError;

fn golden(name: &str) {
    let sp = SentencePiece::from_file(&fixture(&format!("spm/{name}.model"))).unwrap();
    let cases: Cases = json(&format!("spm/{name}.json"));
    let mut m = Mismatches::default();
    for case in &cases.encode {
        m.check(
            format!("{name} encode {:?}", case.text),
            sp.encode(&case.text).unwrap(),
            case.ids.clone(),
        );
        // The piece strings (unknown runs as their text) name the same segmentation.
        let pieces = sp.encode_pieces(&case.text).unwrap();
        let ids = pieces
            .iter()
            .map(|p| sp.piece_to_id(p).unwrap_or(sp.unk_id()))
            .collect();
        m.check(
            format!("{name} encode_pieces {:?}", case.text),
            ids,
            case.ids.clone(),
        );
        let want = case.decoded.clone().unwrap();
        m.check(
            format!("{name} decode {:?}", case.ids),
            sp.decode(&case.ids).unwrap(),
            want,
        );
    }
    for case in &cases.decode {
        m.check(
            format!("{name} decode {:?}", case.ids),
            sp.decode(&case.ids).unwrap(),
            case.text.clone(),
        );
    }
    m.finish();
}

#[test]
fn unigram_nmt_nfkc_matches_sentencepiece() {
    golden("unigram");
}

#[test]
fn bpe_custom_rules_matches_sentencepiece() {
    golden("bpe");
}

#[test]
fn unigram_byte_fallback_matches_sentencepiece() {
    golden("unigram_bytes");
}

#[test]
fn bpe_byte_fallback_identity_matches_sentencepiece() {
    golden("bpe_bytes");
}

/// Unknown runs are their normalized text, as `encode(out_type=str)` gives them (values from
/// the Python library); fullwidth letters are normalized first.
#[test]
fn unknown_pieces_keep_their_text() {
    for name in ["unigram", "bpe"] {
        let sp = SentencePiece::from_file(&fixture(&format!("spm/{name}.model"))).unwrap();
        let pieces = sp.encode_pieces("Runes ᚠᚢᚦ and Ｆｕｌｌ").unwrap();
        let want = [
            "▁",
            "R",
            "u",
            "n",
            "es",
            "▁",
            "ᚠᚢᚦ",
            "▁and",
            "▁",
            "F",
            "u",
            "l",
            "l",
        ];
        assert_eq!(pieces, want, "{name}");
    }
}

#[test]
fn out_of_range_ids_and_garbage_files_are_typed_errors() {
    let sp = SentencePiece::from_file(&fixture("spm/unigram.model")).unwrap();
    let n = sp.len() as u32;
    assert!(matches!(sp.decode(&[5, n]), Err(TextError::UnknownId { id, .. }) if id == n));
    assert!(matches!(
        SentencePiece::from_bytes(b"not a model", "x.model"),
        Err(TextError::Malformed { .. })
    ));
    assert!(matches!(
        SentencePiece::from_bytes(b"", "empty.model"),
        Err(TextError::Malformed { .. })
    ));
    let missing = fixture("spm/none.model");
    assert!(matches!(
        SentencePiece::from_file(&missing),
        Err(TextError::Io { .. })
    ));
}
