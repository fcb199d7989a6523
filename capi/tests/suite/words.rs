//! Word timestamps through the C API: `tessel_transcribe_options.word_timestamps` and its
//! punctuation strings, each segment's `first_word` and `n_words`, and
//! `tessel_transcriber_words`. The reference is the Rust pipeline
//! ([`TranscribeSession::transcribe`] with `word_timestamps`) on the same samples and options:
//! every segment and word identical (text, times and probability to the bit); the pipeline is
//! held to faster-whisper's `word_timestamps=True` by pipeline/tests/suite/words_golden.rs, and
//! the greedy run here to `tests/transcribe/tiny_en_32/words.json` as well (texts identical,
//! word times within 10 ms). With voice activity detection the words come back in the original
//! audio's times, as the pipeline's [`Speech::restore`] maps them. Calls out of order, NULL
//! pointers, strings that are not UTF-8 and small arrays get typed statuses.

use std::ffi::{c_char, CString};
use std::ptr::{null, null_mut};

use serde_json::Value;
use tessel::*;
use tessel_pipeline::transcribe::words::Word;
use tessel_pipeline::transcribe::{
    open_vad, Segment, Speech, TranscribeOptions, Transcriber, VadOptions,
};

use crate::common::{last_error, ok};
use crate::transcribe::{c_isa, clip_samples, load, root, transcribe_call, written};

/// Segments as the C API gives them, with their texts and words.
#[derive(Debug, PartialEq)]
pub(crate) struct Timed {
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) text: String,
    pub(crate) words: Vec<(String, f64, f64, f64)>,
}

/// The raw segments and text of transcribing `samples` with `options`, sized by a first call
/// without arrays; or the first call's status when it was neither `TESSEL_OK` nor
/// `TESSEL_ERR_BUFFER_TOO_SMALL`, or the second's.
pub(crate) fn segments(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    options: &tessel_transcribe_options,
) -> Result<(Vec<tessel_segment>, String), tessel_status> {
    let (mut n, mut len) = (0, 0);
    let call = transcribe_call(transcriber, samples, options);
    match call(null_mut(), 0, &mut n, null_mut(), 0, &mut len) {
        tessel_status::TESSEL_OK | tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL => {}
        status => return Err(status),
    }
    let mut raw = vec![tessel_segment::default(); n];
    let mut text = vec![0u8; len + 1];
    let status = call(
        raw.as_mut_ptr(),
        n,
        &mut n,
        text.as_mut_ptr().cast(),
        len + 1,
        &mut len,
    );
    if status != tessel_status::TESSEL_OK {
        return Err(status);
    }
    Ok((raw, String::from_utf8(text[..len].to_vec()).expect("UTF-8")))
}

/// What `tessel_transcriber_words` writes into arrays of the given sizes, or its status and
/// the two sizes it reported.
fn words_into(
    transcriber: *mut tessel_transcriber,
    words_cap: usize,
    text_cap: usize,
) -> Result<(Vec<tessel_word>, String), (tessel_status, usize, usize)> {
    let call = |words, cap, n: &mut usize, text, text_cap, len: &mut usize| {
        // SAFETY: a live transcriber (or one the call refuses), arrays of the stated sizes.
        unsafe { tessel_transcriber_words(transcriber, words, cap, n, text, text_cap, len) }
    };
    written(call, words_cap, text_cap)
}

/// Every word of the latest transcription, sized by a first call without arrays.
fn all_words(
    transcriber: *mut tessel_transcriber,
) -> Result<(Vec<tessel_word>, String), tessel_status> {
    match words_into(transcriber, 0, 0) {
        Ok(got) => Ok(got),
        Err((tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL, n, len)) => {
            words_into(transcriber, n, len + 1).map_err(|e| e.0)
        }
        Err((status, _, _)) => Err(status),
    }
}

