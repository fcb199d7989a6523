//! `tessel_transcribe` with `options.vad` on, against faster-whisper's
//! `transcribe(vad_filter=True)` (`tests/transcribe/tiny_en_32/vad.json`, made by
//! tools/make_vad_transcribe_golden.py): clip.wav between silences, only the speech
//! transcribed, every segment's text identical and its bounds identical in the original
//! audio's times. Audio without speech gives no segments; options out of faster-whisper's
//! range and non-finite samples are `TESSEL_ERR_ARGUMENT`; changing only the detector's options transcribes again.

use std::ptr::null_mut;

use serde_json::Value;
use tessel::*;

use crate::common::{last_error, ok};
use crate::transcribe::{clip_samples, load, root, with_options, Got};

/// The fixture's audio (silence, the clip, silence, the clip, silence) and its reference.
fn fixture() -> (Vec<f32>, Value) {
    let text = std::fs::read_to_string(root().join("tiny_en_32/vad.json")).expect("vad.json");
    let expected: Value = serde_json::from_str(&text).expect("JSON");
    let clip = clip_samples();
    let seconds: Vec<usize> = expected["silences_s"]
        .as_array()
        .expect("silences_s")
        .iter()
        .map(|s| s.as_u64().expect("seconds") as usize)
        .collect();
    let silence = |s: usize| std::iter::repeat_n(0.0f32, s * 16_000);
    let mut audio: Vec<f32> = silence(seconds[0]).collect();
    for &s in &seconds[1..] {
        audio.extend_from_slice(&clip);
        audio.extend(silence(s));
    }
    assert_eq!(Some(audio.len() as u64), expected["samples"].as_u64());
    (audio, expected)
}

fn transcribe(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    options: &tessel_transcribe_options,
) -> Result<Got, (tessel_status, usize, usize)> {
    with_options(transcriber, samples, options, 64, 1 << 14)
}

/// Greedy with the detector on, ending chunks at `min_silence_ms` of silence.
fn with_vad(min_silence_ms: u64) -> tessel_transcribe_options {
    let mut options = tessel_transcribe_options_default();
    options.beam = 1;
    options.vad.enabled = true;
    options.vad.min_silence_duration_ms = min_silence_ms;
    options
}

#[test]
fn the_speech_transcribes_as_faster_whispers_vad_filter() {
    let (audio, expected) = fixture();
    let run = &expected["runs"]["silence_1s"];
    assert_eq!(run["options"]["beam_size"].as_u64(), Some(1));
    assert_eq!(
        run["options"]["vad_parameters"]["min_silence_duration_ms"].as_u64(),
        Some(1000)
    );
    let want: Vec<(f64, f64, String)> = run["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| {
            let time = |key: &str| s[key].as_f64().expect(key);
            let text = s["text"].as_str().expect("text").to_owned();
            (time("start"), time("end"), text)
        })
        .collect();
    let transcriber = load();
    let (got, whole) = transcribe(transcriber, &audio, &with_vad(1000)).expect("transcribes");
    assert_eq!(got.len(), want.len(), "segments");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.2, w.2, "segment {i}: text");
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9;
        assert!(
            close(g.0, w.0) && close(g.1, w.1),
            "segment {i}: {g:?} vs {w:?}"
        );
    }
    let texts: String = want.iter().map(|w| w.2.as_str()).collect();
    assert_eq!(whole, texts);
    // Only the detector's options differ: transcribed again, not the kept transcript.
    let (defaults, _) = transcribe(transcriber, &audio, &with_vad(2000)).expect("transcribes");
    assert_ne!(
        defaults, got,
        "min_silence_duration_ms 2000 keeps other chunks"
    );
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}

#[test]
fn silence_has_no_segments_and_bad_options_are_refused() {
    let transcriber = load();
    let silence = vec![0.0f32; 3 * 16_000];
    let got = transcribe(transcriber, &silence, &with_vad(1000)).expect("transcribes");
    assert_eq!(got, (Vec::new(), String::new()));
    let bad: [fn(&mut tessel_vad_options); 4] = [
        |v| v.threshold = 1.5,
        |v| v.threshold = f64::NAN,
        |v| v.neg_threshold = 2.0,
        |v| v.max_speech_duration_s = 0.0,
    ];
    for change in bad {
        let mut options = with_vad(1000);
        change(&mut options.vad);
        let status = transcribe(transcriber, &silence, &options).map(|_| ());
        assert_eq!(
            status.map_err(|e| e.0),
            Err(tessel_status::TESSEL_ERR_ARGUMENT),
            "{:?}",
            options.vad
        );
        assert!(last_error().contains("threshold") || last_error().contains("max_speech"));
        // Off, the same options are not read.
        options.vad.enabled = false;
        assert!(
            transcribe(transcriber, &silence[..16_000], &options).is_ok(),
            "{}",
            last_error()
        );
    }
    // A NaN where the detector would find no speech is refused all the same.
    let mut nan = silence.clone();
    nan[100] = f32::NAN;
    let status = transcribe(transcriber, &nan, &with_vad(1000)).map(|_| ());
    assert_eq!(
        status.map_err(|e| e.0),
        Err(tessel_status::TESSEL_ERR_ARGUMENT)
    );
    assert!(last_error().contains("sample 100"), "{}", last_error());
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
    // SAFETY: NULL is accepted and frees nothing.
    ok(unsafe { tessel_transcriber_free(null_mut()) });
}
