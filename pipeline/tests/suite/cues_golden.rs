//! Subtitle cues from words against openai-whisper's own writers (`WriteSRT`, `WriteVTT`; fixture:
//! tools/make_cues_golden.py, `tests/transcribe/<name>/cues.json`) on the segments and
//! words of `words.json` (faster-whisper's runs): each of its word options (`max_line_width`,
//! `max_line_count`, `highlight_words`, `max_words_per_line`, alone and together), every byte
//! identical. The words are a random model's: control characters, U+FFFD, words without a
//! leading space, which is where line widths and stripping differ if anything does.

use serde_json::Value;
use tessel_pipeline::transcribe::cues::{CueFormat, CueOptions, Cues};
use tessel_pipeline::transcribe::words::Word;
use tessel_pipeline::transcribe::Segment;

use crate::timed::root;

fn segments(run: &Value) -> Vec<Segment> {
    let segments = run["segments"].as_array().unwrap();
    segments
        .iter()
        .map(|s| Segment {
            seek: 0,
            start: s["start"].as_f64().unwrap(),
            end: s["end"].as_f64().unwrap(),
            text: s["text"].as_str().unwrap().to_owned(),
            tokens: Vec::new(),
            temperature: 0.0,
            avg_logprob: 0.0,
            compression_ratio: 0.0,
            no_speech_prob: 0.0,
            words: s["words"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| Word {
                    word: w[0].as_str().unwrap().to_owned(),
                    start: w[1].as_f64().unwrap(),
                    end: w[2].as_f64().unwrap(),
                    probability: w[3].as_f64().unwrap(),
                })
                .collect(),
        })
        .collect()
}

fn options(o: &Value) -> CueOptions {
    let count = |key: &str| o[key].as_u64().map(|v| v as usize);
    CueOptions {
        max_line_width: count("max_line_width"),
        max_line_count: count("max_line_count"),
        highlight_words: o["highlight_words"].as_bool().unwrap_or(false),
        max_words_per_line: count("max_words_per_line"),
    }
}

#[test]
fn cues_are_openai_whispers() {
    cues_match("tiny_multi_32", 48);
    cues_match("tiny_en_32", 16);
}

fn cues_match(name: &str, files: usize) {
    let read = |file: &str| -> Value {
        let text = std::fs::read_to_string(root().join(name).join(file)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let (words, cues) = (read("words.json"), read("cues.json"));
    let mut checked = 0;
    for (run_name, written) in cues["runs"].as_object().unwrap() {
        let segments = segments(&words["runs"][run_name]);
        for (option_name, o) in cues["options"].as_object().unwrap() {
            for (ext, format) in [("srt", CueFormat::Srt), ("vtt", CueFormat::Vtt)] {
                let mut out = String::new();
                if format == CueFormat::Vtt {
                    out.push_str("WEBVTT\n\n");
                }
                let mut writer = Cues::new(options(o), format);
                for s in &segments {
                    writer.push(&mut out, s);
                }
                writer.finish(&mut out);
                let want = written[format!("{option_name}.{ext}")].as_str().unwrap();
                assert_eq!(out, want, "{run_name} {option_name}.{ext}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, files, "{name}: files checked");
}
