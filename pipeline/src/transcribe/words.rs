//! Word-level timestamps: faster-whisper's `word_timestamps=True` (its `find_alignment`,
//! `add_word_timestamps` and `merge_punctuations`, and its tokenizer's `split_to_word_tokens`)
//! over one window's segments, from the alignment of [`super::alignment`].
//!
//! 1. **Words of tokens** ([`split_to_word_tokens`]): the window's text tokens and
//!    `<|endoftext|>` are cut where they decode to whole characters (a cut is taken after a
//!    token once the text decoded since the last cut holds no U+FFFD, or holds one exactly
//!    where the whole text does); for every language but zh, ja, th, lo, my and yue, pieces
//!    then join the previous word unless they start with a space, are special, or strip to a
//!    piece of ASCII punctuation (Python's `in string.punctuation`, a substring test).
//! 2. **Times**: a word starts at the time of the path's first step onto its first token's
//!    row and ends at the first step onto the next word's; times are encoder positions / 50
//!    (seconds from the window's start). Its probability is the mean of its tokens'.
//! 3. **Hacks of the reference**, in order: with `median` the median of the non-zero word
//!    durations (at most 0.7 s) and `max = 2 · median`, a word longer than `max` is cut to
//!    `max` when it is a sentence end (`.。!！?？`; from its start) or follows one (from its
//!    end); then punctuation is merged (prepended marks into the next word, appended marks
//!    into the previous); then words are dealt out to the window's segments by token counts,
//!    their times offset by the window's start and rounded to 2 decimals; the first word after
//!    a pause longer than `4 · median` and the first and last words longer than the segment's
//!    bounds are shortened as the reference does, and each segment's bounds move to its
//!    first and last words otherwise.
//!
//! This layer allocates: the words' strings and the decoded pieces. The alignment's numeric
//! buffers are sized once ([`super::alignment::Aligner`]).

use tessel_text::whisper::{python_strip, WhisperTokenizer};
use tessel_text::TextError;

use super::alignment::Aligned;
use super::segments::Cut;

/// faster-whisper's default `prepend_punctuations`.
pub const PREPEND_PUNCTUATIONS: &str = "\"'“¿([{-";
/// faster-whisper's default `append_punctuations`.
pub const APPEND_PUNCTUATIONS: &str = "\"'.。,，!！?？:：”)]}、";

/// Python's `string.punctuation`.
const ASCII_PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// Sentence ends the duration hack looks for.
const SENTENCE_END_MARKS: &str = ".。!！?？";

/// Encoder positions per second (20 ms each).
const TOKENS_PER_SECOND: f64 = 50.0;
/// Mel frames per second.
const FRAMES_PER_SECOND: f64 = 100.0;

/// Languages whose words are split on character boundaries, not spaces.
const UNICODE_SPLIT: [&str; 6] = ["zh", "ja", "th", "lo", "my", "yue"];

/// One word of a segment, as faster-whisper's `Word`.
#[derive(Clone, Debug, PartialEq)]
pub struct Word {
    /// Its text, with its leading space and merged punctuation.
    pub word: String,
    /// Start, seconds from the beginning of the audio (rounded to 2 decimals).
    pub start: f64,
    /// End, seconds (rounded to 2 decimals).
    pub end: f64,
    /// The mean probability of its tokens.
    pub probability: f64,
}

/// A word of the alignment before it is dealt out to segments.
#[derive(Clone, Debug, PartialEq)]
struct Timing {
    word: String,
    tokens: usize,
    start: f64,
    end: f64,
    probability: f64,
}

/// The words of `tokens` (text tokens, then `<|endoftext|>`) and how many tokens each holds,
/// for `language` (step 1 of the module).
pub fn split_to_word_tokens(
    tokenizer: &WhisperTokenizer,
    tokens: &[u32],
    language: &str,
) -> Result<Vec<(String, Vec<u32>)>, TextError> {
    let pieces = split_on_unicode(tokenizer, tokens)?;
    if UNICODE_SPLIT.contains(&language) {
        return Ok(pieces);
    }
    let mut words: Vec<(String, Vec<u32>)> = Vec::with_capacity(pieces.len());
    for (piece, ids) in pieces {
        let special = ids.first().is_some_and(|&id| id >= tokenizer.eot());
        let with_space = piece.starts_with(' ');
        let punctuation = ASCII_PUNCTUATION.contains(python_strip(&piece));
        match words.last_mut() {
            Some(last) if !(special || with_space || punctuation) => {
                last.0.push_str(&piece);
                last.1.extend(ids);
            }
            _ => words.push((piece, ids)),
        }
    }
    Ok(words)
}

/// Text decoded as faster-whisper's `decode_with_timestamps` decodes text tokens (special
/// tokens skipped).
fn decode(tokenizer: &WhisperTokenizer, ids: &[u32]) -> Result<String, TextError> {
    tokenizer.hf().decode(ids, true)
}

