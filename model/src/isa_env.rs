//! The `TESSEL_ISA` environment switch that binaries, tests and benchmarks honour.

use tessel_kernels::{Isa, IsaError};

/// Name of the environment variable that forces an ISA level.
pub const ISA_ENV_VAR: &str = "TESSEL_ISA";

/// The level `TESSEL_ISA` asks for, or the best level when it is unset or empty.
///
/// An unknown name or a level this machine lacks is an error, never a silent fallback.
pub fn isa_from_env() -> Result<Isa, IsaError> {
    match std::env::var(ISA_ENV_VAR) {
        Ok(name) if !name.trim().is_empty() => Isa::from_name(&name),
        _ => Ok(Isa::best()),
    }
}
