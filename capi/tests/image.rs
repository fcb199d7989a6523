//! Packed images through the C API: `tessel_model_load_file` and `tessel_model_load` read a
//! file `tessel pack` writes, `tessel_model_load_memory` reads one in place from caller memory
//! (allocating far less than the weights: no copy), and each gives the logits of the model it
//! was packed from. Refusals are typed: a misaligned block, a truncated or foreign image, a
//! directory given as a file and a file given as a directory, NULL pointers.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use ::tessel_model::aligned::AlignedBuf;
use tessel::*;
use tessel_numbers::Numbers;

#[path = "suite/common/mod.rs"]
mod common;
use common::{last_error, ok, step_from};
use tessel_tests::counting::{allocated_bytes, ThreadCounting};

#[global_allocator]
static GLOBAL: ThreadCounting = ThreadCounting;

/// The embedded numbers model's packed image.
fn numbers_image() -> Vec<u8> {
    let (model, _) = Numbers::embedded().expect("embedded").into_parts();
    model.pack().expect("packs")
}

/// `bytes` copied into a 64-byte aligned buffer (with `skew` bytes before them).
fn aligned(bytes: &[u8], skew: usize) -> AlignedBuf<u8> {
    let mut buf = AlignedBuf::<u8>::zeros(bytes.len() + skew).expect("allocates");
    buf.as_mut_slice()[skew..].copy_from_slice(bytes);
    buf
}

/// `bytes` written to a file of this test's own.
fn write_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-image-{name}"));
    std::fs::write(&path, bytes).expect("writes the file");
    path
}

fn c_path(path: &Path) -> CString {
    CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL")
}

/// The first decoder step's logits from BOS over the ids of "forty two", through the C API.
fn first_logits(model: *mut tessel_model) -> Vec<f32> {
    let (_, vocab) = Numbers::embedded().expect("embedded").into_parts();
    let mut ids = Vec::new();
    vocab.encode_into("forty two", &mut ids).expect("encodes");
    let mut info = tessel_model_info::default();
    let mut session = null_mut();
    // SAFETY: live handles, valid arrays and out-pointers.
    unsafe {
        ok(tessel_model_get_info(model, &mut info));
        ok(tessel_session_new(model, null(), &mut session));
        ok(tessel_encode(session, ids.as_ptr(), ids.len()));
        let mut logits = vec![0f32; info.tgt_vocab];
        step_from(session, info.bos_id, &mut logits);
        ok(tessel_session_free(session));
        logits
    }
}

fn numbers_logits() -> Vec<f32> {
    let mut model = null_mut();
    // SAFETY: a writable out-pointer.
    ok(unsafe { tessel_model_load_numbers(&mut model) });
    let logits = first_logits(model);
    // SAFETY: the handle's one reference.
    ok(unsafe { tessel_model_release(model) });
    logits
}

