//! [`TextTokenizer`]: a model directory's tokenizer with its family's conventions, as the
//! `transformers` tokenizer of that family encodes source text (`tokenizer(text)`), target
//! text (`tokenizer(text_target=text)`) and decodes ids (`decode(ids,
//! skip_special_tokens=True)`):
//!
//! | family | files | source ids | target ids |
//! | --- | --- | --- | --- |
//! | Marian | `source.spm`, `target.spm`, `vocab.json` (`target_vocab.json`) | `[>>lang<<] pieces </s>` | target spm pieces `</s>` |
//! | M2M100 | `sentencepiece.bpe.model`, `vocab.json` | `__src__ pieces </s>` | `__tgt__ pieces </s>` |
//! | NLLB | `tokenizer.json` | `src_lang ids </s>` (legacy: `ids </s> src_lang`) | same with `tgt_lang` |
//! | mBART-50 | `tokenizer.json` | `src_lang ids </s>` | `tgt_lang ids </s>` |
//! | mBART | `tokenizer.json` | `ids </s> src_lang` | `ids </s> tgt_lang` |
//! | T5, BART, plain | `tokenizer.json` | the file's post-processor (`ids </s>`, `<s> ids </s>`) | same |
//! | T5 | one SentencePiece model (`spiece.model`) | special tokens split out, words (split at whitespace) as sentencepiece's ids, `</s>` | same |
//! | plain | one SentencePiece model | sentencepiece's ids | same |
//! | Whisper | `tokenizer.json` | text ids ([`WhisperTokenizer::encode`]) | same |
//!
//! Marian and M2M100 map sentencepiece's pieces through `vocab.json` by their text (as
//! `encode(out_type=str)` gives them: a character the model does not know is looked up as
//! itself, since OPUS-MT vocabularies hold both sides' pieces; text not in the vocabulary is
//! `<unk>`) and decode by turning the kept ids back into pieces and decoding those with
//! sentencepiece (Marian with the source model unless the vocabularies are separate, as
//! `MarianTokenizer` does), then strip surrounding whitespace. Ids past the vocabulary decode
//! as each reference decodes them ([`TextTokenizer::decode`]). Language codes come from
//! `tokenizer_config.json` (`src_lang`, `tgt_lang`) or [`TextTokenizer::with_languages`]: only
//! the family's codes (NLLB `eng_Latn`, M2M100 `en`, mBART `en_XX`) are accepted, an unknown
//! one is [`TextError::UnknownLanguage`], any code for a family without them
//! [`TextError::NoLanguages`]. `clean_up_tokenization_spaces` is applied as transformers 5
//! applies it (not for BPE models of `tokenizer.json` files).
//!
//! Special tokens typed inside the text (`</s>`, `<unk>`, `<pad>`) become their ids, as the
//! Python tokenizers split them out. M2M100's `__xx__` tokens are dropped by decoding as
//! transformers 4 and fairseq drop them (transformers 5.23 no longer counts them as special
//! and leaves `__fr__ ` in the text). Not reproduced: Marian's optional Moses punctuation
//! normalization (transformers applies it only when `sacremoses` is installed).
//! Golden tests: `tests/families.rs`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{read_file, TextError};
use crate::hf::HfTokenizer;
use crate::languages::{M2M100_LANGUAGES, WMT21_LANGUAGES};
use crate::spm::SentencePiece;
use crate::whisper::WhisperTokenizer;

/// A model family's tokenizer conventions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The file's own pipeline, nothing added.
    Plain,
    /// Marian / OPUS-MT.
    Marian,
    /// M2M100.
    M2m100,
    /// NLLB-200.
    Nllb,
    /// mBART-50.
    Mbart50,
    /// mBART (cc25).
    Mbart,
    /// T5, mT5, Flan-T5.
    T5,
    /// BART.
    Bart,
    /// Pegasus: a `tokenizer.json` only (its SentencePiece pieces are numbered from 103,
    /// after the masks and `<unk_2>` to `<unk_102>`, which `spiece.model` does not hold).
    Pegasus,
    /// Whisper.
    Whisper,
}

