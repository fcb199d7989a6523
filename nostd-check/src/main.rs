//! A freestanding binary that links tessel-kernels and the tessel-model core with neither
//! `std` nor `alloc`, and runs a real model.
//!
//! It has no `#[global_allocator]`, so the build fails if anything in its dependency graph
//! links `alloc`, and it has its own `#[panic_handler]`, so the build fails if anything links
//! `std`. Only the C library is linked, for the process entry point, `write`, `clock_gettime`
//! and `abort`. At run time it drives every ISA level this CPU supports through the exp and
//! GELU kernels, then through the numbers model ([`numbers`]: English number words to digits,
//! packed by `build.rs` and compiled in), whose answers it prints; it exits with a non-zero
//! status if a result is wrong.
#![no_std]
#![no_main]

mod numbers;
mod out;

use core::panic::PanicInfo;
use tessel_kernels::activation::Activation;
use tessel_kernels::math::exp_slice;
use tessel_kernels::Isa;

#[link(name = "c")]
extern "C" {
    fn abort() -> !;
}

/// A panic cannot be reported without `std`: stop the process.
#[panic_handler]
fn panic(_info: &PanicInfo) -> ! {
    // SAFETY: `abort` takes no arguments and never returns.
    unsafe { abort() }
}

/// Exit status for a kernel result outside its tolerance.
const WRONG_RESULT: i32 = 1;
/// Exit status when the best level is not among the supported ones.
const INCONSISTENT_ISA: i32 = 2;
/// Exit status when the model gives a wrong answer or cannot run.
const WRONG_ANSWER: i32 = 3;

/// Process entry point, called by the C runtime.
#[no_mangle]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let best = Isa::best();
    if !Isa::supported().any(|isa| isa == best) {
        return INCONSISTENT_ISA;
    }
    for isa in Isa::supported() {
        if !exp_is_right(isa) || !gelu_is_right(isa) {
            return WRONG_RESULT;
        }
    }
    for isa in Isa::supported() {
        if !numbers::reads_every_example(isa) {
            return WRONG_ANSWER;
        }
    }
    0
}

/// Whether `x` is within `relative` of `expected`.
fn near(x: f32, expected: f32, relative: f32) -> bool {
    (x - expected).abs() <= relative * expected.abs()
}

/// exp of 0, ln 2 and -ln 2 over a length that covers full vectors and a tail at every level.
fn exp_is_right(isa: Isa) -> bool {
    const LN_2: f32 = core::f32::consts::LN_2;
    let mut values = [0.0f32; 37];
    for (i, v) in values.iter_mut().enumerate() {
        *v = [0.0, LN_2, -LN_2][i % 3];
    }
    exp_slice(isa, &mut values);
    values
        .iter()
        .enumerate()
        .all(|(i, &v)| near(v, [1.0, 2.0, 0.5][i % 3], 1e-6))
}

/// GELU (erf form) of 0 and of large positive and negative inputs, where it is 0, x and 0.
fn gelu_is_right(isa: Isa) -> bool {
    let mut values = [0.0f32; 19];
    for (i, v) in values.iter_mut().enumerate() {
        *v = [0.0, 8.0, -8.0][i % 3];
    }
    Activation::GeluErf.apply_slice(isa, &mut values);
    values
        .iter()
        .enumerate()
        .all(|(i, &v)| (v - [0.0, 8.0, 0.0][i % 3]).abs() <= 1e-5)
}
