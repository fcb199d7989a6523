//! The numbers model's `vocab.json`: one source symbol per character, one target symbol per
//! digit, and the tokenisation rule it states.
//!
//! Source text is lower-cased, every run of whitespace becomes one space, both ends are
//! trimmed, and each character becomes the id of the same one-character symbol. A character
//! with no symbol is refused ([`TextError::UnknownCharacter`]) rather than mapped to the
//! unknown id: the model never saw that id in training, so its answer would be a guess.
//! Target ids are read up to the first EOS, each replaced by its symbol.

use serde::Deserialize;
use tessel_model::Config;
use thiserror::Error;

/// Why `vocab.json` does not fit the model.
#[derive(Debug, Error)]
pub enum VocabError {
    /// The JSON does not parse or lacks a field.
    #[error("vocab.json: {0}")]
    Json(#[from] serde_json::Error),
    /// A side's symbol count differs from the config's vocabulary size.
    #[error("vocab.json: {side} has {symbols} symbols, the model's vocabulary {vocab}")]
    Size {
        /// `source` or `target`.
        side: &'static str,
        /// Symbols in the file.
        symbols: usize,
        /// The config's vocabulary.
        vocab: usize,
    },
    /// A special id differs from the config's or lies outside the symbols.
    #[error("vocab.json: {which} is {id}, the model's is {expected}")]
    Special {
        /// Which id.
        which: &'static str,
        /// The file's id.
        id: u32,
        /// The config's id.
        expected: u32,
    },
    /// The same character is listed twice.
    #[error("vocab.json: source symbol {0:?} appears twice")]
    Duplicate(char),
    /// A length limit of zero.
    #[error("vocab.json: {0}.max_len must be positive")]
    ZeroLength(&'static str),
}

/// Why a text cannot be read by the model.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TextError {
    /// Nothing but whitespace.
    #[error("the text is empty")]
    Empty,
    /// A character the model has no symbol for.
    #[error(
        "character {character:?} (position {position}) is not one the model reads; it reads \
         only {alphabet:?} (upper case is lowered)"
    )]
    UnknownCharacter {
        /// The character as given.
        character: char,
        /// Its position in the text, counted in characters from 1.
        position: usize,
        /// Every character the model reads.
        alphabet: String,
    },
    /// Longer than the model reads.
    #[error("the text is {len} characters long once whitespace is collapsed; the model reads at most {max}")]
    TooLong {
        /// Characters after normalisation.
        len: usize,
        /// The limit.
        max: usize,
    },
}

#[derive(Deserialize)]
struct SourceSide {
    symbols: Vec<String>,
    max_len: usize,
}

#[derive(Deserialize)]
struct TargetSide {
    symbols: Vec<String>,
    bos_id: u32,
    eos_id: u32,
    max_len: usize,
}

#[derive(Deserialize)]
struct VocabFile {
    source: SourceSide,
    target: TargetSide,
}

/// The parsed vocabulary, checked against the model's config.
#[derive(Clone, Debug)]
pub struct Vocab {
    /// `(character, id)` for every one-character source symbol, sorted by character.
    chars: Vec<(char, u32)>,
    /// Longest source, in characters.
    max_source: usize,
    /// Target symbols by id.
    target: Vec<String>,
    /// Target EOS.
    eos: u32,
    /// Most decoder positions, BOS included.
    max_target: usize,
}

/// A decoded target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The symbols before EOS.
    pub text: String,
    /// Whether EOS ended it (otherwise the step limit did).
    pub finished: bool,
}

