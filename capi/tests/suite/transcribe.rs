//! `tessel_transcribe` and `tessel_transcribe_wav` on the random-weight English Whisper model
//! and the speech clip of `tests/transcribe/` (the fixtures of
//! pipeline/tests/suite/transcribe_golden.rs): the segments and text of the Rust
//! [`TranscribeSession`] on the same samples and options; small arrays report both sizes and
//! the retry copies the kept transcript; bad audio, paths, options, handles and NULL pointers
//! are typed statuses.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use tessel::*;
use tessel_audio::{load_wav, ReadOptions};
use tessel_kernels::isa::Isa;
use tessel_pipeline::transcribe::{TranscribeOptions, Transcriber};

use crate::common;
use common::{last_error, ok, refused_load};

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcribe")
}

fn c(path: &Path) -> CString {
    CString::new(path.to_str().expect("UTF-8")).expect("no NUL")
}

/// The samples of the speech clip, `clip.wav`.
pub(crate) fn clip_samples() -> Vec<f32> {
    let clip = load_wav(&root().join("clip.wav"), &ReadOptions::default()).expect("reads");
    clip.samples
}

pub(crate) fn load() -> *mut tessel_transcriber {
    let dir = c(&root().join("tiny_en_32/model"));
    let mut transcriber = null_mut();
    // SAFETY: a NUL-terminated path and a writable out-pointer.
    ok(unsafe { tessel_transcriber_load(dir.as_ptr(), 2, 1, -1, &mut transcriber) });
    transcriber
}

/// Greedy, with timestamps: a few windows' work.
fn options() -> tessel_transcribe_options {
    tessel_transcribe_options {
        beam: 1,
        ..tessel_transcribe_options_default()
    }
}

/// Segments (start, end, text) and the whole text from the C outputs.
pub(crate) type Got = (Vec<(f64, f64, String)>, String);

/// The items (segments or words) and the text a call wrote into arrays of `items_cap` items
/// and `text_cap` bytes, or its status and the two sizes it reported.
pub(crate) fn written<T: Clone + Default>(
    call: impl FnOnce(*mut T, usize, &mut usize, *mut c_char, usize, &mut usize) -> tessel_status,
    items_cap: usize,
    text_cap: usize,
) -> Result<(Vec<T>, String), (tessel_status, usize, usize)> {
    let mut items = vec![T::default(); items_cap];
    let mut text = vec![0u8; text_cap];
    let (mut n, mut len) = (usize::MAX, usize::MAX);
    let status = call(
        items.as_mut_ptr(),
        items_cap,
        &mut n,
        text.as_mut_ptr().cast(),
        text_cap,
        &mut len,
    );
    if status != tessel_status::TESSEL_OK {
        return Err((status, n, len));
    }
    assert_eq!(text[len], 0, "NUL-terminated");
    items.truncate(n);
    let text = String::from_utf8(text[..len].to_vec()).expect("UTF-8");
    Ok((items, text))
}

/// What a call wrote, or its status and the two sizes it reported.
fn outputs(
    call: impl FnOnce(
        *mut tessel_segment,
        usize,
        &mut usize,
        *mut c_char,
        usize,
        &mut usize,
    ) -> tessel_status,
    segments_cap: usize,
    text_cap: usize,
) -> Result<Got, (tessel_status, usize, usize)> {
    let (segments, whole) = written(call, segments_cap, text_cap)?;
    let pieces = segments
        .iter()
        .map(|s| {
            let piece = &whole[s.text_offset..s.text_offset + s.text_len];
            (s.start, s.end, piece.to_owned())
        })
        .collect();
    Ok((pieces, whole))
}

fn from_samples(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    segments_cap: usize,
    text_cap: usize,
) -> Result<Got, (tessel_status, usize, usize)> {
    with_options(transcriber, samples, &options(), segments_cap, text_cap)
}

/// `tessel_transcribe` of `samples` with `options` on `transcriber`, as a call on the output
/// arrays: segments, their capacity and count, text, its capacity and length.
pub(crate) fn transcribe_call<'a>(
    transcriber: *mut tessel_transcriber,
    samples: &'a [f32],
    options: &'a tessel_transcribe_options,
) -> impl Fn(*mut tessel_segment, usize, &mut usize, *mut c_char, usize, &mut usize) -> tessel_status + 'a
{
    move |segments, cap, n, text, text_cap, len| {
        // SAFETY: a live transcriber, `samples.len()` floats, arrays of the stated sizes.
        unsafe {
            tessel_transcribe(
                transcriber,
                samples.as_ptr(),
                samples.len(),
                options,
                segments,
                cap,
                n,
                text,
                text_cap,
                len,
            )
        }
    }
}

