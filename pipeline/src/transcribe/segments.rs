//! Cutting one window's tokens into timed segments, and where the next window starts: the
//! reference's `_split_segments_by_timestamps` (openai-whisper's `transcribe`, as
//! faster-whisper writes it).
//!
//! With `b` = `<|0.00|>`, 20 ms per timestamp step and 2 mel frames (10 ms each) per step:
//! - **Pairs of timestamps** (`… <|t1|> <|t2|> …`, both ≥ `b`) close a segment and open the
//!   next. When the window holds any pair, the segments are the slices between consecutive
//!   pairs, each from its first token's time to its last token's time (plus the window's
//!   offset). A window ending in a lone timestamp (text, then one timestamp) has a last
//!   segment up to it and means "no speech after this": the next window starts after this
//!   one (`seek += size`). Otherwise the tokens after the last pair are an unfinished segment:
//!   dropped, and the next window starts at the last pair's time (`seek += 2 · step`).
//! - **No pair** (including every `--no-timestamps` window): one segment of the whole window,
//!   from its start to the last timestamp if there is one other than `<|0.00|>`, else to the
//!   window's end; the next window starts after this one.
//!
//! Times are `f64` seconds computed as the reference computes them (`offset + step · 0.02`),
//! so they compare exactly.

use std::ops::Range;

/// Seconds per timestamp step.
pub const TIME_PRECISION: f64 = 0.02;
/// Mel frames per timestamp step (the encoder halves the frame rate).
pub const INPUT_STRIDE: usize = 2;
/// Seconds per mel frame.
pub const SECONDS_PER_FRAME: f64 = 0.01;

/// One segment of a window: which tokens, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// The tokens of the window that belong to this segment (timestamps included).
    pub tokens: Range<usize>,
    /// Start, seconds from the beginning of the audio.
    pub start: f64,
    /// End, seconds from the beginning of the audio.
    pub end: f64,
}

/// A window split into segments.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Where the next window starts, in mel frames.
    pub next_seek: usize,
    /// How many of `cuts` are this window's segments.
    pub count: usize,
}

/// Splits `tokens` (one window's generated tokens, `<|endoftext|>` excluded) of the window at
/// frame `seek` holding `size` frames into `cuts` (cleared first; its capacity is reused),
/// as the module describes. `timestamp_begin` is `<|0.00|>`.
pub fn split(
    tokens: &[u32],
    timestamp_begin: u32,
    seek: usize,
    size: usize,
    cuts: &mut Vec<Cut>,
) -> Split {
    let offset = seek as f64 * SECONDS_PER_FRAME;
    let duration = size as f64 * SECONDS_PER_FRAME;
    let ending = split_at(tokens, timestamp_begin, (offset, duration), cuts);
    let next_seek = match ending {
        Ending::Pair(last) => {
            // A pair closes with a timestamp, so the step count is not negative.
            let steps = i64::from(last) - i64::from(timestamp_begin);
            seek + steps.max(0) as usize * INPUT_STRIDE
        }
        Ending::Window => seek + size,
    };
    Split {
        next_seek,
        count: cuts.len(),
    }
}

/// How a window's tokens end, for where the next window starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// After the window: a lone timestamp ends it, or it holds no pair.
    Window,
    /// At this timestamp, which closes the last pair (the tokens after it are unfinished).
    Pair(u32),
}

