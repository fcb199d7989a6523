//! The C API called as C calls it (raw pointers, status codes), checked against the Rust path
//! on the same model at the same ISA level: equal tokens, scores and logits; and every refusal
//! (NULL, mismatched handles, out-of-range arguments, small buffers, re-entry) is a status
//! with a message, the session staying usable.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};

use ::tessel_model::session::buffer_bytes;
use ::tessel_model::{ArenaPlan, Limits, Request, SearchOptions, Session};
use tessel::*;
use tessel_kernels::isa::Isa;
use tessel_numbers::Numbers;

mod batch;
use crate::common;
use common::{last_error, ok};

fn numbers_model() -> *mut tessel_model {
    let mut model = null_mut();
    // SAFETY: `model` is a writable out-pointer.
    ok(unsafe { tessel_model_load_numbers(&mut model) });
    model
}

fn session(model: *mut tessel_model, limits: Option<tessel_limits>) -> *mut tessel_session {
    let mut session = null_mut();
    let limits = limits.as_ref().map_or(null(), |l| l as *const _);
    // SAFETY: live model handle, valid limits or NULL, writable out-pointer.
    ok(unsafe { tessel_session_new(model, limits, &mut session) });
    session
}

fn session_isa(session: *mut tessel_session) -> Isa {
    let mut name: *const c_char = null();
    // SAFETY: live session, writable out-pointer.
    ok(unsafe { tessel_session_isa_name(session, &mut name) });
    // SAFETY: a static NUL-terminated name.
    let name = unsafe { CStr::from_ptr(name) }.to_str().expect("ASCII");
    Isa::from_name(name).expect("the session's level runs here")
}

/// Frees `session`, then releases `model`.
///
/// # Safety
/// Both are live handles, freed nowhere else.
unsafe fn free_handles(session: *mut tessel_session, model: *mut tessel_model) {
    // SAFETY: the caller's contract.
    unsafe {
        ok(tessel_session_free(session));
        ok(tessel_model_release(model));
    }
}

/// Source ids of `text` through the numbers vocabulary.
fn ids(text: &str) -> Vec<u32> {
    let (model, vocab) = Numbers::embedded().expect("embedded").into_parts();
    drop(model);
    let mut ids = Vec::new();
    vocab.encode_into(text, &mut ids).expect("a readable text");
    ids
}

/// The tokens and score of the hypothesis that `call` copies into a buffer of 64 tokens (given
/// the buffer, its capacity, the length and the score to write).
fn read_hypothesis(
    call: impl FnOnce(*mut u32, usize, &mut usize, &mut f32) -> tessel_status,
) -> (Vec<u32>, f32) {
    let mut tokens = vec![0u32; 64];
    let (mut len, mut score) = (0usize, 0f32);
    ok(call(
        tokens.as_mut_ptr(),
        tokens.len(),
        &mut len,
        &mut score,
    ));
    tokens.truncate(len);
    (tokens, score)
}

/// Runs the encoder of `session` over `src`.
fn encode(session: *mut tessel_session, src: &[u32]) {
    // SAFETY: live session, `src.len()` ids.
    ok(unsafe { tessel_encode(session, src.as_ptr(), src.len()) });
}

fn hypothesis(session: *mut tessel_session, index: usize) -> (Vec<u32>, f32) {
    read_hypothesis(|tokens, cap, len, score| {
        // SAFETY: live session, buffers of the stated sizes.
        unsafe { tessel_hypothesis(session, index, tokens, cap, len, score) }
    })
}

fn generate(session: *mut tessel_session, options: &tessel_generate_options) -> usize {
    let mut count = 0;
    // SAFETY: live session, valid options, writable count.
    ok(unsafe { tessel_generate(session, options, &mut count) });
    count
}