impl Family {
    /// The family's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Marian => "marian",
            Self::M2m100 => "m2m100",
            Self::Nllb => "nllb",
            Self::Mbart50 => "mbart50",
            Self::Mbart => "mbart",
            Self::T5 => "t5",
            Self::Bart => "bart",
            Self::Pegasus => "pegasus",
            Self::Whisper => "whisper",
        }
    }

    /// The family of a `tokenizer_class` (with or without `Fast`).
    pub fn from_tokenizer_class(class: &str) -> Option<Self> {
        Some(match class.trim_end_matches("Fast") {
            "MarianTokenizer" => Self::Marian,
            "M2M100Tokenizer" => Self::M2m100,
            "NllbTokenizer" => Self::Nllb,
            "MBart50Tokenizer" => Self::Mbart50,
            "MBartTokenizer" => Self::Mbart,
            "T5Tokenizer" => Self::T5,
            "BartTokenizer" | "RobertaTokenizer" => Self::Bart,
            "WhisperTokenizer" => Self::Whisper,
            "PegasusTokenizer" => Self::Pegasus,
            _ => return None,
        })
    }

    /// The family of a `config.json` `model_type`.
    pub fn from_model_type(model_type: &str) -> Option<Self> {
        Some(match model_type {
            "marian" => Self::Marian,
            "m2m_100" => Self::M2m100,
            "nllb" => Self::Nllb,
            "mbart" => Self::Mbart50,
            "t5" | "mt5" | "umt5" => Self::T5,
            "bart" => Self::Bart,
            "whisper" => Self::Whisper,
            "pegasus" => Self::Pegasus,
            _ => return None,
        })
    }
}

/// Where language codes go for a family with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LangPlacement {
    /// `lang ids </s>`.
    Prefix,
    /// `ids </s> lang`.
    Suffix,
}

/// The tokenizer behind a family.
#[derive(Clone)]
enum Backend {
    /// A `tokenizer.json`.
    Hf(HfTokenizer),
    /// One SentencePiece model.
    Spm(SentencePiece),
    /// SentencePiece models whose pieces map through `vocab.json` (Marian, M2M100).
    Pieces(Box<PieceVocab>),
    /// Whisper.
    Whisper(Box<WhisperTokenizer>),
}

/// SentencePiece pieces mapped through `vocab.json`.
#[derive(Clone)]
struct PieceVocab {
    /// The model encoding source text.
    source: SentencePiece,
    /// The model encoding target text (the source model for M2M100).
    target: SentencePiece,
    /// Source piece → id.
    vocab: HashMap<String, u32>,
    /// Target piece → id when the vocabularies are separate.
    target_vocab: Option<HashMap<String, u32>>,
    /// Id → piece for decoding (the target vocabulary's when separate).
    decoder: HashMap<u32, String>,
    /// Decode with the source model (Marian with a shared vocabulary).
    decode_with_source: bool,
    /// Language code → id (M2M100: after the vocabulary).
    languages: Vec<(String, u32)>,
    /// Ids dropped by decoding.
    special: HashSet<u32>,
    /// The special tokens' texts and ids, longest first: text holding them is split there.
    special_texts: Vec<(String, u32)>,
    /// `<unk>`.
    unk: u32,
    /// `</s>`.
    eos: u32,
}

/// A model directory's tokenizer with its family's conventions (cloned to change its
/// languages, [`TextTokenizer::with_languages`]).
#[derive(Clone)]
pub struct TextTokenizer {
    /// The family.
    family: Family,
    /// The tokenizer files.
    backend: Backend,
    /// `</s>` (or `<|endoftext|>`).
    eos: Option<u32>,
    /// `<pad>`.
    pad: Option<u32>,
    /// Source language code, for families with language tokens.
    src_lang: Option<String>,
    /// Target language code.
    tgt_lang: Option<String>,
    /// NLLB's `legacy_behaviour`: language code after `</s>`.
    legacy: bool,
    /// `clean_up_tokenization_spaces` of `tokenizer_config.json`.
    clean_up: bool,
    /// T5 from a bare SentencePiece model: the number of `<extra_id_N>` sentinels after the
    /// pieces (`extra_ids`, default 100).
    extra_ids: u32,
    /// T5 from a bare SentencePiece model: the special tokens' texts (`<pad>`, `</s>`,
    /// `<unk>`, the sentinels) and ids, longest first; text holding them is split there, as
    /// T5Tokenizer splits out its special tokens.
    spm_specials: Vec<(String, u32)>,
}

impl TextTokenizer {
    /// Loads the tokenizer of a model directory, detecting the family from
    /// `tokenizer_config.json` (`tokenizer_class`), else `config.json` (`model_type`), else the
    /// files present.
    pub fn from_dir(dir: &Path) -> Result<Self, TextError> {
        let config = read_json_if_present(&dir.join("tokenizer_config.json"))?;
        let model_config = read_json_if_present(&dir.join("config.json"))?;
        let family = detect(dir, config.as_ref(), model_config.as_ref())?;
        Self::from_dir_as(dir, family)
    }

