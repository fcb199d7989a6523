//! The batched pipeline's chunks and features against faster-whisper 1.2.1's
//! `BatchedInferencePipeline` (fixture: tools/make_batched_golden.py,
//! `tests/transcribe/batched/vad_chunks.json`): for four audios built from clip.wav and zeros,
//! the speech the built-in Silero VAD v6 finds with the batched defaults
//! (`max_speech_duration_s` 30, `min_silence_duration_ms` 160) and `collect_chunks`' pieces,
//! identical; each piece's features (`FeatureExtractor(piece)[..., :-1]`, pad_or_trim to 3000)
//! within float rounding of numpy's (not bit for bit: numpy's float32 FFT and mel product
//! against torch's arithmetic): frame count exact, the padding columns 0.0, the matrix and
//! first/last column sums within 3e-5 relative (seen: 7.5e-6), min and max within 1e-6 (seen:
//! 1.2e-7). At every ISA level, the detector's included.

use serde::Deserialize;
use tessel_audio::{load_wav, MelFrontEnd, ReadOptions, N_FRAMES};
use tessel_pipeline::transcribe::{open_vad, VadOptions};
use tessel_tests::audio::{self, silence};
use tessel_tests::for_each_isa;
use tessel_vad::timestamps::{collect_chunks, speech_timestamps, SpeechChunk};

use crate::timed::root;

/// Relative bound on the matrix and column sums (whose terms cancel: the element-wise
/// differences, up to 2.8e-5, mostly average out).
const SUM_TOLERANCE: f64 = 3e-5;
/// Absolute bound on the min and max (the loudest bin, well conditioned; min = max − 2).
const EXTREME_TOLERANCE: f64 = 1e-6;

#[derive(Debug, Deserialize)]
struct Span {
    start: usize,
    end: usize,
}

#[derive(Debug, Deserialize)]
struct Piece {
    offset: f64,
    duration: f64,
    segments: Vec<Span>,
}

/// Statistics of one piece's `[n_mels][len / 160]` feature matrix, before pad_or_trim.
#[derive(Debug, Deserialize)]
struct Features {
    samples: usize,
    shape: [usize; 2],
    sum: f64,
    first_col_sum: f64,
    last_col_sum: f64,
    min: f64,
    max: f64,
}

#[derive(Debug, Deserialize)]
struct Expected {
    samples: usize,
    speech: Vec<Span>,
    chunks: Vec<Piece>,
    /// `None` for an empty piece (no speech).
    features: Vec<Option<Features>>,
}

/// The fixture's audios, as `audios()` of the script builds them.
pub(crate) fn audios() -> Vec<(&'static str, Vec<f32>)> {
    let clip = load_wav(&root().join("clip.wav"), &ReadOptions::default()).unwrap();
    let clip = clip.samples.as_slice();
    let long = [clip, &silence(1.5)].concat().repeat(4);
    let short = long[..20 * 16_000].to_vec();
    vec![
        ("long", long),
        ("gaps", audio::gaps(clip)),
        ("short", short),
        ("silence", silence(10.0)),
    ]
}

fn spans(chunks: &[SpeechChunk]) -> Vec<(usize, usize)> {
    chunks.iter().map(|c| (c.start, c.end)).collect()
}

fn expected_spans(spans: &[Span]) -> Vec<(usize, usize)> {
    spans.iter().map(|s| (s.start, s.end)).collect()
}

/// The largest differences seen: sums (relative), min/max (absolute).
#[derive(Debug, Default)]
struct Worst {
    sum: f64,
    extreme: f64,
}

/// Checks one piece's features against the fixture's statistics.
fn check_features(what: &str, out: &[f32], frames: usize, e: &Features, worst: &mut Worst) {
    assert_eq!(frames, e.shape[1], "{what}: frames");
    let (n_mels, stored) = (e.shape[0], frames.min(N_FRAMES));
    let rows: Vec<&[f32]> = out.chunks_exact(N_FRAMES).collect();
    assert_eq!(rows.len(), n_mels, "{what}: mels");
    assert!(rows.iter().all(|r| r[stored..].iter().all(|&v| v == 0.0)));
    let column = |t: usize| rows.iter().map(|r| f64::from(r[t])).sum::<f64>();
    let values = || {
        rows.iter()
            .flat_map(|r| &r[..stored])
            .map(|&v| f64::from(v))
    };
    let sums = [
        (values().sum::<f64>(), e.sum),
        (column(0), e.first_col_sum),
        (column(stored - 1), e.last_col_sum),
    ];
    for (got, want) in sums {
        let diff = (got - want).abs() / want.abs().max(1.0);
        worst.sum = worst.sum.max(diff);
        assert!(diff <= SUM_TOLERANCE, "{what}: sum {got} vs {want}");
    }
    let min = values().fold(f64::INFINITY, f64::min);
    let max = values().fold(f64::NEG_INFINITY, f64::max);
    for (got, want) in [(min, e.min), (max, e.max)] {
        worst.extreme = worst.extreme.max((got - want).abs());
        assert!(
            (got - want).abs() <= EXTREME_TOLERANCE,
            "{what}: {got} vs {want}"
        );
    }
}

#[test]
fn chunks_and_features_are_faster_whispers_batched_ones() {
    let path = root().join("batched/vad_chunks.json");
    let text = std::fs::read_to_string(path).unwrap();
    let fixture: std::collections::BTreeMap<String, Expected> =
        serde_json::from_str(&text).unwrap();
    let options = VadOptions {
        max_speech_duration_s: 30.0,
        min_silence_duration_ms: 160,
        ..VadOptions::default()
    };
    let audios = audios();
    assert_eq!(audios.len(), fixture.len());
    let mut front = MelFrontEnd::new(80).unwrap();
    let mut out = vec![f32::NAN; front.window_len()];
    let mut worst = Worst::default();
    for_each_isa(|isa| {
        let vad = open_vad(None).unwrap().with_isa(isa);
        for (name, audio) in &audios {
            let e = &fixture[*name];
            let what = format!("{name} {isa:?}");
            assert_eq!(audio.len(), e.samples, "{what}: samples");
            let probabilities = vad.speech_probabilities(audio).unwrap();
            let speech = speech_timestamps(&probabilities, audio.len(), &options);
            assert_eq!(spans(&speech), expected_spans(&e.speech), "{what}: speech");
            let (pieces, metadata) = collect_chunks(audio, &speech, 30.0);
            assert_eq!(metadata.len(), e.chunks.len(), "{what}: pieces");
            for (i, (m, c)) in metadata.iter().zip(&e.chunks).enumerate() {
                assert_eq!((m.offset, m.duration), (c.offset, c.duration), "{what} {i}");
                let want = expected_spans(&c.segments);
                assert_eq!(spans(&m.segments), want, "{what} {i}: segments");
            }
            for (i, (piece, f)) in pieces.iter().zip(&e.features).enumerate() {
                let frames = front.chunk_features(piece, &mut out).unwrap();
                match f {
                    Some(f) => {
                        assert_eq!(piece.len(), f.samples, "{what} {i}: samples");
                        check_features(&format!("{what} {i}"), &out, frames, f, &mut worst);
                    }
                    None => {
                        assert!(piece.is_empty() && frames == 0 && out.iter().all(|&v| v == 0.0))
                    }
                }
            }
        }
    });
    eprintln!("largest differences to faster-whisper's features: {worst:?}");
}
