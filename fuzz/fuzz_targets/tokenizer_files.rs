//! Tokenizer files from arbitrary bytes: the first byte picks the loader (SentencePiece
//! `.model`, a SentencePiece model built field by field from the rest, `tokenizer.json`,
//! Whisper's `tokenizer.json`, a bare `precompiled_charsmap`), the rest is the file. Every load
//! is `Ok` or a typed `TextError`, never a panic; a `tokenizer.json` the direct BPE reader
//! reads is read the same by the library; what loads encodes a multi-script text into
//! in-range ids and decodes them, and decoding arbitrary ids is `Ok` or `UnknownId`.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tessel_text::hf::HfTokenizer;
use tessel_text::spm::proto::{ModelProto, NormalizerSpec, Piece, TrainerSpec};
use tessel_text::spm::{charsmap, SentencePiece};
use tessel_text::whisper::WhisperTokenizer;
use tessel_text::TextError;

/// Text in several scripts with odd whitespace, special-token and byte-piece look-alikes.
const TEXTS: [&str; 4] = [
    "Hello  wörld\tПривет κόσμε مرحبا 你好 😀👩\u{200d}💻 ①½ ｆｕｌｌ",
    "  <s> </s> <unk> <0x41> ▁▁ <|endoftext|> <|0.00|> ",
    "",
    "a",
];

/// A SentencePiece model described field by field.
#[derive(Arbitrary, Debug)]
struct SpmFields {
    pieces: Vec<(String, f32, Option<i32>)>,
    model_type: Option<i32>,
    byte_fallback: Option<bool>,
    unk_surface: Option<String>,
    charsmap: Option<Vec<u8>>,
    add_dummy_prefix: Option<bool>,
    remove_extra_whitespaces: Option<bool>,
    all_bytes: bool,
}

impl SpmFields {
    /// The serialized `ModelProto`; `all_bytes` adds the 256 byte pieces byte fallback needs.
    fn to_bytes(&self) -> Vec<u8> {
        let mut pieces: Vec<Piece> = self
            .pieces
            .iter()
            .map(|(p, s, t)| Piece {
                piece: Some(p.clone()),
                score: Some(*s),
                r#type: *t,
            })
            .collect();
        if self.all_bytes {
            pieces.extend((0..=255u8).map(|b| Piece {
                piece: Some(format!("<0x{b:02X}>")),
                score: Some(0.0),
                r#type: Some(6),
            }));
        }
        ModelProto {
            pieces,
            trainer_spec: Some(TrainerSpec {
                model_type: self.model_type,
                treat_whitespace_as_suffix: None,
                byte_fallback: self.byte_fallback,
                unk_surface: self.unk_surface.clone(),
            }),
            normalizer_spec: Some(NormalizerSpec {
                name: None,
                precompiled_charsmap: self.charsmap.clone(),
                add_dummy_prefix: self.add_dummy_prefix,
                remove_extra_whitespaces: self.remove_extra_whitespaces,
                escape_whitespaces: None,
            }),
        }
        .encode_to_vec()
    }
}

/// Ids to decode: the encoded ones, then a few arbitrary ones.
fn probe_ids(encoded: &[u32], u: &mut Unstructured<'_>) -> Vec<u32> {
    let mut ids = encoded.to_vec();
    for _ in 0..4 {
        if let Ok(id) = u32::arbitrary(u) {
            ids.push(id % 2048);
        }
    }
    ids
}

fn check_spm(sp: &SentencePiece, u: &mut Unstructured<'_>) {
    for text in TEXTS {
        let Ok(ids) = sp.encode(text) else { continue };
        assert!(ids.iter().all(|&id| (id as usize) < sp.len()), "{ids:?}");
        sp.decode(&ids).expect("encoded ids decode");
        match sp.decode(&probe_ids(&ids, u)) {
            Ok(_) | Err(TextError::UnknownId { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

fn check_hf(tok: &HfTokenizer, u: &mut Unstructured<'_>) {
    for text in TEXTS {
        let Ok(ids) = tok.encode(text, true) else {
            continue;
        };
        assert!(
            ids.iter().all(|&id| (id as usize) < tok.vocab_size()),
            "{ids:?}"
        );
        match tok.decode(&probe_ids(&ids, u), true) {
            Ok(_) | Err(TextError::UnknownId { .. } | TextError::Pipeline(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Where the direct BPE reader reads `file`, it builds what the library builds from it.
fn check_direct_reading(file: &[u8]) {
    let Some(direct) = HfTokenizer::read_direct(file) else {
        return;
    };
    let library =
        HfTokenizer::read_library(file).expect("the library reads what the direct reader does");
    assert!(
        direct.to_string(false).ok() == library.to_string(false).ok(),
        "the direct reading differs from the library's"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(file);
    match selector % 5 {
        0 => {
            if let Ok(sp) = SentencePiece::from_bytes(file, "fuzz.model") {
                check_spm(&sp, &mut u);
            }
        }
        1 => {
            let Ok(fields) = SpmFields::arbitrary(&mut u) else {
                return;
            };
            if let Ok(sp) = SentencePiece::from_bytes(&fields.to_bytes(), "fuzz.model") {
                check_spm(&sp, &mut u);
            }
        }
        2 => {
            check_direct_reading(file);
            if let Ok(tok) = HfTokenizer::from_bytes(file, "tokenizer.json") {
                check_hf(&tok, &mut u);
            }
        }
        3 => {
            let Ok(hf) = HfTokenizer::from_bytes(file, "tokenizer.json") else {
                return;
            };
            if let Ok(w) = WhisperTokenizer::new(hf, "tokenizer.json") {
                for text in TEXTS {
                    if let Ok(ids) = w.encode(text) {
                        let _ = w.decode(&probe_ids(&ids, &mut u));
                        let _ = w.decode_with_timestamps(&ids);
                    }
                }
                let _ = w.non_speech_tokens();
                let _ = w.encode_prompt(" prompt ");
            }
        }
        _ => {
            let _ = charsmap::validate(file);
        }
    }
});