impl Vocab {
    /// Parses `vocab.json` and checks it against `config` (sizes, BOS and EOS); lengths are
    /// capped by the config's.
    pub fn from_json(text: &str, config: &Config) -> Result<Vocab, VocabError> {
        let file: VocabFile = serde_json::from_str(text)?;
        for (side, symbols, vocab) in [
            ("source", file.source.symbols.len(), config.src_vocab),
            ("target", file.target.symbols.len(), config.tgt_vocab),
        ] {
            if symbols != vocab {
                return Err(VocabError::Size {
                    side,
                    symbols,
                    vocab,
                });
            }
        }
        for (which, id, expected) in [
            ("target.bos_id", file.target.bos_id, config.bos_id),
            ("target.eos_id", file.target.eos_id, config.eos_id),
        ] {
            if id != expected {
                return Err(VocabError::Special {
                    which,
                    id,
                    expected,
                });
            }
        }
        for (side, len) in [
            ("source", file.source.max_len),
            ("target", file.target.max_len),
        ] {
            if len == 0 {
                return Err(VocabError::ZeroLength(side));
            }
        }
        let mut chars = Vec::new();
        for (id, symbol) in (0u32..).zip(&file.source.symbols) {
            let mut it = symbol.chars();
            if let (Some(c), None) = (it.next(), it.next()) {
                chars.push((c, id));
            }
        }
        chars.sort_unstable();
        if let Some(pair) = chars.windows(2).find(|p| p[0].0 == p[1].0) {
            return Err(VocabError::Duplicate(pair[0].0));
        }
        Ok(Vocab {
            chars,
            max_source: file.source.max_len.min(config.max_src_len),
            target: file.target.symbols,
            eos: file.target.eos_id,
            max_target: file.target.max_len.min(config.max_tgt_len),
        })
    }

    /// Longest source, in characters.
    pub fn max_source(&self) -> usize {
        self.max_source
    }

    /// Most decoder positions (BOS included): the search's step limit.
    pub fn max_target(&self) -> usize {
        self.max_target
    }

    /// Every character the model reads, in symbol order of characters.
    pub fn alphabet(&self) -> String {
        self.chars.iter().map(|&(c, _)| c).collect()
    }

    fn id(&self, c: char) -> Option<u32> {
        self.chars
            .binary_search_by_key(&c, |&(k, _)| k)
            .ok()
            .map(|i| self.chars[i].1)
    }

    /// Tokenises `text` into `ids` (cleared first) as the module says.
    pub fn encode_into(&self, text: &str, ids: &mut Vec<u32>) -> Result<(), TextError> {
        ids.clear();
        let mut space_pending = false;
        for (index, character) in text.chars().enumerate() {
            if character.is_whitespace() {
                space_pending = !ids.is_empty();
                continue;
            }
            for lower in character.to_lowercase() {
                if space_pending {
                    ids.push(self.space_id(index)?);
                    space_pending = false;
                }
                let id = self.id(lower).ok_or_else(|| TextError::UnknownCharacter {
                    character,
                    position: index + 1,
                    alphabet: self.alphabet(),
                })?;
                ids.push(id);
            }
        }
        match ids.len() {
            0 => Err(TextError::Empty),
            len if len > self.max_source => Err(TextError::TooLong {
                len,
                max: self.max_source,
            }),
            _ => Ok(()),
        }
    }

    /// The id of the space that separates words; `index` is the position of the whitespace.
    fn space_id(&self, index: usize) -> Result<u32, TextError> {
        self.id(' ').ok_or_else(|| TextError::UnknownCharacter {
            character: ' ',
            position: index,
            alphabet: self.alphabet(),
        })
    }

    /// The text of target `ids` up to the first EOS; an id without a symbol shows as `?`.
    pub fn decode(&self, ids: &[u32]) -> Decoded {
        let mut text = String::new();
        for &id in ids {
            if id == self.eos {
                return Decoded {
                    text,
                    finished: true,
                };
            }
            text.push_str(self.target.get(id as usize).map_or("?", String::as_str));
        }
        Decoded {
            text,
            finished: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            src_vocab: 7,
            tgt_vocab: 6,
            max_src_len: 10,
            max_tgt_len: 5,
            bos_id: 1,
            eos_id: 2,
            pad_id: 0,
            ..Config::transformer_base()
        }
    }

