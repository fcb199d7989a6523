//! The C API under arbitrary call sequences, called as C calls it: the numbers model and a
//! tiny random model (with a step callback that edits logits and reads tokens), ids out of
//! range, lengths over the limits, NULL pointers, buffers too small, handles of the wrong
//! kind, odd search options (NaN penalties, bad prefixes), arbitrary text bytes. Every call
//! returns a status and never `TESSEL_ERR_PANIC`; a failure leaves a message; a buffer too
//! small reports a size above its capacity; what a successful call writes is in range.
//!
//! And `tessel_model_load_memory` on a packed image in memory: arbitrary bytes, the numbers
//! model's image with bytes changed at arbitrary offsets, or a valid image at a misaligned
//! address. Each is refused with a status, or loads a model that a session then runs.
#![no_main]

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel::*;
use tessel_fuzz::tiny_config;

#[derive(Arbitrary, Debug)]
enum Call {
    Encode {
        ids: Vec<u8>,
        null_ids: bool,
    },
    DecodeStep {
        tokens: Vec<u8>,
        cap: u8,
        null_len: bool,
    },
    Reorder(Vec<u8>),
    Reset,
    Generate {
        beam: u8,
        max_steps: u8,
        length_penalty: i8,
        nan_penalty: bool,
        stop_at_eos: bool,
        prefix: Option<Vec<u8>>,
        callback: bool,
    },
    Hypothesis {
        index: u8,
        cap: u8,
    },
    Read {
        text: Vec<u8>,
        cap: u8,
    },
    WrongHandle,
}

/// A memory block for `tessel_model_load_memory`.
#[derive(Arbitrary, Debug)]
enum Image {
    /// Arbitrary bytes.
    Raw(Vec<u8>),
    /// The numbers model's image with `(offset, xor)` changes and a new length.
    Mutated(Vec<(u32, u8)>, Option<u32>),
    /// The valid image `skew` bytes past a 64-byte boundary.
    Skewed(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    image: Option<Image>,
    numbers: bool,
    limits: (u8, u8, u8),
    calls: Vec<Call>,
}

/// A model handle shared by every input (the handle is `Send + Sync`; the pointer is kept as
/// an address).
fn model(numbers: bool) -> *mut tessel_model {
    static MODELS: OnceLock<[usize; 2]> = OnceLock::new();
    let models = MODELS.get_or_init(|| {
        let mut numbers = null_mut();
        // SAFETY: a writable out-pointer.
        let status = unsafe { tessel_model_load_numbers(&mut numbers) };
        assert_eq!(status, tessel_status::TESSEL_OK);
        let tiny = ::tessel_model::Model::random(tiny_config(3), 11).expect("tiny model");
        [numbers as usize, model_handle(tiny) as usize]
    });
    models[usize::from(!numbers)] as *mut tessel_model
}

/// Ids mostly in a vocabulary of 11, sometimes past it or far beyond.
fn ids(bytes: &[u8]) -> Vec<u32> {
    bytes
        .iter()
        .map(|&b| match b {
            0..=239 => u32::from(b % 11),
            240..=254 => u32::from(b),
            255 => u32::MAX,
        })
        .collect()
}

/// Forbids token 3 in every row and reads every hypothesis's tokens.
unsafe extern "C" fn on_step(_user_data: *mut c_void, step: *mut tessel_step) {
    // SAFETY: tessel passes a step valid during the call.
    let step = unsafe { &mut *step };
    for beam in 0..step.beams {
        let (mut tokens, mut len) = (null(), 0);
        // SAFETY: the callback's step and writable out-pointers.
        let status = unsafe { tessel_step_tokens(step, beam, &mut tokens, &mut len) };
        assert_eq!(status, tessel_status::TESSEL_OK);
        assert_eq!(len, step.step);
        if step.vocab > 3 {
            // SAFETY: the logits hold `beams × vocab` writable floats during the call.
            unsafe { *step.logits.add(beam * step.vocab + 3) = f32::NEG_INFINITY };
        }
    }
}

fn check(status: tessel_status) {
    assert_ne!(status, tessel_status::TESSEL_ERR_PANIC);
    if status != tessel_status::TESSEL_OK {
        // SAFETY: a NUL-terminated thread-owned string.
        let message = unsafe { CStr::from_ptr(tessel_last_error()) };
        assert!(!message.is_empty(), "{status:?} without a message");
    }
}

/// The numbers model's packed image.
fn numbers_image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let (model, _) = tessel_numbers::Numbers::embedded()
            .expect("embedded")
            .into_parts();
        model.pack().expect("packs")
    })
}

