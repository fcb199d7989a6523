//! Skipping the silence around likely hallucinations (faster-whisper's and openai-whisper's
//! `hallucination_silence_threshold`), with word timestamps.
//!
//! A word is anomalous by its score: 1 if its probability is under 0.15, plus
//! `15 · (0.133 − duration)` when it lasts under 0.133 s, plus `duration − 2` when it lasts
//! over 2 s. A segment with words is an anomaly when the summed score of its first 8 words
//! that are not punctuation reaches 3, or (within 0.01) the number of those words. After a
//! window's words are timed:
//!
//! - if the first segment with words is an anomaly and starts more than the threshold after
//!   the window, the window is dropped and the next one starts at that segment's start;
//! - else the first anomalous segment with silence (more than the threshold, or the window's
//!   or the audio's edge) or another anomaly on both sides ends the window: it and the segments
//!   after it are dropped, and the next window starts at its start (at least 1 s into this
//!   window), or at the end of the audio when less than the threshold follows it.

use tessel_audio::N_FRAMES;

use super::segments::{Cut, SECONDS_PER_FRAME};
use super::words::Word;

/// faster-whisper's punctuation: a word that is a substring of it (the empty word too) does
/// not count towards a segment's anomaly.
const PUNCTUATION: &str = "\"'“¿([{-\"'.。,，!！?？:：”)]}、";

/// Where a window is, as the rule needs it (seconds, and frames of 10 ms).
#[derive(Clone, Copy, Debug)]
pub(super) struct Window {
    /// The window's first frame (`previous_seek`).
    pub seek: usize,
    /// Its frames of audio (at most 3000).
    pub size: usize,
    /// The audio's frames.
    pub content_frames: usize,
    /// The end of the last speech before this window (`last_speech_timestamp`).
    pub last_speech: f64,
}

/// What the rule does to a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Verdict {
    /// Nothing: the window's segments stand.
    Keep,
    /// Drop the whole window; the next starts at this frame.
    Skip(usize),
    /// Keep the first `keep` segments; the next window starts at this frame.
    Truncate { keep: usize, seek: usize },
}

/// The rule at `threshold` seconds over a window's segments (`cuts`, bounds moved to their
/// words) and their `words`.
pub(super) fn judge(threshold: f64, cuts: &[Cut], words: &[Vec<Word>], at: Window) -> Verdict {
    let with_words = |from: usize| (from..cuts.len()).find(|&i| has_words(words, i));
    let time_offset = at.seek as f64 * SECONDS_PER_FRAME;
    if let Some(first) = with_words(0).filter(|&i| is_anomaly(&words[i])) {
        let gap = cuts[first].start - time_offset;
        if gap > threshold {
            return Verdict::Skip(at.seek + frames(gap));
        }
    }
    let window_end = (at.seek + N_FRAMES) as f64 * SECONDS_PER_FRAME;
    let window_duration = at.size as f64 * SECONDS_PER_FRAME;
    let content_duration = at.content_frames as f64 * SECONDS_PER_FRAME;
    let mut last_end = at.last_speech;
    for (i, cut) in cuts.iter().enumerate() {
        if !has_words(words, i) {
            continue;
        }
        if is_anomaly(&words[i]) {
            let next = with_words(i + 1);
            let next_start = match next {
                Some(n) => words[n][0].start,
                None => time_offset + window_duration,
            };
            let silence_before = cut.start - last_end > threshold
                || cut.start < threshold
                || cut.start - time_offset < 2.0;
            let silence_after = next_start - cut.end > threshold
                || next.is_some_and(|n| is_anomaly(&words[n]))
                || window_end - cut.end < 2.0;
            if silence_before && silence_after {
                let mut seek = frames(f64::max(time_offset + 1.0, cut.start));
                if content_duration - cut.end < threshold {
                    seek = at.content_frames;
                }
                return Verdict::Truncate { keep: i, seek };
            }
        }
        last_end = cut.end;
    }
    Verdict::Keep
}

fn has_words(words: &[Vec<Word>], i: usize) -> bool {
    words.get(i).is_some_and(|w| !w.is_empty())
}

/// Seconds to frames, rounded half to even as Python's `round`.
fn frames(seconds: f64) -> usize {
    (seconds * 100.0).round_ties_even().max(0.0) as usize
}

