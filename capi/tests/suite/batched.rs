//! Batched transcription through the C API: `tessel_transcribe_options.batch_size` above 0
//! runs faster-whisper's `BatchedInferencePipeline` (the pipeline's [`BatchedSession`]),
//! held to its fixture `tests/transcribe/<model>/batched.json` (tools/make_batched_golden.py,
//! the runs whose options the C options can express): the segment count, every segment's
//! bounds and text identical, its words identical in text and within 10 ms. The transcriber
//! makes its batched session at the first batched call, keeps it for smaller batches and
//! replaces it for word timestamps; bad values and long audio without the detector are
//! typed statuses.
//!
//! [`BatchedSession`]: tessel_pipeline::transcribe::BatchedSession

use std::ffi::CString;
use std::ptr::{null, null_mut};

use serde_json::Value;
use tessel::*;

use crate::common::{last_error, ok};
use crate::transcribe::{load, root};
use crate::words::{long_audio, segments, transcribe, Timed};

/// Loads the Whisper model of `tests/transcribe/<name>/model` for beams up to `max_beam`,
/// multilingual as `multilingual` says (-1: by its vocabulary).
fn load_model(name: &str, max_beam: usize, multilingual: i32) -> *mut tessel_transcriber {
    let dir = root().join(name).join("model");
    let dir = CString::new(dir.to_str().expect("UTF-8")).expect("no NUL");
    let mut transcriber = null_mut();
    // SAFETY: a NUL-terminated path and a writable out-pointer.
    ok(unsafe {
        tessel_transcriber_load(dir.as_ptr(), max_beam, 1, multilingual, &mut transcriber)
    });
    transcriber
}

/// The fixture's runs of the model `name`.
fn fixture(name: &str) -> Value {
    let path = root().join(name).join("batched.json");
    let text = std::fs::read_to_string(path).expect("batched.json");
    serde_json::from_str::<Value>(&text).expect("JSON")["runs"].clone()
}

/// The segments (with their words when `options` asks for them) of a transcription.
fn timed(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    options: &tessel_transcribe_options,
) -> Result<Vec<Timed>, tessel_status> {
    if options.word_timestamps {
        return transcribe(transcriber, samples, options);
    }
    let (raw, text) = segments(transcriber, samples, options)?;
    Ok(raw
        .iter()
        .map(|s| Timed {
            start: s.start,
            end: s.end,
            text: text[s.text_offset..s.text_offset + s.text_len].to_owned(),
            words: Vec::new(),
        })
        .collect())
}

/// Fails unless `got` is the fixture's run `name` of `runs`: as many segments, bounds and
/// texts identical, words identical in text and within 10 ms.
#[track_caller]
fn check(got: &[Timed], runs: &Value, name: &str) {
    let want = runs[name]["segments"].as_array().expect("segments");
    assert_eq!(got.len(), want.len(), "{name}: segments");
    let time = |v: &Value| v.as_f64().expect("a time");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g.text,
            w["text"].as_str().expect("text"),
            "{name} segment {i}"
        );
        assert_eq!(
            (g.start, g.end),
            (time(&w["start"]), time(&w["end"])),
            "{name} segment {i}"
        );
        let words = w["words"].as_array().map_or(&[][..], |w| &w[..]);
        assert_eq!(g.words.len(), words.len(), "{name} segment {i}: words");
        for (gw, ww) in g.words.iter().zip(words) {
            assert_eq!(gw.0, ww[0].as_str().expect("word"), "{name} segment {i}");
            let close = |a: f64, b: &Value| (a - time(b)).abs() <= 0.01 + 1e-9;
            assert!(
                close(gw.1, &ww[1]) && close(gw.2, &ww[2]),
                "{name} segment {i}: {gw:?} against {ww}"
            );
        }
    }
}

/// faster-whisper's batched defaults with `beam` and timestamps.
fn batched(beam: usize) -> tessel_transcribe_options {
    tessel_transcribe_options {
        beam,
        timestamps: true,
        ..tessel_transcribe_options_batched()
    }
}

#[test]
fn batched_defaults_are_faster_whispers() {
    let (plain, options) = (
        tessel_transcribe_options_default(),
        tessel_transcribe_options_batched(),
    );
    assert_eq!((plain.batch_size, plain.multilingual), (0, false));
    assert_eq!((options.batch_size, options.multilingual), (8, false));
    assert!(!options.timestamps && options.vad.enabled && !plain.vad.enabled);
    assert_eq!(options.vad.max_speech_duration_s, 30.0);
    assert_eq!(options.vad.min_silence_duration_ms, 160);
    let vad = tessel_vad_options {
        max_speech_duration_s: plain.vad.max_speech_duration_s,
        min_silence_duration_ms: plain.vad.min_silence_duration_ms,
        enabled: false,
        ..options.vad
    };
    assert_eq!(vad, plain.vad);
    let rest = tessel_transcribe_options {
        timestamps: true,
        vad: plain.vad,
        batch_size: 0,
        ..options
    };
    assert_eq!(format!("{rest:?}"), format!("{plain:?}"));
}

