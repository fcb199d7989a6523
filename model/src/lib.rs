//! tessel-model: assembles the tessel kernels into a transformer encoder-decoder.
//!
//! [`Config`] → [`ArenaPlan`] → [`Model`] (weights laid out once, shared) → [`Session`] (one
//! preallocated arena per concurrent user): [`Session::encode`], [`Session::decode_step`],
//! [`Session::generate`] (greedy and beam search). Nothing allocates after `Session::new`.

pub mod aligned;
pub mod config;
pub mod ct2;
pub mod isa_env;
pub mod ops;
pub mod plan;
pub mod search;
pub mod session;
pub mod weights;

pub use config::{Biases, Config, ConfigError, FfnActivation, NormPlacement, Positions};
pub use plan::{ArenaPlan, Limits, Region};

pub use search::{Hypotheses, Hypothesis, SearchOptions, StepView};
pub use session::{RunError, Session, SessionError};
pub use weights::{LoadError, Model};