    const JSON: &str = r#"{
        "source": {"symbols": ["<pad>", "<unk>", " ", "-", "a", "b", "c"], "pad_id": 0,
                   "unk_id": 1, "max_len": 8},
        "target": {"symbols": ["<pad>", "<bos>", "<eos>", "0", "1", "2"], "pad_id": 0,
                   "bos_id": 1, "eos_id": 2, "max_len": 12}
    }"#;

    fn vocab() -> Vocab {
        Vocab::from_json(JSON, &config()).expect("the test vocabulary fits its config")
    }

    fn encode(text: &str) -> Result<Vec<u32>, TextError> {
        let mut ids = vec![99];
        vocab().encode_into(text, &mut ids).map(|()| ids)
    }

    #[test]
    fn lengths_are_capped_by_the_config() {
        let v = vocab();
        assert_eq!((v.max_source(), v.max_target()), (8, 5));
        assert_eq!(v.alphabet(), " -abc");
    }

    #[test]
    fn text_is_lowered_and_whitespace_collapsed_and_trimmed() {
        assert_eq!(encode("a"), Ok(vec![4]));
        assert_eq!(encode("  Ab \t\n c-A  "), Ok(vec![4, 5, 2, 6, 3, 4]));
        assert_eq!(encode("a b"), encode("a   b"));
    }

    #[test]
    fn unknown_characters_are_refused_with_their_position() {
        match encode("ab d") {
            Err(TextError::UnknownCharacter {
                character,
                position,
                alphabet,
            }) => {
                assert_eq!((character, position), ('d', 4));
                assert_eq!(alphabet, " -abc");
            }
            other => panic!("{other:?}"),
        }
        // A special symbol's name is not text.
        assert!(matches!(
            encode("<pad>"),
            Err(TextError::UnknownCharacter { character: '<', .. })
        ));
        // Upper case that lowers to an unknown character is reported as given.
        assert!(matches!(
            encode("aÉ"),
            Err(TextError::UnknownCharacter {
                character: 'É',
                position: 2,
                ..
            })
        ));
    }

    #[test]
    fn empty_and_too_long_texts_are_refused() {
        assert_eq!(encode(""), Err(TextError::Empty));
        assert_eq!(encode(" \t "), Err(TextError::Empty));
        assert_eq!(encode("abcabcab").map(|ids| ids.len()), Ok(8));
        assert_eq!(
            encode("abc abcab"),
            Err(TextError::TooLong { len: 9, max: 8 })
        );
        // Collapsed whitespace does not count.
        assert_eq!(encode("  abc     abca  ").map(|ids| ids.len()), Ok(8));
    }

    #[test]
    fn targets_are_read_up_to_eos() {
        let v = vocab();
        let done = v.decode(&[4, 3, 5, 2, 4]);
        assert_eq!((done.text.as_str(), done.finished), ("102", true));
        let cut = v.decode(&[4, 4]);
        assert_eq!((cut.text.as_str(), cut.finished), ("11", false));
        assert_eq!(v.decode(&[9]).text, "?");
    }

    #[test]
    fn a_vocabulary_that_does_not_fit_the_config_is_refused() {
        let small = Config {
            src_vocab: 6,
            ..config()
        };
        assert!(matches!(
            Vocab::from_json(JSON, &small),
            Err(VocabError::Size {
                side: "source",
                symbols: 7,
                vocab: 6
            })
        ));
        let other_eos = Config {
            eos_id: 3,
            ..config()
        };
        assert!(matches!(
            Vocab::from_json(JSON, &other_eos),
            Err(VocabError::Special {
                which: "target.eos_id",
                ..
            })
        ));
        let duplicate = JSON.replace("\"c\"]", "\"a\"]");
        assert!(matches!(
            Vocab::from_json(&duplicate, &config()),
            Err(VocabError::Duplicate('a'))
        ));
        assert!(matches!(
            Vocab::from_json("{}", &config()),
            Err(VocabError::Json(_))
        ));
    }
}
