//! `tessel_session_new_in_buffer`: a session whose arena lives in a caller buffer of the size
//! `tessel_session_arena_bytes` reports (at any alignment) searches exactly as a session with
//! its own arena; a buffer one byte short is `TESSEL_ERR_BUFFER_TOO_SMALL` with the size
//! written, and NULL, threads and limits are typed refusals.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use tessel::*;

use crate::common;
use common::{last_error, ok};

/// Beam-3 search over "nine hundred and one", every hypothesis's tokens and score, and the
/// numbers text call's answer.
fn search(session: *mut tessel_session) -> (Vec<(Vec<u32>, f32)>, String) {
    let text = c"nine hundred and one thousand";
    let mut out = [0u8; 64];
    let (mut len, mut count) = (0, 0);
    let mut found = Vec::new();
    // SAFETY: a live session, buffers of the stated sizes, writable out-pointers.
    unsafe {
        ok(tessel_numbers_read(
            session,
            text.as_ptr(),
            out.as_mut_ptr().cast(),
            out.len(),
            &mut len,
        ));
        let options = tessel_generate_options {
            beam: 3,
            ..tessel_generate_options_default()
        };
        ok(tessel_generate(session, &options, &mut count));
        for i in 0..count {
            let mut tokens = [0u32; 64];
            let (mut n, mut score) = (0, 0f32);
            ok(tessel_hypothesis(
                session,
                i,
                tokens.as_mut_ptr(),
                tokens.len(),
                &mut n,
                &mut score,
            ));
            found.push((tokens[..n].to_vec(), score));
        }
    }
    let digits = String::from_utf8(out[..len].to_vec()).expect("UTF-8");
    (found, digits)
}

#[test]
fn a_session_in_a_caller_buffer_equals_one_with_its_own_arena() {
    let mut model = null_mut();
    let limits = tessel_limits {
        max_src_len: 40,
        max_tgt_len: 0,
        max_beam: 3,
        threads: 0,
    };
    let mut bytes = 0;
    let mut own = null_mut();
    // SAFETY: writable out-pointers and valid limits.
    unsafe {
        ok(tessel_model_load_numbers(&mut model));
        ok(tessel_session_arena_bytes(model, &limits, &mut bytes));
        ok(tessel_session_new(model, &limits, &mut own));
    }
    let want = search(own);
    assert!(!want.0.is_empty() && want.1 == "901000", "{want:?}");
    // Every alignment of the buffer's start works with the reported size.
    let mut storage = vec![0xA5u8; bytes + 64];
    for skew in [0, 1, 7, 63] {
        let buffer = storage[skew..].as_mut_ptr().cast::<c_void>();
        let (mut session, mut needed) = (null_mut(), 0);
        // SAFETY: `bytes` writable bytes at `buffer`, alive past the session's free below.
        unsafe {
            ok(tessel_session_new_in_buffer(
                model,
                &limits,
                buffer,
                bytes,
                &mut needed,
                &mut session,
            ));
            assert_eq!(needed, bytes);
            assert_eq!(search(session), want, "skew {skew}");
            ok(tessel_session_free(session));
        }
    }
    // SAFETY: the handles from above, each freed once.
    unsafe {
        ok(tessel_session_free(own));
        ok(tessel_model_release(model));
    }
}

#[test]
fn short_buffers_and_bad_arguments_are_typed_refusals() {
    let mut model = null_mut();
    let mut bytes = 0;
    // SAFETY: writable out-pointers.
    unsafe {
        ok(tessel_model_load_numbers(&mut model));
        ok(tessel_session_arena_bytes(model, null(), &mut bytes));
    }
    let mut buffer = vec![0u8; bytes];
    let ptr = buffer.as_mut_ptr().cast::<c_void>();
    let two_threads = tessel_limits {
        threads: 2,
        ..tessel_limits::default()
    };
    let too_wide = tessel_limits {
        max_beam: 1000,
        ..tessel_limits::default()
    };
    type Case = (
        *mut tessel_model,
        *const tessel_limits,
        *mut c_void,
        usize,
        tessel_status,
    );
    let cases: [Case; 6] = [
        (
            model,
            null(),
            ptr,
            bytes - 1,
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
        ),
        (
            model,
            null(),
            ptr,
            0,
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
        ),
        (
            model,
            null(),
            null_mut(),
            bytes,
            tessel_status::TESSEL_ERR_NULL,
        ),
        (
            null_mut(),
            null(),
            ptr,
            bytes,
            tessel_status::TESSEL_ERR_NULL,
        ),
        (
            model,
            &two_threads,
            ptr,
            bytes,
            tessel_status::TESSEL_ERR_ARGUMENT,
        ),
        (
            model,
            &too_wide,
            ptr,
            bytes,
            tessel_status::TESSEL_ERR_ARGUMENT,
        ),
    ];
    for (i, (m, limits, buf, len, status)) in cases.into_iter().enumerate() {
        let (mut session, mut needed) = (std::ptr::dangling_mut::<tessel_session>(), 0);
        // SAFETY: `buf` is NULL or holds at least `len` writable bytes.
        let got =
            unsafe { tessel_session_new_in_buffer(m, limits, buf, len, &mut needed, &mut session) };
        assert_eq!(got, status, "case {i}: {}", last_error());
        assert!(!last_error().is_empty());
        if status == tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL {
            assert_eq!(needed, bytes);
        }
        if m.is_null() {
            assert_eq!(
                session as usize, 1,
                "out is untouched when the model is NULL"
            );
        } else {
            assert!(session.is_null(), "case {i}");
        }
    }
    // SAFETY: a NULL out-pointer, refused; then the model's one reference.
    unsafe {
        let got = tessel_session_new_in_buffer(model, null(), ptr, bytes, null_mut(), null_mut());
        assert_eq!(got, tessel_status::TESSEL_ERR_NULL);
        ok(tessel_model_release(model));
    }
    drop(buffer);
}
