//! The options of faster-whisper's `transcribe` that change the prompt, CTranslate2's
//! `generate` call or the windows, against faster-whisper itself (fixture:
//! tools/make_transcribe_options_golden.py, `tests/transcribe/tiny_en_32/options.json`):
//! `hotwords`, `prefix` (with hotwords, with and without timestamps), `repetition_penalty`
//! and `no_repeat_ngram_size` (greedy and beam 5), `max_new_tokens`, `suppress_tokens` as a
//! list, `initial_prompt` as token ids, `clip_timestamps` (as text, as a list, an odd count,
//! past the audio's end). Each run's segments differ from the same run without its option
//! (the script checks it). Every segment's seek, tokens, text and bounds identical; its
//! temperature (0), compression ratio identical, average log-probability within 2e-4 and
//! no-speech probability within 1e-4, as the other transcription goldens. At every ISA level.

use serde::Deserialize;
use tessel_pipeline::transcribe::{TranscribeOptions, Transcriber};
use tessel_tests::for_each_isa;

use crate::timed::{check_figures, root, Figures, LongRuns};

#[derive(Debug, Deserialize)]
struct RunOptions {
    beam_size: usize,
    hotwords: Option<String>,
    prefix: Option<String>,
    #[serde(default)]
    without_timestamps: bool,
    repetition_penalty: Option<f32>,
    no_repeat_ngram_size: Option<usize>,
    max_new_tokens: Option<usize>,
    suppress_tokens: Option<Vec<i64>>,
    initial_prompt: Option<Vec<u32>>,
    clip_timestamps: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Run {
    options: RunOptions,
    segments: Vec<Figures>,
}

/// The reference's runs.
type Expected = LongRuns<Run>;

fn options(run: &RunOptions) -> TranscribeOptions {
    let defaults = TranscribeOptions::default();
    TranscribeOptions {
        beam: run.beam_size,
        hotwords: run.hotwords.clone(),
        prefix: run.prefix.clone(),
        timestamps: !run.without_timestamps,
        repetition_penalty: run.repetition_penalty.unwrap_or(1.0),
        no_repeat_ngram_size: run.no_repeat_ngram_size.unwrap_or(0),
        max_new_tokens: run.max_new_tokens,
        suppress_tokens: run
            .suppress_tokens
            .clone()
            .unwrap_or(defaults.suppress_tokens),
        initial_prompt_tokens: run.initial_prompt.clone(),
        clip_timestamps: match &run.clip_timestamps {
            // "3,12.5", as faster-whisper splits it.
            Some(serde_json::Value::String(text)) => {
                text.split(',').map(|t| t.parse().unwrap()).collect()
            }
            Some(list) => serde_json::from_value(list.clone()).unwrap(),
            None => Vec::new(),
        },
        ..TranscribeOptions::default()
    }
}

#[test]
fn transcribe_options_match_faster_whisper() {
    let text = std::fs::read_to_string(root().join("tiny_en_32/options.json")).unwrap();
    let e: Expected = serde_json::from_str(&text).unwrap();
    let audio = e.audio();
    let transcriber = Transcriber::load(&root().join("tiny_en_32/model"), 5, None).unwrap();
    for_each_isa(|isa| {
        let mut session = transcriber.session(isa, 5, 1).unwrap();
        let mut failed = Vec::new();
        for (run_name, run) in &e.runs {
            let what = format!("{run_name} {isa:?}");
            let got = session
                .transcribe(&audio, &options(&run.options), &mut ())
                .unwrap();
            let checked = std::panic::catch_unwind(|| check_run(&what, &got.segments, run));
            if checked.is_err() {
                failed.push(what);
            }
        }
        assert!(
            failed.is_empty(),
            "runs unlike faster-whisper's: {failed:?}"
        );
    });
}

/// Every segment of `got` against the run's.
fn check_run(what: &str, got: &[tessel_pipeline::transcribe::Segment], run: &Run) {
    assert_eq!(got.len(), run.segments.len(), "{what}: segments");
    for (i, (g, w)) in got.iter().zip(&run.segments).enumerate() {
        check_figures(&format!("{what} segment {i}"), g, w, 1e-12);
    }
}