    /// Loads the tokenizer of a model directory with the conventions of `family`.
    pub fn from_dir_as(dir: &Path, family: Family) -> Result<Self, TextError> {
        let config =
            read_json_if_present(&dir.join("tokenizer_config.json"))?.unwrap_or(Value::Null);
        let text = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
        let flag = |key: &str| config.get(key).and_then(Value::as_bool);
        let backend = load_backend(dir, family, &config)?;
        let mut tok = Self {
            family,
            eos: None,
            pad: None,
            src_lang: text("src_lang"),
            tgt_lang: text("tgt_lang"),
            legacy: flag("legacy_behaviour").unwrap_or(false),
            clean_up: flag("clean_up_tokenization_spaces").unwrap_or(false),
            extra_ids: config
                .get("extra_ids")
                .and_then(Value::as_u64)
                .map_or(100, |n| n.min(u64::from(u32::MAX / 2)) as u32),
            backend,
            spm_specials: Vec::new(),
        };
        tok.spm_specials = tok.t5_spm_specials();
        tok.eos = tok.find_token(if family == Family::Whisper {
            "<|endoftext|>"
        } else {
            "</s>"
        });
        tok.pad = tok.find_token("<pad>");
        if tok.placement().is_none() {
            // Language keys of a family without language tokens mean nothing to its tokenizer.
            tok.src_lang = None;
            tok.tgt_lang = None;
            return Ok(tok);
        }
        if tok.src_lang.is_none() {
            tok.src_lang = match family {
                Family::Nllb => Some("eng_Latn".into()),
                Family::M2m100 => Some("en".into()),
                Family::Mbart50 | Family::Mbart => Some("en_XX".into()),
                _ => None,
            };
        }
        let (src, tgt) = (tok.src_lang.clone(), tok.tgt_lang.clone());
        tok.with_languages(src.as_deref(), tgt.as_deref())
    }

    /// Sets the source and target language codes (NLLB `eng_Latn`, M2M100 `en`, mBART `en_XX`).
    /// A code that is not one of the family's language codes (an unknown one, or another
    /// special token such as `</s>`) is [`TextError::UnknownLanguage`]; any code for a family
    /// without language codes (Marian, BART, T5) is [`TextError::NoLanguages`].
    pub fn with_languages(
        mut self,
        src: Option<&str>,
        tgt: Option<&str>,
    ) -> Result<Self, TextError> {
        for (code, side) in [(src, "source"), (tgt, "target")] {
            let Some(code) = code else { continue };
            if self.placement().is_none() {
                return Err(TextError::NoLanguages {
                    family: self.family.name(),
                    side,
                    code: code.to_owned(),
                    hint: if self.family == Family::Marian {
                        "; a multilingual Marian model takes the target language as a \
                         >>xxx<< token at the start of the text"
                    } else {
                        ""
                    },
                });
            }
            self.language_id(code)?;
        }
        if let Some(src) = src {
            self.src_lang = Some(src.to_owned());
        }
        if let Some(tgt) = tgt {
            self.tgt_lang = Some(tgt.to_owned());
        }
        Ok(self)
    }

