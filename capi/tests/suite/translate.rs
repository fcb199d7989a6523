//! `tessel_translate` on the random-weight Marian and NLLB directories of `tests/decoding/`
//! (the fixtures of pipeline/tests/suite/translate_golden.rs): the text of the Python pipeline
//! (`expected.json`) and of the Rust [`Translator`], line by line; a buffer too small reports
//! the length and the retry copies the kept text; bad paths, languages, models, handles and
//! NULL pointers are typed statuses. `tessel_translate_batch` gives each line the text
//! `tessel_translate` gives it, in input order, whatever `max_batch`.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use serde_json::Value;
use tessel::*;
use tessel_kernels::isa::Isa;
use tessel_pipeline::{LoadSettings, Translator};

use crate::common;
use common::{last_error, ok, refused_load};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fixture's model directory; Marian's gets the source SentencePiece model copied in, as
/// the pipeline's test does.
fn model_dir(name: &str) -> PathBuf {
    let hf = root().join("tests/decoding").join(name).join("hf");
    if name != "marian" {
        return hf;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-translate-marian");
    std::fs::create_dir_all(&dir).expect("creates the directory");
    for entry in std::fs::read_dir(&hf).expect("reads the fixture") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("a name"))).expect("copies");
    }
    let spm = root().join("text/tests/fixtures/spm/unigram.model");
    std::fs::copy(spm, dir.join("source.spm")).expect("copies source.spm");
    dir
}

fn expected(name: &str) -> Value {
    let path = root()
        .join("tests/decoding")
        .join(name)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reads")).expect("parses")
}

fn c(text: &str) -> CString {
    CString::new(text).expect("no NUL")
}

fn load(dir: &Path, src: Option<&CString>, tgt: Option<&CString>) -> *mut tessel_translator {
    let options = tessel_translate_options {
        source_lang: src.map_or(null(), |s| s.as_ptr()),
        target_lang: tgt.map_or(null(), |s| s.as_ptr()),
        ..tessel_translate_options_default()
    };
    let path = c(dir.to_str().expect("UTF-8"));
    let mut translator = null_mut();
    // SAFETY: NUL-terminated strings, valid options, a writable out-pointer.
    ok(unsafe { tessel_translator_load(path.as_ptr(), &options, &mut translator) });
    translator
}

/// `text` translated through C, with a buffer of `cap` bytes.
fn translate(
    translator: *mut tessel_translator,
    text: &str,
    cap: usize,
) -> Result<String, (tessel_status, usize)> {
    let text = c(text);
    let mut out = vec![0u8; cap];
    let mut len = usize::MAX;
    // SAFETY: a live translator, a NUL-terminated text, `cap` writable bytes.
    let status = unsafe {
        tessel_translate(
            translator,
            text.as_ptr(),
            out.as_mut_ptr().cast::<c_char>(),
            cap,
            &mut len,
        )
    };
    if status != tessel_status::TESSEL_OK {
        return Err((status, len));
    }
    assert_eq!(out[len], 0, "NUL-terminated");
    Ok(String::from_utf8(out[..len].to_vec()).expect("UTF-8"))
}

#[test]
fn translations_equal_the_python_and_rust_pipelines() {
    for name in ["marian", "nllb"] {
        let dir = model_dir(name);
        let expected = expected(name);
        let lang = |k: &str| expected["languages"][k].as_str().map(str::to_owned);
        let (src, tgt) = (lang("src_lang"), lang("tgt_lang"));
        let (c_src, c_tgt) = (src.as_deref().map(c), tgt.as_deref().map(c));
        let translator = load(&dir, c_src.as_ref(), c_tgt.as_ref());
        let rust = Translator::load(
            &dir,
            LoadSettings::default(),
            src.as_deref(),
            tgt.as_deref(),
        )
        .expect("the Rust translator loads");
        let mut isa_name: *const c_char = null();
        // SAFETY: a writable out-pointer; the name is static.
        ok(unsafe { tessel_isa_name(&mut isa_name) });
        // SAFETY: a static NUL-terminated name.
        let isa = unsafe { CStr::from_ptr(isa_name) }.to_str().expect("ASCII");
        let mut session = rust
            .session(Isa::from_name(isa).expect("a level"), 1)
            .expect("a Rust session");
        for line in expected["pipeline"].as_array().expect("lines") {
            let text = line["text"].as_str().expect("text");
            let got = translate(translator, text, 4096).expect("translates");
            assert_eq!(
                got,
                line["output"].as_str().expect("output"),
                "{name}: {text:?}"
            );
            assert_eq!(
                got,
                session.translate(text).expect("Rust translates"),
                "{name}"
            );
        }
        // An empty source (the family's special tokens alone) as the Rust path has it.
        let empty = session.translate("").expect("Rust translates");
        assert_eq!(translate(translator, "", 4096).expect("translates"), empty);
        // SAFETY: the translator from above, freed once.
        ok(unsafe { tessel_translator_free(translator) });
    }
}

