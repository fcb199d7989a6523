//! What a model directory holds, speech (Whisper) or text to text, read before loading from
//! `config.json`'s `model_type` or the spec name in a CTranslate2 `model.bin` header, so that
//! a task-level loader given the other kind returns `TESSEL_ERR_UNSUPPORTED` saying what the
//! directory is and what the call needs, instead of a loader's message about a missing field.

use std::io::Read as _;
use std::path::Path;

use crate::status::{tessel_status, Error};

/// The task a directory's model does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirKind {
    /// A Whisper model; the string says which format.
    Speech(&'static str),
    /// A text-to-text model; the string names its type.
    Text(String),
    /// Neither could be told (missing or unreadable files): the loader reports it.
    Unknown,
}

/// The spec name a CTranslate2 `model.bin` starts with (binary version ≥ 2: `u32` version,
/// `u16` length, the NUL-terminated name), or `None`.
fn ct2_spec(path: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(262);
    let file = std::fs::File::open(path).ok()?;
    file.take(262).read_to_end(&mut head).ok()?;
    let version = u32::from_le_bytes(head.get(0..4)?.try_into().ok()?);
    if version < 2 {
        return None;
    }
    let len = usize::from(u16::from_le_bytes(head.get(4..6)?.try_into().ok()?));
    let name = head.get(6..6 + len)?.strip_suffix(&[0])?;
    String::from_utf8(name.to_vec()).ok()
}

/// The `model_type` of `dir/config.json`, `Some("")` without one, `None` when unreadable.
fn model_type(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(
        value
            .get("model_type")
            .and_then(|t| t.as_str())
            .unwrap_or("")
            .to_owned(),
    )
}

/// What `dir` holds.
pub fn of(dir: &Path) -> DirKind {
    let bin = dir.join("model.bin");
    if bin.is_file() {
        return match ct2_spec(&bin).as_deref() {
            Some("WhisperSpec") => DirKind::Speech("CTranslate2 Whisper"),
            Some(spec) => DirKind::Text(format!("CTranslate2 {spec}")),
            None => DirKind::Unknown,
        };
    }
    match model_type(dir).as_deref() {
        Some("whisper") => DirKind::Speech("Hugging Face Whisper"),
        Some("") => DirKind::Text("tessel nn.Transformer".to_owned()),
        Some(other) => DirKind::Text(format!("Hugging Face {other}")),
        None => DirKind::Unknown,
    }
}

/// `TESSEL_ERR_UNSUPPORTED` unless `dir` may hold a speech model (`speech`) or a text model.
pub fn require(dir: &Path, speech: bool) -> Result<(), Error> {
    let refuse = |what: String, needs: &str| {
        Err(Error::boxed(
            tessel_status::TESSEL_ERR_UNSUPPORTED,
            format!("{}: {what}; {needs}", dir.display()),
        ))
    };
    match (of(dir), speech) {
        (DirKind::Text(kind), true) => refuse(
            format!("a {kind} model directory (text to text)"),
            "tessel_transcriber_load needs a Whisper model (load this one with \
             tessel_translator_load)",
        ),
        (DirKind::Speech(kind), false) => refuse(
            format!("a {kind} model directory (speech to text)"),
            "tessel_translator_load needs a text-to-text model (load this one with \
             tessel_transcriber_load)",
        ),
        _ => Ok(()),
    }
}
