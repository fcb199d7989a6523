//! SentencePiece models (`.model`, `.spm`, unigram and BPE) with the ids and text of the Python
//! `sentencepiece` library.
//!
//! # Why not the `sentencepiece` crate
//!
//! The `sentencepiece` crate binds Google's C++ library: it builds it from source with CMake
//! (or needs a system `libsentencepiece`), which CI's fresh machine does not have. Instead the
//! model file is read here as what it is, a protobuf `ModelProto` (`prost`, pure Rust, see
//! [`proto`]), and the segmentation runs in the `tokenizers` crate, the same pipeline that
//! transformers' `convert_slow_tokenizer` builds and that Hugging Face ships in every converted
//! `tokenizer.json`:
//!
//! - normalizer: the model's `precompiled_charsmap` (`Precompiled`, validated first by
//!   [`charsmap::validate`]), then, as sentencepiece's normalizer does after the character
//!   map, runs of spaces collapsed and leading/trailing spaces dropped
//!   (`remove_extra_whitespaces`), spaces escaped to `▁`, and `▁` prepended to non-empty text
//!   (`add_dummy_prefix`);
//! - no pre-tokenizer: the whole normalized text is segmented at once as sentencepiece does;
//! - model: `Unigram` (Viterbi over the piece scores, unknown characters scored
//!   `min score − 10`, runs of unknowns fused, optional byte fallback) or `BPE` whose merges are
//!   every split of a piece into two pieces, ranked by the piece's position (sentencepiece's BPE
//!   merges the adjacent pair whose concatenation is the best-scored piece; scores are the
//!   negated merge order), unknowns fused or byte fallback.
//!
//! Decoding is sentencepiece's `DecodeIds`, written out in [`SentencePiece::decode`] because its
//! rules are not those of any `tokenizers` decoder: control pieces vanish, an unknown piece
//! becomes the model's `unk_surface` (`" ⁇ "`), runs of byte pieces are decoded as UTF-8 with
//! one U+FFFD per invalid byte, `▁` becomes a space and the first piece loses its leading `▁`.
//!
//! Equality with the Python library is the golden test `tests/spm.rs` (fixtures from
//! `tools/make_text_golden.py`: unigram and BPE, with and without byte fallback, the nmt_nfkc,
//! a custom and the identity normalization, on a multi-script corpus with odd whitespace).
//! Pieces sentencepiece never matches in text (control, unknown, unused, byte) are kept out of
//! the unigram lattice, and a unigram model's byte fallback replaces each unknown run by its
//! UTF-8 bytes after the lattice, as sentencepiece does (so `<s>` or `<0x41>` in text stay
//! text). Known divergence: in BPE models, user-defined pieces are merged like normal ones
//! rather than matched whole first (no test model has any). The word and char model types and
//! `treat_whitespace_as_suffix` are refused as unsupported.

pub mod charsmap;
pub mod proto;

use std::collections::HashMap;
use std::path::Path;

use prost::Message;
use tokenizers::models::bpe::BPE;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{NormalizerWrapper, Precompiled, Prepend, Replace, Sequence};
use tokenizers::{Model, NormalizedString, Normalizer, Tokenizer};

use crate::error::{read_file, TextError};
use proto::{ModelProto, PieceType};

/// A SentencePiece model ready to encode and decode.
#[derive(Clone)]
pub struct SentencePiece {
    /// The pieces in id order with their types.
    pieces: Vec<(String, PieceType)>,
    /// Piece text to id.
    ids: HashMap<String, u32>,
    /// The segmentation pipeline.
    tokenizer: Tokenizer,
    /// The unknown piece's id.
    unk_id: u32,
    /// What an unknown piece decodes to.
    unk_surface: String,
    /// Whether decoding drops the first piece's leading `▁` (add_dummy_prefix or
    /// remove_extra_whitespaces).
    strip_first_space: bool,
    /// Whether the leading `▁` keeps being dropped until some text has been output.
    remove_extra_whitespaces: bool,
    /// For a unigram model with byte fallback: the id of each byte's piece. The lattice then
    /// runs without byte fallback and each unknown run is replaced here by its bytes.
    byte_ids: Option<Vec<u32>>,
}

