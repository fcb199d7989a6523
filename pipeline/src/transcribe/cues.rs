//! Subtitle cues built from words (SubRip and WebVTT with word timestamps), as openai-whisper's
//! `SubtitlesWriter.iterate_result` builds them, with its `max_line_width`, `max_line_count`,
//! `highlight_words` and `max_words_per_line`.
//!
//! Words are laid out in lines: a word continues its line while the line has room
//! (`max_line_width` characters, 1000 by default) and, when lines may flow across segments
//! (both `max_line_width` and `max_line_count` given), no pause of more than 3 s precedes it;
//! otherwise it starts a new line, stripped, and a new cue when the cue has `max_line_count`
//! lines or after such a pause. Unless lines flow across segments, every segment, and every
//! run of `max_words_per_line` words in it, starts a new cue. A cue runs from its first word's
//! start to its last word's end. With `highlight_words`, each word of a cue gets a cue of its
//! own time with that word underlined (`<u>…</u>`), and the gaps between words a cue of the
//! plain text.
//!
//! A cue is complete only when the next word starts another, so [`Cues::push`] writes the
//! cues the segments so far completed and [`Cues::finish`] the last.

use std::fmt::Write as _;

use tessel_text::whisper::python_strip;

use super::format::timestamp;
use super::types::Segment;

/// openai-whisper's word options of its subtitle writers (`None`/`false`: its defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CueOptions {
    /// Characters a line holds at most (`max_line_width`).
    pub max_line_width: Option<usize>,
    /// Lines a cue holds at most (`max_line_count`; only with `max_line_width`).
    pub max_line_count: Option<usize>,
    /// Underline each word in a cue of its own (`highlight_words`).
    pub highlight_words: bool,
    /// Words a cue holds at most within a segment (`max_words_per_line`).
    pub max_words_per_line: Option<usize>,
}

/// A word as a cue holds it: its text as laid out (stripped, or after a line break).
#[derive(Clone, Debug)]
struct Timing {
    word: String,
    start: f64,
    end: f64,
}

/// Which subtitle format the cues are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CueFormat {
    /// SubRip: numbered cues, `HH:MM:SS,mmm`.
    Srt,
    /// WebVTT: `[HH:]MM:SS.mmm` (after the `WEBVTT` header, written by the caller).
    Vtt,
}

/// The cue writer's state between segments.
#[derive(Debug)]
pub struct Cues {
    options: CueOptions,
    format: CueFormat,
    /// Whether every segment starts a cue (not both width and count given).
    preserve_segments: bool,
    line_len: usize,
    line_count: usize,
    cue: Vec<Timing>,
    /// The last word's start (`None` before the first word: no pause before it).
    last: Option<f64>,
    /// Cues written (SubRip numbers them from 1).
    written: usize,
}

impl Cues {
    /// A writer of cues in `format` laid out as `options` say.
    pub fn new(options: CueOptions, format: CueFormat) -> Cues {
        let options = CueOptions {
            max_line_width: options.max_line_width.filter(|&w| w > 0),
            max_line_count: options.max_line_count.filter(|&c| c > 0),
            max_words_per_line: options.max_words_per_line.filter(|&n| n > 0),
            ..options
        };
        Cues {
            options,
            format,
            preserve_segments: options.max_line_count.is_none() || options.max_line_width.is_none(),
            line_len: 0,
            line_count: 1,
            cue: Vec::new(),
            last: None,
            written: 0,
        }
    }

    /// Lays out `segment`'s words, appending to `out` the cues they complete.
    pub fn push(&mut self, out: &mut String, segment: &Segment) {
        let per_cue = self.options.max_words_per_line.unwrap_or(1000);
        for chunk in segment.words.chunks(per_cue) {
            for (i, word) in chunk.iter().enumerate() {
                self.place(out, i == 0, &word.word, word.start, word.end);
            }
        }
    }

    /// Appends the last cue.
    pub fn finish(&mut self, out: &mut String) {
        if !self.cue.is_empty() {
            self.write_cue(out);
        }
    }

    /// One word, `first` of its run of words in a segment.
    fn place(&mut self, out: &mut String, first: bool, word: &str, start: f64, end: f64) {
        let width = self.options.max_line_width.unwrap_or(1000);
        let chars = word.chars().count();
        let long_pause = !self.preserve_segments && self.last.is_some_and(|l| start - l > 3.0);
        let has_room = self.line_len + chars <= width;
        let segment_break = first && !self.cue.is_empty() && self.preserve_segments;
        let mut text = word.to_owned();
        if self.line_len > 0 && has_room && !long_pause && !segment_break {
            self.line_len += chars;
        } else {
            text = python_strip(word).to_owned();
            let full = self
                .options
                .max_line_count
                .is_some_and(|count| long_pause || self.line_count >= count);
            if (!self.cue.is_empty() && full) || segment_break {
                self.write_cue(out);
                self.line_count = 1;
            } else if self.line_len > 0 {
                self.line_count += 1;
                text.insert(0, '\n');
            }
            self.line_len = python_strip(&text).chars().count();
        }
        self.cue.push(Timing {
            word: text,
            start,
            end,
        });
        self.last = Some(start);
    }