/// Loads `image` from memory; a model that loads runs one short search.
fn load_memory(image: &Image) {
    let (bytes, skew) = match image {
        Image::Raw(bytes) => (bytes.clone(), 0),
        Image::Mutated(changes, len) => {
            let mut bytes = numbers_image().to_vec();
            for &(at, xor) in changes {
                let n = bytes.len();
                bytes[at as usize % n] ^= xor;
            }
            if let Some(len) = len {
                bytes.truncate(*len as usize % (bytes.len() + 1));
            }
            (bytes, 0)
        }
        Image::Skewed(skew) => (numbers_image().to_vec(), usize::from(*skew % 64)),
    };
    let mut block =
        ::tessel_model::aligned::AlignedBuf::<u8>::zeros(bytes.len() + skew).expect("allocates");
    block.as_mut_slice()[skew..].copy_from_slice(&bytes);
    let data = block.as_slice()[skew..].as_ptr();
    let mut model = null_mut();
    // SAFETY: `bytes.len()` readable bytes at `data`, alive until after the release below.
    let status = unsafe { tessel_model_load_memory(data, bytes.len(), &mut model) };
    check(status);
    if skew != 0 {
        assert_eq!(status, tessel_status::TESSEL_ERR_MISALIGNED);
    }
    if status != tessel_status::TESSEL_OK {
        assert!(model.is_null());
        return;
    }
    let limits = tessel_limits {
        max_src_len: 8,
        max_tgt_len: 4,
        max_beam: 1,
        threads: 1,
    };
    let (mut session, mut count) = (null_mut(), 0);
    // SAFETY: a live model, valid limits and out-pointers; each handle freed once.
    unsafe {
        let status = tessel_session_new(model, &limits, &mut session);
        check(status);
        if status == tessel_status::TESSEL_OK {
            check(tessel_encode(session, [1u32, 2].as_ptr(), 2));
            check(tessel_generate(session, null(), &mut count));
            check(tessel_session_free(session));
        }
        check(tessel_model_release(model));
    }
    drop(block);
}

