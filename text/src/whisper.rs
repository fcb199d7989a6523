//! Whisper's tokenizer: the byte-level BPE of a model directory's `tokenizer.json` with the
//! special tokens of the multilingual, `.en` and large-v3 vocabularies, behaving as
//! openai-whisper's `whisper.tokenizer.Tokenizer` (a `tiktoken` encoding) behaves.
//!
//! - Layout: after the BPE vocabulary come `<|endoftext|>`, `<|startoftranscript|>`, one token
//!   per language (99, or 100 from large-v3 on), `<|translate|>`, `<|transcribe|>`,
//!   `<|startoflm|>`, `<|startofprev|>`, `<|nospeech|>` (`<|nocaptions|>` in older files),
//!   `<|notimestamps|>` and the timestamps `<|0.00|>` … `<|30.00|>` in steps of 0.02 s. Every
//!   id is looked up by its token's text, so all three layouts load from their own files;
//!   timestamps that a file does not list (older Hugging Face files) follow `<|notimestamps|>`.
//! - [`WhisperTokenizer::encode`]: the BPE ids of text, as `tiktoken`'s `encode` (which refuses
//!   text containing a special token's text: so does this, with a typed error).
//! - [`WhisperTokenizer::decode`]: the text of a transcript as openai-whisper's `transcribe`
//!   produces it: the tokens below `<|endoftext|>`, their bytes concatenated and decoded as
//!   UTF-8 with U+FFFD for each maximal invalid subsequence (`errors="replace"`).
//! - [`WhisperTokenizer::decode_with_timestamps`]: every token, specials as their text and
//!   timestamps as `<|1.08|>`.
//! - [`WhisperTokenizer::sot_sequence`], [`WhisperTokenizer::encode_prompt`],
//!   [`WhisperTokenizer::non_speech_tokens`]: the start sequence, the `--initial-prompt`
//!   encoding and the suppressed non-speech set, as the reference builds them.
//!
//! Golden test: `tests/whisper.rs`, ids from `tiktoken` and text from openai-whisper's
//! `Tokenizer` over a byte-level BPE in both layouts (fixtures: tools/make_text_golden.py).

use crate::error::TextError;
use crate::hf::HfTokenizer;
use crate::languages::WHISPER_LANGUAGES;

/// The number of timestamp tokens (`<|0.00|>` … `<|30.00|>`).
pub const TIMESTAMPS: u32 = 1501;

/// Seconds per timestamp step.
pub const SECONDS_PER_TIMESTAMP: f64 = 0.02;

/// What the decoder is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// Speech to text in the spoken language.
    Transcribe,
    /// Speech to English text.
    Translate,
}

/// Whisper's tokenizer.
#[derive(Clone)]
pub struct WhisperTokenizer {
    /// The byte-level BPE and the special tokens.
    hf: HfTokenizer,
    /// `<|endoftext|>`: every text token is below it.
    eot: u32,
    /// `<|startoftranscript|>`.
    sot: u32,
    /// `<|translate|>`.
    translate: u32,
    /// `<|transcribe|>`.
    transcribe: u32,
    /// `<|startoflm|>`.
    sot_lm: u32,
    /// `<|startofprev|>`.
    sot_prev: u32,
    /// `<|nospeech|>`.
    no_speech: u32,
    /// `<|notimestamps|>`.
    no_timestamps: u32,
    /// `<|0.00|>`.
    timestamp_begin: u32,
    /// The languages the vocabulary has, in token order, with their token ids.
    languages: Vec<(&'static str, u32)>,
}

impl WhisperTokenizer {
    /// Wraps a loaded `tokenizer.json`; fails naming the first special token it lacks.
    pub fn new(hf: HfTokenizer, name: &str) -> Result<Self, TextError> {
        let find = |tokens: &[&str]| {
            tokens
                .iter()
                .find_map(|t| hf.token_to_id(t))
                .ok_or_else(|| {
                    TextError::malformed(name, format!("no Whisper token {}", tokens[0]))
                })
        };
        let no_timestamps = find(&["<|notimestamps|>"])?;
        let timestamp_begin = hf
            .token_to_id("<|0.00|>")
            .unwrap_or(no_timestamps.saturating_add(1));
        let languages = WHISPER_LANGUAGES
            .iter()
            .filter_map(|&(code, _)| hf.token_to_id(&format!("<|{code}|>")).map(|id| (code, id)))
            .collect();
        Ok(Self {
            eot: find(&["<|endoftext|>"])?,
            sot: find(&["<|startoftranscript|>"])?,
            translate: find(&["<|translate|>"])?,
            transcribe: find(&["<|transcribe|>"])?,
            sot_lm: find(&["<|startoflm|>"])?,
            sot_prev: find(&["<|startofprev|>"])?,
            no_speech: find(&["<|nospeech|>", "<|nocaptions|>"])?,
            no_timestamps,
            timestamp_begin,
            languages,
            hf,
        })
    }