/// The unknown surface sentencepiece uses when the model does not set one.
const DEFAULT_UNK_SURFACE: &str = " \u{2047} ";

impl SentencePiece {
    /// Loads a `.model`/`.spm` file.
    pub fn from_file(path: &Path) -> Result<Self, TextError> {
        let bytes = read_file(path)?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    /// Loads a serialized `ModelProto`; `name` names it in errors.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Self, TextError> {
        let proto = ModelProto::decode(bytes).map_err(|e| {
            TextError::malformed(name, format!("not a SentencePiece ModelProto: {e}"))
        })?;
        Self::from_proto(proto, name)
    }

    /// Builds the model from a decoded `ModelProto`.
    fn from_proto(proto: ModelProto, name: &str) -> Result<Self, TextError> {
        let pieces = piece_table(&proto, name)?;
        if pieces.len() > u32::MAX as usize {
            return Err(TextError::malformed(name, "more pieces than u32 ids"));
        }
        let unk_id = pieces
            .iter()
            .position(|(_, kind)| *kind == PieceType::Unknown)
            .ok_or_else(|| TextError::malformed(name, "no unknown piece"))?;
        let trainer = proto.trainer_spec.clone().unwrap_or_default();
        let norm = proto.normalizer_spec.clone().unwrap_or_default();
        if trainer.treat_whitespace_as_suffix.unwrap_or(false) {
            return Err(TextError::unsupported(name, "treat_whitespace_as_suffix"));
        }
        if !norm.escape_whitespaces.unwrap_or(true) {
            return Err(TextError::unsupported(name, "escape_whitespaces = false"));
        }
        let byte_fallback = trainer.byte_fallback.unwrap_or(false);
        let model_type = trainer.model_type.unwrap_or(1);
        let byte_ids = if model_type == 1 && byte_fallback {
            Some(byte_id_table(&pieces, name)?)
        } else {
            None
        };
        let mut tokenizer = match model_type {
            1 => Tokenizer::new(unigram(&proto, &pieces, unk_id, name)?),
            2 => Tokenizer::new(bpe(&proto, &pieces, unk_id, byte_fallback, name)?),
            3 => return Err(TextError::unsupported(name, "the word model type")),
            4 => return Err(TextError::unsupported(name, "the char model type")),
            t => return Err(TextError::malformed(name, format!("model type {t}"))),
        };
        let remove_extra_whitespaces = norm.remove_extra_whitespaces.unwrap_or(true);
        let add_dummy_prefix = norm.add_dummy_prefix.unwrap_or(true);
        let charsmap = norm.precompiled_charsmap.unwrap_or_default();
        tokenizer.with_normalizer(Some(normalizer(
            &charsmap,
            remove_extra_whitespaces,
            add_dummy_prefix,
            name,
        )?));
        let ids = pieces
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (p.clone(), i as u32))
            .collect();
        Ok(Self {
            pieces,
            ids,
            tokenizer,
            unk_id: unk_id as u32,
            unk_surface: trainer
                .unk_surface
                .unwrap_or_else(|| DEFAULT_UNK_SURFACE.to_owned()),
            strip_first_space: add_dummy_prefix || remove_extra_whitespaces,
            remove_extra_whitespaces,
            byte_ids,
        })
    }

    /// The number of pieces.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether the model has no pieces (never true for a loaded model).
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The id of a piece.
    pub fn piece_to_id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    /// The text of the piece `id`.
    pub fn id_to_piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(|(p, _)| p.as_str())
    }

    /// Whether the piece `id` is a control or the unknown piece (`<pad>`, `</s>`, `<unk>`).
    pub fn is_special(&self, id: u32) -> bool {
        self.pieces
            .get(id as usize)
            .is_some_and(|(_, kind)| matches!(kind, PieceType::Control | PieceType::Unknown))
    }

    /// The unknown piece's id.
    pub fn unk_id(&self) -> u32 {
        self.unk_id
    }

    /// Segments `text` into piece ids, as `SentencePieceProcessor.encode(text)`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TextError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(TextError::pipeline)?;
        let Some(byte_ids) = &self.byte_ids else {
            return Ok(encoding.get_ids().to_vec());
        };
        let mut ids = Vec::with_capacity(encoding.len());
        for (&id, token) in encoding.get_ids().iter().zip(encoding.get_tokens()) {
            if id == self.unk_id {
                ids.extend(token.bytes().map(|b| byte_ids[usize::from(b)]));
            } else {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Segments `text` into piece strings, as `encode(text, out_type=str)`: a known piece as its
    /// text, an unknown run as the normalized text it covers (not `<unk>`), byte fallback as
    /// `<0xXX>` pieces. Tokenizers that map pieces through a vocabulary of their own
    /// (MarianTokenizer, M2M100Tokenizer) look these strings up, so a character this model does
    /// not know can still be a token of that vocabulary.
    pub fn encode_pieces(&self, text: &str) -> Result<Vec<String>, TextError> {
        let mut normalized = NormalizedString::from(text);
        if let Some(normalizer) = self.tokenizer.get_normalizer() {
            normalizer
                .normalize(&mut normalized)
                .map_err(TextError::pipeline)?;
        }
        let normalized = normalized.get();
        let tokens = self
            .tokenizer
            .get_model()
            .tokenize(normalized)
            .map_err(TextError::pipeline)?;
        let mut pieces = Vec::with_capacity(tokens.len());
        for token in tokens {
            if token.id != self.unk_id {
                pieces.push(self.pieces[token.id as usize].0.clone());
                continue;
            }
            let surface = normalized
                .get(token.offsets.0..token.offsets.1)
                .unwrap_or(&token.value);
            match &self.byte_ids {
                Some(byte_ids) => pieces.extend(
                    surface
                        .bytes()
                        .map(|b| self.pieces[byte_ids[usize::from(b)] as usize].0.clone()),
                ),
                None => pieces.push(surface.to_owned()),
            }
        }
        Ok(pieces)
    }

    /// Decodes ids to text, as `SentencePieceProcessor.decode(ids)`; an id outside the model is
    /// a [`TextError::UnknownId`].
    pub fn decode(&self, ids: &[u32]) -> Result<String, TextError> {
        let items = ids
            .iter()
            .map(|&id| {
                self.pieces
                    .get(id as usize)
                    .map(|(piece, _)| (id, piece.as_str()))
                    .ok_or(TextError::UnknownId {
                        id,
                        vocab_size: self.pieces.len(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.decode_items(&items))
    }

    /// Decodes piece strings, as `decode_pieces(pieces)`: a string that is no piece of the model
    /// is an unknown piece that keeps its own text as its surface.
    pub fn decode_pieces(&self, pieces: &[&str]) -> String {
        let items: Vec<(u32, &str)> = pieces
            .iter()
            .map(|&p| (self.piece_to_id(p).unwrap_or(self.unk_id), p))
            .collect();
        self.decode_items(&items)
    }

    /// sentencepiece's `Decode` over (id, piece text) pairs whose ids are in range.
    fn decode_items(&self, items: &[(u32, &str)]) -> String {
        let mut text = String::new();
        let mut bytes = Vec::new();
        let mut at_start = true;
        for &(id, piece) in items {
            let kind = self.pieces[id as usize].1;
            if kind == PieceType::Byte {
                bytes.push(byte_of_piece(piece));
                continue;
            }
            if !bytes.is_empty() {
                push_bytes_lossy(&mut text, &bytes);
                bytes.clear();
                at_start = false;
            }
            let (surface, consumed_space) = match kind {
                PieceType::Control => (String::new(), false),
                PieceType::Unknown if piece == self.pieces[id as usize].0 => {
                    (self.unk_surface.clone(), false)
                }
                PieceType::Unknown => (piece.to_owned(), false),
                _ => self.piece_surface(piece, at_start),
            };
            if at_start && (!surface.is_empty() || consumed_space) {
                at_start = false;
            }
            text.push_str(&surface);
        }
        push_bytes_lossy(&mut text, &bytes);
        text
    }

    /// A normal piece's text with `▁` as spaces; at the start, its leading `▁` dropped. The flag
    /// says whether that consumed space ends the start (it does not when extra whitespace is
    /// removed: then every leading `▁` is dropped).
    fn piece_surface(&self, piece: &str, at_start: bool) -> (String, bool) {
        let mut piece = piece;
        let mut consumed = false;
        if at_start && self.strip_first_space {
            if let Some(rest) = piece.strip_prefix('\u{2581}') {
                piece = rest;
                consumed = !self.remove_extra_whitespaces;
            }
        }
        (piece.replace('\u{2581}', " "), consumed)
    }
}

/// The byte a `<0xXX>` piece stands for (pieces of type byte are checked at load).
fn byte_of_piece(piece: &str) -> u8 {
    parse_byte_piece(piece).unwrap_or(0)
}

/// The byte of a `<0xXX>` piece text.
fn parse_byte_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Appends `bytes` decoded as UTF-8 with each invalid byte replaced by U+FFFD, as
/// sentencepiece decodes runs of byte pieces.
fn push_bytes_lossy(text: &mut String, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                text.push_str(s);
                return;
            }
            Err(e) => {
                let valid = e.valid_up_to();
                // The prefix up to `valid_up_to` is valid UTF-8 by the error's contract.
                text.push_str(std::str::from_utf8(&bytes[..valid]).unwrap_or_default());
                text.push('\u{FFFD}');
                bytes = &bytes[valid + 1..];
            }
        }
    }
}

/// The pieces of the proto with their types, checked: text present, type known, byte pieces
/// well formed.
fn piece_table(proto: &ModelProto, name: &str) -> Result<Vec<(String, PieceType)>, TextError> {
    if proto.pieces.is_empty() {
        return Err(TextError::malformed(name, "no pieces"));
    }
    proto
        .pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let text = p
                .piece
                .clone()
                .ok_or_else(|| TextError::malformed(format!("{name}: piece {i}"), "no text"))?;
            let kind = PieceType::from_proto(p.r#type).ok_or_else(|| {
                TextError::malformed(format!("{name}: piece {i}"), format!("type {:?}", p.r#type))
            })?;
            if kind == PieceType::Byte && parse_byte_piece(&text).is_none() {
                return Err(TextError::malformed(
                    format!("{name}: piece {i}"),
                    format!("byte piece {text:?} is not <0xXX>"),
                ));
            }
            if !p.score.unwrap_or(0.0).is_finite() {
                return Err(TextError::malformed(
                    format!("{name}: piece {i}"),
                    "score is not finite",
                ));
            }
            Ok((text, kind))
        })
        .collect()
}

/// The id of each byte's `<0xXX>` piece; every byte must have one.
fn byte_id_table(pieces: &[(String, PieceType)], name: &str) -> Result<Vec<u32>, TextError> {
    let mut table = vec![None; 256];
    for (id, (text, kind)) in pieces.iter().enumerate() {
        if *kind == PieceType::Byte {
            table[usize::from(byte_of_piece(text))] = Some(id as u32);
        }
    }
    table
        .into_iter()
        .enumerate()
        .map(|(b, id)| {
            id.ok_or_else(|| {
                TextError::malformed(name, format!("byte fallback without <0x{b:02X}>"))
            })
        })
        .collect()
}

/// The unigram model: every piece with its score, in id order, scored as sentencepiece's
/// lattice scores them. Control, unknown, unused and byte pieces never match text there, so
/// their text here gets a leading U+0020, which the normalizer has replaced by `▁` everywhere
/// (byte fallback is applied after the lattice, in [`SentencePiece::encode`]); a user-defined
/// piece scores `chars × max score − 0.1`, which makes it win as sentencepiece's does.
fn unigram(
    proto: &ModelProto,
    pieces: &[(String, PieceType)],
    unk_id: usize,
    name: &str,
) -> Result<Unigram, TextError> {
    let max_score = pieces
        .iter()
        .zip(&proto.pieces)
        .filter(|((_, kind), _)| *kind == PieceType::Normal)
        .map(|(_, p)| f64::from(p.score.unwrap_or(0.0)))
        .fold(f64::NEG_INFINITY, f64::max);
    let vocab = pieces
        .iter()
        .zip(&proto.pieces)
        .map(|((text, kind), p)| match kind {
            PieceType::Control | PieceType::Unknown | PieceType::Unused | PieceType::Byte => {
                (format!(" {text}"), f64::from(p.score.unwrap_or(0.0)))
            }
            PieceType::UserDefined if max_score.is_finite() => {
                (text.clone(), text.chars().count() as f64 * max_score - 0.1)
            }
            _ => (text.clone(), f64::from(p.score.unwrap_or(0.0))),
        })
        .collect();
    Unigram::from(vocab, Some(unk_id), false).map_err(|e| TextError::malformed(name, e))
}

/// The BPE model: merges are every split of a normal or user-defined piece into two pieces of
/// the vocabulary, ranked by the piece's score (best first), then by the ids of the halves.
fn bpe(
    proto: &ModelProto,
    pieces: &[(String, PieceType)],
    unk_id: usize,
    byte_fallback: bool,
    name: &str,
) -> Result<BPE, TextError> {
    let vocab: ahash::AHashMap<String, u32> = pieces
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (p.clone(), i as u32))
        .collect();
    let mut merges: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, ((text, kind), p)) in pieces.iter().zip(&proto.pieces).enumerate() {
        if !matches!(kind, PieceType::Normal | PieceType::UserDefined) {
            continue;
        }
        for (split, _) in text.char_indices().skip(1) {
            let (left, right) = text.split_at(split);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right)) {
                merges.push((p.score.unwrap_or(0.0), id as u32, l, r));
            }
        }
    }
    merges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then((a.2, a.3).cmp(&(b.2, b.3)))
    });
    let merges = merges
        .into_iter()
        .map(|(_, _, l, r)| (pieces[l as usize].0.clone(), pieces[r as usize].0.clone()))
        .collect();
    BPE::builder()
        .vocab_and_merges(vocab, merges)
        .unk_token(pieces[unk_id].0.clone())
        .fuse_unk(true)
        .byte_fallback(byte_fallback)
        .build()
        .map_err(|e| TextError::malformed(name, e))
}

