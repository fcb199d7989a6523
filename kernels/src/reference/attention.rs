//! Reference attention kernels (being written).
