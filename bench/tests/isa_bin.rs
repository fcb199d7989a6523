//! The `isa` binary, which the test script uses to pick the levels to test at, prints exactly
//! the levels `Isa::supported()` returns, scalar first, one name per line.

use std::process::Command;
use tessel_kernels::{Isa, Level};

#[test]
fn isa_bin_prints_every_supported_level_scalar_first() {
    let output = Command::new(env!("CARGO_BIN_EXE_isa"))
        .output()
        .expect("the isa binary runs");
    assert!(output.status.success(), "isa exited with {}", output.status);
    let stdout = String::from_utf8(output.stdout).expect("isa prints UTF-8");
    let printed: Vec<&str> = stdout.lines().collect();
    let supported: Vec<&str> = Isa::supported().map(|isa| isa.level().name()).collect();
    assert_eq!(printed, supported);
    assert_eq!(printed.first(), Some(&Level::Scalar.name()));
    for name in printed {
        assert_eq!(
            Isa::from_name(name).map(Isa::level).map(Level::name),
            Ok(name)
        );
    }
}
