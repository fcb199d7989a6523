//! faster-whisper's speech timestamps (`faster_whisper/vad.py`, 1.2.1), ported line for line:
//! [`VadOptions`], [`speech_timestamps`] (`get_speech_timestamps` over the probabilities
//! [`crate::Vad::speech_probabilities`] gives), [`collect_chunks`] and
//! [`SpeechTimestampsMap`].
//!
//! Python's arithmetic is kept: sample positions are integers, the option-derived bounds are
//! floats (`16000 * ms / 1000`), comparisons mix the two as Python does (an `i64` converted
//! to `f64` is exact below 2⁵³), `int()` truncates, `//` floors, and the probabilities
//! (`float32`) are compared with the `float64` thresholds after widening, as numpy does.

use crate::silero::WINDOW;
use crate::VadError;
use crate::SAMPLE_RATE;

/// The sample rate as a float, as the Python divides by it.
const RATE: f64 = SAMPLE_RATE as f64;

/// faster-whisper's `VadOptions` (the same defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VadOptions {
    /// A window is speech when its probability is at least this (default 0.5).
    pub threshold: f64,
    /// A window below this is silence; between it and `threshold` a window continues the
    /// state before it. `None`: `max(threshold - 0.15, 0.01)`.
    pub neg_threshold: Option<f64>,
    /// Speech chunks not longer than this are dropped (default 0).
    pub min_speech_duration_ms: u64,
    /// Chunks longer than this are split, at the last silence over 98 ms if any, else just
    /// before this length (default infinity).
    pub max_speech_duration_s: f64,
    /// Silence that ends a chunk (default 2000).
    pub min_silence_duration_ms: u64,
    /// Padding added on each side of a chunk (default 400).
    pub speech_pad_ms: u64,
}

impl Default for VadOptions {
    fn default() -> Self {
        VadOptions {
            threshold: 0.5,
            neg_threshold: None,
            min_speech_duration_ms: 0,
            max_speech_duration_s: f64::INFINITY,
            min_silence_duration_ms: 2000,
            speech_pad_ms: 400,
        }
    }
}

impl VadOptions {
    /// Whether the options are ones faster-whisper's `get_speech_timestamps` accepts: both
    /// thresholds in [0, 1] and `max_speech_duration_s` above 0 (infinity for no limit).
    pub fn check(&self) -> Result<(), VadError> {
        let unit = |p: f64| (0.0..=1.0).contains(&p);
        if !unit(self.threshold) || !self.neg_threshold.is_none_or(unit) {
            return Err(VadError::InvalidArgument(
                "threshold and neg_threshold must be in [0, 1]",
            ));
        }
        if self.max_speech_duration_s.is_nan() || self.max_speech_duration_s <= 0.0 {
            return Err(VadError::InvalidArgument(
                "max_speech_duration_s must be above 0",
            ));
        }
        Ok(())
    }
}

/// A chunk of speech: samples `start..end` of the audio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpeechChunk {
    /// First sample.
    pub start: usize,
    /// One past the last sample.
    pub end: usize,
}

/// `sampling_rate * ms / 1000`: Python's exact integer product, then its correctly rounded true
/// division (the `f64` product is exact below 2⁵³, and no overflow is possible).
fn samples_of_ms(ms: u64) -> f64 {
    RATE * ms as f64 / 1000.0
}

/// `int(x)` of a non-negative float: truncation.
fn int(x: f64) -> i64 {
    x as i64
}