    /// The family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// `</s>` (Whisper: `<|endoftext|>`).
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// `<pad>`, Marian's and T5's decoder start.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad
    }

    /// The target language's token, which NLLB, M2M100 and mBART-50 force as the first
    /// generated token (`forced_bos_token_id`); `None` for other families or without a target
    /// language.
    pub fn forced_bos_id(&self) -> Result<Option<u32>, TextError> {
        match (self.placement(), &self.tgt_lang) {
            (Some(_), Some(tgt)) => self.language_id(tgt).map(Some),
            _ => Ok(None),
        }
    }

    /// The Whisper tokenizer, for a Whisper directory.
    pub fn whisper(&self) -> Option<&WhisperTokenizer> {
        match &self.backend {
            Backend::Whisper(w) => Some(w),
            _ => None,
        }
    }

    /// One past the largest id.
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Hf(hf) => hf.vocab_size(),
            Backend::Spm(sp) if self.family == Family::T5 => sp.len() + self.extra_ids as usize,
            Backend::Spm(sp) => sp.len(),
            Backend::Pieces(p) => p
                .decoder
                .keys()
                .chain(p.languages.iter().map(|(_, id)| id))
                .map(|&id| id as usize + 1)
                .max()
                .unwrap_or(0),
            Backend::Whisper(w) => w.vocab_size(),
        }
    }

    /// The id of a token of the vocabulary (the source side's where the two differ).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.find_token(token)
    }

    /// The id of a token of the target vocabulary: [`TextTokenizer::token_to_id`], but for
    /// Marian with separate vocabularies the target side's.
    pub fn target_token_to_id(&self, token: &str) -> Option<u32> {
        match &self.backend {
            Backend::Pieces(p) => match &p.target_vocab {
                Some(target) => target.get(token).copied(),
                None => self.find_token(token),
            },
            _ => self.find_token(token),
        }
    }

    /// The token of a generated id: the target vocabulary's, as decoding reads it (the
    /// inverse of [`TextTokenizer::target_token_to_id`]).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match &self.backend {
            Backend::Hf(hf) => hf.id_to_token(id),
            Backend::Spm(sp) => sp.id_to_piece(id).map(str::to_owned).or_else(|| {
                // T5's sentinels follow the pieces, the last one first.
                let past = id.checked_sub(sp.len() as u32)?;
                (self.family == Family::T5 && past < self.extra_ids)
                    .then(|| format!("<extra_id_{}>", self.extra_ids - 1 - past))
            }),
            Backend::Pieces(p) => p.decoder.get(&id).cloned().or_else(|| {
                p.languages
                    .iter()
                    .find(|&&(_, lang)| lang == id)
                    .map(|(code, _)| format!("__{code}__"))
            }),
            Backend::Whisper(w) => w.hf().id_to_token(id),
        }
    }

    /// Source text to the ids the encoder reads, with the family's special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TextError> {
        self.encode_side(text, false)
    }

    /// Target text to ids as the family labels it (`text_target`): the decoder's tokens for a
    /// target prefix or for teacher forcing.
    pub fn encode_target(&self, text: &str) -> Result<Vec<u32>, TextError> {
        self.encode_side(text, true)
    }

    /// Ids to text, special tokens skipped. An id past the vocabulary (the padding rows of a
    /// T5 embedding, M2M100's made-up words) decodes as the family's `transformers` tokenizer
    /// decodes it: to nothing (tokenizer.json, T5), to the text `<unk>` (M2M100); Marian and
    /// Whisper refuse it with [`TextError::UnknownId`], as their references fail on it.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TextError> {
        let text = match &self.backend {
            Backend::Hf(hf) => {
                // The `tokenizers` library skips ids that have no token.
                let known: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|&id| hf.id_to_token(id).is_some())
                    .collect();
                let text = hf.decode(&known, true)?;
                let bpe = matches!(
                    hf.inner().get_model(),
                    tokenizers::models::ModelWrapper::BPE(_)
                );
                return Ok(if self.clean_up && !bpe {
                    clean_up_tokenization(&text)
                } else {
                    text
                });
            }
            Backend::Spm(sp) if self.family == Family::T5 => {
                // As T5Tokenizer: `<pad>`, `</s>`, `<unk>` and the `<extra_id_N>` sentinels after
                // the pieces are special and skipped, ids past them (the embedding's padding
                // rows) have no token and are skipped too.
                let kept: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|&id| id < sp.len() as u32 && !sp.is_special(id))
                    .collect();
                sp.decode(&kept)?
            }
            Backend::Spm(sp) => sp.decode(ids)?,
            Backend::Pieces(p) => p.decode(ids, self.family)?,
            Backend::Whisper(w) => w.decode(ids)?,
        };
        Ok(if self.clean_up {
            clean_up_tokenization(&text)
        } else {
            text
        })
    }

    /// Encodes one side: the body ids with the family's special tokens around them.
    fn encode_side(&self, text: &str, target: bool) -> Result<Vec<u32>, TextError> {
        let lang = if target {
            &self.tgt_lang
        } else {
            &self.src_lang
        };
        let body = match &self.backend {
            Backend::Hf(hf) if self.placement().is_none() => return hf.encode(text, true),
            Backend::Hf(hf) => hf.encode(text, false)?,
            Backend::Spm(sp) if self.family == Family::T5 => {
                let mut ids = Vec::new();
                for chunk in split_specials(text, &self.spm_specials) {
                    match chunk {
                        Ok(id) => ids.push(id),
                        // T5Tokenizer splits at any whitespace before segmenting.
                        Err(rest) => {
                            let words: Vec<&str> = rest.split_whitespace().collect();
                            ids.extend(sp.encode(&words.join(" "))?);
                        }
                    }
                }
                ids.extend(self.eos);
                return Ok(ids);
            }
            Backend::Spm(sp) => return sp.encode(text),
            Backend::Whisper(w) => return w.encode(text),
            Backend::Pieces(p) if self.family == Family::Marian => {
                return p.encode_marian(text, target);
            }
            Backend::Pieces(p) => p.encode_pieces(text, false)?,
        };
        let eos = self
            .eos
            .ok_or_else(|| TextError::malformed("vocabulary", "no </s> token"))?;
        let placement = self.placement().unwrap_or(LangPlacement::Prefix);
        let lang = lang.as_deref().ok_or(TextError::LanguageRequired {
            family: self.family.name(),
            side: if target { "target" } else { "source" },
        })?;
        let lang = self.language_id(lang)?;
        let mut ids = Vec::with_capacity(body.len() + 2);
        match placement {
            LangPlacement::Prefix => {
                ids.push(lang);
                ids.extend(body);
                ids.push(eos);
            }
            LangPlacement::Suffix => {
                ids.extend(body);
                ids.push(eos);
                ids.push(lang);
            }
        }
        Ok(ids)
    }

    /// Where this family puts language codes, `None` when it has none.
    fn placement(&self) -> Option<LangPlacement> {
        match self.family {
            Family::Nllb if self.legacy => Some(LangPlacement::Suffix),
            Family::Nllb | Family::Mbart50 | Family::M2m100 => Some(LangPlacement::Prefix),
            Family::Mbart => Some(LangPlacement::Suffix),
            _ => None,
        }
    }

    /// The token id of a language code: one of the family's codes that the tokenizer has as a
    /// special token.
    fn language_id(&self, code: &str) -> Result<u32, TextError> {
        let found = match &self.backend {
            Backend::Pieces(p) => p
                .languages
                .iter()
                .find(|(c, _)| c == code)
                .map(|&(_, id)| id),
            Backend::Hf(hf) if is_language_code(self.family, code) => {
                hf.token_to_id(code).filter(|&id| hf.is_special(id))
            }
            _ => None,
        };
        found.ok_or_else(|| {
            let known = self.languages();
            let mut examples: Vec<&str> = known.iter().take(4).map(|(c, _)| c.as_str()).collect();
            if known.len() > examples.len() {
                examples.push("...");
            }
            TextError::UnknownLanguage {
                family: self.family.name(),
                code: code.to_owned(),
                examples: format!("{} ({} codes)", examples.join(", "), known.len()),
            }
        })
    }

    /// The language codes [`TextTokenizer::with_languages`] accepts with their token ids, in
    /// id order; empty for a family without language codes.
    pub fn languages(&self) -> Vec<(String, u32)> {
        match &self.backend {
            Backend::Pieces(p) => p.languages.clone(),
            Backend::Hf(hf) if self.placement().is_some() => {
                let mut codes: Vec<(String, u32)> = hf
                    .inner()
                    .get_added_tokens_decoder()
                    .into_iter()
                    .filter(|(id, t)| {
                        hf.is_special(*id) && is_language_code(self.family, &t.content)
                    })
                    .map(|(id, t)| (t.content, id))
                    .collect();
                codes.sort_by_key(|&(_, id)| id);
                codes
            }
            _ => Vec::new(),
        }
    }

    /// The id of a token, whatever the backend.
    fn find_token(&self, token: &str) -> Option<u32> {
        match &self.backend {
            Backend::Hf(hf) => hf.token_to_id(token),
            Backend::Spm(sp) if self.family == Family::T5 => sp
                .piece_to_id(token)
                .or_else(|| self.sentinel_id(sp, token)),
            Backend::Spm(sp) => sp.piece_to_id(token),
            Backend::Pieces(p) => p.vocab.get(token).copied().or_else(|| {
                let code = token.strip_prefix("__")?.strip_suffix("__")?;
                p.languages
                    .iter()
                    .find(|(c, _)| c == code)
                    .map(|&(_, id)| id)
            }),
            Backend::Whisper(w) => w.hf().token_to_id(token),
        }
    }
}

