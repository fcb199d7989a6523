//! The task-level loaders' check of what a model directory holds, speech (Whisper) or text to
//! text, read by [`Directory::open`] before any weight: given the other kind, they return
//! `TESSEL_ERR_UNSUPPORTED` saying what the directory is and what the call needs, instead of
//! a loader's message about a missing field.

use std::path::Path;

use tessel_model::load::directory::{Directory, Modality};

use crate::status::{tessel_status, Error};

/// `TESSEL_ERR_UNSUPPORTED` unless `dir` may hold a model of `task`. A directory that cannot
/// be opened passes: the loader reports why.
pub fn require(dir: &Path, wanted: Modality) -> Result<(), Error> {
    let Ok(directory) = Directory::open(dir) else {
        return Ok(());
    };
    let needs = match directory.modality() {
        Some(found) if found != wanted => match wanted {
            Modality::Speech => {
                "tessel_transcriber_load needs a Whisper model (load this one with \
                 tessel_translator_load)"
            }
            Modality::Text => {
                "tessel_translator_load needs a text-to-text model (load this one with \
                 tessel_transcriber_load)"
            }
        },
        _ => return Ok(()),
    };
    Err(Error::boxed(
        tessel_status::TESSEL_ERR_UNSUPPORTED,
        format!("{} holds {}; {needs}", dir.display(), directory.describe()),
    ))
}
