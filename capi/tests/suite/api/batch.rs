//! `tessel_batch` called as C calls it: every slot's hypotheses equal those a plain session
//! gives the same source and options (tokens and score bits), whether the slots start
//! together or one is submitted while others run; and every misuse is a status with a
//! message, the batch staying usable.
//!
//! The numbers model is loaded with `f32` weights: its stored `f16` weights, widened by F16C
//! at AVX2, round apart between one-row and many-row products (within their error bound, as
//! the engine's batch documents), so only `f32` weights give equal score bits at every level.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use tessel::*;

use super::{generate, hypothesis, ids, read_hypothesis, session};
use crate::common::{last_error, ok};

/// The numbers model of `assets/numbers`, its weights widened to `f32`.
fn numbers_model() -> *mut tessel_model {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/numbers\0");
    let options = tessel_load_options {
        weights: c"f32".as_ptr(),
        ..tessel_load_options_default()
    };
    let mut model = null_mut();
    // SAFETY: a NUL-terminated path, valid options, a writable out-pointer.
    ok(unsafe { tessel_model_load_dir(dir.as_ptr().cast(), &options, &mut model) });
    model
}

/// A batch of `max_batch` slots over `model`, the model's limits.
fn batch(model: *mut tessel_model, max_batch: usize) -> *mut tessel_batch {
    let mut batch = null_mut();
    // SAFETY: live model, NULL limits, writable out-pointer.
    ok(unsafe { tessel_batch_new(model, null(), max_batch, &mut batch) });
    batch
}

/// One search's result: each hypothesis's tokens and score bits, best first.
type Found = Vec<(Vec<u32>, u32)>;

/// What a plain session finds for `src` with `options`.
fn alone(model: *mut tessel_model, src: &[u32], options: &tessel_generate_options) -> Found {
    let s = session(model, None);
    // SAFETY: live session, `src.len()` ids.
    ok(unsafe { tessel_encode(s, src.as_ptr(), src.len()) });
    let count = generate(s, options);
    let found = (0..count)
        .map(|i| {
            let (tokens, score) = hypothesis(s, i);
            (tokens, score.to_bits())
        })
        .collect();
    // SAFETY: the session from above, freed once.
    ok(unsafe { tessel_session_free(s) });
    found
}

/// What slot `slot` of `batch` found.
fn found(batch: *mut tessel_batch, slot: usize) -> Found {
    let mut count = 0;
    // SAFETY: live batch, writable count.
    ok(unsafe { tessel_batch_finished(batch, slot, &mut count) });
    (0..count)
        .map(|i| {
            let (tokens, score) = read_hypothesis(|tokens, cap, len, score| {
                // SAFETY: live batch, buffers of the stated sizes.
                unsafe { tessel_batch_hypothesis(batch, slot, i, tokens, cap, len, score) }
            });
            (tokens, score.to_bits())
        })
        .collect()
}

fn encode(batch: *mut tessel_batch, slot: usize, src: &[u32]) {
    // SAFETY: live batch, `src.len()` ids.
    ok(unsafe { tessel_batch_encode(batch, slot, src.as_ptr(), src.len()) });
}

fn submit(batch: *mut tessel_batch, slot: usize, options: &tessel_generate_options) {
    // SAFETY: live batch, valid options.
    ok(unsafe { tessel_batch_submit(batch, slot, options) });
}

/// One step; the number of slots still running.
fn step(batch: *mut tessel_batch) -> usize {
    let mut running = usize::MAX;
    // SAFETY: live batch, writable count.
    ok(unsafe { tessel_batch_step(batch, &mut running) });
    running
}

fn running(batch: *mut tessel_batch, slot: usize) -> bool {
    let mut running = false;
    // SAFETY: live batch, writable flag.
    ok(unsafe { tessel_batch_running(batch, slot, &mut running) });
    running
}

fn options(beam: usize) -> tessel_generate_options {
    tessel_generate_options {
        beam,
        ..tessel_generate_options_default()
    }
}