/// The segments of a transcription with their words, through both calls.
pub(crate) fn transcribe(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    options: &tessel_transcribe_options,
) -> Result<Vec<Timed>, tessel_status> {
    let (raw, text) = segments(transcriber, samples, options)?;
    let (words, words_text) = all_words(transcriber)?;
    let mut next = 0;
    Ok(raw
        .iter()
        .map(|s| {
            // Each segment's words follow the previous segment's.
            assert_eq!(s.first_word, next, "{s:?}");
            next += s.n_words;
            let words = words[s.first_word..s.first_word + s.n_words]
                .iter()
                .map(|w| {
                    let word = &words_text[w.text_offset..w.text_offset + w.text_len];
                    (word.to_owned(), w.start, w.end, w.probability)
                })
                .collect();
            let text = text[s.text_offset..s.text_offset + s.text_len].to_owned();
            Timed {
                start: s.start,
                end: s.end,
                text,
                words,
            }
        })
        .collect())
}

/// The pipeline's segments as [`Timed`].
fn timed(segments: &[Segment]) -> Vec<Timed> {
    let word = |w: &Word| (w.word.clone(), w.start, w.end, w.probability);
    segments
        .iter()
        .map(|s| Timed {
            start: s.start,
            end: s.end,
            text: s.text.clone(),
            words: s.words.iter().map(word).collect(),
        })
        .collect()
}

/// Greedy with word timestamps, faster-whisper's punctuation.
fn with_words() -> tessel_transcribe_options {
    tessel_transcribe_options {
        beam: 1,
        word_timestamps: true,
        ..tessel_transcribe_options_default()
    }
}

/// The Rust pipeline's segments for `samples` with `options` (and the speech alone, its
/// times mapped back, with `vad`), at the C sessions' level.
fn pipeline(samples: &[f32], options: &TranscribeOptions, vad: Option<&VadOptions>) -> Vec<Timed> {
    let rust = Transcriber::load(&root().join("tiny_en_32/model"), 2, None).expect("loads");
    let isa = c_isa();
    let mut session = rust.session_with_words(isa, 2, 1).expect("a session");
    let speech = vad.map(|vad| {
        let detector = open_vad(None).expect("the built-in VAD").with_isa(isa);
        Speech::find(&detector, samples, vad).expect("speech")
    });
    let heard = speech.as_ref().map_or(samples, |s| &s.samples[..]);
    let got = session
        .transcribe(heard, options, &mut ())
        .expect("transcribes");
    let segments: Vec<Segment> = match &speech {
        Some(speech) => got.segments.iter().map(|s| speech.restore(s)).collect(),
        None => got.segments,
    };
    timed(&segments)
}

/// clip.wav, each copy followed by 1.5 s of zeros, 4 times: the audio of words.json.
pub(crate) fn long_audio() -> Vec<f32> {
    let clip = clip_samples();
    let mut audio = Vec::new();
    for _ in 0..4 {
        audio.extend_from_slice(&clip);
        audio.extend(std::iter::repeat_n(0.0, 24_000));
    }
    audio
}