#[test]
fn greedy_and_beam_equal_the_rust_path() {
    let model = numbers_model();
    let s = session(model, None);
    let (rust_model, _) = Numbers::embedded().expect("embedded").into_parts();
    let mut rust = Session::new(&rust_model, session_isa(s)).expect("a Rust session");
    for text in ["four hundred and twelve thousand and seven", "nineteen"] {
        let src = ids(text);
        for beam in [1, 3] {
            encode(s, &src);
            let options = tessel_generate_options {
                beam,
                max_steps: 12,
                ..tessel_generate_options_default()
            };
            let count = generate(s, &options);
            rust.encode(&src).expect("encodes");
            let expected = rust
                .generate(Request::new(SearchOptions::beam(beam, 12)))
                .expect("searches");
            assert_eq!(count, expected.len());
            for (i, want) in expected.iter().enumerate() {
                let (tokens, score) = hypothesis(s, i);
                assert_eq!(tokens, want.tokens, "{text}, beam {beam}, hypothesis {i}");
                assert_eq!(score.to_bits(), want.score.to_bits());
            }
        }
    }
    // SAFETY: handles from this test, freed once.
    unsafe { free_handles(s, model) };
}

#[test]
fn decode_steps_write_the_rust_logits_and_report_small_buffers() {
    let model = numbers_model();
    let s = session(model, None);
    let (rust_model, _) = Numbers::embedded().expect("embedded").into_parts();
    let vocab = rust_model.config().tgt_vocab;
    let mut rust = Session::new(&rust_model, session_isa(s)).expect("a Rust session");
    let src = ids("seven hundred five million and sixty");
    rust.encode(&src).expect("encodes");
    // SAFETY: live session, valid arrays and out-pointers throughout.
    unsafe {
        ok(tessel_encode(s, src.as_ptr(), src.len()));
        let mut logits = vec![f32::NAN; 2 * vocab + 1];
        let mut len = 0;
        let bos = [1u32, 1];
        let status = tessel_decode_step(s, bos.as_ptr(), 2, logits.as_mut_ptr(), vocab, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL);
        assert_eq!(len, 2 * vocab);
        assert!(logits.iter().all(|x| x.is_nan()), "nothing written");
        ok(tessel_decode_step(
            s,
            bos.as_ptr(),
            2,
            logits.as_mut_ptr(),
            logits.len(),
            &mut len,
        ));
        let want = rust.decode_step(&bos).expect("a step");
        assert_eq!(&logits[..len], want);
        assert!(logits[len].is_nan(), "nothing past the logits");
        let parents = [1u32, 0];
        ok(tessel_reorder_beams(s, parents.as_ptr(), 2));
        rust.reorder_beams(&parents).expect("reorders");
        let next = [5u32, 7];
        ok(tessel_decode_step(
            s,
            next.as_ptr(),
            2,
            logits.as_mut_ptr(),
            logits.len(),
            &mut len,
        ));
        assert_eq!(&logits[..len], rust.decode_step(&next).expect("a step"));
        // After a reset the first step from BOS again gives the first step's logits.
        ok(tessel_reset_decoder(s));
        ok(tessel_decode_step(
            s,
            bos.as_ptr(),
            1,
            logits.as_mut_ptr(),
            logits.len(),
            &mut len,
        ));
        rust.reset_decoder();
        assert_eq!(&logits[..len], rust.decode_step(&bos[..1]).expect("a step"));
        free_handles(s, model);
    }
}

/// What the step callback of the next test records.
struct Seen {
    steps: usize,
    session: *mut tessel_session,
    reentry: Option<tessel_status>,
    forbidden: u32,
    tokens_ok: bool,
}

unsafe extern "C" fn on_step(user_data: *mut c_void, step: *mut tessel_step) {
    // SAFETY: `user_data` is the `Seen` the test passed; `step` is valid during the call.
    let (seen, step) = unsafe { (&mut *user_data.cast::<Seen>(), &mut *step) };
    seen.steps += 1;
    for beam in 0..step.beams {
        let (mut tokens, mut len) = (null(), usize::MAX);
        // SAFETY: `step` is the callback's step; out-pointers are writable.
        let status = unsafe { tessel_step_tokens(step, beam, &mut tokens, &mut len) };
        seen.tokens_ok &= status == tessel_status::TESSEL_OK && len == step.step;
        // SAFETY: the logits are `beams × vocab` floats, writable during the call.
        let row = unsafe {
            std::slice::from_raw_parts_mut(step.logits.add(beam * step.vocab), step.vocab)
        };
        row[seen.forbidden as usize] = f32::NEG_INFINITY;
    }
    let (mut tokens, mut len) = (null(), 0);
    // SAFETY: as above; `beams` is out of range on purpose.
    let status = unsafe { tessel_step_tokens(step, step.beams, &mut tokens, &mut len) };
    seen.tokens_ok &= status == tessel_status::TESSEL_ERR_ARGUMENT;
    let mut count = 0;
    // SAFETY: the session is live; the call must be refused as busy.
    seen.reentry = Some(unsafe { tessel_generate(seen.session, null(), &mut count) });
}

