//! Transcription of the speech voice activity detection keeps, against faster-whisper's
//! `transcribe(..., vad_filter=True)` (fixture: tools/make_vad_transcribe_golden.py,
//! `tests/transcribe/tiny_en_32/vad.json`): clip.wav between silences, the built-in Silero VAD
//! v6, the speech chunks joined and transcribed, every time mapped back to the original audio
//! ([`Speech::restore`]). Every segment's seek, tokens and text identical; its bounds identical
//! without word timestamps and within 10 ms with them (they come from the words); every word's
//! text identical, its times within 10 ms and its probability within 0.1 %. At every ISA
//! level, the detector's included.

use serde::Deserialize;
use tessel_audio::{load_wav, ReadOptions};
use tessel_pipeline::transcribe::{open_vad, Speech, TranscribeOptions, Transcriber, VadOptions};
use tessel_tests::for_each_isa;

use crate::timed::{check_segment, root, Reference};

#[derive(Debug, Deserialize)]
struct VadParameters {
    min_silence_duration_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct RunOptions {
    beam_size: usize,
    #[serde(default)]
    word_timestamps: bool,
    vad_parameters: Option<VadParameters>,
}

#[derive(Debug, Deserialize)]
struct Run {
    options: RunOptions,
    language: String,
    duration_after_vad: f64,
    segments: Vec<Reference>,
}

#[derive(Debug, Deserialize)]
struct Expected {
    silences_s: Vec<usize>,
    samples: usize,
    runs: std::collections::BTreeMap<String, Run>,
}

/// The fixture's audio: silence, the clip, silence, the clip, silence.
fn audio(e: &Expected) -> Vec<f32> {
    let clip = load_wav(&root().join("clip.wav"), &ReadOptions::default()).unwrap();
    let silence = |seconds: usize| std::iter::repeat_n(0.0f32, seconds * 16_000);
    let mut audio: Vec<f32> = silence(e.silences_s[0]).collect();
    for &seconds in &e.silences_s[1..] {
        audio.extend_from_slice(&clip.samples);
        audio.extend(silence(seconds));
    }
    assert_eq!(audio.len(), e.samples);
    audio
}

#[test]
fn the_speech_transcribes_as_faster_whispers_vad_filter() {
    let text = std::fs::read_to_string(root().join("tiny_en_32/vad.json")).unwrap();
    let e: Expected = serde_json::from_str(&text).unwrap();
    let audio = audio(&e);
    let transcriber = Transcriber::load(&root().join("tiny_en_32/model"), 1, None).unwrap();
    for_each_isa(|isa| {
        let vad = open_vad(None).unwrap().with_isa(isa);
        let mut session = transcriber.session_with_words(isa, 1, 1).unwrap();
        for (run_name, run) in &e.runs {
            let what = format!("{run_name} {isa:?}");
            let mut vad_options = VadOptions::default();
            if let Some(ms) = run
                .options
                .vad_parameters
                .as_ref()
                .and_then(|p| p.min_silence_duration_ms)
            {
                vad_options.min_silence_duration_ms = ms;
            }
            let speech = Speech::find(&vad, &audio, &vad_options).unwrap();
            assert!(
                (speech.seconds() - run.duration_after_vad).abs() <= 1e-9,
                "{what}: speech kept"
            );
            let options = TranscribeOptions {
                beam: run.options.beam_size,
                word_timestamps: run.options.word_timestamps,
                ..TranscribeOptions::default()
            };
            let got = session
                .transcribe(&speech.samples, &options, &mut ())
                .unwrap();
            assert_eq!(got.language, run.language, "{what}");
            assert_eq!(got.segments.len(), run.segments.len(), "{what}: segments");
            let bound = if run.options.word_timestamps {
                0.01
            } else {
                0.0
            };
            for (i, (g, w)) in got.segments.iter().zip(&run.segments).enumerate() {
                check_segment(&format!("{what} segment {i}"), &speech.restore(g), w, bound);
            }
        }
    });
}