#[test]
fn small_buffers_keep_the_text_and_errors_are_typed() {
    let dir = model_dir("nllb");
    let (src, tgt) = (c("eng_Latn"), c("fra_Latn"));
    let translator = load(&dir, Some(&src), Some(&tgt));
    let text = "Hello world";
    let want = translate(translator, text, 4096).expect("translates");
    assert!(!want.is_empty());
    // Too small: the length is reported, and the same text is copied on the retry.
    assert_eq!(
        translate(translator, text, want.len()),
        Err((tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL, want.len()))
    );
    assert_eq!(
        translate(translator, text, want.len() + 1).as_deref(),
        Ok(&*want)
    );
    // A source over the model's 64 positions is refused (no truncation asked for).
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    let (status, _) = translate(translator, &long, 4096).expect_err("too long");
    assert_eq!(status, tessel_status::TESSEL_ERR_ARGUMENT);
    assert!(last_error().contains("64"), "{}", last_error());
    let mut len = 0;
    let mut out = [0 as c_char; 8];
    // SAFETY: NULL pointers and a handle of another kind, which the calls refuse; the
    // translator is freed once.
    unsafe {
        let status = tessel_translate(translator, null(), out.as_mut_ptr(), 8, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = tessel_translate(translator, c"a".as_ptr(), out.as_mut_ptr(), 8, null_mut());
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let status = tessel_translate(null_mut(), c"a".as_ptr(), out.as_mut_ptr(), 8, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_NULL);
        let mut model = null_mut();
        ok(tessel_model_load_numbers(&mut model));
        let status = tessel_translate(model.cast(), c"a".as_ptr(), out.as_mut_ptr(), 8, &mut len);
        assert_eq!(status, tessel_status::TESSEL_ERR_HANDLE);
        ok(tessel_model_release(model));
        ok(tessel_translator_free(translator));
        ok(tessel_translator_free(null_mut()));
    }
    // Loading: a missing directory, an unknown language, a speech model.
    let whisper = root().join("tests/whisper/tiny_like_80/hf");
    let fake = c("xx_Fake");
    let cases = [
        (
            root().join("tests/missing"),
            None,
            tessel_status::TESSEL_ERR_LOAD,
        ),
        (dir.clone(), Some(&fake), tessel_status::TESSEL_ERR_ARGUMENT),
        (whisper, None, tessel_status::TESSEL_ERR_UNSUPPORTED),
    ];
    for (path, target, status) in cases {
        let options = tessel_translate_options {
            target_lang: target.map_or(null(), |t| t.as_ptr()),
            ..tessel_translate_options_default()
        };
        let path = c(path.to_str().expect("UTF-8"));
        let mut translator = std::ptr::dangling_mut();
        // SAFETY: NUL-terminated strings, valid options, a writable out-pointer.
        let got = unsafe { tessel_translator_load(path.as_ptr(), &options, &mut translator) };
        assert_eq!(got, status, "{:?}: {}", path, last_error());
        assert!(translator.is_null());
    }
}

/// A copy of the fixture directory `from` whose `generation_config.json` asks for `num_beams`.
fn with_num_beams(from: &Path, name: &str, num_beams: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-beams-{name}"));
    std::fs::create_dir_all(&dir).expect("creates the directory");
    for entry in std::fs::read_dir(from).expect("reads the fixture") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("a name"))).expect("copies");
    }
    let path = dir.join("generation_config.json");
    let text = std::fs::read_to_string(&path).expect("reads the generation config");
    let mut config: Value = serde_json::from_str(&text).expect("parses");
    config["num_beams"] = num_beams.into();
    std::fs::write(&path, config.to_string()).expect("writes the generation config");
    dir
}

