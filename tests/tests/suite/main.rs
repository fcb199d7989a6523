//! The integration, property and golden tests that need no process of their own, as one test
//! binary: one link and one set of generic instantiations instead of one per file. Tests that
//! install a counting global allocator, count page faults, or generate gigabytes of weights
//! (`align_pass`, `no_alloc`, `no_alloc_workers`, `no_page_faults`, `published`) stay binaries
//! of their own beside this one.

mod attention;
mod batch_audio;
mod convert;
mod ct2_errors;
mod ct2_load;
mod decoding_golden;
mod gemm;
mod gemm_half;
mod gemm_int8;
mod gemm_support;
mod int8_accuracy;
mod model_golden;
mod model_image;
mod model_load;
mod model_ops;
mod model_session;
mod model_weights16;
mod norm;
mod numbers_model;
mod sampling;
mod translation_ct2;
mod translation_golden;
mod whisper_golden;
mod whisper_int8;