#[test]
fn the_step_callback_sees_tokens_edits_logits_and_cannot_reenter() {
    let model = numbers_model();
    let s = session(model, None);
    encode(s, &ids("nine hundred ninety-nine"));
    let free = generate(s, &tessel_generate_options_default());
    let (best, _) = hypothesis(s, 0);
    assert!(free >= 1 && !best.is_empty());
    // Forbid the first digit the free search chose.
    let mut seen = Seen {
        steps: 0,
        session: s,
        reentry: None,
        forbidden: best[0],
        tokens_ok: true,
    };
    let options = tessel_generate_options {
        beam: 2,
        on_step: Some(on_step),
        user_data: (&mut seen as *mut Seen).cast(),
        ..tessel_generate_options_default()
    };
    let count = generate(s, &options);
    assert!(seen.steps >= 1 && seen.tokens_ok);
    assert_eq!(seen.reentry, Some(tessel_status::TESSEL_ERR_BUSY));
    for i in 0..count {
        assert!(!hypothesis(s, i).0.contains(&seen.forbidden));
    }
    // SAFETY: handles from this test, freed once.
    unsafe { free_handles(s, model) };
}

/// Sets every logit of the step to the value `user_data` points to.
unsafe extern "C" fn poison(user_data: *mut c_void, step: *mut tessel_step) {
    // SAFETY: `user_data` is the test's `f32`; the logits are `beams × vocab` writable floats
    // during the call.
    let (value, logits) = unsafe {
        let step = &*step;
        (
            *user_data.cast::<f32>(),
            std::slice::from_raw_parts_mut(step.logits, step.beams * step.vocab),
        )
    };
    logits.fill(value);
}

#[test]
fn a_callback_that_leaves_no_finite_logit_is_blamed_and_the_session_stays_usable() {
    let model = numbers_model();
    let s = session(model, None);
    encode(s, &ids("forty two"));
    for mut value in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        for beam in [1, 3] {
            let options = tessel_generate_options {
                beam,
                on_step: Some(poison),
                user_data: (&mut value as *mut f32).cast(),
                ..tessel_generate_options_default()
            };
            let mut count = usize::MAX;
            // SAFETY: live session, valid options, writable count.
            let status = unsafe { tessel_generate(s, &options, &mut count) };
            let what = format!("{value} at beam {beam}");
            assert_eq!(status, tessel_status::TESSEL_ERR_ARGUMENT, "{what}");
            assert_eq!(count, 0, "{what}");
            let message = last_error();
            assert!(
                message.contains("step callback") && message.contains("non-finite at step 0"),
                "{what}: {message}"
            );
        }
    }
    assert!(generate(s, &tessel_generate_options_default()) >= 1);
    // SAFETY: handles from this test, freed once.
    unsafe { free_handles(s, model) };
}