#[test]
fn default_options_plan_for_the_generation_configs_beam() {
    // mBART and NLLB (the M2M100 family; tests/translation/m2m100 has no tokenizer model).
    let cases = [
        ("mbart", root().join("tests/translation/mbart/hf"), None),
        (
            "nllb",
            model_dir("nllb"),
            Some((c("eng_Latn"), c("fra_Latn"))),
        ),
    ];
    for (name, fixture, languages) in cases {
        let dir = with_num_beams(&fixture, name, 5);
        let (src, tgt) = languages
            .as_ref()
            .map_or((None, None), |(s, t)| (Some(s), Some(t)));
        let translator = load(&dir, src, tgt);
        let text = translate(translator, "Hello world", 4096);
        assert!(text.is_ok(), "{name}: {text:?}: {}", last_error());
        // SAFETY: the translator from above, freed once.
        ok(unsafe { tessel_translator_free(translator) });
    }
}

#[test]
fn wrong_directories_and_absurd_beams_are_refused_at_load_with_their_status() {
    let nllb = model_dir("nllb");
    let huge = with_num_beams(&nllb, "nllb-huge", 1000);
    let whisper_ct2 = root().join("tests/transcribe/tiny_en_32/model");
    let cases = [
        (
            whisper_ct2,
            0,
            tessel_status::TESSEL_ERR_UNSUPPORTED,
            "Whisper",
        ),
        (
            nllb.clone(),
            1000,
            tessel_status::TESSEL_ERR_ARGUMENT,
            "beam 1000",
        ),
        (nllb, usize::MAX, tessel_status::TESSEL_ERR_ARGUMENT, "beam"),
        (huge, 0, tessel_status::TESSEL_ERR_UNSUPPORTED, "beam 1000"),
    ];
    let (src, tgt) = (c("eng_Latn"), c("fra_Latn"));
    for (path, beam, status, says) in cases {
        let options = tessel_translate_options {
            source_lang: src.as_ptr(),
            target_lang: tgt.as_ptr(),
            beam,
            ..tessel_translate_options_default()
        };
        let path = c(path.to_str().expect("UTF-8"));
        let mut translator = std::ptr::dangling_mut();
        // SAFETY: NUL-terminated strings, valid options, a writable out-pointer.
        let got = unsafe { tessel_translator_load(path.as_ptr(), &options, &mut translator) };
        refused_load(
            &format!("{path:?} beam {beam}"),
            got,
            translator,
            status,
            says,
        );
    }
}

/// `lines` translated through `tessel_translate_batch` into a buffer of `cap` bytes: each
/// line's output or status, or the call's status and the bytes it needs.
fn translate_batch(
    translator: *mut tessel_translator,
    lines: &[&str],
    max_batch: usize,
    cap: usize,
) -> (tessel_status, usize, Vec<Result<String, tessel_status>>) {
    let owned: Vec<CString> = lines.iter().map(|line| c(line)).collect();
    let pointers: Vec<*const c_char> = owned.iter().map(|line| line.as_ptr()).collect();
    let mut out = vec![0xffu8; cap];
    let mut offsets = vec![usize::MAX; lines.len()];
    let mut statuses = vec![tessel_status::TESSEL_ERR_PANIC; lines.len()];
    let mut len = usize::MAX;
    // SAFETY: a live translator; arrays of the stated lengths; NUL-terminated lines.
    let status = unsafe {
        tessel_translate_batch(
            translator,
            pointers.as_ptr(),
            lines.len(),
            max_batch,
            out.as_mut_ptr().cast::<c_char>(),
            cap,
            offsets.as_mut_ptr(),
            &mut len,
            statuses.as_mut_ptr(),
        )
    };
    if status == tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL {
        return (status, len, Vec::new());
    }
    let outputs = offsets
        .iter()
        .zip(&statuses)
        .map(|(&at, &line_status)| {
            let text = CStr::from_bytes_until_nul(&out[at..]).expect("NUL-terminated");
            let text = text.to_str().expect("UTF-8").to_owned();
            match line_status {
                tessel_status::TESSEL_OK => Ok(text),
                failed => {
                    assert!(text.is_empty(), "a failed line's output is empty");
                    Err(failed)
                }
            }
        })
        .collect();
    (status, len, outputs)
}

