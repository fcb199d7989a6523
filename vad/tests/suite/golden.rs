//! tessel-vad against faster-whisper 1.2.1 with onnxruntime on the committed clips
//! (`tools/make_vad_golden.py`): the speech probabilities at every ISA level, streaming and
//! batched, and the timestamps, chunks and time maps of `vad.py`, identical.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tessel_audio::{load_wav, ReadOptions};
use tessel_tests::for_each_isa;
use tessel_vad::timestamps::{
    collect_chunks, speech_timestamps, SpeechChunk, SpeechTimestampsMap, VadOptions,
};
use tessel_vad::{Vad, WINDOW};

/// How far a probability may be from onnxruntime's. Both run the same `f32` operations in
/// different orders (GEMM blocking, onnxruntime's vectorised `exp`/`tanh` against the standard
/// library's): rounding differences of order 1e-6 relative in the 387-term convolution sums and
/// the 128-term LSTM products, damped by the final sigmoid (slope at most ¼). The largest
/// difference measured is about 1e-6; 1e-4 leaves room for other ISA levels and compilers
/// while still catching any wrong weight, tap, gate or context sample (those move
/// probabilities by 1e-2 or more).
const TOLERANCE: f32 = 1e-4;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn model_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/silero_vad_v6.onnx")
}

fn golden() -> Value {
    let text = std::fs::read_to_string(fixtures().join("vad_golden.json")).expect("golden json");
    serde_json::from_str(&text).expect("golden parses")
}

fn clips(golden: &Value) -> Vec<(String, Vec<f32>, &Value)> {
    let clips = golden["clips"].as_object().expect("clips");
    clips
        .iter()
        .map(|(name, entry)| {
            let audio = load_wav(
                &fixtures().join(format!("{name}.wav")),
                &ReadOptions::default(),
            )
            .expect("wav")
            .samples;
            assert_eq!(
                audio.len() as u64,
                entry["samples"].as_u64().unwrap(),
                "{name}"
            );
            (name.clone(), audio, entry)
        })
        .collect()
}

fn floats(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect()
}