impl TextTokenizer {
    /// For T5 from a bare SentencePiece model, the texts and ids of its special tokens,
    /// longest first (empty otherwise).
    fn t5_spm_specials(&self) -> Vec<(String, u32)> {
        let Backend::Spm(sp) = &self.backend else {
            return Vec::new();
        };
        if self.family != Family::T5 {
            return Vec::new();
        }
        let mut specials: Vec<(String, u32)> = (0..sp.len() as u32)
            .filter(|&id| sp.is_special(id))
            .filter_map(|id| Some((sp.id_to_piece(id)?.to_owned(), id)))
            .chain((0..self.extra_ids.min(1000)).filter_map(|n| {
                let token = format!("<extra_id_{n}>");
                let id = self.sentinel_id(sp, &token)?;
                Some((token, id))
            }))
            .collect();
        specials.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        specials
    }

    /// The id of T5's sentinel `<extra_id_N>` after the pieces of a bare SentencePiece model:
    /// `<extra_id_0>` last, as T5Tokenizer adds them.
    fn sentinel_id(&self, sp: &SentencePiece, token: &str) -> Option<u32> {
        let n: u32 = token
            .strip_prefix("<extra_id_")?
            .strip_suffix('>')?
            .parse()
            .ok()?;
        (n < self.extra_ids).then(|| sp.len() as u32 + self.extra_ids - 1 - n)
    }
}