#[test]
fn a_batch_decodes_each_slot_as_a_session_does() {
    let model = numbers_model();
    let b = batch(model, 3);
    let texts = [
        "seven",
        "four hundred and twelve thousand and seven",
        "two million, three hundred thousand",
    ];
    let beams = [1, 3, 2];
    for (slot, text) in texts.iter().enumerate() {
        encode(b, slot, &ids(text));
        submit(b, slot, &options(beams[slot]));
    }
    let mut steps = 1;
    while step(b) > 0 {
        steps += 1;
    }
    assert!(steps > 1, "the batch ran {steps} steps");
    for (slot, text) in texts.iter().enumerate() {
        assert!(!running(b, slot));
        let want = alone(model, &ids(text), &options(beams[slot]));
        assert!(!want.is_empty());
        assert_eq!(found(b, slot), want, "slot {slot}: {text}");
    }
    // SAFETY: handles from this test, freed once.
    unsafe {
        ok(tessel_batch_free(b));
        ok(tessel_model_release(model));
    }
}

/// A step callback's record: the steps it saw and the token it forbids.
struct Watch {
    steps: usize,
    forbidden: u32,
}

/// Counts the step and sets the forbidden token's logit to `-INFINITY` in every row.
unsafe extern "C" fn forbid(user_data: *mut c_void, step: *mut tessel_step) {
    // SAFETY: `user_data` is the test's `Watch`; the logits are `beams × vocab` writable
    // floats during the call.
    let (watch, step) = unsafe { (&mut *user_data.cast::<Watch>(), &mut *step) };
    // SAFETY: as above.
    let logits = unsafe { std::slice::from_raw_parts_mut(step.logits, step.beams * step.vocab) };
    watch.steps += 1;
    for row in logits.chunks_mut(step.vocab) {
        row[watch.forbidden as usize] = f32::NEG_INFINITY;
    }
}

/// Options with `forbid` watching `watch`.
fn watched(beam: usize, watch: &mut Watch) -> tessel_generate_options {
    tessel_generate_options {
        on_step: Some(forbid),
        user_data: (watch as *mut Watch).cast(),
        ..options(beam)
    }
}

#[test]
fn a_slot_submitted_while_others_run_decodes_as_alone() {
    let model = numbers_model();
    let b = batch(model, 3);
    let long = ids("nine hundred ninety-nine million, eight hundred thousand and one");
    let short = ids("twelve");
    let middle = ids("three thousand and forty");
    let again = ids("sixty-six");
    let prefix = [1u32, 5];
    let with_prefix = tessel_generate_options {
        prefix: prefix.as_ptr(),
        prefix_len: prefix.len(),
        ..options(2)
    };
    encode(b, 0, &long);
    submit(b, 0, &options(3));
    encode(b, 1, &short);
    submit(b, 1, &options(1));
    assert_eq!(step(b), 2);
    // Slot 2 joins the running ones, with a step callback of its own.
    let mut watch = Watch {
        steps: 0,
        forbidden: 4,
    };
    encode(b, 2, &middle);
    submit(b, 2, &watched(2, &mut watch));
    assert!(running(b, 0) && running(b, 2));
    while running(b, 1) {
        step(b);
    }
    let short_found = found(b, 1);
    assert!(running(b, 0));
    // Slot 1 is reused for a new source with a forced start while the others still run.
    encode(b, 1, &again);
    submit(b, 1, &with_prefix);
    while step(b) > 0 {}
    let results = [found(b, 0), found(b, 1), found(b, 2)];
    // SAFETY: the batch from above, freed once.
    ok(unsafe { tessel_batch_free(b) });
    assert_eq!(short_found, alone(model, &short, &options(1)));
    assert_eq!(results[0], alone(model, &long, &options(3)));
    assert_eq!(results[1], alone(model, &again, &with_prefix));
    let mut alone_watch = Watch {
        steps: 0,
        forbidden: 4,
    };
    assert_eq!(
        results[2],
        alone(model, &middle, &watched(2, &mut alone_watch))
    );
    assert_eq!(watch.steps, alone_watch.steps);
    assert!(watch.steps > 0 && results.iter().all(|r| !r.is_empty()));
    assert!(results[2].iter().all(|(tokens, _)| !tokens.contains(&4)));
    // SAFETY: the model from above, released once.
    ok(unsafe { tessel_model_release(model) });
}

/// Asserts `status` is `want` and the last error mentions `says`.
#[track_caller]
fn refused(status: tessel_status, want: tessel_status, says: &str) {
    assert_eq!(status, want, "{}", last_error());
    let message = last_error();
    assert!(message.contains(says), "{message:?} lacks {says:?}");
}