#[test]
fn numbers_read_equals_the_cli_reader_and_reports_sizes() {
    let model = numbers_model();
    let s = session(model, None);
    let numbers = Numbers::embedded().expect("embedded");
    let mut reader = numbers.reader(session_isa(s)).expect("a reader");
    for text in tessel_numbers::EXAMPLES {
        let want = reader.read(text).expect("reads").digits;
        let input = std::ffi::CString::new(text).expect("no NUL");
        let mut out = [0 as c_char; 32];
        let mut len = 0;
        // SAFETY: live session, NUL-terminated text, buffer of 32 bytes.
        ok(unsafe { tessel_numbers_read(s, input.as_ptr(), out.as_mut_ptr(), 32, &mut len) });
        // SAFETY: the call wrote a NUL-terminated string.
        let got = unsafe { CStr::from_ptr(out.as_ptr()) }
            .to_str()
            .expect("UTF-8");
        assert_eq!((got, len), (want.as_str(), want.len()));
        let mut small = [0 as c_char; 2];
        // SAFETY: as above, two bytes.
        let status =
            unsafe { tessel_numbers_read(s, input.as_ptr(), small.as_mut_ptr(), 2, &mut len) };
        if want.len() >= 2 {
            assert_eq!(status, tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL);
            assert_eq!(len, want.len());
        }
    }
    let (mut out, mut len) = ([0 as c_char; 8], 0);
    // SAFETY: as above.
    let status =
        unsafe { tessel_numbers_read(s, c"forty-2".as_ptr(), out.as_mut_ptr(), 8, &mut len) };
    assert_eq!(status, tessel_status::TESSEL_ERR_ARGUMENT);
    assert!(last_error().contains("'2'"), "{}", last_error());
    // SAFETY: handles from this test, freed once.
    unsafe { free_handles(s, model) };
}

#[test]
fn refusals_are_statuses_with_messages_and_the_session_stays_usable() {
    let model = numbers_model();
    let s = session(model, None);
    let src = ids("twelve");
    let mut count = 0;
    // SAFETY: every pointer is NULL, a live handle, a handle of the other kind, or a valid
    // array; the library must refuse the bad ones.
    unsafe {
        let status = tessel_encode(null_mut(), src.as_ptr(), src.len());
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = tessel_encode(model.cast(), src.as_ptr(), src.len());
        assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
        let mut info = tessel_model_info::default();
        let status = tessel_model_get_info(s.cast(), &mut info);
        assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
        assert!(last_error().contains("not a model handle"));
        assert_eq!(
            tessel_model_get_info(model, null_mut()),
            tessel_status::TESSEL_ERR_NULL
        );
        assert_eq!(tessel_encode(s, null(), 3), tessel_status::TESSEL_ERR_NULL);
        assert_eq!(
            tessel_generate(s, null(), &mut count),
            tessel_status::TESSEL_ERR_RUN
        );
        assert!(last_error().contains("before encode"), "{}", last_error());
        let bad = [5u32, 9999];
        assert_eq!(
            tessel_encode(s, bad.as_ptr(), 2),
            tessel_status::TESSEL_ERR_RUN
        );
        assert!(last_error().contains("9999"), "{}", last_error());
        ok(tessel_encode(s, src.as_ptr(), src.len()));
        let wide = tessel_generate_options {
            beam: 99,
            ..tessel_generate_options_default()
        };
        assert_eq!(
            tessel_generate(s, &wide, &mut count),
            tessel_status::TESSEL_ERR_RUN
        );
        let (mut tokens, mut len) = ([0u32; 1], 0);
        assert_eq!(
            tessel_hypothesis(s, 0, tokens.as_mut_ptr(), 1, &mut len, null_mut()),
            tessel_status::TESSEL_ERR_ARGUMENT
        );
        assert!(generate(s, &tessel_generate_options_default()) >= 1);
        let (best, _) = hypothesis(s, 0);
        if best.len() > 1 {
            assert_eq!(
                tessel_hypothesis(s, 0, tokens.as_mut_ptr(), 1, &mut len, null_mut()),
                tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL
            );
            assert_eq!(len, best.len());
        }
        let mut buf = [0 as c_char; 4];
        let mut need = 0;
        assert_eq!(
            tessel_last_error_copy(buf.as_mut_ptr(), 4, &mut need),
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL
        );
        let mut full = vec![0 as c_char; need + 1];
        ok(tessel_last_error_copy(
            full.as_mut_ptr(),
            full.len(),
            &mut need,
        ));
        assert_eq!(
            CStr::from_ptr(full.as_ptr()).to_string_lossy(),
            last_error()
        );
        assert_eq!(
            tessel_session_free(model.cast()),
            tessel_status::TESSEL_ERR_HANDLE
        );
        assert_eq!(
            tessel_model_release(s.cast()),
            tessel_status::TESSEL_ERR_HANDLE
        );
        ok(tessel_session_free(s));
        ok(tessel_session_free(null_mut()));
        ok(tessel_model_release(model));
        ok(tessel_model_release(null_mut()));
    }
}