impl PieceVocab {
    /// Marian: in each piece of text between special tokens, a leading `>>code<<` as its own
    /// token and the pieces of the rest; then `</s>`.
    fn encode_marian(&self, text: &str, target: bool) -> Result<Vec<u32>, TextError> {
        let mut ids = Vec::new();
        for chunk in split_specials(text, &self.special_texts) {
            let mut rest = match chunk {
                Ok(id) => {
                    ids.push(id);
                    continue;
                }
                Err(rest) => rest,
            };
            if let Some(end) = rest.strip_prefix(">>").and_then(|_| rest.find("<<")) {
                let vocab = self.vocab_for(target);
                ids.push(vocab.get(&rest[..end + 2]).copied().unwrap_or(self.unk));
                rest = &rest[end + 2..];
            }
            ids.extend(self.encode_chunk(rest, target)?);
        }
        ids.push(self.eos);
        Ok(ids)
    }

    /// The ids of `text`: special tokens typed in it as their ids (as the Python tokenizers
    /// split them out), the text between them as pieces mapped through the vocabulary.
    fn encode_pieces(&self, text: &str, target: bool) -> Result<Vec<u32>, TextError> {
        let mut ids = Vec::new();
        for chunk in split_specials(text, &self.special_texts) {
            match chunk {
                Ok(id) => ids.push(id),
                Err(rest) => ids.extend(self.encode_chunk(rest, target)?),
            }
        }
        Ok(ids)
    }

    /// The pieces of `text` (source or target model) mapped through the vocabulary.
    fn encode_chunk(&self, text: &str, target: bool) -> Result<Vec<u32>, TextError> {
        let sp = if target { &self.target } else { &self.source };
        let vocab = self.vocab_for(target);
        Ok(sp
            .encode_pieces(text)?
            .iter()
            .map(|p| vocab.get(p).copied().unwrap_or(self.unk))
            .collect())
    }

    /// The vocabulary of one side.
    fn vocab_for(&self, target: bool) -> &HashMap<String, u32> {
        match (&self.target_vocab, target) {
            (Some(t), true) => t,
            _ => &self.vocab,
        }
    }

    /// Kept ids back to pieces, decoded by sentencepiece, whitespace stripped. An id missing
    /// from the vocabulary is, as in MarianTokenizer, the decoding model's piece of that id
    /// (an error past the model, where MarianTokenizer fails), and as in M2M100Tokenizer (its
    /// made-up words) the special token text `<unk>`, which ends a run of pieces.
    fn decode(&self, ids: &[u32], family: Family) -> Result<String, TextError> {
        let sp = if self.decode_with_source {
            &self.source
        } else {
            &self.target
        };
        let mut text = String::new();
        let mut pieces = Vec::with_capacity(ids.len());
        for &id in ids {
            if self.special.contains(&id) || self.languages.iter().any(|&(_, l)| l == id) {
                continue;
            }
            if let Some(piece) = self.decoder.get(&id) {
                pieces.push(piece.as_str());
            } else if family == Family::Marian {
                pieces.push(sp.id_to_piece(id).ok_or(TextError::UnknownId {
                    id,
                    vocab_size: self.decoder.len().max(sp.len()),
                })?);
            } else {
                text.push_str(&sp.decode_pieces(&pieces));
                text.push_str(UNK_TEXT);
                pieces.clear();
            }
        }
        text.push_str(&sp.decode_pieces(&pieces));
        let text = if family == Family::Marian {
            text.replace('\u{2581}', " ")
        } else {
            text
        };
        Ok(crate::whisper::python_strip(&text).to_owned())
    }
}

/// Whether `code` has the shape of the family's language codes in a `tokenizer.json`: NLLB
/// `xxx_Xxxx` (`eng_Latn`), mBART and mBART-50 `xx_XX` (`en_XX`).
fn is_language_code(family: Family, code: &str) -> bool {
    let b = code.as_bytes();
    let lower = |s: &[u8]| s.iter().all(u8::is_ascii_lowercase);
    let upper = |s: &[u8]| s.iter().all(u8::is_ascii_uppercase);
    match family {
        Family::Nllb => {
            b.len() == 8 && lower(&b[..3]) && b[3] == b'_' && upper(&b[4..5]) && lower(&b[5..])
        }
        Family::Mbart50 | Family::Mbart => {
            b.len() == 5 && lower(&b[..2]) && b[2] == b'_' && upper(&b[3..])
        }
        _ => false,
    }
}