/// Tries a re-entrant step into the batch `user_data` points to, recording its status there.
unsafe extern "C" fn reenter(user_data: *mut c_void, _: *mut tessel_step) {
    // SAFETY: `user_data` is the test's `Reentry`, alive for the search.
    let reentry = unsafe { &mut *user_data.cast::<Reentry>() };
    let mut running = 0;
    // SAFETY: a live batch whose call is in progress: refused as busy.
    reentry.status = Some(unsafe { tessel_batch_step(reentry.batch, &mut running) });
}

struct Reentry {
    batch: *mut tessel_batch,
    status: Option<tessel_status>,
}

/// Leaves no finite logit.
unsafe extern "C" fn poison(_: *mut c_void, step: *mut tessel_step) {
    // SAFETY: the logits are `beams × vocab` writable floats during the call.
    let logits =
        unsafe { std::slice::from_raw_parts_mut((*step).logits, (*step).beams * (*step).vocab) };
    logits.fill(f32::NAN);
}

#[test]
fn batch_creation_refusals_are_statuses_with_messages() {
    use tessel_status::*;
    let model = numbers_model();
    let s = session(model, None);
    let mut b = null_mut();
    let wide = tessel_limits {
        max_beam: 99,
        ..tessel_limits::default()
    };
    // SAFETY: NULL, live or wrong-kind handles and writable out-pointers; the bad ones are
    // refused.
    unsafe {
        refused(
            tessel_batch_new(null_mut(), null(), 2, &mut b),
            TESSEL_ERR_NULL,
            "NULL",
        );
        refused(
            tessel_batch_new(s.cast(), null(), 2, &mut b),
            TESSEL_ERR_HANDLE,
            "model",
        );
        refused(
            tessel_batch_new(model, null(), 2, null_mut()),
            TESSEL_ERR_NULL,
            "out",
        );
        for max_batch in [0, 1025] {
            let status = tessel_batch_new(model, null(), max_batch, &mut b);
            refused(status, TESSEL_ERR_ARGUMENT, "max_batch");
            assert!(b.is_null());
        }
        refused(
            tessel_batch_new(model, &wide, 2, &mut b),
            TESSEL_ERR_ARGUMENT,
            "max_beam",
        );
        ok(tessel_batch_new(model, &wide_threads(2), 2, &mut b));
        let (mut limits, mut max_batch) = (tessel_limits::default(), 0);
        ok(tessel_batch_get_limits(b, &mut limits, &mut max_batch));
        assert_eq!((limits.max_beam, limits.threads, max_batch), (4, 2, 2));
        refused(
            tessel_batch_free(s.cast()),
            TESSEL_ERR_HANDLE,
            "not a batch handle",
        );
        refused(
            tessel_session_free(b.cast()),
            TESSEL_ERR_HANDLE,
            "not a session handle",
        );
        ok(tessel_batch_free(b));
        ok(tessel_batch_free(null_mut()));
        ok(tessel_session_free(s));
        ok(tessel_model_release(model));
    }
}

fn wide_threads(threads: usize) -> tessel_limits {
    tessel_limits {
        threads,
        ..tessel_limits::default()
    }
}

