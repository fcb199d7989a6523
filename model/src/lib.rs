//! tessel-model: assembles the tessel kernels into a transformer encoder-decoder.
//!
//! [`Config`] → [`Model`] (the [`layers`], weights laid out once, shared) → [`ArenaPlan`]
//! (what the layers need, summed) → [`Session`] (one preallocated arena per concurrent user,
//! holding its model by reference or by `Arc`): [`Session::encode`], [`Session::decode_step`],
//! [`Session::generate`] (greedy, beam and sampled search, one [`Request`]). Nothing allocates
//! after `Session::new`.
//!
//! ```
//! use tessel_model::config::{Sizes, SpecialIds};
//! use tessel_model::{Config, Limits, Model, Request, SearchOptions, Session};
//! use tessel_kernels::Isa;
//!
//! // A small model with seeded weights (`Model::load_dir` reads config.json +
//! // model.safetensors in PyTorch `nn.Transformer` naming).
//! let sizes = Sizes {
//!     d_model: 64, heads: 4, encoder_layers: 2, decoder_layers: 2, d_ff: 128,
//!     src_vocab: 100, tgt_vocab: 100, max_src_len: 16, max_tgt_len: 16, max_beam: 2,
//! };
//! let config = Config::builder(sizes, SpecialIds { bos: 1, eos: 2, pad: 0 }).build()?;
//! let model = Model::random(config, 7)?;
//! // The arena is planned and allocated here, once; two threads run the GEMMs.
//! let limits = Limits::of(model.config()).with_threads(2);
//! let mut session = Session::with_limits(&model, Isa::best(), limits)?;
//! println!("arena: {} bytes", session.plan().total_bytes());
//!
//! session.encode(&[5, 17, 42, 9])?;
//! let hypotheses = session.generate(Request::new(SearchOptions::beam(2, 8)))?;
//! let best = hypotheses.best().expect("a beam search returns hypotheses");
//! assert!(!best.tokens.is_empty() && best.tokens.len() <= 8);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Without `std`
//!
//! With `default-features = false` the crate is `#![no_std]` and links no `alloc`: a host
//! parses a packed image ([`load::image::parse`], for instance of `include_bytes!` data) into a
//! [`Model`] whose tensors it borrows, and runs a [`Session::in_buffer`] over a byte buffer it
//! provides (size [`session::buffer_bytes`] of the plan), GEMMs on the calling thread. The
//! loaders, decoding options, owned weights and the thread pool come with `std`
//! (`nostd-check/` is such a host and runs the numbers model).

#![cfg_attr(not(feature = "std"), no_std)]

/// Items that need `std`: each one compiled only with the `std` feature.
macro_rules! with_std {
    ($($item:item)*) => {
        $(
            #[cfg(feature = "std")]
            $item
        )*
    };
}

pub mod aligned;
pub mod config;
mod forward;
pub mod layers;
pub mod load;
pub mod model;
mod named;
pub mod ops;
pub mod plan;
mod runner;
pub mod sampling;
pub mod search;
pub mod session;
pub mod storage;

with_std! {
    pub mod batch;
    pub mod decoding;
    pub mod generation;
    pub mod isa_env;
    pub mod processors;
    pub mod threads;
}

pub use config::{
    Biases, Config, ConfigBuilder, ConfigError, FfnActivation, FrontEnd, NormPlacement, Positions,
};
pub use layers::{MemoryType, WeightType};
pub use model::Model;
pub use plan::{ArenaPlan, Limits, Region, ENCODE_ROWS, MAX_BATCH};
pub use sampling::Sampling;
pub use search::{
    BeamRules, EarlyStopping, Hypotheses, Hypothesis, Request, SearchOptions, StepLogits, StepView,
};
pub use session::{Arena, ModelRef, RunError, Session, SessionError};
pub use storage::Weights;

with_std! {
    pub use batch::Batch;
    pub use decoding::{Convention, DecodeOptions};
    pub use generation::{Generation, GenerationError};
    pub use load::directory::{Directory, LoadSettings, Modality, OpenError};
    pub use load::{LoadError, LoadOptions};
    pub use search::SlotRequests;
    pub use threads::{PoolError, ThreadPool};
}