    /// The ids of `text` without special tokens, as `tiktoken`'s `encode`.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TextError> {
        let ids = self.hf.encode(text, false)?;
        match ids.iter().find(|&&id| id >= self.eot) {
            Some(&id) => Err(TextError::SpecialTokenInText {
                token: self.hf.id_to_token(id).unwrap_or_default(),
            }),
            None => Ok(ids),
        }
    }

    /// `<|startofprev|>` and the prompt as openai-whisper conditions on an initial prompt:
    /// `encode(" " + prompt.strip())`.
    pub fn encode_prompt(&self, prompt: &str) -> Result<Vec<u32>, TextError> {
        let mut ids = vec![self.sot_prev];
        ids.extend(self.encode(&format!(" {}", python_strip(prompt)))?);
        Ok(ids)
    }

    /// The transcript text of model output: the tokens below `<|endoftext|>`, decoded.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TextError> {
        self.check_ids(ids)?;
        let text: Vec<u32> = ids.iter().copied().filter(|&id| id < self.eot).collect();
        self.hf.decode(&text, false)
    }

    /// Every token decoded, specials as their text and timestamps as `<|1.08|>`.
    pub fn decode_with_timestamps(&self, ids: &[u32]) -> Result<String, TextError> {
        self.check_ids(ids)?;
        let mut out = String::new();
        let mut run = Vec::new();
        for &id in ids {
            match self.timestamp_seconds(id) {
                Some(seconds) => {
                    out.push_str(&self.hf.decode(&run, false)?);
                    run.clear();
                    out.push_str(&format!("<|{seconds:.2}|>"));
                }
                None => run.push(id),
            }
        }
        out.push_str(&self.hf.decode(&run, false)?);
        Ok(out)
    }

    /// Fails with [`TextError::UnknownId`] on an id that is neither a token nor a timestamp.
    fn check_ids(&self, ids: &[u32]) -> Result<(), TextError> {
        let unknown = |id: u32| !self.is_timestamp(id) && self.hf.id_to_token(id).is_none();
        match ids.iter().find(|&&id| unknown(id)) {
            Some(&id) => Err(TextError::UnknownId {
                id,
                vocab_size: self.vocab_size(),
            }),
            None => Ok(()),
        }
    }

    /// The decoder's start: `<|startoftranscript|>`, then the language's token if given, then
    /// the task's token if given (a `.en` model takes neither). `language` is a code (`"de"`)
    /// or an English name (`"german"`), in any case.
    pub fn sot_sequence(
        &self,
        language: Option<&str>,
        task: Option<Task>,
    ) -> Result<Vec<u32>, TextError> {
        let mut ids = vec![self.sot];
        if let Some(language) = language {
            ids.push(self.language_token(language)?);
        }
        match task {
            Some(Task::Transcribe) => ids.push(self.transcribe),
            Some(Task::Translate) => ids.push(self.translate),
            None => {}
        }
        Ok(ids)
    }

    /// The token of a language given by code or English name.
    pub fn language_token(&self, language: &str) -> Result<u32, TextError> {
        let lower = language.to_lowercase();
        let code = WHISPER_LANGUAGES
            .iter()
            .find(|(code, name)| *code == lower || *name == lower)
            .map(|(code, _)| *code);
        code.and_then(|code| self.languages.iter().find(|(c, _)| *c == code))
            .map(|&(_, id)| id)
            .ok_or_else(|| TextError::UnknownLanguage {
                family: "whisper",
                code: language.to_owned(),
                examples: "en, de, zh, english, german".into(),
            })
    }

    /// The languages of this vocabulary with their token ids, in token order (99, or 100 for
    /// large-v3): the candidates of language detection.
    pub fn language_tokens(&self) -> &[(&'static str, u32)] {
        &self.languages
    }

    /// The tokens openai-whisper suppresses as non-speech (`Tokenizer.non_speech_tokens`):
    /// speaker tags, brackets, music symbols; sorted ascending.
    pub fn non_speech_tokens(&self) -> Result<Vec<u32>, TextError> {
        const SINGLE: &str = "\"#()*+/:;<=>@[\\]^_`{|}~「」『』";
        const MULTI: &str = "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪";
        const MISCELLANEOUS: &str = "♩♪♫♬♭♮♯";
        let mut result = std::collections::BTreeSet::new();
        for start in [" -", " '"] {
            if let Some(&id) = self.encode(start)?.first() {
                result.insert(id);
            }
        }
        let symbols = SINGLE
            .chars()
            .map(String::from)
            .chain(MULTI.split(' ').map(String::from));
        let misc = MISCELLANEOUS.chars().map(String::from);
        for (symbol, is_misc) in symbols.map(|s| (s, false)).chain(misc.map(|s| (s, true))) {
            for text in [symbol.clone(), format!(" {symbol}")] {
                let ids = self.encode(&text)?;
                if ids.len() == 1 || (is_misc && !ids.is_empty()) {
                    result.insert(ids[0]);
                }
            }
        }
        Ok(result.into_iter().collect())
    }

    /// Whether `id` is a timestamp token.
    pub fn is_timestamp(&self, id: u32) -> bool {
        id >= self.timestamp_begin && id - self.timestamp_begin < TIMESTAMPS
    }

    /// The time a timestamp token stands for, in seconds.
    pub fn timestamp_seconds(&self, id: u32) -> Option<f64> {
        self.is_timestamp(id)
            .then(|| f64::from(id - self.timestamp_begin) * SECONDS_PER_TIMESTAMP)
    }

    /// `<|endoftext|>`.
    pub fn eot(&self) -> u32 {
        self.eot
    }
    /// `<|startoftranscript|>`.
    pub fn sot(&self) -> u32 {
        self.sot
    }
    /// `<|translate|>`.
    pub fn translate(&self) -> u32 {
        self.translate
    }
    /// `<|transcribe|>`.
    pub fn transcribe(&self) -> u32 {
        self.transcribe
    }
    /// `<|startoflm|>`.
    pub fn sot_lm(&self) -> u32 {
        self.sot_lm
    }
    /// `<|startofprev|>`.
    pub fn sot_prev(&self) -> u32 {
        self.sot_prev
    }
    /// `<|nospeech|>` (`<|nocaptions|>` in older vocabularies).
    pub fn no_speech(&self) -> u32 {
        self.no_speech
    }
    /// `<|notimestamps|>`.
    pub fn no_timestamps(&self) -> u32 {
        self.no_timestamps
    }
    /// `<|0.00|>`, the first timestamp.
    pub fn timestamp_begin(&self) -> u32 {
        self.timestamp_begin
    }

    /// One past the largest id: the vocabulary with its specials and timestamps.
    pub fn vocab_size(&self) -> usize {
        self.hf
            .vocab_size()
            .max((self.timestamp_begin + TIMESTAMPS) as usize)
    }

    /// The underlying `tokenizer.json` tokenizer.
    pub fn hf(&self) -> &HfTokenizer {
        &self.hf
    }
}

/// Python's `str.strip()`: drops leading and trailing characters that are whitespace to Python
/// (Unicode White_Space plus the separators U+001C..U+001F).
pub fn python_strip(text: &str) -> &str {
    let is_space = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    text.trim_matches(is_space)
}