    /// Writes the cue held and empties it.
    fn write_cue(&mut self, out: &mut String) {
        let cue = std::mem::take(&mut self.cue);
        let (Some(first), Some(last)) = (cue.first(), cue.last()) else {
            return;
        };
        let text: String = cue.iter().map(|t| t.word.as_str()).collect();
        let (start, end) = (self.stamp(first.start), self.stamp(last.end));
        if !self.options.highlight_words {
            self.write(out, &start, &end, &text);
            return;
        }
        let mut shown = start;
        for (i, word) in cue.iter().enumerate() {
            let (from, to) = (self.stamp(word.start), self.stamp(word.end));
            if shown != from {
                self.write(out, &shown, &from, &text);
            }
            let highlighted: String = cue
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    if j == i {
                        underline(&t.word)
                    } else {
                        t.word.clone()
                    }
                })
                .collect();
            self.write(out, &from, &to, &highlighted);
            shown = to;
        }
    }

    fn stamp(&self, seconds: f64) -> String {
        match self.format {
            CueFormat::Srt => timestamp(seconds, true, ','),
            CueFormat::Vtt => timestamp(seconds, false, '.'),
        }
    }

    fn write(&mut self, out: &mut String, start: &str, end: &str, text: &str) {
        self.written += 1;
        if self.format == CueFormat::Srt {
            let _ = writeln!(out, "{}", self.written);
        }
        let _ = write!(out, "{start} --> {end}\n{text}\n\n");
    }
}

/// `word` with everything after its leading white space underlined, as openai-whisper's
/// `re.sub(r"^(\s*)(.*)$", r"\1<u>\2</u>", word)`.
fn underline(word: &str) -> String {
    let body =
        word.trim_start_matches(|c: char| python_strip(c.encode_utf8(&mut [0; 4])).is_empty());
    let lead = &word[..word.len() - body.len()];
    format!("{lead}<u>{body}</u>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcribe::words::Word;

    fn segment(words: &[(&str, f64, f64)]) -> Segment {
        Segment {
            seek: 0,
            start: words.first().map_or(0.0, |w| w.1),
            end: words.last().map_or(0.0, |w| w.2),
            text: words.iter().map(|w| w.0).collect(),
            tokens: Vec::new(),
            temperature: 0.0,
            avg_logprob: 0.0,
            compression_ratio: 0.0,
            no_speech_prob: 0.0,
            words: words
                .iter()
                .map(|&(word, start, end)| Word {
                    word: word.into(),
                    start,
                    end,
                    probability: 1.0,
                })
                .collect(),
        }
    }

    fn render(options: CueOptions, format: CueFormat, segments: &[Segment]) -> String {
        let mut cues = Cues::new(options, format);
        let mut out = String::new();
        for s in segments {
            cues.push(&mut out, s);
        }
        cues.finish(&mut out);
        out
    }

    #[test]
    fn one_cue_per_segment_by_default_and_per_run_of_words() {
        let segments = [
            segment(&[(" Hello", 0.0, 0.5), (" there", 0.5, 1.0)]),
            segment(&[(" again", 1.5, 2.0)]),
        ];
        let srt = render(CueOptions::default(), CueFormat::Srt, &segments);
        assert_eq!(
            srt,
            "1\n00:00:00,000 --> 00:00:01,000\nHello there\n\n\
             2\n00:00:01,500 --> 00:00:02,000\nagain\n\n"
        );
        let one = CueOptions {
            max_words_per_line: Some(1),
            ..CueOptions::default()
        };
        let vtt = render(one, CueFormat::Vtt, &segments);
        assert_eq!(
            vtt,
            "00:00.000 --> 00:00.500\nHello\n\n00:00.500 --> 00:01.000\nthere\n\n\
             00:01.500 --> 00:02.000\nagain\n\n"
        );
    }

    #[test]
    fn highlighted_words_get_cues_of_their_own() {
        let segments = [segment(&[(" Hi", 0.0, 0.5), (" you", 1.0, 1.5)])];
        let options = CueOptions {
            highlight_words: true,
            ..CueOptions::default()
        };
        let vtt = render(options, CueFormat::Vtt, &segments);
        assert_eq!(
            vtt,
            "00:00.000 --> 00:00.500\n<u>Hi</u> you\n\n00:00.500 --> 00:01.000\nHi you\n\n\
             00:01.000 --> 00:01.500\nHi <u>you</u>\n\n"
        );
    }
}