#[test]
fn limits_arena_bytes_and_reference_counts() {
    let model = numbers_model();
    let (rust_model, _) = Numbers::embedded().expect("embedded").into_parts();
    let config = rust_model.config();
    let limits = tessel_limits {
        max_src_len: 40,
        max_tgt_len: 0,
        max_beam: 2,
        threads: 0,
    };
    let want = Limits {
        max_src_len: 40,
        max_tgt_len: config.max_tgt_len,
        max_beam: 2,
        max_batch: 1,
        encode_sources: 1,
        threads: 1,
        cross_kv: ::tessel_model::MemoryType::F32,
    };
    let mut bytes = 0;
    // SAFETY: live handles, valid structs and out-pointers.
    unsafe {
        ok(tessel_session_arena_bytes(model, &limits, &mut bytes));
        let plan = ArenaPlan::with_limits(config, want).expect("plans");
        assert_eq!(bytes, buffer_bytes(&plan));
        ok(tessel_session_arena_bytes(model, null(), &mut bytes));
        assert_eq!(bytes, buffer_bytes(&ArenaPlan::new(config).expect("plans")));
        let too_wide = tessel_limits {
            max_beam: config.max_beam + 1,
            ..limits
        };
        let mut s = null_mut();
        assert_eq!(
            tessel_session_new(model, &too_wide, &mut s),
            tessel_status::TESSEL_ERR_ARGUMENT
        );
        assert!(s.is_null());
        let s = session(model, Some(limits));
        let mut got = tessel_limits::default();
        ok(tessel_session_get_limits(s, &mut got));
        assert_eq!(
            (got.max_src_len, got.max_tgt_len, got.max_beam, got.threads),
            (40, config.max_tgt_len, 2, 1)
        );
        // The session holds the model: releasing the caller's reference keeps it alive.
        ok(tessel_model_retain(model));
        ok(tessel_model_release(model));
        ok(tessel_model_release(model));
        let src = ids("forty");
        ok(tessel_encode(s, src.as_ptr(), src.len()));
        assert!(generate(s, &tessel_generate_options_default()) >= 1);
        ok(tessel_session_free(s));
    }
}

#[test]
fn versions_isa_levels_and_status_names() {
    // SAFETY: static NUL-terminated strings and writable out-pointers.
    unsafe {
        let version = CStr::from_ptr(tessel_version()).to_str().expect("ASCII");
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        let name = CStr::from_ptr(tessel_status_name(6))
            .to_str()
            .expect("ASCII");
        assert_eq!(name, "TESSEL_ERR_RUN");
        let name = CStr::from_ptr(tessel_status_name(-1))
            .to_str()
            .expect("ASCII");
        assert_eq!(name, "unknown status");
        let mut level: *const c_char = null();
        ok(tessel_isa_name(&mut level));
        let level = CStr::from_ptr(level).to_str().expect("ASCII");
        assert!(Isa::from_name(level).is_ok());
        assert_eq!(
            tessel_isa_force(c"sse9".as_ptr()),
            tessel_status::TESSEL_ERR_ARGUMENT
        );
        let missing = if cfg!(target_arch = "x86_64") {
            c"neon"
        } else {
            c"avx2"
        };
        assert_eq!(
            tessel_isa_force(missing.as_ptr()),
            tessel_status::TESSEL_ERR_UNSUPPORTED
        );
        // Forcing scalar (always available) is seen by new sessions; NULL restores.
        ok(tessel_isa_force(c"scalar".as_ptr()));
        let model = numbers_model();
        let s = session(model, None);
        assert_eq!(session_isa(s), Isa::scalar());
        ok(tessel_isa_force(null()));
        free_handles(s, model);
    }
}

#[test]
fn a_panic_inside_is_a_status_and_a_message() {
    let status = tessel::status::guard(|| panic!("a deliberate test panic"));
    assert_eq!(status, tessel_status::TESSEL_ERR_PANIC);
    assert!(last_error().contains("a deliberate test panic"));
}
