//! tessel-model: assembles the tessel kernels into a transformer encoder-decoder.

pub mod isa_env;