/// Whether a segment's words look hallucinated (see the module documentation).
fn is_anomaly(words: &[Word]) -> bool {
    if words.is_empty() {
        return false;
    }
    let counted = words
        .iter()
        .filter(|w| !PUNCTUATION.contains(w.word.as_str()))
        .take(8);
    let (mut score, mut count) = (0.0, 0usize);
    for word in counted {
        score += anomaly_score(word);
        count += 1;
    }
    score >= 3.0 || score + 0.01 >= count as f64
}

/// A word's anomaly score: improbable, very short or very long.
fn anomaly_score(word: &Word) -> f64 {
    let duration = word.end - word.start;
    let mut score = 0.0;
    if word.probability < 0.15 {
        score += 1.0;
    }
    if duration < 0.133 {
        score += (0.133 - duration) * 15.0;
    }
    if duration > 2.0 {
        score += duration - 2.0;
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str, start: f64, end: f64, probability: f64) -> Word {
        Word {
            word: text.into(),
            start,
            end,
            probability,
        }
    }

    fn cut(start: f64, end: f64) -> Cut {
        Cut {
            tokens: 0..0,
            start,
            end,
        }
    }

    /// A full 30 s window from frame `seek` of 60 s of audio, no speech before it.
    fn full_window(seek: usize) -> Window {
        Window {
            seek,
            size: 3000,
            content_frames: 6000,
            last_speech: 0.0,
        }
    }

    #[test]
    fn words_score_as_faster_whisper_scores_them() {
        // Improbable: 1; 0.033 s: 1.5 more; 3 s: 1 more.
        assert_eq!(anomaly_score(&word(" a", 0.0, 0.5, 0.1)), 1.0);
        assert!((anomaly_score(&word(" a", 0.0, 0.033, 0.9)) - 1.5).abs() < 1e-12);
        assert!((anomaly_score(&word(" a", 0.0, 3.0, 0.9)) - 1.0).abs() < 1e-12);
        assert_eq!(anomaly_score(&word(" a", 0.0, 0.5, 0.9)), 0.0);
        // Punctuation (and the empty word) is left out: one plain word scoring 0.
        let words = [word(".", 0.0, 0.01, 0.0), word("", 0.0, 0.0, 0.0)];
        assert!(is_anomaly(&words), "nothing counted: 0 + 0.01 ≥ 0");
        let words = [word(".", 0.0, 0.01, 0.0), word(" fine", 0.0, 0.5, 0.9)];
        assert!(!is_anomaly(&words));
        // " ." is not a substring of the punctuation: it counts.
        assert!(is_anomaly(&[word(" .", 0.0, 0.5, 0.1)]));
    }

    #[test]
    fn a_leading_anomaly_after_silence_skips_to_it() {
        let cuts = [cut(12.0, 12.5), cut(12.5, 14.0)];
        let words = vec![
            vec![word(" uh", 12.0, 12.01, 0.01)],
            vec![word(" fine", 12.5, 14.0, 0.9)],
        ];
        let at = full_window(1000);
        assert_eq!(judge(1.0, &cuts, &words, at), Verdict::Skip(1200));
        // A threshold above the 2 s gap keeps the window: speech follows the anomaly at once.
        assert_eq!(judge(3.0, &cuts, &words, at), Verdict::Keep);
    }

    #[test]
    fn an_anomaly_between_silences_truncates_the_window() {
        let cuts = [cut(0.0, 2.0), cut(10.0, 10.1), cut(20.0, 21.0)];
        let words = vec![
            vec![word(" fine", 0.0, 2.0, 0.9)],
            vec![word(" uh", 10.0, 10.1, 0.01)],
            vec![word(" fine", 20.0, 21.0, 0.9)],
        ];
        let at = full_window(0);
        let verdict = judge(1.0, &cuts, &words, at);
        assert_eq!(
            verdict,
            Verdict::Truncate {
                keep: 1,
                seek: 1000
            }
        );
        // Less than the threshold of audio after it: the walk ends.
        let short = Window {
            content_frames: 1050,
            ..at
        };
        let verdict = judge(1.0, &cuts, &words, short);
        assert_eq!(
            verdict,
            Verdict::Truncate {
                keep: 1,
                seek: 1050
            }
        );
        // Speech close on both sides: no silence, nothing dropped.
        assert_eq!(judge(15.0, &cuts, &words, at), Verdict::Keep);
    }
}
