//! Transcription of the speech voice activity detection keeps, against faster-whisper's
//! `transcribe(..., vad_filter=True)` (fixture: tools/make_vad_transcribe_golden.py,
//! `tests/transcribe/tiny_en_32/vad.json`): clip.wav between silences, the built-in Silero VAD
//! v6, the speech chunks joined and transcribed, every time mapped back to the original audio
//! ([`Speech::restore`]). Every segment's seek, tokens and text identical; its bounds identical
//! without word timestamps and within 10 ms with them (they come from the words); every word's
//! text identical, its times within 10 ms and its probability within 0.1 %. At every ISA
//! level, the detector's included.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tessel_audio::{load_wav, ReadOptions};
use tessel_pipeline::transcribe::{open_vad, Speech, TranscribeOptions, Transcriber, VadOptions};
use tessel_tests::for_each_isa;

#[derive(Debug, Deserialize)]
struct Segment {
    seek: usize,
    start: f64,
    end: f64,
    text: String,
    tokens: Vec<u32>,
    words: Option<Vec<(String, f64, f64, f64)>>,
}

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
    segments: Vec<Segment>,
}

#[derive(Debug, Deserialize)]
struct Expected {
    silences_s: Vec<usize>,
    samples: usize,
    runs: std::collections::BTreeMap<String, Run>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcribe")
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

fn close(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= tolerance + 1e-9
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
                close(speech.seconds(), run.duration_after_vad, 1e-9),
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
                let at = format!("{what} segment {i}");
                let g = speech.restore(g);
                assert_eq!(
                    (g.seek, &g.tokens, &g.text),
                    (w.seek, &w.tokens, &w.text),
                    "{at}"
                );
                assert!(
                    close(g.start, w.start, bound) && close(g.end, w.end, bound),
                    "{at}: {:?} vs {:?}",
                    (g.start, g.end),
                    (w.start, w.end)
                );
                let want = w.words.as_deref().unwrap_or_default();
                let words: Vec<&str> = g.words.iter().map(|w| w.word.as_str()).collect();
                let want_words: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
                assert_eq!(words, want_words, "{at}: words");
                for (gw, (_, start, end, probability)) in g.words.iter().zip(want) {
                    assert!(
                        close(gw.start, *start, 0.01) && close(gw.end, *end, 0.01),
                        "{at}: {gw:?} vs {start} {end}"
                    );
                    let relative = (gw.probability - probability).abs() / probability.abs();
                    assert!(
                        relative <= 1e-3 || close(gw.probability, *probability, 0.0),
                        "{at}: {gw:?}"
                    );
                }
            }
        }
    });
}
