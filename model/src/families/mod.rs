//! Model families beyond PyTorch's `nn.Transformer` layout: each is a config mapping and a
//! name mapping onto the shared [`crate::layers`], never a copy of the encoder/decoder passes.

pub mod bart;
mod hf_layers;
pub mod t5;
mod tables;
pub mod whisper;