/// transformers' `clean_up_tokenization`: no space before `.`, `?`, `!`, `,` and English
/// contractions.
pub fn clean_up_tokenization(text: &str) -> String {
    [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ]
    .iter()
    .fold(text.to_owned(), |t, (from, to)| t.replace(from, to))
}

/// `text` split at the leftmost-longest occurrences of the special tokens `specials` (text,
/// id; longest first): `Ok(id)` for a
/// special token, `Err(text)` for the text between them.
fn split_specials<'t>(text: &'t str, specials: &[(String, u32)]) -> Vec<Result<u32, &'t str>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < text.len() {
        let found = specials
            .iter()
            .find(|(t, _)| text[at..].starts_with(t.as_str()));
        match found {
            Some((t, id)) => {
                if start < at {
                    out.push(Err(&text[start..at]));
                }
                out.push(Ok(*id));
                at += t.len();
                start = at;
            }
            None => at += text[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    if start < text.len() {
        out.push(Err(&text[start..]));
    }
    out
}

/// The unknown token's text, which vocabularies mapped from pieces must have.
const UNK_TEXT: &str = "<unk>";

/// The family of a directory: `tokenizer_config.json`'s class, `config.json`'s model type,
/// then the files present.
fn detect(
    dir: &Path,
    config: Option<&Value>,
    model_config: Option<&Value>,
) -> Result<Family, TextError> {
    let class = config
        .and_then(|c| c.get("tokenizer_class"))
        .and_then(Value::as_str)
        .and_then(Family::from_tokenizer_class);
    let model_type = model_config
        .and_then(|c| c.get("model_type"))
        .and_then(Value::as_str)
        .and_then(Family::from_model_type);
    if let Some(family) = class.or(model_type) {
        return Ok(family);
    }
    if dir.join("source.spm").exists() {
        return Ok(Family::Marian);
    }
    if dir.join("vocab.json").exists() && dir.join("sentencepiece.bpe.model").exists() {
        return Ok(Family::M2m100);
    }
    let json = dir.join("tokenizer.json");
    if json.exists() {
        let hf = HfTokenizer::from_file(&json)?;
        let whisper = hf.token_to_id("<|startoftranscript|>").is_some();
        return Ok(if whisper {
            Family::Whisper
        } else {
            Family::Plain
        });
    }
    if let [one] = spm_files(dir)?.as_slice() {
        // `spiece.model` is T5Tokenizer's file name.
        let t5 = one.file_name().is_some_and(|n| n == "spiece.model");
        return Ok(if t5 { Family::T5 } else { Family::Plain });
    }
    Err(TextError::NoTokenizer {
        dir: dir.to_path_buf(),
    })
}

/// The `.model`/`.spm` files of a directory.
fn spm_files(dir: &Path) -> Result<Vec<PathBuf>, TextError> {
    let entries = std::fs::read_dir(dir).map_err(|source| TextError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("model" | "spm")
            )
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Loads the files of `family` from `dir`.
fn load_backend(dir: &Path, family: Family, config: &Value) -> Result<Backend, TextError> {
    let need = |file: &str, needs: &'static str| {
        let path = dir.join(file);
        if path.exists() {
            Ok(path)
        } else {
            Err(TextError::MissingFile {
                family: family.name(),
                path,
                needs,
            })
        }
    };
    match family {
        Family::Marian => {
            const NEEDS: &str = "source.spm, target.spm, vocab.json";
            let source = SentencePiece::from_file(&need("source.spm", NEEDS)?)?;
            let target = SentencePiece::from_file(&need("target.spm", NEEDS)?)?;
            let vocab = read_vocab(&need("vocab.json", NEEDS)?)?;
            let separate = config.get("separate_vocabs").and_then(Value::as_bool) == Some(true);
            let target_vocab = if separate {
                Some(read_vocab(&need(
                    "target_vocab.json",
                    "target_vocab.json with separate_vocabs",
                )?)?)
            } else {
                None
            };
            let decoder = invert(target_vocab.as_ref().unwrap_or(&vocab));
            let pieces = piece_vocab(
                source,
                target,
                vocab,
                target_vocab,
                decoder,
                !separate,
                Vec::new(),
            )?;
            Ok(Backend::Pieces(Box::new(pieces)))
        }
        Family::M2m100 => {
            const NEEDS: &str = "sentencepiece.bpe.model (or spm.model), vocab.json";
            let model = ["sentencepiece.bpe.model", "spm.model"]
                .iter()
                .map(|f| dir.join(f))
                .find(|p| p.exists())
                .ok_or_else(|| TextError::MissingFile {
                    family: family.name(),
                    path: dir.join("sentencepiece.bpe.model"),
                    needs: NEEDS,
                })?;
            let vocab = read_vocab(&need("vocab.json", NEEDS)?)?;
            let codes: &[&str] = match config.get("language_codes").and_then(Value::as_str) {
                Some("wmt21") => &WMT21_LANGUAGES,
                _ => &M2M100_LANGUAGES,
            };
            let base = vocab.len() as u32;
            let languages = codes
                .iter()
                .enumerate()
                .map(|(i, c)| ((*c).to_owned(), base + i as u32))
                .collect();
            let decoder = invert(&vocab);
            let source = SentencePiece::from_file(&model)?;
            let target = SentencePiece::from_file(&model)?;
            let pieces = piece_vocab(source, target, vocab, None, decoder, true, languages)?;
            Ok(Backend::Pieces(Box::new(pieces)))
        }
        Family::Whisper => {
            let path = need("tokenizer.json", "tokenizer.json")?;
            let hf = HfTokenizer::from_file(&path)?;
            Ok(Backend::Whisper(Box::new(WhisperTokenizer::new(
                hf,
                "tokenizer.json",
            )?)))
        }
        Family::Nllb | Family::Mbart50 | Family::Mbart | Family::Bart => {
            let path = need("tokenizer.json", "tokenizer.json")?;
            Ok(Backend::Hf(HfTokenizer::from_file(&path)?))
        }
        Family::Pegasus => {
            const NEEDS: &str = "tokenizer.json (spiece.model alone misses the 103 ids that \
                                 PegasusTokenizer puts before its pieces)";
            Ok(Backend::Hf(HfTokenizer::from_file(&need(
                "tokenizer.json",
                NEEDS,
            )?)?))
        }
        Family::T5 | Family::Plain => {
            let json = dir.join("tokenizer.json");
            if json.exists() {
                return Ok(Backend::Hf(HfTokenizer::from_file(&json)?));
            }
            match spm_files(dir)?.as_slice() {
                [one] => Ok(Backend::Spm(SentencePiece::from_file(one)?)),
                _ => Err(TextError::MissingFile {
                    family: family.name(),
                    path: json,
                    needs: "tokenizer.json, or exactly one SentencePiece model (*.model, *.spm)",
                }),
            }
        }
    }
}

/// Builds the piece-vocabulary backend, finding its special tokens.
fn piece_vocab(
    source: SentencePiece,
    target: SentencePiece,
    vocab: HashMap<String, u32>,
    target_vocab: Option<HashMap<String, u32>>,
    decoder: HashMap<u32, String>,
    decode_with_source: bool,
    languages: Vec<(String, u32)>,
) -> Result<PieceVocab, TextError> {
    let id = |t: &str| vocab.get(t).copied();
    let unk = id(UNK_TEXT).ok_or_else(|| TextError::malformed("vocab.json", "no <unk> token"))?;
    let eos = id("</s>").ok_or_else(|| TextError::malformed("vocab.json", "no </s> token"))?;
    let mut special_texts: Vec<(String, u32)> = ["<s>", "</s>", "<unk>", "<pad>"]
        .iter()
        .filter_map(|t| id(t).map(|i| ((*t).to_owned(), i)))
        .collect();
    special_texts.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
    let special = special_texts.iter().map(|&(_, i)| i).collect();
    Ok(PieceVocab {
        source,
        target,
        vocab,
        target_vocab,
        decoder,
        decode_with_source,
        languages,
        special,
        special_texts,
        unk,
        eos,
    })
}

/// Reads a `vocab.json` (token → id).
fn read_vocab(path: &Path) -> Result<HashMap<String, u32>, TextError> {
    let bytes = read_file(path)?;
    serde_json::from_slice(&bytes).map_err(|e| TextError::malformed(path.display().to_string(), e))
}

/// Id → token.
fn invert(vocab: &HashMap<String, u32>) -> HashMap<u32, String> {
    vocab.iter().map(|(t, &id)| (id, t.clone())).collect()
}

/// Parses a JSON file if it exists.
fn read_json_if_present(path: &Path) -> Result<Option<Value>, TextError> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_file(path)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| TextError::malformed(path.display().to_string(), e))
}