/// `get_speech_timestamps(audio, options)` given `probabilities`, the model's output over
/// the padded audio (one per 512-sample window), and the audio's length in samples.
pub fn speech_timestamps(
    probabilities: &[f32],
    audio_len: usize,
    options: &VadOptions,
) -> Vec<SpeechChunk> {
    let window = WINDOW as i64;
    let threshold = options.threshold;
    let min_speech_samples = samples_of_ms(options.min_speech_duration_ms);
    let speech_pad_samples = samples_of_ms(options.speech_pad_ms);
    let max_speech_samples =
        RATE * options.max_speech_duration_s - window as f64 - 2.0 * speech_pad_samples;
    let min_silence_samples = samples_of_ms(options.min_silence_duration_ms);
    let min_silence_samples_at_max_speech = samples_of_ms(98);
    let audio_length_samples = audio_len as i64;
    let neg_threshold = options
        .neg_threshold
        .unwrap_or_else(|| (threshold - 0.15).max(0.01));

    let mut triggered = false;
    let mut speeches: Vec<(i64, i64)> = Vec::new();
    // `current_speech`: its start while one is open.
    let mut current: Option<i64> = None;
    let mut temp_end = 0i64;
    let mut prev_end = 0i64;
    let mut next_start = 0i64;

    for (i, &probability) in probabilities.iter().enumerate() {
        let speech_prob = f64::from(probability);
        let position = window * i as i64;
        if speech_prob >= threshold && temp_end != 0 {
            temp_end = 0;
            if next_start < prev_end {
                next_start = position;
            }
        }
        if speech_prob >= threshold && !triggered {
            triggered = true;
            current = Some(position);
            continue;
        }
        let start = current.unwrap_or(0);
        if triggered && ((position - start) as f64) > max_speech_samples {
            if prev_end != 0 {
                speeches.push((start, prev_end));
                current = None;
                // Previously reached silence (< neg_threshold) and still not speech.
                if next_start < prev_end {
                    triggered = false;
                } else {
                    current = Some(next_start);
                }
                prev_end = 0;
                next_start = 0;
                temp_end = 0;
            } else {
                speeches.push((start, position));
                current = None;
                prev_end = 0;
                next_start = 0;
                temp_end = 0;
                triggered = false;
                continue;
            }
        }
        if speech_prob < neg_threshold && triggered {
            if temp_end == 0 {
                temp_end = position;
            }
            // Avoid cutting in a very short silence.
            if ((position - temp_end) as f64) > min_silence_samples_at_max_speech {
                prev_end = temp_end;
            }
            if ((position - temp_end) as f64) < min_silence_samples {
                continue;
            }
            let start = current.unwrap_or(0);
            if ((temp_end - start) as f64) > min_speech_samples {
                speeches.push((start, temp_end));
            }
            current = None;
            prev_end = 0;
            next_start = 0;
            temp_end = 0;
            triggered = false;
            continue;
        }
    }
    if let Some(start) = current {
        if ((audio_length_samples - start) as f64) > min_speech_samples {
            speeches.push((start, audio_length_samples));
        }
    }

    let count = speeches.len();
    for i in 0..count {
        if i == 0 {
            speeches[0].0 = int((speeches[0].0 as f64 - speech_pad_samples).max(0.0));
        }
        if i != count - 1 {
            let silence_duration = speeches[i + 1].0 - speeches[i].1;
            if (silence_duration as f64) < 2.0 * speech_pad_samples {
                let half = silence_duration.div_euclid(2);
                speeches[i].1 += half;
                speeches[i + 1].0 = (speeches[i + 1].0 - half).max(0);
            } else {
                speeches[i].1 =
                    int((audio_length_samples as f64)
                        .min(speeches[i].1 as f64 + speech_pad_samples));
                speeches[i + 1].0 = int((speeches[i + 1].0 as f64 - speech_pad_samples).max(0.0));
            }
        } else {
            speeches[i].1 =
                int((audio_length_samples as f64).min(speeches[i].1 as f64 + speech_pad_samples));
        }
    }
    speeches
        .into_iter()
        .map(|(start, end)| SpeechChunk {
            start: start.max(0) as usize,
            end: end.max(0) as usize,
        })
        .collect()
}

/// One merged chunk's place in the speech-only audio, as `collect_chunks` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkMetadata {
    /// Seconds of speech-only audio before it.
    pub offset: f64,
    /// Its length in seconds.
    pub duration: f64,
    /// The speech chunks it holds.
    pub segments: Vec<SpeechChunk>,
}

/// `audio[start:end]` with numpy's clamping.
fn slice<'a>(audio: &'a [f32], chunk: &SpeechChunk) -> &'a [f32] {
    let end = chunk.end.min(audio.len());
    &audio[chunk.start.min(end)..end]
}

/// `collect_chunks(audio, chunks, max_duration=max_duration)`: the speech chunks
/// concatenated into pieces of at most `max_duration` seconds (`f64::INFINITY`: one piece),
/// each with its metadata. As in faster-whisper, a chunk that opens a new piece is in that
/// piece's audio but not in its `segments`, and no chunks give one empty piece.
pub fn collect_chunks(
    audio: &[f32],
    chunks: &[SpeechChunk],
    max_duration: f64,
) -> (Vec<Vec<f32>>, Vec<ChunkMetadata>) {
    if chunks.is_empty() {
        let metadata = ChunkMetadata {
            offset: 0.0,
            duration: 0.0,
            segments: Vec::new(),
        };
        return (vec![Vec::new()], vec![metadata]);
    }
    let mut audio_chunks = Vec::new();
    let mut chunks_metadata = Vec::new();
    let mut current_segments = Vec::new();
    let mut current_duration = 0i64;
    let mut total_duration = 0i64;
    let mut current_audio: Vec<f32> = Vec::new();
    for chunk in chunks {
        let length = chunk.end as i64 - chunk.start as i64;
        if (current_duration + length) as f64 > max_duration * RATE {
            audio_chunks.push(std::mem::take(&mut current_audio));
            chunks_metadata.push(ChunkMetadata {
                offset: total_duration as f64 / RATE,
                duration: current_duration as f64 / RATE,
                segments: std::mem::take(&mut current_segments),
            });
            total_duration += current_duration;
            current_audio = slice(audio, chunk).to_vec();
            current_duration = length;
        } else {
            current_segments.push(*chunk);
            current_audio.extend_from_slice(slice(audio, chunk));
            current_duration += length;
        }
    }
    audio_chunks.push(current_audio);
    chunks_metadata.push(ChunkMetadata {
        offset: total_duration as f64 / RATE,
        duration: current_duration as f64 / RATE,
        segments: current_segments,
    });
    (audio_chunks, chunks_metadata)
}

