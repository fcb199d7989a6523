//! Everything the C API takes from the engine's construction side, in one place: loading a
//! model from a directory (the format detected), the embedded numbers model, the arena size
//! for given limits, and creating a session or a batch that holds its model through the C
//! handle.
//!
//! A path is a directory or a packed image file (`tessel pack`, recognised by its magic);
//! a packed image in caller memory is read in place ([`crate::memory`]).
//!
//! Paths are opened by [`Directory::open`], the engine's one opener of model paths (which
//! tells a CTranslate2, Hugging Face or tessel directory and a packed image apart, and names
//! the supported `model_type`s when a directory's is not one). A `vocab.json` in the numbers
//! model's format is attached as the model's text vocabulary.

use std::path::Path;
use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::load::directory::{self, Directory, Format, OpenError};
use tessel_model::load::image::{self, PackError};
use tessel_model::session::{buffer_bytes, ModelRef};
use tessel_model::{
    ArenaPlan, Batch, Hypotheses, Limits, LoadSettings, Model, Request, RunError, Session,
    SessionError, StepLogits, StepView,
};
use tessel_numbers::{Numbers, Vocab};

use crate::handle::ModelHandle;
use crate::memory::{self, BlockStore};
use crate::status::{tessel_status, Error};

/// A loaded model and, when its directory has one, its text vocabulary.
///
/// Fields drop in order: the model before the block storage it may borrow.
pub struct Loaded {
    /// The model.
    pub model: Model<'static>,
    /// The numbers-format vocabulary.
    pub vocab: Option<Vocab>,
    /// The blocks of a model read in place from caller memory.
    pub blocks: Option<BlockStore>,
}

impl Loaded {
    fn owned(model: Model<'static>, vocab: Option<Vocab>) -> Loaded {
        Loaded {
            model,
            vocab,
            blocks: None,
        }
    }
}

fn load_error(error: impl std::fmt::Display + Send + 'static) -> Error {
    Error::boxed(tessel_status::TESSEL_ERR_LOAD, error)
}

/// The status of an open or load failure: a misaligned image is `TESSEL_ERR_MISALIGNED`,
/// anything else `TESSEL_ERR_LOAD`.
fn open_error(error: OpenError) -> Error {
    match error {
        OpenError::Image(PackError::Image(e)) => memory::image_error(e),
        e => load_error(e),
    }
}

/// Loads `path`, a model directory or a packed image file ([`Directory::open`] tells which).
pub fn load_path(path: &Path, settings: LoadSettings) -> Result<Loaded, Error> {
    let directory = Directory::open(path).map_err(open_error)?;
    let model = directory.load(&settings).map_err(open_error)?.model;
    let vocab = match directory.format() {
        Format::Image => None,
        _ => numbers_vocab(path, &model),
    };
    Ok(Loaded::owned(model, vocab))
}

/// The numbers-format `vocab.json` of the directory `dir`, when it has one that fits `model`.
fn numbers_vocab(dir: &Path, model: &Model<'_>) -> Option<Vocab> {
    let text = std::fs::read_to_string(dir.join("vocab.json")).ok()?;
    Vocab::from_json(&text, model.config()).ok()
}

/// Loads the packed image file at `path`; the model owns a copy of its tensors.
pub fn load_image_file(path: &Path) -> Result<Loaded, Error> {
    if path.is_dir() {
        return Err(load_error(format!(
            "{}: a directory, not a packed image (load it with tessel_model_load_dir)",
            path.display()
        )));
    }
    let model = image::load(path).map_err(|e| open_error(OpenError::Image(e)))?;
    Ok(Loaded::owned(model, None))
}

/// Loads the model directory `dir` ([`load_path`], refusing a packed image file).
pub fn load_dir(dir: &Path, settings: LoadSettings) -> Result<Loaded, Error> {
    if dir.is_file() && directory::probe::is_image_file(dir) {
        return Err(load_error(format!(
            "{}: a packed image file, not a directory (load it with tessel_model_load_file)",
            dir.display()
        )));
    }
    load_path(dir, settings)
}

/// The model of the packed image in `bytes`, borrowing its tensors.
pub fn load_memory(bytes: &'static [u8]) -> Result<Loaded, Error> {
    let (model, blocks) = memory::parse_in_place(bytes)?;
    Ok(Loaded {
        model,
        vocab: None,
        blocks: Some(blocks),
    })
}

/// The numbers model compiled into the library, with its vocabulary.
pub fn numbers() -> Result<Loaded, Error> {
    let (model, vocab) = Numbers::embedded().map_err(load_error)?.into_parts();
    Ok(Loaded::owned(model, Some(vocab)))
}