fuzz_target!(|input: Input| {
    if let Some(image) = &input.image {
        load_memory(image);
        return;
    }
    let model = model(input.numbers);
    let mut info = tessel_model_info::default();
    // SAFETY: a live handle and a writable out-pointer.
    check(unsafe { tessel_model_get_info(model, &mut info) });
    let (src, tgt, beam) = input.limits;
    let limits = tessel_limits {
        max_src_len: usize::from(src % 40),
        max_tgt_len: usize::from(tgt % 16),
        max_beam: usize::from(beam % 6),
        threads: 1,
    };
    let mut session = null_mut();
    // SAFETY: live handle, valid limits, writable out-pointer.
    let status = unsafe { tessel_session_new(model, &limits, &mut session) };
    check(status);
    if status != tessel_status::TESSEL_OK {
        assert!(session.is_null());
        return;
    }
    let mut logits = vec![0f32; 256];
    let mut tokens = vec![0u32; 256];
    for call in input.calls.iter().take(24) {
        // SAFETY: every pointer is NULL (on purpose), a live handle, or a buffer at least as
        // long as the length passed with it.
        unsafe {
            match call {
                Call::Encode {
                    ids: bytes,
                    null_ids,
                } => {
                    let src = ids(bytes);
                    let ptr = if *null_ids { null() } else { src.as_ptr() };
                    check(tessel_encode(session, ptr, src.len()));
                }
                Call::DecodeStep {
                    tokens: bytes,
                    cap,
                    null_len,
                } => {
                    let step = ids(bytes);
                    let cap = usize::from(*cap);
                    let mut len = 0;
                    let len_ptr = if *null_len {
                        null_mut()
                    } else {
                        &mut len as *mut usize
                    };
                    let status = tessel_decode_step(
                        session,
                        step.as_ptr(),
                        step.len(),
                        logits.as_mut_ptr(),
                        cap,
                        len_ptr,
                    );
                    check(status);
                    if status == tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL {
                        assert!(len > cap);
                    }
                    if status == tessel_status::TESSEL_OK {
                        assert_eq!(len, step.len() * info.tgt_vocab);
                    }
                }
                Call::Reorder(bytes) => {
                    let parents: Vec<u32> = bytes.iter().map(|&b| u32::from(b % 8)).collect();
                    check(tessel_reorder_beams(
                        session,
                        parents.as_ptr(),
                        parents.len(),
                    ));
                }
                Call::Reset => check(tessel_reset_decoder(session)),
                Call::Generate {
                    beam,
                    max_steps,
                    length_penalty,
                    nan_penalty,
                    stop_at_eos,
                    prefix,
                    callback,
                } => {
                    let prefix = prefix.as_deref().map(ids);
                    let options = tessel_generate_options {
                        beam: usize::from(*beam % 8),
                        max_steps: usize::from(*max_steps % 20),
                        length_penalty: if *nan_penalty {
                            f32::NAN
                        } else {
                            f32::from(*length_penalty) / 16.0
                        },
                        stop_at_eos: *stop_at_eos,
                        prefix: prefix.as_ref().map_or(null(), |p| p.as_ptr()),
                        prefix_len: prefix.as_ref().map_or(0, Vec::len),
                        on_step: if *callback { Some(on_step) } else { None },
                        user_data: null_mut(),
                    };
                    let mut count = usize::MAX;
                    let status = tessel_generate(session, &options, &mut count);
                    check(status);
                    if status == tessel_status::TESSEL_OK {
                        assert!(count >= 1 && count <= options.beam);
                    } else {
                        assert_eq!(count, 0);
                    }
                }
                Call::Hypothesis { index, cap } => {
                    let (cap, mut len, mut score) = (usize::from(*cap), 0, 0f32);
                    let status = tessel_hypothesis(
                        session,
                        usize::from(*index % 8),
                        tokens.as_mut_ptr(),
                        cap,
                        &mut len,
                        &mut score,
                    );
                    check(status);
                    if status == tessel_status::TESSEL_OK {
                        assert!(tokens[..len].iter().all(|&t| (t as usize) < info.tgt_vocab));
                    }
                    if status == tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL {
                        assert!(len > cap);
                    }
                }
                Call::Read { text, cap } => {
                    let text: Vec<u8> = text.iter().copied().filter(|&b| b != 0).collect();
                    let text = CString::new(text).expect("no NUL");
                    let (cap, mut len) = (usize::from(*cap % 24), 0);
                    let mut out = vec![0 as c_char; cap];
                    let status = tessel_numbers_read(
                        session,
                        text.as_ptr(),
                        out.as_mut_ptr(),
                        cap,
                        &mut len,
                    );
                    check(status);
                    if status == tessel_status::TESSEL_OK {
                        assert!(input.numbers && len < cap && out[len] == 0);
                    }
                }
                Call::WrongHandle => {
                    let status = tessel_encode(model.cast(), null(), 0);
                    assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
                    let status = tessel_model_get_info(session.cast(), &mut info);
                    assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
                }
            }
        }
    }
    // SAFETY: the session from above, freed once.
    check(unsafe { tessel_session_free(session) });
});
