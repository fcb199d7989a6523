//! Batched transcription against faster-whisper 1.2.1's `BatchedInferencePipeline` (fixture:
//! tools/make_batched_golden.py, `tests/transcribe/<name>/batched.json`, on the models of
//! tools/make_transcribe_golden.py and the audios of `batched_chunks`): every run's language,
//! durations and segments: ids (order), seek, bounds, tokens, text, temperature and
//! compression ratio identical, log-probability and no-speech probability within
//! [`check_figures`]' bounds, words identical in text and within 10 ms. The runs cover the
//! defaults (no timestamps), timestamps, greedy and beam, `max_new_tokens`, word timestamps,
//! the initial prompt and hotwords, clip timestamps, a `vad_parameters` dict, audio with
//! long silences, batch size 2, short audio without the detector, silence, and on the
//! multilingual model a given language, a detected one and per-chunk languages.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessel_kernels::Isa;
use tessel_model::WeightType;
use tessel_pipeline::transcribe::{
    open_vad, BatchedOptions, TranscribeOptions, Transcriber, VadOptions,
};
use tessel_tests::for_each_isa;

use crate::batched_chunks::audios;
use crate::timed::{check_figures, root, Figures};

#[derive(Debug, Deserialize)]
struct Clip {
    start: f64,
    end: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VadParameters {
    threshold: Option<f64>,
}

/// The options a run passed to faster-whisper's batched `transcribe`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunOptions {
    beam_size: Option<usize>,
    max_new_tokens: Option<usize>,
    without_timestamps: Option<bool>,
    word_timestamps: Option<bool>,
    initial_prompt: Option<String>,
    hotwords: Option<String>,
    clip_timestamps: Option<Vec<Clip>>,
    vad_parameters: Option<VadParameters>,
    vad_filter: Option<bool>,
    batch_size: Option<usize>,
    language: Option<String>,
    multilingual: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Run {
    audio: String,
    options: RunOptions,
    language: String,
    language_probability: f64,
    duration: f64,
    duration_after_vad: f64,
    segments: Vec<Figures>,
}

#[derive(Debug, Deserialize)]
struct Expected {
    runs: BTreeMap<String, Run>,
}

/// The run's options as tessel takes them.
fn options(run: &RunOptions) -> (TranscribeOptions, BatchedOptions) {
    let clips = run.clip_timestamps.iter().flatten();
    let options = TranscribeOptions {
        beam: run.beam_size.unwrap_or(5),
        max_new_tokens: run.max_new_tokens,
        timestamps: !run.without_timestamps.unwrap_or(true),
        word_timestamps: run.word_timestamps.unwrap_or(false),
        initial_prompt: run.initial_prompt.clone(),
        hotwords: run.hotwords.clone(),
        clip_timestamps: clips.flat_map(|c| [c.start, c.end]).collect(),
        language: run.language.clone(),
        ..TranscribeOptions::default()
    };
    let mut batched = BatchedOptions {
        batch_size: run.batch_size.unwrap_or(8),
        multilingual: run.multilingual.unwrap_or(false),
        vad_filter: run.vad_filter.unwrap_or(true),
        ..BatchedOptions::default()
    };
    if let Some(parameters) = &run.vad_parameters {
        let vad = VadOptions {
            threshold: parameters.threshold.unwrap_or(0.5),
            ..VadOptions::default()
        };
        batched = batched.with_vad_parameters(vad);
    }
    (options, batched)
}

/// The runs the scalar level takes when the machine has another (whose runs hold the
/// pipeline to faster-whisper's; the scalar kernels are proven by their own tests): one with
/// words and timestamps, one greedy in batches of 2 over long silences, one with per-chunk
/// languages. CI time.
const SCALAR_RUNS: [&str; 3] = ["words_timestamps", "gaps_greedy_batch2", "multilingual"];

fn runs_at(isa: Isa, run: &str) -> bool {
    isa != Isa::scalar() || Isa::best() == Isa::scalar() || SCALAR_RUNS.contains(&run)
}

fn batched_match(name: &str) {
    let text = std::fs::read_to_string(root().join(name).join("batched.json")).unwrap();
    let expected: Expected = serde_json::from_str(&text).unwrap();
    let audios = audios();
    let transcriber = Transcriber::load(&root().join(name).join("model"), 5, None)
        .unwrap()
        .with_multilingual(name != "tiny_en_32");
    for_each_isa(|isa| {
        let vad = open_vad(None).unwrap().with_isa(isa);
        let mut session = transcriber.batched_session(isa, (5, 8), 1, true).unwrap();
        for (run_name, run) in &expected.runs {
            if !runs_at(isa, run_name) {
                continue;
            }
            let what = format!("{name} {run_name} {isa:?}");
            let audio = &audios.iter().find(|(n, _)| *n == run.audio).unwrap().1;
            let (options, batched) = options(&run.options);
            let got = session
                .transcribe(audio, &options, &batched, Some(&vad), &mut ())
                .unwrap();
            let transcript = &got.transcript;
            assert_eq!(transcript.language, run.language, "{what}");
            let p = transcript.language_probability;
            assert!((p - run.language_probability).abs() < 1e-5, "{what}: {p}");
            assert_eq!(transcript.stats.audio_seconds, run.duration, "{what}");
            assert_eq!(got.duration_after_vad, run.duration_after_vad, "{what}");
            let segments = &transcript.segments;
            assert_eq!(segments.len(), run.segments.len(), "{what}: segments");
            for (i, (g, w)) in segments.iter().zip(&run.segments).enumerate() {
                check_figures(&format!("{what} segment {}", i + 1), g, w, 0.0);
            }
        }
    });
}

#[test]
fn batched_transcriptions_are_faster_whispers_english() {
    batched_match("tiny_en_32");
}

#[test]
fn batched_transcriptions_are_faster_whispers_multilingual() {
    batched_match("tiny_multi_32");
}

/// faster-whisper's results do not depend on the batch size (up to float noise), and its
/// batched `transcribe` decodes at the first temperature whatever it is, only reporting it
/// (the fixture's `same_as` checks). tessel's, with `f32` weights, are the same at every batch
/// size bit for bit (16-bit weights round a one-row product apart from a several-row one), and
/// a temperature changes only the reported one.
#[test]
fn batch_size_and_temperature_change_nothing_but_the_reported_temperature() {
    let audio = audios().into_iter().find(|(n, _)| *n == "gaps").unwrap().1;
    let dir = root().join("tiny_en_32/model");
    let transcriber = Transcriber::load(&dir, 5, Some(WeightType::F32)).unwrap();
    let isa = Isa::best();
    let vad = open_vad(None).unwrap().with_isa(isa);
    let mut session = transcriber.batched_session(isa, (5, 3), 1, true).unwrap();
    let options = TranscribeOptions {
        timestamps: true,
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let mut run = |options: &TranscribeOptions, batch_size| {
        let batched = BatchedOptions {
            batch_size,
            ..BatchedOptions::default()
        };
        let got = session.transcribe(&audio, options, &batched, Some(&vad), &mut ());
        got.unwrap().transcript.segments
    };
    let one = run(&options, 1);
    assert!(one.len() > 2, "{}", one.len());
    assert_eq!(run(&options, 2), one);
    assert_eq!(run(&options, 3), one);
    let warm = TranscribeOptions {
        temperatures: vec![0.6, 0.0],
        ..options.clone()
    };
    let warm = run(&warm, 3);
    assert!(warm.iter().all(|s| s.temperature == 0.6));
    let cooled: Vec<_> = warm
        .into_iter()
        .map(|s| tessel_pipeline::transcribe::Segment {
            temperature: 0.0,
            ..s
        })
        .collect();
    assert_eq!(cooled, one);
}