/// The long audio (clip.wav and 1.5 s of zeros, 4 times) in batches: greedy with timestamps
/// in batches of 8 and of 2 (the same segments: a chunk's decoding does not depend on its
/// batch), then with words (beam 5, the session replaced by one that times words), without
/// them on that session, the first 20 s without the detector, and silence.
#[test]
fn batched_runs_are_faster_whispers() {
    let runs = fixture("tiny_en_32");
    let audio = long_audio();
    let transcriber = load_model("tiny_en_32", 5, -1);
    let greedy = timed(transcriber, &audio, &batched(1)).expect("transcribes");
    check(&greedy, &runs, "timestamps_greedy");
    let by_two = tessel_transcribe_options {
        batch_size: 2,
        ..batched(1)
    };
    let again = timed(transcriber, &audio, &by_two).expect("transcribes");
    assert_eq!(again, greedy);
    let words = tessel_transcribe_options {
        word_timestamps: true,
        ..batched(5)
    };
    let got = timed(transcriber, &audio, &words).expect("transcribes");
    assert!(got.iter().any(|s| !s.words.is_empty()), "{got:?}");
    check(&got, &runs, "words_timestamps");
    let got = timed(transcriber, &audio, &batched(5)).expect("transcribes");
    check(&got, &runs, "timestamps");
    // Under 30 s the detector may be off: the audio is one chunk.
    let mut no_vad = batched(5);
    no_vad.vad.enabled = false;
    let got = timed(transcriber, &audio[..20 * 16_000], &no_vad).expect("transcribes");
    check(&got, &runs, "short_no_vad");
    // No speech, no segments.
    let silence = vec![0.0f32; 10 * 16_000];
    let options = tessel_transcribe_options_batched();
    let got = timed(transcriber, &silence, &options).expect("transcribes");
    assert!(got.is_empty() && runs["silence"]["segments"] == Value::Array(Vec::new()));
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}

/// `multilingual` prompts each chunk with its own language, even over a given one: on the
/// multilingual model, the fixture's `multilingual_de` (whose segments differ from
/// `de_timestamps_greedy`'s, the same options without it).
#[test]
fn per_chunk_languages_reach_the_pipeline() {
    let runs = fixture("tiny_multi_32");
    let audio = long_audio();
    let clip = &audio[..audio.len() / 4 - 24_000];
    let gaps = tessel_tests::audio::gaps(clip);
    assert_eq!(
        gaps.len() as f64 / 16_000.0,
        runs["multilingual_de"]["duration"]
    );
    let transcriber = load_model("tiny_multi_32", 1, 1);
    let german = CString::new("de").expect("no NUL");
    let options = tessel_transcribe_options {
        language: german.as_ptr(),
        multilingual: true,
        ..batched(1)
    };
    let got = timed(transcriber, &gaps, &options).expect("transcribes");
    check(&got, &runs, "multilingual_de");
    let options = tessel_transcribe_options {
        multilingual: false,
        ..options
    };
    let got = timed(transcriber, &gaps, &options).expect("transcribes");
    check(&got, &runs, "de_timestamps_greedy");
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}

#[test]
fn batched_refusals_are_typed() {
    let audio = long_audio();
    let short = &audio[..16_000];
    let transcriber = load();
    let mut nan = short.to_vec();
    nan[100] = f32::NAN;
    let greedy = batched(1);
    let without_vad = tessel_transcribe_options {
        vad: tessel_vad_options {
            enabled: false,
            ..greedy.vad
        },
        ..greedy
    };
    let cases: [(&[f32], tessel_transcribe_options, tessel_status, &str); 9] = [
        (
            &audio,
            without_vad,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "30 s",
        ),
        (
            short,
            tessel_transcribe_options {
                batch_size: tessel::args::TESSEL_MAX_BATCH + 1,
                ..greedy
            },
            tessel_status::TESSEL_ERR_ARGUMENT,
            "batch_size 1025 is outside 1..=1024",
        ),
        (
            short,
            tessel_transcribe_options {
                multilingual: true,
                ..tessel_transcribe_options_default()
            },
            tessel_status::TESSEL_ERR_ARGUMENT,
            "multilingual",
        ),
        (
            short,
            tessel_transcribe_options {
                vad: tessel_vad_options {
                    threshold: 2.0,
                    ..greedy.vad
                },
                ..greedy
            },
            tessel_status::TESSEL_ERR_ARGUMENT,
            "threshold",
        ),
        (
            short,
            tessel_transcribe_options { beam: 9, ..greedy },
            tessel_status::TESSEL_ERR_ARGUMENT,
            "beam",
        ),
        (
            short,
            tessel_transcribe_options {
                patience: 0.0,
                ..greedy
            },
            tessel_status::TESSEL_ERR_ARGUMENT,
            "patience",
        ),
        (
            &short[..100],
            without_vad,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "160 samples",
        ),
        (&nan, greedy, tessel_status::TESSEL_ERR_ARGUMENT, "finite"),
        (
            short,
            tessel_transcribe_options {
                word_timestamps: true,
                prepend_punctuations: null(),
                ..greedy
            },
            tessel_status::TESSEL_ERR_NULL,
            "prepend_punctuations",
        ),
    ];
    for (samples, options, status, says) in cases {
        let got = segments(transcriber, samples, &options).map(drop);
        let message = last_error();
        assert_eq!(got, Err(status), "{says}: {message}");
        assert!(message.contains(says), "{says}: {message}");
    }
    // The detector's options are used as given, 30 s at most; a bad one is still refused.
    let capped = tessel_transcribe_options {
        vad: tessel_vad_options {
            max_speech_duration_s: 0.0,
            ..greedy.vad
        },
        ..greedy
    };
    let got = segments(transcriber, short, &capped).map(drop);
    assert_eq!(got, Err(tessel_status::TESSEL_ERR_ARGUMENT));
    assert!(
        last_error().contains("max_speech_duration_s"),
        "{}",
        last_error()
    );
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}