#[test]
fn batch_misuse_is_a_status_with_a_message_and_the_batch_stays_usable() {
    use tessel_status::*;
    let model = numbers_model();
    let s = session(model, None);
    let b = batch(model, 2);
    let src = ids("forty two");
    let (mut count, mut running, mut flag) = (7usize, 7usize, false);
    let (mut tokens, mut len) = ([0u32; 1], 0usize);
    // SAFETY: every pointer is NULL, a live handle, a handle of another kind, or a valid
    // array; the library must refuse the bad ones.
    unsafe {
        let status = tessel_batch_encode(null_mut(), 0, src.as_ptr(), src.len());
        refused(status, TESSEL_ERR_NULL, "batch handle is NULL");
        let status = tessel_batch_encode(s.cast(), 0, src.as_ptr(), src.len());
        refused(status, TESSEL_ERR_HANDLE, "not a batch handle");
        let status = tessel_encode(b.cast(), src.as_ptr(), src.len());
        refused(status, TESSEL_ERR_HANDLE, "not a session handle");
        let status = tessel_batch_encode(b, 2, src.as_ptr(), src.len());
        refused(
            status,
            TESSEL_ERR_ARGUMENT,
            "slot 2 outside the batch's 2 slots",
        );
        refused(tessel_batch_encode(b, 0, null(), 3), TESSEL_ERR_NULL, "ids");
        let status = tessel_batch_encode(b, 0, [5u32, 9999].as_ptr(), 2);
        refused(status, TESSEL_ERR_RUN, "9999");
        refused(
            tessel_batch_submit(b, 0, null()),
            TESSEL_ERR_RUN,
            "no encoded source",
        );
        refused(
            tessel_batch_submit(b, 5, null()),
            TESSEL_ERR_ARGUMENT,
            "slot 5",
        );
        refused(
            tessel_batch_step(b, &mut running),
            TESSEL_ERR_RUN,
            "no slot is running",
        );
        assert_eq!(running, 0);
        refused(tessel_batch_step(b, null_mut()), TESSEL_ERR_NULL, "running");
        refused(
            tessel_batch_running(b, 2, &mut flag),
            TESSEL_ERR_ARGUMENT,
            "slot 2",
        );
        refused(
            tessel_batch_running(b, 0, null_mut()),
            TESSEL_ERR_NULL,
            "running",
        );
        ok(tessel_batch_encode(b, 0, src.as_ptr(), src.len()));
        let status = tessel_batch_finished(b, 0, &mut count);
        refused(status, TESSEL_ERR_RUN, "no finished search");
        assert_eq!(count, 0);
        refused(
            tessel_batch_submit(b, 0, &options(99)),
            TESSEL_ERR_RUN,
            "beam width 99",
        );
        let far = tessel_generate_options {
            max_steps: 99,
            ..options(1)
        };
        refused(
            tessel_batch_submit(b, 0, &far),
            TESSEL_ERR_RUN,
            "max_tgt_len",
        );
        // A search that re-enters the batch from its step callback: refused as busy.
        let mut reentry = Reentry {
            batch: b,
            status: None,
        };
        let reentrant = tessel_generate_options {
            on_step: Some(reenter),
            user_data: (&mut reentry as *mut Reentry).cast(),
            ..options(2)
        };
        ok(tessel_batch_submit(b, 0, &reentrant));
        refused(
            tessel_batch_submit(b, 0, null()),
            TESSEL_ERR_RUN,
            "still running",
        );
        let status = tessel_batch_encode(b, 0, src.as_ptr(), src.len());
        refused(status, TESSEL_ERR_RUN, "still running");
        let status = tessel_batch_finished(b, 0, &mut count);
        refused(status, TESSEL_ERR_RUN, "still running");
        ok(tessel_batch_running(b, 0, &mut flag));
        assert!(flag);
        // Slot 1's callback leaves nothing finite: it alone ends, blamed on the callback.
        ok(tessel_batch_encode(b, 1, src.as_ptr(), src.len()));
        let poisoned = tessel_generate_options {
            on_step: Some(poison),
            ..options(3)
        };
        ok(tessel_batch_submit(b, 1, &poisoned));
        while {
            ok(tessel_batch_step(b, &mut running));
            running > 0
        } {}
        assert_eq!(reentry.status, Some(TESSEL_ERR_BUSY));
        let status = tessel_batch_finished(b, 1, &mut count);
        refused(
            status,
            TESSEL_ERR_ARGUMENT,
            "after the step callback: every logit",
        );
        ok(tessel_batch_finished(b, 0, &mut count));
        assert!(count >= 1);
        let want = alone(model, &src, &options(2));
        assert_eq!(found(b, 0), want);
        let status =
            tessel_batch_hypothesis(b, 0, count, tokens.as_mut_ptr(), 1, &mut len, null_mut());
        refused(status, TESSEL_ERR_ARGUMENT, "index");
        let status =
            tessel_batch_hypothesis(b, 0, 0, tokens.as_mut_ptr(), 1, null_mut(), null_mut());
        refused(status, TESSEL_ERR_NULL, "len");
        if want[0].0.len() > 1 {
            let status =
                tessel_batch_hypothesis(b, 0, 0, tokens.as_mut_ptr(), 1, &mut len, null_mut());
            refused(status, TESSEL_ERR_BUFFER_TOO_SMALL, "too small");
            assert_eq!(len, want[0].0.len());
        }
        // The batch stays usable: slot 1 searches again, without a callback.
        submit(b, 1, &options(1));
        while step(b) > 0 {}
        assert_eq!(found(b, 1), alone(model, &src, &options(1)));
        ok(tessel_batch_free(b));
        ok(tessel_session_free(s));
        ok(tessel_model_release(model));
    }
}
