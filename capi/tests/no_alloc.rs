//! Proves the header's promise: after `tessel_session_new`, the token-level C calls (encode,
//! decode steps, beam reordering, greedy and beam search with a step callback reading tokens,
//! hypotheses, limits and ISA queries, and refusals with their messages, a step callback that
//! leaves no finite logit among them) allocate nothing,
//! whether the arena was allocated or lives in a caller buffer (`tessel_session_new_in_buffer`);
//! and after `tessel_batch_new`, the batch calls (encode, submit while others run, step with a
//! step callback, poll, hypotheses, refusals); counted by a global allocator that counts the
//! allocations of the measuring thread only.

use std::ffi::{c_char, c_void};
use std::ptr::{null, null_mut};

use tessel::*;

#[path = "suite/common/mod.rs"]
mod common;
use common::{ok, step_from};
use tessel_tests::counting::{allocations, ThreadCounting};

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

/// Reads every hypothesis's tokens and counts the steps.
unsafe extern "C" fn on_step(user_data: *mut c_void, step: *mut tessel_step) {
    // SAFETY: `user_data` is the test's counter; `step` is valid during the call.
    let (steps, step) = unsafe { (&mut *user_data.cast::<usize>(), &*step) };
    *steps += 1;
    for beam in 0..step.beams {
        let (mut tokens, mut len) = (null(), 0);
        // SAFETY: the callback's step and writable out-pointers.
        let status = unsafe { tessel_step_tokens(step, beam, &mut tokens, &mut len) };
        assert_eq!(status, tessel_status::TESSEL_OK);
    }
}

/// Leaves no finite logit: every one NaN.
unsafe extern "C" fn poison(_: *mut c_void, step: *mut tessel_step) {
    // SAFETY: the logits are `beams × vocab` writable floats during the call.
    let logits =
        unsafe { std::slice::from_raw_parts_mut((*step).logits, (*step).beams * (*step).vocab) };
    logits.fill(f32::NAN);
}

/// Every token-level call, refusals included, on an encoded-from-scratch session.
fn token_level_calls(model: *mut tessel_model, session: *mut tessel_session, vocab: usize) {
    let src = [10u32, 11, 12, 3, 20, 21];
    let mut logits = [0f32; 64];
    let (mut len, mut count, mut score, mut steps) = (0usize, 0usize, 0f32, 0usize);
    let mut tokens = [0u32; 16];
    let mut name: *const c_char = null();
    let mut limits = tessel_limits::default();
    let mut info = tessel_model_info::default();
    let mut message = [0 as c_char; 256];
    assert!(2 * vocab <= logits.len());
    // SAFETY: live handles and buffers of the stated sizes; the refusals pass bad arguments
    // on purpose.
    unsafe {
        ok(tessel_encode(session, src.as_ptr(), src.len()));
        // One step of two beams into `logits`.
        let mut step = |tokens: [u32; 2]| {
            ok(tessel_decode_step(
                session,
                tokens.as_ptr(),
                2,
                logits.as_mut_ptr(),
                64,
                &mut len,
            ))
        };
        step([1, 1]);
        ok(tessel_reorder_beams(session, [1u32, 0].as_ptr(), 2));
        ok(tessel_reset_decoder(session));
        step([1, 1]);
        step([4, 5]);
        for beam in [1, 3] {
            let options = tessel_generate_options {
                beam,
                on_step: Some(on_step),
                user_data: (&mut steps as *mut usize).cast(),
                ..tessel_generate_options_default()
            };
            ok(tessel_generate(session, &options, &mut count));
            for i in 0..count {
                ok(tessel_hypothesis(
                    session,
                    i,
                    tokens.as_mut_ptr(),
                    16,
                    &mut len,
                    &mut score,
                ));
            }
        }
        ok(tessel_session_get_limits(session, &mut limits));
        ok(tessel_session_isa_name(session, &mut name));
        ok(tessel_model_get_info(model, &mut info));
        // Refusals, each formatting its message into the thread's buffer.
        let refused = [
            tessel_encode(session, [9999u32].as_ptr(), 1),
            tessel_encode(session, null(), 0),
            tessel_encode(model.cast(), src.as_ptr(), 1),
            tessel_decode_step(
                session,
                [1u32].as_ptr(),
                1,
                logits.as_mut_ptr(),
                1,
                &mut len,
            ),
            tessel_generate(null_mut(), null(), &mut count),
            tessel_hypothesis(session, 99, tokens.as_mut_ptr(), 16, &mut len, null_mut()),
            tessel_generate(
                session,
                &tessel_generate_options {
                    beam: 3,
                    on_step: Some(poison),
                    ..tessel_generate_options_default()
                },
                &mut len,
            ),
        ];
        assert!(refused.iter().all(|s| *s != tessel_status::TESSEL_OK));
        ok(tessel_last_error_copy(message.as_mut_ptr(), 256, &mut len));
        assert!(!tessel_last_error().is_null());
    }
    assert!(steps > 0 && count > 0);
}

