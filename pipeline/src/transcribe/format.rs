//! Writing a transcript: plain text, SubRip (`.srt`), WebVTT (`.vtt`) and JSON, as
//! openai-whisper's writers lay them out (`whisper.utils.WriteTXT`, `WriteSRT`, `WriteVTT`,
//! `WriteJSON`): times rounded to the millisecond, `HH:MM:SS,mmm` in SubRip, `[HH:]MM:SS.mmm`
//! in WebVTT (hours only when non-zero), each segment's text stripped of surrounding white
//! space, `-->` inside a text written as `->`.

use std::fmt::Write as _;

use serde::Serialize;

use super::Transcript;

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per segment.
    Txt,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
    /// The segments with their times, tokens and decoding figures.
    Json,
}

/// `seconds` as `[HH:]MM:SS<marker>mmm`, milliseconds rounded half to even as Python's
/// `round` (the hour shown when `hours` or when non-zero).
fn timestamp(seconds: f64, hours: bool, marker: char) -> String {
    let ms = (seconds.max(0.0) * 1000.0).round_ties_even() as u64;
    let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1000, rest % 1000);
    let mut out = String::new();
    if hours || h > 0 {
        let _ = write!(out, "{h:02}:");
    }
    let _ = write!(out, "{m:02}:{s:02}{marker}{ms:03}");
    out
}

fn cue_text(text: &str) -> String {
    text.trim().replace("-->", "->")
}

#[derive(Serialize)]
struct JsonSegment<'a> {
    id: usize,
    seek: usize,
    start: f64,
    end: f64,
    text: &'a str,
    tokens: &'a [u32],
    temperature: f32,
    avg_logprob: f64,
    compression_ratio: f64,
    no_speech_prob: f64,
}

#[derive(Serialize)]
struct JsonTranscript<'a> {
    text: String,
    language: &'a str,
    segments: Vec<JsonSegment<'a>>,
}

/// The transcript in `format`.
pub fn render(transcript: &Transcript, format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Txt => {
            for s in &transcript.segments {
                let _ = writeln!(out, "{}", s.text.trim());
            }
        }
        Format::Srt => {
            for (i, s) in transcript.segments.iter().enumerate() {
                let _ = write!(
                    out,
                    "{}\n{} --> {}\n{}\n\n",
                    i + 1,
                    timestamp(s.start, true, ','),
                    timestamp(s.end, true, ','),
                    cue_text(&s.text)
                );
            }
        }
        Format::Vtt => {
            out.push_str("WEBVTT\n\n");
            for s in &transcript.segments {
                let _ = write!(
                    out,
                    "{} --> {}\n{}\n\n",
                    timestamp(s.start, false, '.'),
                    timestamp(s.end, false, '.'),
                    cue_text(&s.text)
                );
            }
        }
        Format::Json => {
            let json = JsonTranscript {
                text: transcript.text(),
                language: &transcript.language,
                segments: transcript
                    .segments
                    .iter()
                    .enumerate()
                    .map(|(id, s)| JsonSegment {
                        id,
                        seek: s.seek,
                        start: s.start,
                        end: s.end,
                        text: &s.text,
                        tokens: &s.tokens,
                        temperature: s.temperature,
                        avg_logprob: s.avg_logprob,
                        compression_ratio: s.compression_ratio,
                        no_speech_prob: s.no_speech_prob,
                    })
                    .collect(),
            };
            out = serde_json::to_string_pretty(&json).unwrap_or_default();
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_as_the_reference_writes_them() {
        assert_eq!(timestamp(0.0, true, ','), "00:00:00,000");
        assert_eq!(timestamp(61.25, false, '.'), "01:01.250");
        assert_eq!(timestamp(3725.5, false, '.'), "01:02:05.500");
        assert_eq!(timestamp(29.96, true, ','), "00:00:29,960");
        assert_eq!(cue_text("  a --> b "), "a -> b");
    }
}
