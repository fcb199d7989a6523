//! Prints the ISA levels this machine runs, one name per line on stdout (scalar first, the
//! names `TESSEL_ISA` accepts), and the detected CPU features and best level on stderr.
//!
//! The test script runs the test suite once per line of this output.

use tessel_kernels::{cpu_features, Isa};

fn main() {
    for isa in Isa::supported() {
        println!("{}", isa.level());
    }
    eprintln!(
        "isa: {:?}; best level: {}",
        cpu_features(),
        Isa::best().level()
    );
}
