//! The language of a multilingual model's first window: the most likely language token.

use tessel_text::whisper::WhisperTokenizer;
use tessel_text::TextError;

/// The most likely language of the logits after `<|startoftranscript|>` ([`most_likely`]
/// over the tokenizer's language tokens), English with probability 1 when it has none.
pub(super) fn detect(tokenizer: &WhisperTokenizer, logits: &[f32]) -> (String, f64) {
    let language_logits = tokenizer.language_tokens().iter().map(|&(code, id)| {
        let v = logits.get(id as usize).copied();
        (code, v.unwrap_or(f32::NEG_INFINITY))
    });
    most_likely(language_logits).unwrap_or(("en".to_owned(), 1.0))
}

/// The language a transcription needs no detection for, with probability 1: English for a model
/// that is not `multilingual`, else `language` when given (checked against the vocabulary);
/// `None` when it must be detected.
pub(super) fn given(
    tokenizer: &WhisperTokenizer,
    multilingual: bool,
    language: Option<&str>,
) -> Result<Option<(String, f64)>, TextError> {
    if !multilingual {
        return Ok(Some(("en".to_owned(), 1.0)));
    }
    match language {
        Some(language) => {
            tokenizer.language_token(language)?;
            Ok(Some((code_of(language), 1.0)))
        }
        None => Ok(None),
    }
}

/// The code of `language` (a code or an English name, any case).
fn code_of(language: &str) -> String {
    let lower = language.to_lowercase();
    tessel_text::languages::WHISPER_LANGUAGES
        .iter()
        .find(|(code, name)| *code == lower || *name == lower)
        .map_or(lower.clone(), |(code, _)| (*code).to_owned())
}

/// The code with the largest logit (the first of equals) and its probability: the softmax
/// over the language tokens alone, in `f64`, as openai-whisper's and CTranslate2's
/// `detect_language` give it. `None` when there is no language.
pub(super) fn most_likely<'a>(
    logits: impl Iterator<Item = (&'a str, f32)> + Clone,
) -> Option<(String, f64)> {
    let mut best: Option<(&str, f32)> = None;
    for (code, v) in logits.clone() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((code, v));
        }
    }
    let (code, max) = best?;
    if !max.is_finite() {
        return Some((code.to_owned(), 0.0));
    }
    let sum: f64 = logits
        .map(|(_, v)| (f64::from(v) - f64::from(max)).exp())
        .sum();
    Some((code.to_owned(), 1.0 / sum))
}

#[cfg(test)]
mod tests {
    use super::most_likely;

    #[test]
    fn the_language_probability_is_a_softmax_over_the_languages() {
        let logits = [("en", 0.0), ("de", 3f32.ln()), ("fr", f32::NEG_INFINITY)];
        let (code, p) = most_likely(logits.into_iter()).unwrap();
        assert_eq!(code, "de");
        assert!((p - 0.75).abs() < 1e-7, "{p}");
        let equal = [("en", 1.0), ("zh", 1.0)];
        assert_eq!(most_likely(equal.into_iter()), Some(("en".to_owned(), 0.5)));
        assert_eq!(most_likely(std::iter::empty()), None);
        let none = [("en", f32::NEG_INFINITY)];
        assert_eq!(most_likely(none.into_iter()), Some(("en".to_owned(), 0.0)));
    }
}
