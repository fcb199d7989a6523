//! Everything that turns files into a [`crate::Model`], and a model back into a file.
//!
//! The parts, each over the shared [`crate::layers`], none with a forward pass of its own:
//! - [`directory`]: the one opener of model paths. It tells a path's format and family from
//!   its small files ([`directory::FAMILIES`], one row per Hugging Face family), reads the
//!   decoding defaults, and hands the weights to the loader below that reads them.
//! - [`hf`]: Hugging Face directories (`config.json` + `model.safetensors`), one module per
//!   family mapping its config onto a [`crate::Config`] and its tensor names onto the layers
//!   (Marian/BART/mBART/M2M100 in `bart`, T5, Whisper), with the block layout and the token
//!   tables they share.
//! - `native`: tessel's own `config.json` + `model.safetensors` in PyTorch `nn.Transformer`
//!   names ([`crate::Model::load_dir`]), and seeded random weights ([`crate::Model::random`]).
//! - [`ct2`]: CTranslate2 conversions (`model.bin`, its vocabularies), every
//!   `TransformerSpec` family and the `WhisperSpec`, int8 weights kept.
//! - [`image`]: tessel's packed image, one aligned file a model borrows its tensors from
//!   (read without `std`), and its writer (`tessel pack`).
//! - The pieces the safetensors loaders share: `source` (where tensors come from: a
//!   safetensors file, seeded values, or a recorder of the names asked for), `loader` (the
//!   `Loader` that builds layers from tensors read by name and shape), [`LoadOptions`] and
//!   [`LoadError`].
//!
//! Where loaded tensors live once built (owned, borrowed from an image, pooled in huge
//! pages) is [`crate::storage`]'s business, not the loaders'.

pub mod image;

with_std! {
    pub mod ct2;
    pub mod directory;
    mod error;
    pub mod hf;
    pub(crate) mod loader;
    mod native;
    mod options;
    pub(crate) mod source;

    pub use error::LoadError;
    pub(crate) use error::{linear_error, malformed, out_of_memory};
    pub(crate) use loader::{block, conv_linear, linear_rows, Loader, TokenTables};
    pub use options::LoadOptions;
}