/// faster-whisper's `split_tokens_on_unicode`: cuts after a token where the text decoded so
/// far is whole; tokens after the last cut are dropped, as the reference drops them.
fn split_on_unicode(
    tokenizer: &WhisperTokenizer,
    tokens: &[u32],
) -> Result<Vec<(String, Vec<u32>)>, TextError> {
    const REPLACEMENT: char = '\u{fffd}';
    let full: Vec<char> = decode(tokenizer, tokens)?.chars().collect();
    let mut words = Vec::new();
    let mut current = Vec::new();
    let mut offset = 0;
    for &token in tokens {
        current.push(token);
        let decoded = decode(tokenizer, &current)?;
        let replacement = decoded.chars().position(|c| c == REPLACEMENT);
        let whole = match replacement {
            None => true,
            Some(at) => full.get(at + offset) == Some(&REPLACEMENT),
        };
        if whole {
            offset += decoded.chars().count();
            words.push((decoded, std::mem::take(&mut current)));
        }
    }
    Ok(words)
}

/// faster-whisper's `find_alignment` for one window: the words of `text` (its text tokens)
/// with their times from the alignment `aligned` and the text tokens' probabilities `probs`.
fn find_alignment(
    tokenizer: &WhisperTokenizer,
    text: &[u32],
    language: &str,
    aligned: Aligned<'_>,
    probs: &[f32],
) -> Result<Vec<Timing>, TextError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut with_eot = Vec::with_capacity(text.len() + 1);
    with_eot.extend_from_slice(text);
    with_eot.push(tokenizer.eot());
    let words = split_to_word_tokens(tokenizer, &with_eot, language)?;
    if words.len() <= 1 {
        return Ok(Vec::new());
    }
    let mut jump_times = Vec::with_capacity(text.len() + 1);
    let mut previous = None;
    for &(token, time) in aligned.path {
        if previous != Some(token) {
            jump_times.push(time as f64 / TOKENS_PER_SECOND);
        }
        previous = Some(token);
    }
    let mut timings = Vec::with_capacity(words.len() - 1);
    let mut first = 0;
    for (word, ids) in &words[..words.len() - 1] {
        let last = first + ids.len();
        let (Some(&start), Some(&end)) = (jump_times.get(first), jump_times.get(last)) else {
            break;
        };
        let probabilities = probs.get(first..last.min(probs.len())).unwrap_or(&[]);
        let probability =
            probabilities.iter().map(|&p| f64::from(p)).sum::<f64>() / probabilities.len() as f64;
        timings.push(Timing {
            word: word.clone(),
            tokens: ids.len(),
            start,
            end,
            probability,
        });
        first = last;
    }
    Ok(timings)
}

/// numpy's `median`: the middle value, or the mean of the two middle values.
fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// faster-whisper's `merge_punctuations`.
fn merge_punctuations(alignment: &mut [Timing], prepended: &str, appended: &str) {
    if alignment.len() >= 2 {
        let mut j = alignment.len() - 1;
        for i in (0..alignment.len() - 1).rev() {
            let previous = &alignment[i];
            if previous.word.starts_with(' ') && prepended.contains(python_strip(&previous.word)) {
                let (word, tokens) = (std::mem::take(&mut alignment[i].word), alignment[i].tokens);
                alignment[i].tokens = 0;
                let following = &mut alignment[j];
                following.word.insert_str(0, &word);
                following.tokens += tokens;
            } else {
                j = i;
            }
        }
    }
    let mut i = 0;
    for j in 1..alignment.len() {
        if !alignment[i].word.ends_with(' ') && appended.contains(alignment[j].word.as_str()) {
            let (word, tokens) = (std::mem::take(&mut alignment[j].word), alignment[j].tokens);
            alignment[j].tokens = 0;
            alignment[i].word.push_str(&word);
            alignment[i].tokens += tokens;
        } else {
            i = j;
        }
    }
}

/// Python's `round(x, 2)` (the nearest two-decimal value, ties to even on the exact value).
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// What the word pass needs of a window beyond its segments.
pub(super) struct WindowWords<'a> {
    /// The window's first mel frame.
    pub seek: usize,
    /// The language code (it chooses how words are split).
    pub language: &'a str,
    /// Punctuation merged into the following word.
    pub prepend: &'a str,
    /// Punctuation merged into the previous word.
    pub append: &'a str,
}

