//! Writing a transcript: plain text, SubRip (`.srt`), WebVTT (`.vtt`), JSON and JSON lines, as
//! openai-whisper's writers lay them out (`whisper.utils.WriteTXT`, `WriteSRT`, `WriteVTT`,
//! `WriteJSON`): times rounded to the millisecond, `HH:MM:SS,mmm` in SubRip, `[HH:]MM:SS.mmm`
//! in WebVTT (hours only when non-zero), each segment's text stripped of surrounding white
//! space, `-->` inside a text written as `->`.
//!
//! Every format but JSON is a header ([`write_header`]) and then one piece per segment
//! ([`write_segment`]), so a transcript can be written segment by segment as each becomes
//! final ([`Format::streams`]); JSON is one document, written once the transcript is done
//! ([`render`]). JSON lines hold one object per segment, the fields of JSON's `segments`.

use std::fmt::Write as _;

use serde::Serialize;

use super::types::{Segment, Transcript};

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per segment.
    Txt,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
    /// The segments with their times, tokens and decoding figures, as one document.
    Json,
    /// One JSON object per segment per line (JSON's segment fields).
    Jsonl,
}

impl Format {
    /// Whether a transcript in this format can be written segment by segment.
    pub fn streams(self) -> bool {
        self != Format::Json
    }
}

/// `seconds` as `[HH:]MM:SS<marker>mmm`, milliseconds rounded half to even as Python's
/// `round` (the hour shown when `hours` or when non-zero).
pub(super) fn timestamp(seconds: f64, hours: bool, marker: char) -> String {
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
    /// With word timestamps only.
    #[serde(skip_serializing_if = "<[JsonWord<'_>]>::is_empty")]
    words: Vec<JsonWord<'a>>,
}

/// A word as faster-whisper's `Word` (and openai-whisper's JSON) names its fields.
#[derive(Serialize)]
struct JsonWord<'a> {
    word: &'a str,
    start: f64,
    end: f64,
    probability: f64,
}

#[derive(Serialize)]
struct JsonTranscript<'a> {
    text: String,
    language: &'a str,
    segments: Vec<JsonSegment<'a>>,
}

impl<'a> JsonSegment<'a> {
    fn of(id: usize, s: &'a Segment) -> JsonSegment<'a> {
        JsonSegment {
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
            words: s
                .words
                .iter()
                .map(|w| JsonWord {
                    word: &w.word,
                    start: w.start,
                    end: w.end,
                    probability: w.probability,
                })
                .collect(),
        }
    }
}

/// Appends what `format` writes before the first segment (WebVTT's `WEBVTT` line; nothing
/// for the others, and JSON is written whole by [`render`]).
pub fn write_header(out: &mut String, format: Format) {
    if format == Format::Vtt {
        out.push_str("WEBVTT\n\n");
    }
}

/// Appends segment number `id` (from 0) in `format` (nothing for JSON, written whole by
/// [`render`]).
pub fn write_segment(out: &mut String, format: Format, id: usize, s: &Segment) {
    match format {
        Format::Txt => {
            let _ = writeln!(out, "{}", s.text.trim());
        }
        Format::Srt => {
            let _ = write!(
                out,
                "{}\n{} --> {}\n{}\n\n",
                id + 1,
                timestamp(s.start, true, ','),
                timestamp(s.end, true, ','),
                cue_text(&s.text)
            );
        }
        Format::Vtt => {
            let _ = write!(
                out,
                "{} --> {}\n{}\n\n",
                timestamp(s.start, false, '.'),
                timestamp(s.end, false, '.'),
                cue_text(&s.text)
            );
        }
        Format::Jsonl => {
            out.push_str(&serde_json::to_string(&JsonSegment::of(id, s)).unwrap_or_default());
            out.push('\n');
        }
        Format::Json => {}
    }
}

/// The transcript in `format`.
pub fn render(transcript: &Transcript, format: Format) -> String {
    let mut out = String::new();
    if format == Format::Json {
        let json = JsonTranscript {
            text: transcript.text(),
            language: &transcript.language,
            segments: transcript
                .segments
                .iter()
                .enumerate()
                .map(|(id, s)| JsonSegment::of(id, s))
                .collect(),
        };
        out = serde_json::to_string_pretty(&json).unwrap_or_default();
        out.push('\n');
        return out;
    }
    write_header(&mut out, format);
    for (id, s) in transcript.segments.iter().enumerate() {
        write_segment(&mut out, format, id, s);
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

    #[test]
    fn segments_are_written_one_at_a_time() {
        let segment = |start: f64, text: &str| Segment {
            seek: 0,
            start,
            end: start + 1.5,
            text: text.to_owned(),
            tokens: vec![1, 2],
            temperature: 0.0,
            avg_logprob: -0.25,
            compression_ratio: 1.0,
            no_speech_prob: 0.5,
            words: Vec::new(),
        };
        let transcript = Transcript {
            language_probability: 1.0,
            language: "en".to_owned(),
            segments: vec![segment(0.0, " One."), segment(2.0, " Two --> three")],
            stats: Default::default(),
        };
        for format in [Format::Txt, Format::Srt, Format::Vtt, Format::Jsonl] {
            assert!(format.streams());
        }
        assert!(!Format::Json.streams());
        let mut vtt = String::new();
        write_header(&mut vtt, Format::Vtt);
        write_segment(&mut vtt, Format::Vtt, 1, &transcript.segments[1]);
        assert_eq!(vtt, "WEBVTT\n\n00:02.000 --> 00:03.500\nTwo -> three\n\n");
        let lines = render(&transcript, Format::Jsonl);
        let objects: Vec<serde_json::Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["id"], 1);
        assert_eq!(objects[1]["text"], " Two --> three");
        assert_eq!(objects[1]["start"], 2.0);
        assert!(
            objects[1].get("words").is_none(),
            "no words without word timestamps"
        );
        let mut timed = transcript.clone();
        timed.segments[0].words = vec![crate::transcribe::words::Word {
            word: " One.".into(),
            start: 0.1,
            end: 0.6,
            probability: 0.75,
        }];
        let json: serde_json::Value = serde_json::from_str(&render(&timed, Format::Json)).unwrap();
        let word = &json["segments"][0]["words"][0];
        assert_eq!(
            (
                &word["word"],
                &word["start"],
                &word["end"],
                &word["probability"]
            ),
            (&" One.".into(), &0.1.into(), &0.6.into(), &0.75.into())
        );
        assert_eq!(
            render(&transcript, Format::Srt),
            "1\n00:00:00,000 --> 00:00:01,500\nOne.\n\n\
             2\n00:00:02,000 --> 00:00:03,500\nTwo -> three\n\n"
        );
    }
}
