//! `tessel_model_load_dir` detects each directory format of the test fixtures and loads the
//! model its own loader loads: equal configs, and equal first-step logits through the C path
//! and the Rust path (audio through `tessel_encode_audio` for Whisper).

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use ::tessel_model::load::ct2::{self, Ct2Options};
use ::tessel_model::load::hf::{bart, t5, whisper};
use ::tessel_model::{LoadOptions, Model, Session};
use tessel::*;
use tessel_kernels::isa::Isa;

use crate::common;
use common::{last_error, ok, step_from};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(path)
}

fn load(dir: &Path) -> Result<*mut tessel_model, tessel_status> {
    let path = CString::new(dir.to_str().expect("UTF-8 path")).expect("no NUL");
    let mut model = null_mut();
    // SAFETY: NUL-terminated path, default options, writable out-pointer.
    match unsafe { tessel_model_load_dir(path.as_ptr(), null(), &mut model) } {
        tessel_status::TESSEL_OK => Ok(model),
        status => Err(status),
    }
}

/// The first decoder step's logits from BOS, through the C API.
fn first_logits(model: *mut tessel_model, source: Source<'_>) -> (Vec<f32>, Isa) {
    let mut info = tessel_model_info::default();
    let mut session = null_mut();
    let mut name: *const c_char = null();
    // SAFETY: live handles, valid arrays and out-pointers.
    unsafe {
        ok(tessel_model_get_info(model, &mut info));
        ok(tessel_session_new(model, null(), &mut session));
        ok(tessel_session_isa_name(session, &mut name));
        match source {
            Source::Ids(ids) => ok(tessel_encode(session, ids.as_ptr(), ids.len())),
            Source::Mel(mel) => ok(tessel_encode_audio(session, mel.as_ptr(), mel.len())),
        }
        let mut logits = vec![0f32; info.tgt_vocab];
        step_from(session, info.bos_id, &mut logits);
        ok(tessel_session_free(session));
        let isa = Isa::from_name(CStr::from_ptr(name).to_str().expect("ASCII")).expect("a level");
        (logits, isa)
    }
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Ids(&'a [u32]),
    Mel(&'a [f32]),
}

/// Loads `dir` through C and checks it against `rust`, the format's own loader.
fn check(dir: &str, rust: Model, source: Source<'_>) {
    let model = load(&fixture(dir)).expect("the fixture loads");
    let mut info = tessel_model_info::default();
    // SAFETY: live handle, writable out-pointer.
    ok(unsafe { tessel_model_get_info(model, &mut info) });
    let config = rust.config();
    assert_eq!(
        (info.src_vocab, info.tgt_vocab, info.bos_id, info.eos_id),
        (
            config.src_vocab,
            config.tgt_vocab,
            config.bos_id,
            config.eos_id
        ),
        "{dir}"
    );
    assert_eq!(info.n_mels, config.front_end.n_mels().unwrap_or(0));
    assert!(!info.has_text_vocab);
    let (logits, isa) = first_logits(model, source);
    let mut session = Session::new(&rust, isa).expect("a Rust session");
    match source {
        Source::Ids(ids) => session.encode(ids).expect("encodes"),
        Source::Mel(mel) => session.encode_audio(mel).expect("encodes"),
    }
    let want = session.decode_step(&[config.bos_id]).expect("a step");
    assert_eq!(logits, want, "{dir}");
    // SAFETY: the handle from `load`, released once.
    ok(unsafe { tessel_model_release(model) });
}

const IDS: [u32; 5] = [3, 7, 11, 2, 5];

#[test]
fn tessel_layout() {
    let rust = Model::load_dir(&fixture("golden/post_relu")).expect("loads");
    check("golden/post_relu", rust, Source::Ids(&IDS));
}

#[test]
fn ctranslate2() {
    let dir = fixture("ct2/post_relu_sinusoidal_f32");
    let options = Ct2Options {
        max_src_len: 512,
        max_tgt_len: 512,
        max_beam: 4,
        weights: None,
    };
    let rust = ct2::load_dir(&dir, options).expect("loads").model;
    check("ct2/post_relu_sinusoidal_f32", rust, Source::Ids(&IDS));
}

#[test]
fn hugging_face_marian_and_t5() {
    let options = LoadOptions::default();
    let marian = bart::load_hf_dir(&fixture("translation/marian/hf"), 4, &options);
    check(
        "translation/marian/hf",
        marian.expect("loads").1,
        Source::Ids(&IDS),
    );
    let t5 = t5::load_hf_dir(&fixture("translation/t5/hf"), 512, 4, &options);
    check("translation/t5/hf", t5.expect("loads"), Source::Ids(&IDS));
}

#[test]
fn hugging_face_whisper_through_encode_audio() {
    let dir = fixture("whisper/tiny_like_80/hf");
    let rust = whisper::load_hf_dir(&dir, 4, &LoadOptions::default()).expect("loads");
    let n_mels = rust.config().front_end.n_mels().expect("audio");
    let frames = 2 * rust.config().max_src_len;
    let mel: Vec<f32> = (0..n_mels * frames)
        .map(|i| ((i * 37 % 101) as f32 / 101.0) - 0.5)
        .collect();
    check("whisper/tiny_like_80/hf", rust, Source::Mel(&mel));
}

#[test]
fn bad_directories_and_options_are_refused() {
    let missing = load(Path::new("/nonexistent/tessel-model"));
    assert_eq!(missing.err(), Some(tessel_status::TESSEL_ERR_LOAD));
    assert!(
        last_error().contains("no such file or directory"),
        "{}",
        last_error()
    );
    let path = CString::new(fixture("golden/post_relu").to_str().expect("UTF-8")).expect("path");
    let mut model = null_mut();
    let options = tessel_load_options {
        weights: c"f12".as_ptr(),
        ..tessel_load_options_default()
    };
    // SAFETY: NUL-terminated strings, valid options, writable out-pointer.
    let status = unsafe { tessel_model_load_dir(path.as_ptr(), &options, &mut model) };
    assert_eq!(status, tessel_status::TESSEL_ERR_ARGUMENT);
    assert!(model.is_null());
    let options = tessel_load_options {
        weights: c"bf16".as_ptr(),
        ..tessel_load_options_default()
    };
    // SAFETY: as above.
    ok(unsafe { tessel_model_load_dir(path.as_ptr(), &options, &mut model) });
    // SAFETY: the handle just loaded.
    ok(unsafe { tessel_model_release(model) });
    // SAFETY: NULL path must be refused.
    let status = unsafe { tessel_model_load_dir(null(), null(), &mut model) };
    assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
    // Absurd limits are the caller's: ARGUMENT, before anything loads.
    for (max_beam, max_len, says) in [
        (1 << 40, 512, "max_beam"),
        (129, 512, "max_beam 129"),
        (4, 1 << 40, "max_len"),
        (0, 512, "max_beam 0"),
    ] {
        let options = tessel_load_options {
            max_beam,
            max_len,
            ..tessel_load_options_default()
        };
        // SAFETY: NUL-terminated path, valid options, writable out-pointer.
        let status = unsafe { tessel_model_load_dir(path.as_ptr(), &options, &mut model) };
        assert_eq!(status, tessel_status::TESSEL_ERR_ARGUMENT, "{says}");
        assert!(last_error().contains(says), "{}", last_error());
    }
}

#[test]
fn a_ctranslate2_whisper_holds_a_30_s_window_with_the_default_options() {
    let model = load(&fixture("transcribe/tiny_en_32/model")).expect("loads");
    let mut info = tessel_model_info::default();
    // SAFETY: the live model and a writable info.
    ok(unsafe { tessel_model_get_info(model, &mut info) });
    assert_eq!((info.max_src_len, info.max_tgt_len), (1500, 448));
    let mel = vec![0.25f32; info.n_mels * 3000];
    let mut session = null_mut();
    // SAFETY: the live model, default limits, `mel.len()` floats; each handle freed once.
    unsafe {
        ok(tessel_session_new(model, null(), &mut session));
        ok(tessel_encode_audio(session, mel.as_ptr(), mel.len()));
        ok(tessel_session_free(session));
        ok(tessel_model_release(model));
    }
}