/// A session's hold on its model: the C handle's reference count keeps the model alive.
pub struct SharedModel(pub Arc<ModelHandle>);

impl ModelRef for SharedModel {
    fn model(&self) -> &Model<'_> {
        &self.0.model
    }
}

/// The session behind a `tessel_session`: its arena allocated at creation, or carved from a
/// buffer the caller owns (and promises to keep alive until the session is freed).
pub enum EngineSession {
    /// `tessel_session_new`.
    Owned(Session<SharedModel>),
    /// `tessel_session_new_in_buffer`.
    InBuffer(Session<SharedModel, &'static mut [f32]>),
}

/// `$body` with `$s` bound to the session inside an [`EngineSession`] of either kind.
macro_rules! each {
    ($session:expr, $s:ident => $body:expr) => {
        match $session {
            EngineSession::Owned($s) => $body,
            EngineSession::InBuffer($s) => $body,
        }
    };
}

impl EngineSession {
    /// [`Session::limits`].
    pub fn limits(&self) -> Limits {
        each!(self, s => s.limits())
    }

    /// [`Session::isa`].
    pub fn isa(&self) -> Isa {
        each!(self, s => s.isa())
    }

    /// [`Session::model`].
    pub fn model(&self) -> &Model<'_> {
        each!(self, s => s.model())
    }

    /// [`Session::encode`].
    pub fn encode(&mut self, src: &[u32]) -> Result<(), RunError> {
        each!(self, s => s.encode(src))
    }

    /// [`Session::encode_audio`].
    pub fn encode_audio(&mut self, mel: &[f32]) -> Result<(), RunError> {
        each!(self, s => s.encode_audio(mel))
    }

    /// [`Session::reset_decoder`].
    pub fn reset_decoder(&mut self) {
        each!(self, s => s.reset_decoder())
    }

    /// [`Session::decode_step`].
    pub fn decode_step(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        each!(self, s => s.decode_step(tokens))
    }

    /// [`Session::reorder_beams`].
    pub fn reorder_beams(&mut self, parents: &[u32]) -> Result<(), RunError> {
        each!(self, s => s.reorder_beams(parents))
    }

    /// [`Session::generate`].
    pub fn generate<P, S>(&mut self, request: Request<'_, P, S>) -> Result<Hypotheses<'_>, RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        each!(self, s => s.generate(request))
    }
}

/// The bytes a buffer for a session over `model` with `limits` needs: the arena and the
/// slack to reach a 64-byte boundary ([`buffer_bytes`]).
pub fn arena_bytes(model: &Model, limits: Limits) -> Result<usize, Error> {
    ArenaPlan::with_limits(model.config(), limits)
        .map(|plan| buffer_bytes(&plan))
        .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))
}

/// The status of a session refusal.
fn session_error(e: SessionError) -> Error {
    let status = match e {
        SessionError::OutOfMemory { .. } => tessel_status::TESSEL_ERR_OUT_OF_MEMORY,
        SessionError::BufferTooSmall { .. } => tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
        SessionError::Limits(_) | SessionError::Threads(_) => tessel_status::TESSEL_ERR_ARGUMENT,
    };
    Error::boxed(status, e)
}

/// A session over `model` at `isa` planned for `limits`: the arena's one allocation.
pub fn new_session(
    model: Arc<ModelHandle>,
    isa: Isa,
    limits: Limits,
) -> Result<EngineSession, Error> {
    Session::with_limits(SharedModel(model), isa, limits)
        .map(EngineSession::Owned)
        .map_err(session_error)
}

/// A session over `model` at `isa` planned for `limits` (one thread), its arena carved from
/// `buffer`: `TESSEL_ERR_BUFFER_TOO_SMALL` when it holds fewer than [`arena_bytes`].
pub fn new_session_in(
    model: Arc<ModelHandle>,
    isa: Isa,
    limits: Limits,
    buffer: &'static mut [u8],
) -> Result<EngineSession, Error> {
    Session::in_buffer(SharedModel(model), isa, limits, buffer)
        .map(EngineSession::InBuffer)
        .map_err(session_error)
}

/// A batch of `limits.max_batch` slots over `model` at `isa`: the arena's one allocation.
pub fn new_batch(
    model: Arc<ModelHandle>,
    isa: Isa,
    limits: Limits,
) -> Result<Batch<SharedModel>, Error> {
    Batch::new(SharedModel(model), isa, limits).map_err(session_error)
}