#[test]
fn batched_lines_translate_as_one_at_a_time_in_input_order() {
    for name in ["marian", "nllb"] {
        let expected = expected(name);
        let lang = |k: &str| expected["languages"][k].as_str().map(c);
        let (src, tgt) = (lang("src_lang"), lang("tgt_lang"));
        let translator = load(&model_dir(name), src.as_ref(), tgt.as_ref());
        let mut lines: Vec<&str> = expected["pipeline"]
            .as_array()
            .expect("lines")
            .iter()
            .map(|line| line["text"].as_str().expect("text"))
            .collect();
        lines.push("");
        let want: Vec<_> = lines
            .iter()
            .map(|line| Ok(translate(translator, line, 4096).expect("translates")))
            .collect();
        for max_batch in [1, 2, lines.len()] {
            let (status, _, got) = translate_batch(translator, &lines, max_batch, 1 << 16);
            assert_eq!(status, tessel_status::TESSEL_OK, "{}", last_error());
            assert_eq!(got, want, "{name}, max_batch {max_batch}");
        }
        // SAFETY: the translator from above, freed once.
        ok(unsafe { tessel_translator_free(translator) });
    }
}

#[test]
fn batched_lines_report_small_buffers_and_failing_lines() {
    use tessel_status::*;
    let (src, tgt) = (c("eng_Latn"), c("fra_Latn"));
    let translator = load(&model_dir("nllb"), Some(&src), Some(&tgt));
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(8);
    let lines = ["Hello world", &long, "Good morning"];
    let alone = |line| translate(translator, line, 4096).expect("translates");
    let (hello, morning) = (alone(lines[0]), alone(lines[2]));
    let needed = hello.len() + 1 + 1 + morning.len() + 1;
    let (status, len, _) = translate_batch(translator, &lines, 2, needed - 1);
    assert_eq!((status, len), (TESSEL_ERR_BUFFER_TOO_SMALL, needed));
    // The retry copies the kept outputs; the long line alone failed, and the call says which.
    let (status, len, got) = translate_batch(translator, &lines, 2, needed);
    assert_eq!((status, len), (TESSEL_ERR_ARGUMENT, needed));
    assert!(last_error().starts_with("line 1: "), "{}", last_error());
    assert!(last_error().contains("64"), "{}", last_error());
    assert_eq!(got, [Ok(hello), Err(TESSEL_ERR_ARGUMENT), Ok(morning)]);
    let mut len = 0;
    let mut offsets = [0usize; 2];
    let one = [c"a".as_ptr(), null()];
    // SAFETY: NULL pointers, a NULL line and out-of-range counts, which the calls refuse; the
    // translator is freed once.
    unsafe {
        // `lines` (`n` of them) in batches of `max_batch`, into no output buffer.
        let mut batch = |lines, n, max_batch| {
            tessel_translate_batch(
                translator,
                lines,
                n,
                max_batch,
                null_mut(),
                0,
                offsets.as_mut_ptr(),
                &mut len,
                null_mut(),
            )
        };
        assert_eq!(batch(null(), 2, 2), TESSEL_ERR_NULL);
        assert_eq!(batch(one.as_ptr(), 2, 2), TESSEL_ERR_NULL);
        assert!(last_error().contains("lines[1]"), "{}", last_error());
        for max_batch in [0, 1025] {
            assert_eq!(batch(one.as_ptr(), 1, max_batch), TESSEL_ERR_ARGUMENT);
            assert!(last_error().contains("max_batch"), "{}", last_error());
        }
        ok(tessel_translator_free(translator));
    }
}