/// faster-whisper's `add_word_timestamps` for one window: the words of each of `cuts`
/// (the window's segments; their bounds may move) into `words` (one list per cut), from the
/// window's text tokens `text` (every cut's tokens below `<|endoftext|>`, in order), their
/// alignment and probabilities. Returns the new `last_speech_timestamp`.
#[allow(clippy::too_many_arguments)]
pub(super) fn add_word_timestamps(
    tokenizer: &WhisperTokenizer,
    window: &WindowWords<'_>,
    (tokens, cuts): (&[u32], &mut [Cut]),
    text: &[u32],
    (aligned, probs): (Aligned<'_>, &[f32]),
    words: &mut Vec<Vec<Word>>,
    mut last_speech_timestamp: f64,
) -> Result<f64, TextError> {
    words.clear();
    words.resize_with(cuts.len(), Vec::new);
    let mut alignment = find_alignment(tokenizer, text, window.language, aligned, probs)?;
    let mut durations: Vec<f64> = alignment
        .iter()
        .map(|w| w.end - w.start)
        .filter(|&d| d != 0.0)
        .collect();
    let median_duration = if durations.is_empty() {
        0.0
    } else {
        median(&mut durations)
    }
    .min(0.7);
    let max_duration = median_duration * 2.0;
    if !durations.is_empty() {
        for i in 1..alignment.len() {
            if alignment[i].end - alignment[i].start > max_duration {
                if SENTENCE_END_MARKS.contains(alignment[i].word.as_str()) {
                    alignment[i].end = alignment[i].start + max_duration;
                } else if SENTENCE_END_MARKS.contains(alignment[i - 1].word.as_str()) {
                    alignment[i].start = alignment[i].end - max_duration;
                }
            }
        }
    }
    merge_punctuations(&mut alignment, window.prepend, window.append);
    let time_offset = window.seek as f64 / FRAMES_PER_SECOND;
    let mut word_index = 0;
    for (cut, out) in cuts.iter_mut().zip(words.iter_mut()) {
        let cut_text = tokens[cut.tokens.clone()]
            .iter()
            .filter(|&&t| t < tokenizer.eot())
            .count();
        let mut saved_tokens = 0;
        while word_index < alignment.len() && saved_tokens < cut_text {
            let timing = &alignment[word_index];
            if !timing.word.is_empty() {
                out.push(Word {
                    word: timing.word.clone(),
                    start: round2(time_offset + timing.start),
                    end: round2(time_offset + timing.end),
                    probability: timing.probability,
                });
            }
            saved_tokens += timing.tokens;
            word_index += 1;
        }
        if out.is_empty() {
            continue;
        }
        if out[0].end - last_speech_timestamp > median_duration * 4.0
            && (out[0].end - out[0].start > max_duration
                || (out.len() > 1 && out[1].end - out[0].start > max_duration * 2.0))
        {
            if out.len() > 1 && out[1].end - out[1].start > max_duration {
                let boundary = (out[1].end / 2.0).max(out[1].end - max_duration);
                out[0].end = boundary;
                out[1].start = boundary;
            }
            out[0].start = (out[0].end - max_duration).max(0.0);
        }
        if cut.start < out[0].end && cut.start - 0.5 > out[0].start {
            out[0].start = (out[0].end - median_duration).min(cut.start).max(0.0);
        } else {
            cut.start = out[0].start;
        }
        let last = out.len() - 1;
        if cut.end > out[last].start && cut.end + 0.5 < out[last].end {
            out[last].end = (out[last].start + median_duration).max(cut.end);
        } else {
            cut.end = out[last].end;
        }
        last_speech_timestamp = cut.end;
    }
    Ok(last_speech_timestamp)
}

/// faster-whisper's `get_end`: the end of the last word of the last segment with words, else
/// the last segment's end.
pub(super) fn last_end(cuts: &[Cut], words: &[Vec<Word>]) -> Option<f64> {
    words
        .iter()
        .rev()
        .find_map(|w| w.last().map(|w| w.end))
        .or_else(|| cuts.last().map(|c| c.end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(word: &str, tokens: usize) -> Timing {
        Timing {
            word: word.into(),
            tokens,
            start: 0.0,
            end: 0.0,
            probability: 0.0,
        }
    }

    #[test]
    fn punctuation_merges_as_the_reference_merges_it() {
        let mut a = vec![
            timing(" \"", 1),
            timing(" Hello", 2),
            timing(",", 1),
            timing(" world", 1),
            timing(".\"", 2),
        ];
        merge_punctuations(&mut a, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS);
        let got: Vec<_> = a.iter().map(|t| (t.word.as_str(), t.tokens)).collect();
        // `."` is not one of the appended marks (a substring test on the whole word).
        assert_eq!(
            got,
            [
                ("", 0),
                (" \" Hello,", 4),
                ("", 0),
                (" world", 1),
                (".\"", 2)
            ]
        );
    }

    #[test]
    fn medians_and_rounding_follow_numpy_and_python() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(round2(0.125), 0.12);
        assert_eq!(round2(1.005), 1.0);
        assert_eq!(round2(26.82), 26.82);
    }
}
