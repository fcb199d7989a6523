//! Reference gemm kernels (being written).