#[test]
fn words_equal_the_pipelines_and_faster_whispers() {
    let audio = long_audio();
    let transcriber = load();
    let got = transcribe(transcriber, &audio, &with_words()).expect("transcribes");
    let options = TranscribeOptions {
        beam: 1,
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let want = pipeline(&audio, &options, None);
    assert!(want.iter().any(|s| !s.words.is_empty()), "{want:?}");
    assert_eq!(got, want);
    // faster-whisper's greedy run on the same audio (through the pipeline's golden test too).
    let text = std::fs::read_to_string(root().join("tiny_en_32/words.json")).expect("words");
    let reference: Value = serde_json::from_str(&text).expect("JSON");
    let run = &reference["runs"]["greedy"];
    assert_eq!(run["options"]["beam_size"].as_u64(), Some(1));
    let reference = run["segments"].as_array().expect("segments");
    assert_eq!(got.len(), reference.len(), "segments");
    let close = |a: f64, b: &Value, bound: f64| (a - b.as_f64().expect("time")).abs() <= bound;
    for (i, (g, w)) in got.iter().zip(reference).enumerate() {
        assert_eq!(g.text, w["text"].as_str().expect("text"), "segment {i}");
        assert!(close(g.start, &w["start"], 1e-9) && close(g.end, &w["end"], 1e-9));
        let words = w["words"].as_array().expect("words");
        assert_eq!(g.words.len(), words.len(), "segment {i}: words");
        for (gw, ww) in g.words.iter().zip(words) {
            assert_eq!(gw.0, ww[0].as_str().expect("word"), "segment {i}");
            assert!(
                close(gw.1, &ww[1], 0.01 + 1e-9) && close(gw.2, &ww[2], 0.01 + 1e-9),
                "segment {i}: {gw:?} vs {ww}"
            );
        }
    }
    // The session that times words gives the same segments without them as a plain one.
    let plain = tessel_transcribe_options {
        word_timestamps: false,
        ..with_words()
    };
    let (raw, _) = segments(transcriber, &audio, &plain).expect("transcribes");
    assert!(raw.iter().all(|s| (s.first_word, s.n_words) == (0, 0)));
    let fresh = load();
    let (alone, _) = segments(fresh, &audio, &plain).expect("transcribes");
    assert_eq!(raw, alone);
    // SAFETY: the transcribers from above, each freed once.
    unsafe {
        ok(tessel_transcriber_free(fresh));
        ok(tessel_transcriber_free(transcriber));
    }
}

#[test]
fn punctuation_strings_and_voice_activity_detection_reach_the_pipeline() {
    let clip = clip_samples();
    let transcriber = load();
    // No punctuation merged: the strings are the caller's, empty.
    let empty = CString::new("").expect("no NUL");
    let options = tessel_transcribe_options {
        prepend_punctuations: empty.as_ptr(),
        append_punctuations: empty.as_ptr(),
        ..with_words()
    };
    let got = transcribe(transcriber, &clip, &options).expect("transcribes");
    let rust = TranscribeOptions {
        beam: 1,
        word_timestamps: true,
        prepend_punctuations: String::new(),
        append_punctuations: String::new(),
        ..TranscribeOptions::default()
    };
    assert_eq!(got, pipeline(&clip, &rust, None));
    // The speech after 2 s of silence: words in the original audio's times.
    let mut audio = vec![0.0f32; 2 * 16_000];
    audio.extend(long_audio());
    let mut options = with_words();
    options.vad.enabled = true;
    options.vad.min_silence_duration_ms = 1000;
    let got = transcribe(transcriber, &audio, &options).expect("transcribes");
    let vad = VadOptions {
        min_silence_duration_ms: 1000,
        ..VadOptions::default()
    };
    let rust = TranscribeOptions {
        beam: 1,
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let want = pipeline(&audio, &rust, Some(&vad));
    assert!(want.iter().any(|s| !s.words.is_empty()), "{want:?}");
    assert_eq!(got, want);
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}

#[test]
fn word_calls_out_of_order_and_bad_arguments_are_typed() {
    let samples = clip_samples();
    let transcriber = load();
    // No transcription yet.
    assert_eq!(
        words_into(transcriber, 8, 64).map(drop),
        Err((tessel_status::TESSEL_ERR_RUN, usize::MAX, usize::MAX))
    );
    assert!(last_error().contains("no transcript"), "{}", last_error());
    // A transcription without word timestamps; NULL punctuation is not read then.
    let plain = tessel_transcribe_options {
        word_timestamps: false,
        prepend_punctuations: null(),
        append_punctuations: null(),
        ..with_words()
    };
    segments(transcriber, &samples, &plain).expect("transcribes");
    assert_eq!(
        words_into(transcriber, 8, 64).map(drop).map_err(|e| e.0),
        Err(tessel_status::TESSEL_ERR_RUN)
    );
    assert!(
        last_error().contains("did not time words"),
        "{}",
        last_error()
    );
    // With word timestamps: NULL punctuation, punctuation that is not UTF-8.
    let bad = c"\xff".as_ptr();
    let cases = [
        (
            null(),
            c",".as_ptr(),
            tessel_status::TESSEL_ERR_NULL,
            "prepend",
        ),
        (
            c",".as_ptr(),
            null(),
            tessel_status::TESSEL_ERR_NULL,
            "append",
        ),
        (
            bad,
            c",".as_ptr(),
            tessel_status::TESSEL_ERR_ARGUMENT,
            "prepend",
        ),
        (
            c",".as_ptr(),
            bad,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "append",
        ),
    ];
    for (prepend, append, status, says) in cases {
        let options = tessel_transcribe_options {
            prepend_punctuations: prepend,
            append_punctuations: append,
            ..with_words()
        };
        let got = segments(transcriber, &samples, &options).map(drop);
        assert_eq!(got, Err(status), "{says}: {}", last_error());
        assert!(last_error().contains(says), "{}", last_error());
        // A failed call leaves no words to read.
        let words = words_into(transcriber, 8, 64).map(drop).map_err(|e| e.0);
        assert_eq!(words, Err(tessel_status::TESSEL_ERR_RUN));
    }
    // The transcript reported too small still has its words; small word arrays report both
    // sizes, and the words stay readable.
    let (mut n, mut len) = (0, 0);
    // SAFETY: a live transcriber, `samples.len()` floats, no arrays.
    let status = unsafe {
        tessel_transcribe(
            transcriber,
            samples.as_ptr(),
            samples.len(),
            &with_words(),
            null_mut(),
            0,
            &mut n,
            null_mut(),
            0,
            &mut len,
        )
    };
    assert_eq!(status, tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL);
    let (words, text) = all_words(transcriber).expect("the words");
    let (count, bytes) = (words.len(), text.len());
    assert!(count > 0);
    for (words_cap, text_cap) in [(0, 0), (count - 1, bytes + 1), (count, bytes)] {
        assert_eq!(
            words_into(transcriber, words_cap, text_cap).map(drop),
            Err((tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL, count, bytes))
        );
    }
    assert_eq!(words_into(transcriber, count, bytes + 1), Ok((words, text)));
    // NULL counts, NULL arrays with capacities, a handle of another kind.
    let mut word = tessel_word::default();
    let mut bytes_out = vec![0 as c_char; bytes + 1];
    // SAFETY: NULL pointers and a handle of another kind, which the calls refuse.
    unsafe {
        let status = tessel_transcriber_words(
            transcriber,
            &mut word,
            1,
            null_mut(),
            null_mut(),
            0,
            &mut len,
        );
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status =
            tessel_transcriber_words(transcriber, &mut word, 1, &mut n, null_mut(), 0, null_mut());
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = tessel_transcriber_words(
            transcriber,
            null_mut(),
            count,
            &mut n,
            bytes_out.as_mut_ptr(),
            bytes + 1,
            &mut len,
        );
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL, "{}", last_error());
        let mut model = null_mut();
        ok(tessel_model_load_numbers(&mut model));
        let status =
            tessel_transcriber_words(model.cast(), null_mut(), 0, &mut n, null_mut(), 0, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
        ok(tessel_model_release(model));
        let status =
            tessel_transcriber_words(null_mut(), null_mut(), 0, &mut n, null_mut(), 0, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        ok(tessel_transcriber_free(transcriber));
    }
}

/// `patience` and `hallucination_silence_threshold` reach the pipeline: the segments and words
/// are the Rust pipeline's with the same options (the threshold drops windows and segments of
/// this audio, as faster-whisper's does in words.json), and bad values are typed.
#[test]
fn patience_and_the_hallucination_threshold_reach_the_pipeline() {
    let audio = long_audio();
    let transcriber = load();
    let options = tessel_transcribe_options {
        hallucination_silence_threshold: 1.0,
        ..with_words()
    };
    let got = transcribe(transcriber, &audio, &options).expect("transcribes");
    let rust = TranscribeOptions {
        beam: 1,
        word_timestamps: true,
        hallucination_silence_threshold: Some(1.0),
        ..TranscribeOptions::default()
    };
    assert_eq!(got, pipeline(&audio, &rust, None));
    let plain = transcribe(transcriber, &audio, &with_words()).expect("transcribes");
    assert!(
        got.len() < plain.len(),
        "{} against {}",
        got.len(),
        plain.len()
    );
    let options = tessel_transcribe_options {
        beam: 2,
        patience: 2.0,
        ..with_words()
    };
    let got = transcribe(transcriber, &audio, &options).expect("transcribes");
    let rust = TranscribeOptions {
        beam: 2,
        patience: 2.0,
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    assert_eq!(got, pipeline(&audio, &rust, None));
    for (patience, threshold) in [(0.0, 0.0), (f32::NAN, 0.0), (1.0, -1.0), (1.0, f64::NAN)] {
        let options = tessel_transcribe_options {
            patience,
            hallucination_silence_threshold: threshold,
            ..with_words()
        };
        let status = segments(transcriber, &audio[..16_000], &options).map(drop);
        assert_eq!(
            status,
            Err(tessel_status::TESSEL_ERR_ARGUMENT),
            "{patience} {threshold}"
        );
    }
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}
