//! `Directory::open` on a directory written from arbitrary bytes: any of `config.json`,
//! `generation_config.json`, `model.bin` and `model.safetensors` present with arbitrary
//! contents. Opening reads only these small files' heads and is `Ok` with a format, a
//! description and decoding defaults, or a typed `OpenError`; never a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_model::load::directory::{Directory, Format};

/// The directory's files; `None` leaves a file out.
#[derive(Arbitrary, Debug)]
struct Files {
    config: Option<Vec<u8>>,
    generation_config: Option<Vec<u8>>,
    model_bin: Option<Vec<u8>>,
    safetensors: Option<Vec<u8>>,
}

/// One directory for the whole run (libFuzzer runs inputs one at a time in this process).
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("tessel-fuzz-model-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        dir
    })
}

fuzz_target!(|files: Files| {
    let dir = dir();
    for (name, bytes) in [
        ("config.json", &files.config),
        ("generation_config.json", &files.generation_config),
        ("model.bin", &files.model_bin),
        ("model.safetensors", &files.safetensors),
    ] {
        let path = dir.join(name);
        match bytes {
            Some(bytes) => std::fs::write(&path, bytes).expect("write a file"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    match Directory::open(dir) {
        Ok(opened) => {
            assert!(!opened.describe().is_empty());
            let expected_ct2 = files.model_bin.is_some();
            assert_eq!(
                matches!(opened.format(), Format::CTranslate2 { .. }),
                expected_ct2
            );
            let _ = opened.generation().options.search.beam;
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
