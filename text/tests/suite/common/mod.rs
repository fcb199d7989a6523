//! Fixture helpers shared by the golden tests.

#![allow(dead_code)]

use std::path::PathBuf;

use serde::Deserialize;

/// `text/tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Reads and parses a JSON fixture.
pub fn json<T: for<'de> Deserialize<'de>>(rel: &str) -> T {
    let path = fixture(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Text and the ids the reference encodes it to (and, where recorded, decodes them back to).
#[derive(Deserialize)]
pub struct EncodeCase {
    pub text: String,
    pub ids: Vec<u32>,
    #[serde(default)]
    pub decoded: Option<String>,
}

/// Ids and the text the reference decodes them to.
#[derive(Deserialize)]
pub struct DecodeCase {
    pub ids: Vec<u32>,
    pub text: String,
}

/// The encode and decode cases of one tokenizer.
#[derive(Deserialize)]
pub struct Cases {
    pub encode: Vec<EncodeCase>,
    pub decode: Vec<DecodeCase>,
}

/// A directory of a test's own, removed with everything in it when the value is dropped.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh empty directory under the system's temporary directory, named after the process
/// and `name`.
pub fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("tessel-text-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// Copies fixtures into `dir` under new names.
pub fn copy_into(dir: &std::path::Path, files: &[(&str, &str)]) {
    for (from, to) in files {
        std::fs::copy(fixture(from), dir.join(to)).unwrap_or_else(|e| panic!("{from}: {e}"));
    }
}

/// Collects mismatches so one run reports them all.
#[derive(Default)]
pub struct Mismatches(Vec<String>);

impl Mismatches {
    /// Records a mismatch when `got != want`.
    pub fn check<T: PartialEq + std::fmt::Debug>(
        &mut self,
        what: impl std::fmt::Display,
        got: T,
        want: T,
    ) {
        if got != want {
            self.0
                .push(format!("{what}:\n   got  {got:?}\n   want {want:?}"));
        }
    }

    /// Panics listing every mismatch.
    pub fn finish(self) {
        assert!(
            self.0.is_empty(),
            "{} mismatches:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}
