//! Why a model could not be loaded, and the conversions of the layers' errors to it.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::aligned::AllocError;
use crate::config::ConfigError;
use crate::layers::LinearError;

/// Why a model could not be built.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The safetensors file is malformed.
    #[error("malformed safetensors file: {0}")]
    Malformed(String),
    /// The config asks for a feature tessel does not implement; the text names it.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// A tensor the config requires is absent.
    #[error("tensor `{name}` is missing")]
    Missing {
        /// Tensor name.
        name: String,
    },
    /// A tensor has the wrong shape.
    #[error("tensor `{name}` has shape {got:?}, expected {expected:?}")]
    Shape {
        /// Tensor name.
        name: String,
        /// Shape the config implies.
        expected: Vec<usize>,
        /// Shape in the file.
        got: Vec<usize>,
    },
    /// A tensor is not `F32`, `F16` or `BF16`.
    #[error("tensor `{name}` has dtype {dtype}, expected F32, F16 or BF16")]
    Dtype {
        /// Tensor name.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// The file holds a tensor this config does not use.
    #[error("tensor `{name}` is not used by this config")]
    Unexpected {
        /// Tensor name.
        name: String,
    },
    /// A tensor holds a NaN or infinity.
    #[error("tensor `{name}` holds a non-finite value")]
    NonFinite {
        /// Tensor name.
        name: String,
    },
    /// A tensor or table the config asks for could not be allocated.
    #[error("cannot allocate {bytes} bytes for `{what}`")]
    OutOfMemory {
        /// Which tensor or table.
        what: String,
        /// Its size.
        bytes: usize,
    },
}

/// Maps a refused allocation for `what` to [`LoadError::OutOfMemory`].
pub(crate) fn out_of_memory(what: &str) -> impl Fn(AllocError) -> LoadError + '_ {
    move |e| LoadError::OutOfMemory {
        what: what.to_owned(),
        bytes: e.bytes,
    }
}

/// Maps a layer's refusal (a [`tessel_kernels::KernelError`], a block's width mismatch) to
/// a malformed-file error naming `prefix`.
pub(crate) fn malformed<E: core::fmt::Display>(prefix: &str) -> impl Fn(E) -> LoadError + '_ {
    move |e| LoadError::Malformed(format!("{prefix}: {e}"))
}

/// Maps a [`LinearError`] of the layer whose weight is `name` to a [`LoadError`].
pub(crate) fn linear_error(name: &str) -> impl Fn(LinearError) -> LoadError + '_ {
    move |e| match e {
        LinearError::Shape(e) => LoadError::Malformed(format!("{name}: {e}")),
        LinearError::Alloc(e) => out_of_memory(name)(e),
    }
}

pub(super) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_owned(),
        source,
    }
}