/// faster-whisper's `SpeechTimestampsMap`: maps a time in the speech-only audio (the chunks
/// concatenated) back to the original audio.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeechTimestampsMap {
    time_precision: usize,
    chunk_end_sample: Vec<i64>,
    total_silence_before: Vec<f64>,
}

impl SpeechTimestampsMap {
    /// The map of `chunks` at 16 kHz, rounding times to `time_precision` decimals
    /// (faster-whisper uses 2).
    pub fn new(chunks: &[SpeechChunk], time_precision: usize) -> SpeechTimestampsMap {
        let mut chunk_end_sample = Vec::with_capacity(chunks.len());
        let mut total_silence_before = Vec::with_capacity(chunks.len());
        let mut previous_end = 0i64;
        let mut silent_samples = 0i64;
        for chunk in chunks {
            silent_samples += chunk.start as i64 - previous_end;
            previous_end = chunk.end as i64;
            chunk_end_sample.push(chunk.end as i64 - silent_samples);
            total_silence_before.push(silent_samples as f64 / RATE);
        }
        SpeechTimestampsMap {
            time_precision,
            chunk_end_sample,
            total_silence_before,
        }
    }

    /// `get_original_time(time, chunk_index, is_end)`: `time` (seconds of speech-only audio)
    /// in the original audio, rounded as Python's `round(x, time_precision)`. The chunk is
    /// found from the time when `chunk_index` is `None`. `None` for a map of no chunks or an
    /// index past its last chunk (where Python raises `IndexError`).
    pub fn original_time(
        &self,
        time: f64,
        chunk_index: Option<usize>,
        is_end: bool,
    ) -> Option<f64> {
        let index = match chunk_index {
            Some(index) => index,
            None => self.chunk_index(time, is_end)?,
        };
        let before = *self.total_silence_before.get(index)?;
        Some(python_round(before + time, self.time_precision))
    }

    /// `get_chunk_index(time, is_end)`: the chunk a time falls in (`None` for a map of no
    /// chunks).
    pub fn chunk_index(&self, time: f64, is_end: bool) -> Option<usize> {
        let sample = (time * RATE) as i64;
        if is_end {
            if let Some(index) = self.chunk_end_sample.iter().position(|&e| e == sample) {
                return Some(index);
            }
        }
        let after = self.chunk_end_sample.partition_point(|&e| e <= sample);
        after
            .min(self.chunk_end_sample.len().checked_sub(1)?)
            .into()
    }
}

/// Python's `round(x, digits)`: the nearest value with `digits` decimals, ties (of the exact
/// binary value) to even. Rust's fixed-precision formatting rounds the exact value the same
/// way, and parsing back gives the nearest `f64`, as CPython does.
pub fn python_round(x: f64, digits: usize) -> f64 {
    // CPython returns `x` itself past 323 digits, where every double is exact.
    if !x.is_finite() || digits > 323 {
        return x;
    }
    format!("{x:.digits$}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::VadOptions;

    #[test]
    fn options_out_of_faster_whispers_range_are_refused() {
        let ok = VadOptions::default();
        assert!(ok.check().is_ok());
        let bad = [
            VadOptions {
                threshold: 1.5,
                ..ok
            },
            VadOptions {
                threshold: f64::NAN,
                ..ok
            },
            VadOptions {
                neg_threshold: Some(-0.1),
                ..ok
            },
            VadOptions {
                max_speech_duration_s: 0.0,
                ..ok
            },
            VadOptions {
                max_speech_duration_s: f64::NAN,
                ..ok
            },
        ];
        for options in bad {
            assert!(options.check().is_err(), "{options:?}");
        }
        let edges = VadOptions {
            threshold: 0.0,
            neg_threshold: Some(1.0),
            ..ok
        };
        assert!(edges.check().is_ok());
    }
}