#[test]
fn token_level_c_calls_do_not_allocate_after_session_creation() {
    let probe = allocations(|| drop(std::hint::black_box(vec![1u8; 8])));
    assert_eq!(probe, 1, "the counter sees this thread's allocations");
    let mut model = null_mut();
    let mut info = tessel_model_info::default();
    // SAFETY: writable out-pointers; the handles are freed at the end.
    unsafe {
        ok(tessel_model_load_numbers(&mut model));
        ok(tessel_model_get_info(model, &mut info));
    }
    for threads in [1, 2] {
        let limits = tessel_limits {
            threads,
            ..tessel_limits::default()
        };
        let mut session = null_mut();
        // SAFETY: live model, valid limits, writable out-pointer.
        ok(unsafe { tessel_session_new(model, &limits, &mut session) });
        // Twice: the first pass may warm nothing up either.
        for pass in 0..2 {
            let count = allocations(|| token_level_calls(model, session, info.tgt_vocab));
            assert_eq!(
                count, 0,
                "{count} allocations ({threads} threads, pass {pass})"
            );
        }
        // SAFETY: the session from above, freed once.
        ok(unsafe { tessel_session_free(session) });
    }
    // A session in a caller buffer (one byte off a 64-byte boundary): no allocation either.
    let mut bytes = 0;
    // SAFETY: live model, default limits, writable out-pointer.
    ok(unsafe { tessel_session_arena_bytes(model, null(), &mut bytes) });
    let mut buffer = vec![0u8; bytes + 1];
    let mut session = null_mut();
    // SAFETY: the buffer outlives the session (freed below, before the buffer drops).
    ok(unsafe {
        tessel_session_new_in_buffer(
            model,
            null(),
            buffer[1..].as_mut_ptr().cast(),
            bytes,
            null_mut(),
            &mut session,
        )
    });
    for pass in 0..2 {
        let count = allocations(|| token_level_calls(model, session, info.tgt_vocab));
        assert_eq!(count, 0, "{count} allocations (in a buffer, pass {pass})");
    }
    // SAFETY: the session and the model from above, each freed once.
    unsafe {
        ok(tessel_session_free(session));
        ok(tessel_model_release(model));
    }
    drop(buffer);
}

