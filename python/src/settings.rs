//! The constructor arguments both classes share: `compute_type` and thread counts, read as
//! CTranslate2 reads them.

use pyo3::PyResult;
use tessel_kernels::Isa;
use tessel_model::WeightType;

use crate::errors;

/// The weight storage of a `compute_type`: `None` keeps the directory's. CTranslate2's int8
/// variants (`int8_float32`, `int8_float16`, `int8_bfloat16`) all run int8 weights with
/// `f32` activations here.
pub fn weights(compute_type: &str) -> PyResult<Option<WeightType>> {
    Ok(match compute_type {
        "default" | "auto" => None,
        "float32" => Some(WeightType::F32),
        "float16" => Some(WeightType::F16),
        "bfloat16" => Some(WeightType::Bf16),
        "int8" | "int8_float32" | "int8_float16" | "int8_bfloat16" => Some(WeightType::Int8),
        other => {
            return Err(errors::input(format!(
                "compute_type {other:?}: expected default, auto, float32, float16, bfloat16, \
                 int8, int8_float32, int8_float16 or int8_bfloat16"
            )))
        }
    })
}

/// Threads for a count where 0 means "choose": every core the process may use.
pub fn threads(count: usize) -> usize {
    match count {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

/// The kernels' instruction set: `TESSEL_ISA`'s, else the best the CPU runs.
pub fn isa() -> PyResult<Isa> {
    tessel_model::isa_env::isa_from_env().map_err(errors::input)
}

/// Refuses a device other than the CPU.
pub fn cpu_only(device: &str) -> PyResult<()> {
    match device {
        "cpu" | "auto" => Ok(()),
        other => Err(errors::input(format!(
            "device {other:?}: tessel runs on the CPU (\"cpu\" or \"auto\")"
        ))),
    }
}