#[test]
fn an_image_file_loads_and_equals_the_packed_model() {
    let want = numbers_logits();
    let path = write_file("numbers.tessel", &numbers_image());
    let c = c_path(&path);
    // SAFETY: NUL-terminated paths, writable out-pointers, handles released once.
    unsafe {
        let mut model = null_mut();
        ok(tessel_model_load_file(c.as_ptr(), &mut model));
        assert_eq!(first_logits(model), want);
        ok(tessel_model_release(model));
        // The detecting call reads the same file, and a directory.
        let mut model = null_mut();
        ok(tessel_model_load(c.as_ptr(), null(), &mut model));
        assert_eq!(first_logits(model), want);
        ok(tessel_model_release(model));
        let dir = c_path(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/numbers"));
        let mut model = null_mut();
        ok(tessel_model_load(dir.as_ptr(), null(), &mut model));
        assert_eq!(first_logits(model), want);
        ok(tessel_model_release(model));
    }
}

#[test]
fn wrong_kinds_of_path_are_load_errors() {
    let image = write_file("kinds.tessel", &numbers_image());
    let garbage = write_file("garbage.bin", &[b'x'; 100]);
    let mut truncated_bytes = numbers_image();
    truncated_bytes.truncate(truncated_bytes.len() - 1);
    let truncated = write_file("truncated.tessel", &truncated_bytes);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/numbers");
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-image-missing");
    type Load = fn(&CString, &mut *mut tessel_model) -> tessel_status;
    // SAFETY: a NUL-terminated path and a writable out-pointer.
    let by_dir: Load = |p, out| unsafe { tessel_model_load_dir(p.as_ptr(), null(), out) };
    // SAFETY: as above.
    let by_file: Load = |p, out| unsafe { tessel_model_load_file(p.as_ptr(), out) };
    // SAFETY: as above.
    let by_any: Load = |p, out| unsafe { tessel_model_load(p.as_ptr(), null(), out) };
    let cases: [(Load, &Path, &str); 8] = [
        (by_dir, &image, "packed image file"),
        (by_file, &dir, "a directory"),
        (by_file, &garbage, "magic"),
        (by_file, &truncated, "truncated"),
        (by_file, &missing, "No such file"),
        (by_any, &garbage, "neither a model directory nor"),
        (by_any, &missing, "no such file"),
        (by_dir, &missing, "no such file or directory"),
    ];
    for (load, path, message) in cases {
        let mut model = std::ptr::dangling_mut::<tessel_model>();
        let status = load(&c_path(path), &mut model);
        assert_eq!(status, tessel_status::TESSEL_ERR_LOAD, "{}", path.display());
        assert!(model.is_null());
        assert!(last_error().contains(message), "{}", last_error());
    }
    // SAFETY: NULL pointers, which the calls refuse.
    unsafe {
        let mut model = null_mut();
        let status = tessel_model_load_file(null(), &mut model);
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = tessel_model_load(c_path(&image).as_ptr(), null(), null_mut());
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
    }
}

#[test]
fn a_memory_block_is_read_in_place() {
    let want = numbers_logits();
    let image = numbers_image();
    let block = aligned(&image, 0);
    let mut model = null_mut();
    let bytes = allocated_bytes(|| {
        // SAFETY: an aligned image that outlives the model (released below); a writable
        // out-pointer.
        ok(unsafe { tessel_model_load_memory(block.as_slice().as_ptr(), image.len(), &mut model) })
    });
    // The layers' descriptors only: a small fraction of the image, no copy of the weights.
    assert!(
        bytes * 8 < image.len(),
        "{bytes} bytes allocated for a {}-byte image",
        image.len()
    );
    assert_eq!(first_logits(model), want);
    let mut info = tessel_model_info::default();
    // SAFETY: a live handle, a writable struct, then the handle's one reference released.
    unsafe {
        ok(tessel_model_get_info(model, &mut info));
        assert!(!info.has_text_vocab);
        // A session keeps the model (and needs the block) after the caller's release.
        let mut session = null_mut();
        ok(tessel_session_new(model, null(), &mut session));
        ok(tessel_model_release(model));
        let ids = [1u32, 2];
        ok(tessel_encode(session, ids.as_ptr(), ids.len()));
        ok(tessel_session_free(session));
    }
    drop(block);
}

#[test]
fn bad_memory_blocks_get_typed_statuses() {
    let image = numbers_image();
    let skewed = aligned(&image, 8);
    let whole = aligned(&image, 0);
    let mut garbage = whole.as_slice().to_vec();
    garbage[..8].copy_from_slice(b"NOTTESSE");
    let garbage = aligned(&garbage, 0);
    let cases: [(*const u8, usize, tessel_status, &str); 5] = [
        (
            skewed.as_slice()[8..].as_ptr(),
            image.len(),
            tessel_status::TESSEL_ERR_MISALIGNED,
            "aligned",
        ),
        (
            whole.as_slice().as_ptr(),
            image.len() - 64,
            tessel_status::TESSEL_ERR_LOAD,
            "truncated",
        ),
        (
            whole.as_slice().as_ptr(),
            10,
            tessel_status::TESSEL_ERR_LOAD,
            "truncated",
        ),
        (
            garbage.as_slice().as_ptr(),
            image.len(),
            tessel_status::TESSEL_ERR_LOAD,
            "magic",
        ),
        (null(), 64, tessel_status::TESSEL_ERR_NULL, "NULL"),
    ];
    for (data, len, status, message) in cases {
        let mut model = std::ptr::dangling_mut::<tessel_model>();
        // SAFETY: `data` is NULL or points to at least `len` readable bytes.
        let got = unsafe { tessel_model_load_memory(data, len, &mut model) };
        assert_eq!(got, status, "{message}: {}", last_error());
        assert!(model.is_null());
        assert!(last_error().contains(message), "{}", last_error());
    }
    // SAFETY: a valid block and a NULL out-pointer, which the call refuses.
    let got =
        unsafe { tessel_model_load_memory(whole.as_slice().as_ptr(), image.len(), null_mut()) };
    assert_eq!(got, tessel_status::TESSEL_ERR_NULL);
}

/// `image` with the first value of directory slot `slot` set to NaN (in its own type).
fn poisoned(image: &[u8], slot: usize) -> Vec<u8> {
    use ::tessel_model::load::image::{ImageHeader, Kind, TensorRecord, RECORD_BYTES};
    let header = ImageHeader::read(image).expect("a valid image");
    let at = header.directory + slot * RECORD_BYTES;
    let bytes: &[u8; RECORD_BYTES] = image[at..at + RECORD_BYTES].try_into().expect("a record");
    let record = TensorRecord::from_bytes(bytes).expect("a record");
    let nan: &[u8] = match record.kind {
        Kind::F32 => &f32::NAN.to_le_bytes(),
        Kind::F16 => &0x7E00u16.to_le_bytes(),
        Kind::Bf16 => &0x7FC0u16.to_le_bytes(),
        kind => panic!("slot {slot} holds {kind:?}, not floats"),
    };
    let mut out = image.to_vec();
    let offset = record.offset as usize;
    out[offset..offset + nan.len()].copy_from_slice(nan);
    out
}

#[test]
fn a_non_finite_value_in_any_float_tensor_is_refused_with_its_name() {
    let image = numbers_image();
    let header = ::tessel_model::load::image::ImageHeader::read(&image).expect("valid");
    // The source table (f32), and the first decoder block's QKV weight (packed, f16 here).
    let qkv = 8 + 22 * header.config.encoder_layers + 3 + 2;
    for (slot, name) in [
        (0, "source embedding table"),
        (qkv, "decoder block 0 self-attention qkv weight"),
    ] {
        let bad = poisoned(&image, slot);
        let path = write_file(&format!("nan-{slot}.tessel"), &bad);
        let path = c_path(&path);
        let block = aligned(&bad, 0);
        let (mut from_file, mut from_memory) = (null_mut(), null_mut());
        // SAFETY: a NUL-terminated path, `bad.len()` readable bytes, writable out-pointers.
        let statuses = unsafe {
            [
                tessel_model_load_file(path.as_ptr(), &mut from_file),
                tessel_model_load_memory(block.as_slice().as_ptr(), bad.len(), &mut from_memory),
            ]
        };
        for status in statuses {
            assert_eq!(status, tessel_status::TESSEL_ERR_LOAD, "{name}");
        }
        assert!(last_error().contains(name), "{}", last_error());
        assert!(from_file.is_null() && from_memory.is_null());
    }
}

#[test]
fn a_packed_ctranslate2_whisper_keeps_its_1500_encoder_positions() {
    use ::tessel_model::load::ct2::{self, Ct2Options};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcribe/tiny_en_32/model");
    // What `tessel pack` loads a CTranslate2 directory with.
    let model = ct2::load_dir(&dir, Ct2Options::default())
        .expect("loads")
        .model;
    let image = aligned(&model.pack().expect("packs"), 0);
    let mut loaded = null_mut();
    let mut info = tessel_model_info::default();
    let mut session = null_mut();
    // SAFETY: the aligned image outlives the model (released below, before it drops).
    unsafe {
        ok(tessel_model_load_memory(
            image.as_slice().as_ptr(),
            image.len(),
            &mut loaded,
        ));
        ok(tessel_model_get_info(loaded, &mut info));
        assert_eq!(info.max_src_len, 1500);
        // A whole 30 s window: 3000 frames.
        let mel = vec![0.1f32; info.n_mels * 3000];
        ok(tessel_session_new(loaded, null(), &mut session));
        ok(tessel_encode_audio(session, mel.as_ptr(), mel.len()));
        ok(tessel_session_free(session));
        ok(tessel_model_release(loaded));
    }
}