/// `tessel_transcribe` of `samples` with `options` into arrays of the given sizes.
pub(crate) fn with_options(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    options: &tessel_transcribe_options,
    segments_cap: usize,
    text_cap: usize,
) -> Result<Got, (tessel_status, usize, usize)> {
    outputs(
        transcribe_call(transcriber, samples, options),
        segments_cap,
        text_cap,
    )
}

/// The level C sessions run at.
pub(crate) fn c_isa() -> Isa {
    let mut name: *const c_char = null();
    // SAFETY: a writable out-pointer; the name is static and NUL-terminated.
    unsafe {
        ok(tessel_isa_name(&mut name));
        Isa::from_name(CStr::from_ptr(name).to_str().expect("ASCII")).expect("a level")
    }
}

#[test]
fn segments_equal_the_rust_pipeline_from_samples_and_from_the_wav() {
    let wav = root().join("clip.wav");
    let samples = clip_samples();
    let transcriber = load();
    let got = from_samples(transcriber, &samples, 64, 1 << 14).expect("transcribes");
    let path = c(&wav);
    let options = options();
    let call = |segments, cap, n: &mut usize, text, text_cap, len: &mut usize| {
        // SAFETY: a live transcriber, a NUL-terminated path, arrays of the stated sizes.
        unsafe {
            tessel_transcribe_wav(
                transcriber,
                path.as_ptr(),
                &options,
                segments,
                cap,
                n,
                text,
                text_cap,
                len,
            )
        }
    };
    assert_eq!(
        outputs(call, 64, 1 << 14).expect("transcribes the WAV"),
        got
    );
    // The Rust pipeline, same samples and options, at the level C sessions run at.
    let isa = c_isa();
    let rust = Transcriber::load(&root().join("tiny_en_32/model"), 2, None).expect("loads");
    let mut session = rust.session(isa, 2, 1).expect("a session");
    let want = session
        .transcribe(
            &samples,
            &TranscribeOptions {
                beam: 1,
                ..TranscribeOptions::default()
            },
            &mut (),
        )
        .expect("transcribes");
    assert!(!want.segments.is_empty());
    let want_segments: Vec<(f64, f64, String)> = want
        .segments
        .iter()
        .map(|s| (s.start, s.end, s.text.clone()))
        .collect();
    assert_eq!(got.0, want_segments);
    assert_eq!(got.1, want.text());
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
}

