//! Reference norm kernels (being written).