/// [`split`] of a window starting `offset` seconds into the audio and lasting `duration`
/// seconds (the no-pair segment's end unless a timestamp gives it): the cuts into `cuts`, and
/// how the tokens end. faster-whisper's batched pipeline times its chunks this way (exact
/// offsets in seconds, not whole frames), and signed: a slice that starts with a text token
/// starts before the offset.
pub fn split_at(
    tokens: &[u32],
    timestamp_begin: u32,
    (offset, duration): (f64, f64),
    cuts: &mut Vec<Cut>,
) -> Ending {
    cuts.clear();
    let is_ts = |t: u32| t >= timestamp_begin;
    let steps = |t: u32| i64::from(t) - i64::from(timestamp_begin);
    let at = |t: u32| offset + steps(t) as f64 * TIME_PRECISION;
    let n = tokens.len();
    let single_ending = n >= 2 && !is_ts(tokens[n - 2]) && is_ts(tokens[n - 1]);
    let pairs = (1..n).filter(|&i| is_ts(tokens[i]) && is_ts(tokens[i - 1]));
    let mut last = 0;
    for end in pairs.chain(single_ending.then_some(n)) {
        // `pairs` is empty exactly when no cut is pushed here (a single ending alone makes
        // no pair: handled below).
        if end == n && cuts.is_empty() {
            break;
        }
        cuts.push(Cut {
            tokens: last..end,
            start: at(tokens[last]),
            end: at(tokens[end - 1]),
        });
        last = end;
    }
    if !cuts.is_empty() {
        return if single_ending {
            Ending::Window
        } else {
            Ending::Pair(tokens[last - 1])
        };
    }
    let mut duration = duration;
    if let Some(&t) = tokens.iter().rev().find(|&&t| is_ts(t)) {
        if t != timestamp_begin {
            duration = steps(t) as f64 * TIME_PRECISION;
        }
    }
    cuts.push(Cut {
        tokens: 0..n,
        start: offset,
        end: offset + duration,
    });
    Ending::Window
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u32 = 100;

    fn run(tokens: &[u32], seek: usize, size: usize) -> (Vec<Cut>, usize) {
        let mut cuts = Vec::new();
        let split = split(tokens, B, seek, size, &mut cuts);
        assert_eq!(split.count, cuts.len());
        (cuts, split.next_seek)
    }

    #[test]
    fn pairs_cut_segments_and_the_unfinished_tail_is_dropped() {
        // <|0.00|> a b <|1.00|> <|1.00|> c <|2.00|> <|2.40|> d (unfinished)
        let tokens = [B, 1, 2, B + 50, B + 50, 3, B + 100, B + 120, 4];
        let (cuts, next) = run(&tokens, 1000, 3000);
        assert_eq!(cuts.len(), 2);
        assert_eq!(cuts[0].tokens, 0..4);
        assert_eq!((cuts[0].start, cuts[0].end), (10.0, 10.0 + 50.0 * 0.02));
        assert_eq!(cuts[1].tokens, 4..7);
        assert_eq!(next, 1000 + 100 * 2);
    }

    #[test]
    fn a_single_timestamp_ending_consumes_the_window() {
        let tokens = [B, 1, B + 10, B + 10, 2, B + 30];
        let (cuts, next) = run(&tokens, 0, 2500);
        assert_eq!(cuts.len(), 2);
        assert_eq!(cuts[1].tokens, 3..6);
        assert_eq!(cuts[1].end, 30.0 * 0.02);
        assert_eq!(next, 2500);
    }

    #[test]
    fn without_pairs_one_segment_spans_the_window() {
        let (cuts, next) = run(&[1, 2, 3], 300, 3000);
        assert_eq!(
            cuts,
            vec![Cut {
                tokens: 0..3,
                start: 3.0,
                end: 33.0
            }]
        );
        assert_eq!(next, 3300);
        // A lone timestamp other than <|0.00|> sets the end.
        let (cuts, _) = run(&[B + 5, 1, 2], 0, 3000);
        assert_eq!(cuts[0].end, 5.0 * 0.02);
        let (cuts, _) = run(&[B, 1, 2], 0, 1200);
        assert_eq!(cuts[0].end, 12.0);
        let (cuts, next) = run(&[], 0, 10);
        assert_eq!((cuts.len(), next), (1, 10));
    }

    #[test]
    fn chunks_are_timed_from_exact_offsets_and_may_start_before_them() {
        let mut cuts = Vec::new();
        // a <|1.00|> <|1.00|> b <|2.00|> <|2.00|> c: the first slice starts with a text
        // token; c is unfinished.
        let tokens = [B - 30, B + 50, B + 50, 3, B + 100, B + 100, 4];
        let ending = split_at(&tokens, B, (26.432, 5.68), &mut cuts);
        assert_eq!(ending, Ending::Pair(B + 100));
        assert_eq!(cuts.len(), 2);
        assert_eq!(cuts[0].start, 26.432 + -30.0 * 0.02);
        assert_eq!(cuts[1].end, 26.432 + 100.0 * 0.02);
        // No pair: the exact duration.
        assert_eq!(
            split_at(&[1, 2], B, (26.432, 5.68), &mut cuts),
            Ending::Window
        );
        assert_eq!((cuts[0].start, cuts[0].end), (26.432, 26.432 + 5.68));
    }
}