#[test]
fn small_arrays_keep_the_transcript_and_errors_are_typed() {
    let samples = clip_samples();
    let transcriber = load();
    let (segments, text) = from_samples(transcriber, &samples, 64, 1 << 14).expect("transcribes");
    let (n, len) = (segments.len(), text.len());
    // Either array too small: both sizes reported; the retry copies the kept transcript.
    for (segments_cap, text_cap) in [(0, 0), (n - 1, len + 1), (n, len)] {
        assert_eq!(
            from_samples(transcriber, &samples, segments_cap, text_cap),
            Err((tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL, n, len))
        );
    }
    let again = from_samples(transcriber, &samples, n, len + 1).expect("copies");
    assert_eq!((again.0.len(), again.1.as_str()), (n, text.as_str()));
    // Audio shorter than a frame, non-finite samples, NULL samples.
    let mut bad = vec![0.0f32; 16000];
    bad[7] = f32::NAN;
    for (audio, status) in [
        (&samples[..10], tessel_status::TESSEL_ERR_ARGUMENT),
        (&bad[..], tessel_status::TESSEL_ERR_ARGUMENT),
    ] {
        let got = from_samples(transcriber, audio, 8, 64).map(|_| ());
        assert_eq!(got.map_err(|e| e.0), Err(status), "{}", last_error());
    }
    let (mut count, mut len) = (0, 0);
    let beam_9 = tessel_transcribe_options {
        beam: 9,
        ..options()
    };
    let missing = c(&root().join("missing.wav"));
    // SAFETY: NULL pointers, bad options, a missing file and a handle of another kind, which
    // the calls refuse; the transcriber is freed once.
    unsafe {
        // Samples into no output buffers (the counts only).
        let mut transcribe = |samples: *const f32, n: usize, options| {
            let (segments, text) = (null_mut(), null_mut());
            tessel_transcribe(
                transcriber,
                samples,
                n,
                options,
                segments,
                0,
                &mut count,
                text,
                0,
                &mut len,
            )
        };
        let status = transcribe(null(), 10, null());
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = transcribe(samples.as_ptr(), samples.len(), &beam_9);
        assert_eq!(
            status,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "{}",
            last_error()
        );
        // The missing file through `handle`.
        let mut wav = |handle: *mut tessel_transcriber| {
            let (segments, text) = (null_mut(), null_mut());
            tessel_transcribe_wav(
                handle,
                missing.as_ptr(),
                null(),
                segments,
                0,
                &mut count,
                text,
                0,
                &mut len,
            )
        };
        let status = wav(transcriber);
        assert_eq!(status, tessel_status::TESSEL_ERR_LOAD);
        let mut model = null_mut();
        ok(tessel_model_load_numbers(&mut model));
        let status = wav(model.cast());
        assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
        ok(tessel_model_release(model));
        ok(tessel_transcriber_free(transcriber));
        ok(tessel_transcriber_free(null_mut()));
    }
    // Loading: a missing directory, text models (Hugging Face, CTranslate2), a bad
    // `multilingual`, an English-only model as multilingual, an absurd beam.
    let nllb = c(&root().join("../decoding/nllb/hf"));
    let marian_ct2 = c(&root().join("../translation/marian/ct2"));
    let missing_dir = c(&root().join("missing"));
    let here = c(&root().join("tiny_en_32/model"));
    for (dir, beam, multilingual, status, says) in [
        (&missing_dir, 0, -1, tessel_status::TESSEL_ERR_LOAD, ""),
        (
            &nllb,
            0,
            -1,
            tessel_status::TESSEL_ERR_UNSUPPORTED,
            "Hugging Face M2M100/NLLB",
        ),
        (
            &marian_ct2,
            0,
            -1,
            tessel_status::TESSEL_ERR_UNSUPPORTED,
            "CTranslate2",
        ),
        (
            &here,
            0,
            2,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "multilingual",
        ),
        (
            &here,
            0,
            1,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "English-only",
        ),
        (
            &here,
            1000,
            -1,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "max_beam 1000",
        ),
    ] {
        let mut transcriber = std::ptr::dangling_mut();
        // SAFETY: a NUL-terminated path and a writable out-pointer.
        let got = unsafe {
            tessel_transcriber_load(dir.as_ptr(), beam, 0, multilingual, &mut transcriber)
        };
        refused_load(&format!("{dir:?}"), got, transcriber, status, says);
    }
}

/// The status of transcribing `samples` with `language` on `transcriber`.
fn with_language(
    transcriber: *mut tessel_transcriber,
    samples: &[f32],
    language: &str,
) -> tessel_status {
    let language = CString::new(language).expect("no NUL");
    let options = tessel_transcribe_options {
        language: language.as_ptr(),
        ..options()
    };
    let (mut count, mut len) = (0, 0);
    let mut segments = vec![tessel_segment::default(); 64];
    let mut text = vec![0 as c_char; 1 << 14];
    // SAFETY: a live transcriber, `samples.len()` floats, arrays of the stated capacities.
    unsafe {
        tessel_transcribe(
            transcriber,
            samples.as_ptr(),
            samples.len(),
            &options,
            segments.as_mut_ptr(),
            segments.len(),
            &mut count,
            text.as_mut_ptr(),
            text.len(),
            &mut len,
        )
    }
}

#[test]
fn languages_are_checked_against_the_model() {
    let samples = vec![0.0f32; 1600];
    let transcriber = load();
    // English-only: an unknown code, another language; English is fine.
    for (language, status) in [
        ("xx", tessel_status::TESSEL_ERR_ARGUMENT),
        ("de", tessel_status::TESSEL_ERR_ARGUMENT),
        ("English", tessel_status::TESSEL_OK),
    ] {
        let got = with_language(transcriber, &samples, language);
        assert_eq!(got, status, "{language}: {}", last_error());
    }
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(transcriber) });
    // Multilingual (its CTranslate2 config lists language ids): codes its vocabulary lacks.
    let dir = c(&root().join("tiny_multi_32/model"));
    let mut multi = null_mut();
    // SAFETY: a NUL-terminated path and a writable out-pointer.
    ok(unsafe { tessel_transcriber_load(dir.as_ptr(), 1, 1, 1, &mut multi) });
    for language in ["xx", "fr"] {
        let got = with_language(multi, &samples, language);
        assert_eq!(got, tessel_status::TESSEL_ERR_ARGUMENT, "{language}");
        assert!(last_error().contains(language), "{}", last_error());
    }
    // SAFETY: the transcriber from above, freed once.
    ok(unsafe { tessel_transcriber_free(multi) });
}