/// Every batch call after creation, refusals included: slots encoded, submitted together and
/// while others run (one with a step callback reading tokens), stepped to the end and read.
fn batch_calls(model: *mut tessel_model, batch: *mut tessel_batch) {
    let sources: [&[u32]; 3] = [&[10, 11, 12, 3, 20, 21], &[14, 15], &[9, 3, 16, 17, 18]];
    let (mut steps, mut running, mut flag) = (0usize, 0usize, false);
    let (mut count, mut len, mut score) = (0usize, 0usize, 0f32);
    let mut tokens = [0u32; 16];
    let mut limits = tessel_limits::default();
    let mut message = [0 as c_char; 256];
    let watched = tessel_generate_options {
        beam: 3,
        on_step: Some(on_step),
        user_data: (&mut steps as *mut usize).cast(),
        ..tessel_generate_options_default()
    };
    // SAFETY: live handles and buffers of the stated sizes; the refusals pass bad arguments
    // on purpose.
    unsafe {
        ok(tessel_batch_get_limits(batch, &mut limits, &mut count));
        for (slot, src) in sources.iter().enumerate().take(2) {
            ok(tessel_batch_encode(batch, slot, src.as_ptr(), src.len()));
        }
        ok(tessel_batch_submit(batch, 0, &watched));
        ok(tessel_batch_submit(batch, 1, null()));
        ok(tessel_batch_step(batch, &mut running));
        ok(tessel_batch_encode(
            batch,
            2,
            sources[2].as_ptr(),
            sources[2].len(),
        ));
        ok(tessel_batch_submit(batch, 2, &watched));
        while running > 0 {
            ok(tessel_batch_step(batch, &mut running));
            ok(tessel_batch_running(batch, 2, &mut flag));
        }
        for slot in 0..3 {
            ok(tessel_batch_finished(batch, slot, &mut count));
            for i in 0..count {
                ok(tessel_batch_hypothesis(
                    batch,
                    slot,
                    i,
                    tokens.as_mut_ptr(),
                    16,
                    &mut len,
                    &mut score,
                ));
            }
        }
        let statuses = [
            tessel_batch_step(batch, &mut running),
            tessel_batch_encode(batch, 9, sources[0].as_ptr(), 1),
            tessel_batch_encode(batch, 0, [9999u32].as_ptr(), 1),
            tessel_batch_encode(model.cast(), 0, sources[0].as_ptr(), 1),
            tessel_batch_hypothesis(batch, 0, 99, tokens.as_mut_ptr(), 16, &mut len, null_mut()),
            tessel_batch_submit(
                batch,
                1,
                &tessel_generate_options {
                    beam: 3,
                    on_step: Some(poison),
                    ..tessel_generate_options_default()
                },
            ),
            tessel_batch_submit(batch, 1, null()),
            tessel_batch_step(batch, &mut running),
            tessel_batch_finished(batch, 1, &mut count),
        ];
        // The poisoned submit and its step succeed; the refusals around them do not.
        use tessel_status::*;
        let want = [
            TESSEL_ERR_RUN,
            TESSEL_ERR_ARGUMENT,
            TESSEL_ERR_RUN,
            TESSEL_ERR_HANDLE,
            TESSEL_ERR_ARGUMENT,
            TESSEL_OK,
            TESSEL_ERR_RUN,
            TESSEL_OK,
            TESSEL_ERR_ARGUMENT,
        ];
        assert_eq!(statuses, want);
        ok(tessel_last_error_copy(message.as_mut_ptr(), 256, &mut len));
    }
    assert!(steps > 0);
}

#[test]
fn batch_calls_do_not_allocate_after_batch_creation() {
    let mut model = null_mut();
    // SAFETY: a writable out-pointer.
    ok(unsafe { tessel_model_load_numbers(&mut model) });
    for threads in [1, 2] {
        let limits = tessel_limits {
            threads,
            ..tessel_limits::default()
        };
        let mut batch = null_mut();
        // SAFETY: live model, valid limits, writable out-pointer.
        ok(unsafe { tessel_batch_new(model, &limits, 3, &mut batch) });
        for pass in 0..2 {
            let count = allocations(|| batch_calls(model, batch));
            assert_eq!(
                count, 0,
                "{count} allocations ({threads} threads, pass {pass})"
            );
        }
        // SAFETY: the batch from above, freed once.
        ok(unsafe { tessel_batch_free(batch) });
    }
    // SAFETY: the model from above, released once.
    ok(unsafe { tessel_model_release(model) });
}

#[test]
fn encode_audio_does_not_allocate_after_session_creation() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/whisper/tiny_like_80/hf\0"
    );
    let (mut model, mut session) = (null_mut(), null_mut());
    let mut info = tessel_model_info::default();
    // SAFETY: a NUL-terminated path and writable out-pointers.
    unsafe {
        ok(tessel_model_load_dir(
            dir.as_ptr().cast(),
            null(),
            &mut model,
        ));
        ok(tessel_model_get_info(model, &mut info));
        ok(tessel_session_new(model, null(), &mut session));
    }
    let frames = 2 * info.max_src_len;
    let mel: Vec<f32> = (0..info.n_mels * frames)
        .map(|i| (i % 7) as f32 / 7.0 - 0.5)
        .collect();
    let mut logits = vec![0f32; info.tgt_vocab];
    let count = allocations(|| {
        // SAFETY: live session, arrays of the stated lengths.
        unsafe {
            ok(tessel_encode_audio(session, mel.as_ptr(), mel.len()));
            step_from(session, info.bos_id, &mut logits);
            let refused = tessel_encode_audio(session, mel.as_ptr(), mel.len() - 1);
            assert_eq!(refused, tessel_status::TESSEL_ERR_RUN);
        }
    });
    assert_eq!(count, 0, "{count} allocations");
    // SAFETY: the handles from above, freed once.
    unsafe {
        ok(tessel_session_free(session));
        ok(tessel_model_release(model));
    }
}
