//! The `tessel` binary on a golden fixture: runs, reports its figures and zero allocations.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .expect("the tessel binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn reports_latency_memory_and_no_allocations_for_a_model_directory() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/golden/pre_gelu");
    for beam in ["1", "3"] {
        let (ok, out, err) = run(&[
            "--model",
            dir,
            "--beam",
            beam,
            "--src-len",
            "9",
            "--steps",
            "7",
            "--runs",
            "2",
            "--plan",
        ]);
        assert!(ok, "{err}");
        for field in [
            "isa ",
            "weights ",
            "arena ",
            "encode ",
            "per token ",
            "self_attention.k_cache",
        ] {
            assert!(out.contains(field), "missing `{field}` in:\n{out}");
        }
        assert!(out.contains("heap allocs   0 during inference"), "{out}");
    }
}

#[test]
fn bad_arguments_and_limits_fail_cleanly() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/golden/pre_gelu");
    for args in [
        vec!["--bogus"],
        vec!["--beam"],
        vec!["--steps", "many"],
        vec!["--model", "/nonexistent"],
        vec!["--model", dir, "--src-len", "999"],
        vec!["--model", dir, "--beam", "9"],
    ] {
        let (ok, _, err) = run(&args);
        assert!(!ok, "{args:?} should fail");
        assert!(err.starts_with("tessel: "), "{args:?}: {err}");
    }
}
