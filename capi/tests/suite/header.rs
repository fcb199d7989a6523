//! The committed `include/tessel.h` is what cbindgen generates from `src/` now: the test fails
//! on any difference. `TESSEL_BLESS_HEADER=1` rewrites the header instead.

use std::path::Path;

fn generate() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("capi/cbindgen.toml parses");
    // cbindgen follows the `mod` declarations of lib.rs.
    let builder = cbindgen::Builder::new()
        .with_src(root.join("src/lib.rs"))
        .with_config(config);
    let mut out = Vec::new();
    builder
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/tessel.h");
    let fresh = generate();
    if std::env::var_os("TESSEL_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("include/tessel.h is writable");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "capi/include/tessel.h differs from a fresh cbindgen generation; regenerate it with \
         TESSEL_BLESS_HEADER=1 cargo test -p tessel-capi --test suite header"
    );
    for name in [
        "tessel_session_new",
        "tessel_generate",
        "tessel_last_error",
        "TESSEL_OK",
    ] {
        assert!(fresh.contains(name), "{name} is missing from the header");
    }
}