/// sentencepiece's normalizer as a `tokenizers` normalizer sequence.
fn normalizer(
    charsmap: &[u8],
    remove_extra_whitespaces: bool,
    add_dummy_prefix: bool,
    name: &str,
) -> Result<NormalizerWrapper, TextError> {
    let mut steps: Vec<NormalizerWrapper> = Vec::new();
    if !charsmap.is_empty() {
        charsmap::validate(charsmap).map_err(|reason| {
            TextError::malformed(format!("{name}: precompiled_charsmap"), reason)
        })?;
        let precompiled = Precompiled::from(charsmap)
            .map_err(|e| TextError::malformed(format!("{name}: precompiled_charsmap"), e))?;
        steps.push(precompiled.into());
    }
    let replace = |pattern: &str, regex: bool, with: &str| {
        let pattern = if regex {
            tokenizers::normalizers::replace::ReplacePattern::Regex(pattern.to_owned())
        } else {
            tokenizers::normalizers::replace::ReplacePattern::String(pattern.to_owned())
        };
        Replace::new(pattern, with).map_err(TextError::pipeline)
    };
    if remove_extra_whitespaces {
        steps.push(replace(" {2,}", true, " ")?.into());
        steps.push(replace("^ | $", true, "")?.into());
    }
    steps.push(replace(" ", false, "\u{2581}")?.into());
    if add_dummy_prefix {
        steps.push(Prepend::new("\u{2581}".to_owned()).into());
    }
    Ok(Sequence::new(steps).into())
}