fn options(value: &Value) -> VadOptions {
    let mut options = VadOptions::default();
    for (key, v) in value.as_object().expect("options") {
        match key.as_str() {
            "threshold" => options.threshold = v.as_f64().unwrap(),
            "neg_threshold" => options.neg_threshold = v.as_f64(),
            "min_speech_duration_ms" => options.min_speech_duration_ms = v.as_u64().unwrap(),
            "max_speech_duration_s" => options.max_speech_duration_s = v.as_f64().unwrap(),
            "min_silence_duration_ms" => options.min_silence_duration_ms = v.as_u64().unwrap(),
            "speech_pad_ms" => options.speech_pad_ms = v.as_u64().unwrap(),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

fn chunks(value: &Value) -> Vec<SpeechChunk> {
    value
        .as_array()
        .expect("chunks")
        .iter()
        .map(|pair| SpeechChunk {
            start: pair[0].as_u64().unwrap() as usize,
            end: pair[1].as_u64().unwrap() as usize,
        })
        .collect()
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `speech_probabilities` (faster-whisper's padding, one stream) matches onnxruntime within
/// [`TOLERANCE`] at every ISA level, and the timestamps from tessel's own probabilities equal
/// faster-whisper's.
#[test]
fn probabilities_match_onnxruntime() {
    let golden = golden();
    let base = Vad::open(&model_path()).expect("model loads");
    for_each_isa(|isa| {
        let vad = base.clone().with_isa(isa);
        for (name, audio, entry) in clips(&golden) {
            let expected = floats(&entry["probabilities"]);
            let got = vad.speech_probabilities(&audio).expect("runs");
            let diff = max_difference(&got, &expected);
            eprintln!("{name} at {isa:?}: max difference {diff:e}");
            assert!(
                diff <= TOLERANCE,
                "{name} at {isa:?}: max difference {diff}"
            );
            for case in entry["timestamps"].as_array().unwrap() {
                let options = options(&case["options"]);
                assert_eq!(
                    speech_timestamps(&got, audio.len(), &options),
                    chunks(&case["speech"]),
                    "{name} at {isa:?} with {options:?}"
                );
            }
        }
    });
}

/// Window by window, batches of several sizes and 2 threads' scratch all give the same
/// probabilities as the whole-clip call (the LSTM state and context carry across calls).
#[test]
fn streaming_equals_batched() {
    let golden = golden();
    let vad = Vad::open(&model_path()).expect("model loads");
    for (name, audio, entry) in clips(&golden) {
        let expected = floats(&entry["probabilities"]);
        let whole = audio.len() / WINDOW;
        let mut state = vad.state();
        let streamed: Vec<f32> = audio
            .chunks_exact(WINDOW)
            .map(|window| vad.process(&mut state, window).expect("window"))
            .collect();
        let diff = max_difference(&streamed, &expected[..whole]);
        assert!(diff <= TOLERANCE, "{name} streamed: {diff}");
        for batch in [3, 16] {
            let mut state = vad.state_with(batch, 2);
            let mut out = vec![0.0; whole];
            vad.process_windows(
                &mut state,
                &audio[..whole * WINDOW],
                &mut out,
                &tessel_kernels::gemm::Sequential,
            )
            .expect("batch");
            let diff = max_difference(&out, &expected[..whole]);
            assert!(diff <= TOLERANCE, "{name} batch {batch}: {diff}");
        }
    }
}

/// `get_speech_timestamps` on onnxruntime's own probabilities: identical for every option
/// set, so the port is exact independent of the model.
#[test]
fn timestamps_equal_faster_whisper() {
    let golden = golden();
    for (name, audio, entry) in clips(&golden) {
        let probabilities = floats(&entry["probabilities"]);
        for case in entry["timestamps"].as_array().unwrap() {
            let options = options(&case["options"]);
            assert_eq!(
                speech_timestamps(&probabilities, audio.len(), &options),
                chunks(&case["speech"]),
                "{name} with {options:?}"
            );
        }
    }
}

/// `collect_chunks` and `SpeechTimestampsMap.get_original_time` equal faster-whisper's.
#[test]
fn chunks_and_time_map_equal_faster_whisper() {
    let golden = golden();
    for (name, audio, entry) in clips(&golden) {
        let default = chunks(&entry["timestamps"][0]["speech"]);
        for case in entry["chunks"].as_array().unwrap() {
            let max_duration = case["max_duration"].as_f64().unwrap_or(f64::INFINITY);
            let (pieces, metadata) = collect_chunks(&audio, &default, max_duration);
            let lengths: Vec<u64> = pieces.iter().map(|p| p.len() as u64).collect();
            let expected: Vec<u64> = case["lengths"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(lengths, expected, "{name} max {max_duration}");
            let expected = case["metadata"].as_array().unwrap();
            assert_eq!(metadata.len(), expected.len());
            for (got, want) in metadata.iter().zip(expected) {
                assert_eq!(got.offset, want["offset"].as_f64().unwrap(), "{name}");
                assert_eq!(got.duration, want["duration"].as_f64().unwrap(), "{name}");
                assert_eq!(got.segments, chunks(&want["segments"]), "{name}");
            }
            // The pieces are the audio's samples, in order.
            let joined: Vec<f32> = pieces.concat();
            let direct: Vec<f32> = default
                .iter()
                .flat_map(|c| audio[c.start..c.end].iter().copied())
                .collect();
            assert_eq!(joined, direct, "{name}");
        }
        let map = SpeechTimestampsMap::new(&default, 2);
        for case in entry["original_times"].as_array().unwrap() {
            let (time, is_end) = (case[0].as_f64().unwrap(), case[1].as_bool().unwrap());
            assert_eq!(
                map.original_time(time, None, is_end),
                case[2].as_f64(),
                "{name} time {time} end {is_end}"
            );
        }
    }
}

/// Extreme options and inputs give Python's answers without panicking: no speech, all speech,
/// huge durations, an empty map, Python's `round` ties and its limit on digits.
#[test]
fn edge_cases_follow_python() {
    use tessel_vad::timestamps::python_round;
    let options = VadOptions::default();
    assert!(speech_timestamps(&[], 0, &options).is_empty());
    assert!(speech_timestamps(&[0.1; 10], 5000, &options).is_empty());
    // All speech: one chunk over the whole audio.
    assert_eq!(
        speech_timestamps(&[0.9; 10], 5000, &options),
        [SpeechChunk {
            start: 0,
            end: 5000
        }]
    );
    let huge = VadOptions {
        min_speech_duration_ms: u64::MAX,
        min_silence_duration_ms: u64::MAX,
        speech_pad_ms: u64::MAX,
        ..VadOptions::default()
    };
    assert!(speech_timestamps(&[0.9; 10], 5000, &huge).is_empty());
    let (pieces, metadata) = collect_chunks(&[1.0; 10], &[], f64::INFINITY);
    assert_eq!((pieces.len(), metadata[0].duration), (1, 0.0));
    let empty = SpeechTimestampsMap::new(&[], 2);
    assert_eq!(empty.original_time(1.0, None, false), None);
    // round(0.125, 2) == 0.12, round(0.375, 2) == 0.38, round(2.675, 2) == 2.67 in Python.
    assert_eq!(python_round(0.125, 2), 0.12);
    assert_eq!(python_round(0.375, 2), 0.38);
    assert_eq!(python_round(2.675, 2), 2.67);
    assert_eq!(python_round(1e-300, usize::MAX), 1e-300);
}
