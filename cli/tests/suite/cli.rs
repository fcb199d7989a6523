//! The `tessel` binary as a user runs it: help, the embedded numbers model, `run` and `plan`
//! on tiny models and the committed fixtures, and command lines it must refuse with a clear
//! message and a non-zero status (never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tessel_model::{ArenaPlan, Config, Limits, Model};

/// Runs `tessel` with `args` (and `TESSEL_ISA` as the test runs with).
fn tessel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(args)
        .output()
        .expect("the tessel binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// `output` succeeded; its stdout.
fn success(args: &[&str]) -> String {
    let output = tessel(args);
    assert!(
        output.status.success(),
        "tessel {args:?} failed: {}\n{}",
        output.status,
        stderr(&output)
    );
    stdout(&output)
}

/// A repository directory.
fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// A small config, two beams wide.
fn tiny_config() -> Config {
    Config {
        d_model: 32,
        heads: 4,
        encoder_layers: 2,
        decoder_layers: 1,
        d_ff: 48,
        src_vocab: 50,
        tgt_vocab: 40,
        max_src_len: 16,
        max_tgt_len: 8,
        max_beam: 2,
        ..Config::transformer_base()
    }
}

/// `config` written as `config.json` in a directory of its own named `name`.
fn write_config(name: &str, config: &Config) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tests")
        .join(name);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_json()).expect("config.json written");
    path
}

/// A copy of the repository directory `from` in a directory of its own named `name`.
fn repo_copy(from: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tests")
        .join(name);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    for entry in std::fs::read_dir(repo(from)).expect("fixture directory") {
        let path = entry.expect("directory entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("a file name"))).expect("copy");
    }
    dir
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The value after `label` on the report line starting with it.
fn field<'a>(report: &'a str, label: &str) -> &'a str {
    report
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .unwrap_or_else(|| panic!("no `{label}` line in\n{report}"))
        .trim()
}

/// The output of `input` in an embedded-model report (`input -> digits  time ...`).
fn reading<'a>(report: &'a str, input: &str) -> &'a str {
    report
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" -> ")?;
            (left.trim() == input).then(|| right.split_whitespace().next().unwrap_or(""))
        })
        .unwrap_or_else(|| panic!("no reading of {input:?} in\n{report}"))
}

#[test]
fn help_explains_every_command_and_option() {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["--help"],
            &["--text", "run", "bench", "plan", "pack", "TESSEL_ISA"],
        ),
        (
            &["run", "--help"],
            &[
                "--model",
                "--config",
                "--beam",
                "--src-len",
                "--steps",
                "--runs",
                "--seed",
                "--threads",
                "--weights",
                "bf16-dot",
                "--ignore-eos",
                "--stop-at-eos",
            ],
        ),
        (
            &["bench", "--help"],
            &[
                "Transformer-base",
                "--runs",
                "--seed",
                "--threads",
                "--weights",
            ],
        ),
        (
            &["plan", "--help"],
            &[
                "--model",
                "--config",
                "--max-src-len",
                "--max-tgt-len",
                "--max-beam",
                "--threads",
            ],
        ),
        (
            &["translate", "--help"],
            &[
                "--beam",
                "--nbest",
                "--threads",
                "--min-length",
                "--max-length",
                "1 to 64",
                "at most the beam width",
                "4 × the cores available",
                "(--max-length + 1)",
                "memory available",
                "written as `\\n`, `\\r`, `\\t` and `\\\\`",
                "tessel: line N: reason",
                "--batch-type",
                "source tokens per batch",
            ],
        ),
        (
            &["transcribe", "--help"],
            &[
                "--beam",
                "--best-of",
                "--threads",
                "--temperatures",
                "--no-speech-threshold",
                "jsonl",
                "1 to 64",
                "4 × the cores available",
                "as soon as it is final",
            ],
        ),
    ];
    for (args, words) in cases {
        let help = success(args);
        // Phrases may be wrapped over lines.
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for word in words {
            assert!(flat.contains(word), "tessel {args:?}: no {word}\n{help}");
        }
        // Every option is declared on a line of its own, followed by its explanation.
        for option in words.iter().filter(|w| w.starts_with("--")) {
            let mut lines = help.lines().skip_while(|l| {
                let declared = l.trim_start().strip_prefix(option);
                !declared.is_some_and(|rest| rest.is_empty() || rest.starts_with(" <"))
            });
            assert!(
                lines.next().is_some(),
                "tessel {args:?}: {option} undeclared"
            );
            let explanation = lines.next().unwrap_or("");
            assert!(
                explanation.split_whitespace().count() >= 3,
                "tessel {args:?}: {option} unexplained\n{help}"
            );
        }
    }
}

#[test]
fn the_embedded_model_reads_its_examples_without_allocating() {
    let report = success(&[]);
    for (words, digits) in [
        ("four hundred and twelve thousand and seven", "412007"),
        ("nineteen", "19"),
        ("one thousand nine hundred and eighty-four", "1984"),
        ("two million, three hundred thousand", "2300000"),
        ("ninety-nine thousand nine hundred ninety-nine", "99999"),
        ("seven hundred five million and sixty", "705000060"),
    ] {
        assert_eq!(reading(&report, words), digits, "{report}");
    }
    assert!(
        report.contains("heap allocs 0 during inference"),
        "{report}"
    );
}

#[test]
fn the_embedded_model_reads_the_users_text() {
    let report = success(&["--text", "forty-two"]);
    assert_eq!(reading(&report, "forty-two"), "42", "{report}");
    assert!(!report.contains("twelve thousand"), "examples printed too");
    let report = success(&[
        "--text",
        "  Seven   HUNDRED\tand one ",
        "--text",
        "a hundred and five",
    ]);
    assert_eq!(reading(&report, "Seven   HUNDRED\tand one"), "701");
    assert_eq!(reading(&report, "a hundred and five"), "105");
}

#[test]
fn the_embedded_model_refuses_text_it_cannot_read() {
    let long = "one ".repeat(40);
    let cases: [(&str, &[&str]); 4] = [
        ("forty-two!", &["'!'", "position 10"]),
        ("vingt-deux é", &["'é'", "position 12"]),
        (&long, &["159 characters", "at most 128"]),
        ("   ", &["empty"]),
    ];
    for (text, words) in cases {
        let output = tessel(&["--text", "forty-two", "--text", text]);
        assert_eq!(output.status.code(), Some(1), "{text:?}");
        let message = stderr(&output);
        assert!(message.starts_with("tessel: "), "{message}");
        for word in words {
            assert!(message.contains(word), "{text:?}: no {word} in {message}");
        }
        assert!(!message.contains("panicked"), "{message}");
        // The texts are checked before anything is read.
        assert_eq!(stdout(&output), "", "{text:?}");
    }
}

#[test]
fn plan_lists_every_region_of_the_arena() {
    let config = tiny_config();
    let path = write_config("plan", &config);
    let report = success(&[
        "plan",
        "--config",
        path_str(&path),
        "--max-src-len",
        "7",
        "--threads",
        "2",
    ]);
    let limits = Limits {
        max_src_len: 7,
        ..Limits::of(&config)
    }
    .with_threads(2);
    let plan = ArenaPlan::with_limits(&config, limits).expect("the tiny config plans");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), plan.regions().len() + 1, "{report}");
    assert!(lines[0].starts_with(&format!("arena {} bytes", plan.total_bytes())));
    assert!(lines[0].contains("max src 7, max tgt 8, max beam 2, batch 1, 2 threads"));
    for (line, region) in lines[1..].iter().zip(plan.regions()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let offset = region.offset_bytes.to_string();
        let bytes = region.bytes.to_string();
        let expected = [region.name, "offset", &offset, "B", "size", &bytes, "B"];
        assert_eq!(words, expected, "{report}");
    }
}

/// `tessel plan` of three fixtures (a Whisper front end; T5 v1.1's gated feed-forward and
/// relative bias; a plain pre-LN model) at small limits prints, byte for byte, the committed
/// `cli/tests/plans/NAME.LEVEL.txt` of the machine's widest ISA level (written on such a
/// machine with `tessel plan --model DIR --max-src-len 12 --max-tgt-len 10 --max-beam 3
/// --threads 2`): every region's name, offset and size is pinned.
#[test]
fn plan_prints_the_pinned_regions_of_the_fixtures() {
    for (name, dir) in [
        ("whisper_tiny_like_80", "tests/whisper/tiny_like_80/hf"),
        ("t5_v1_1", "tests/translation/t5_v1_1/hf"),
        ("pre_gelu", "tests/golden/pre_gelu"),
    ] {
        let report = success(&[
            "plan",
            "--model",
            path_str(&repo(dir)),
            "--max-src-len",
            "12",
            "--max-tgt-len",
            "10",
            "--max-beam",
            "3",
            "--threads",
            "2",
        ]);
        // The scratch is planned for every ISA level the machine runs, so the plan is pinned
        // per widest level.
        let level = tessel_kernels::Isa::best().level().name();
        let path = repo(&format!("cli/tests/plans/{name}.{level}.txt"));
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "no pinned plan for {level} machines: {}: {e}",
                path.display()
            )
        });
        assert_eq!(
            report, expected,
            "{name} on a machine whose widest level is {level}"
        );
    }
}

#[test]
fn pack_writes_an_image_that_runs() {
    let config = tiny_config();
    let path = write_config("pack", &config);
    let image = std::env::temp_dir().join(format!("tessel-cli-pack-{}.tessel", std::process::id()));
    let report = success(&["pack", "--config", path_str(&path), "-o", path_str(&image)]);
    let bytes = std::fs::read(&image).expect("the image was written");
    assert!(
        report.contains(&format!("{} bytes", bytes.len())),
        "{report}"
    );
    // The image is the seeded model's (the default seed of `run`).
    let model = Model::random(config, 42).expect("tiny model");
    assert_eq!(bytes, model.pack().expect("it packs"));
    let report = success(&[
        "run",
        "--model",
        path_str(&image),
        "--src-len",
        "4",
        "--steps",
        "3",
        "--runs",
        "1",
    ]);
    assert_eq!(field(&report, "heap allocs"), "0 during inference");
    assert!(report.contains("(packed image)"), "{report}");
    std::fs::remove_file(&image).expect("cleanup");
}

#[test]
fn plan_reads_model_directories() {
    let golden = repo("tests/golden/pre_gelu");
    let report = success(&["plan", "--model", path_str(&golden)]);
    let text = std::fs::read_to_string(golden.join("config.json")).expect("fixture config");
    let config = Config::from_json(&text).expect("fixture config parses");
    let plan = ArenaPlan::new(&config).expect("fixture config plans");
    assert!(report.starts_with(&format!("arena {} bytes", plan.total_bytes())));

    let ct2 = repo("tests/ct2/post_relu_sinusoidal_f32");
    let report = success(&["plan", "--model", path_str(&ct2), "--max-src-len", "6"]);
    assert!(
        report.contains("max src 6, max tgt 512, max beam 4"),
        "{report}"
    );
}

#[test]
fn run_measures_a_tiny_random_model() {
    let path = write_config("run", &tiny_config());
    let args = [
        "run",
        "--config",
        path_str(&path),
        "--src-len",
        "5",
        "--steps",
        "3",
        "--runs",
        "2",
        "--threads",
        "2",
    ];
    let report = success(&args);
    assert_eq!(field(&report, "heap allocs"), "0 during inference");
    assert_eq!(field(&report, "threads"), "2 (GEMM column blocks)");
    // EOS is ignored for random weights: every run decodes every step.
    assert!(
        field(&report, "per token").ends_with("(6 steps)"),
        "{report}"
    );
    assert!(field(&report, "search").starts_with("beam 1, 5 source tokens -> 3 tokens"));
    assert!(field(&report, "weights").contains("linear layers as stored (output projection f32)"));
    for label in ["isa", "arena", "encode", "total", "output"] {
        field(&report, label);
    }
    // Same seed, same weights, same output.
    assert_eq!(field(&success(&args), "output"), field(&report, "output"));
}

#[test]
fn run_loads_model_directories() {
    let golden = repo("tests/golden/pre_gelu");
    for (beam, weights, stored) in [("1", "f32", "f32"), ("3", "bf16", "bf16")] {
        let report = success(&[
            "run",
            "--model",
            path_str(&golden),
            "--weights",
            weights,
            "--beam",
            beam,
            "--src-len",
            "9",
            "--steps",
            "7",
            "--runs",
            "2",
        ]);
        let linear = format!("linear layers {stored} ");
        assert!(field(&report, "weights").contains(&linear), "{report}");
        let search = format!("beam {beam}, 9 source tokens");
        assert!(field(&report, "search").starts_with(&search), "{report}");
        assert!(
            field(&report, "search").contains("stops at EOS"),
            "{report}"
        );
        assert_eq!(field(&report, "heap allocs"), "0 during inference");
    }

    // A CTranslate2 and a Hugging Face directory run through the same opener as `translate`.
    for (dir, what) in [
        ("tests/ct2/pre_gelu_shared_learned_f16", "(CTranslate2)"),
        ("tests/translation/bart/hf", "(Hugging Face BART)"),
    ] {
        let dir = repo(dir);
        let report = success(&[
            "run",
            "--model",
            path_str(&dir),
            "--src-len",
            "3",
            "--steps",
            "2",
            "--runs",
            "1",
        ]);
        assert!(report.starts_with("tessel: "), "{report}");
        let first = report.lines().next().unwrap_or_default();
        assert!(first.ends_with(what), "{report}");
        assert_eq!(field(&report, "heap allocs"), "0 during inference");
    }
}

#[test]
fn bad_command_lines_are_refused_with_a_message() {
    let tiny = write_config("bad", &tiny_config());
    let tiny = path_str(&tiny);
    let golden = repo("tests/golden/pre_gelu");
    let golden = path_str(&golden);
    // (arguments, exit status, words of the message): 2 for what clap refuses, 1 for what
    // the command finds wrong.
    let truncated = repo_copy("tests/golden/pre_gelu", "truncated");
    let weights = truncated.join("model.safetensors");
    let bytes = std::fs::read(&weights).expect("fixture weights");
    std::fs::write(&weights, &bytes[..bytes.len() - 1]).expect("truncated copy");
    let truncated = path_str(&truncated);
    let hugging_face = repo("tests/translation/bart/hf");
    let hugging_face = path_str(&hugging_face);
    let moe = repo_copy("tests/translation/bart/hf", "moe");
    let config = std::fs::read_to_string(moe.join("config.json")).expect("fixture config");
    let config = config.replace("\"model_type\": \"bart\"", "\"model_type\": \"nllb-moe\"");
    std::fs::write(moe.join("config.json"), config).expect("moe config");
    let moe = path_str(&moe);
    let cases: [(&[&str], i32, &[&str]); 18] = [
        (
            &[
                "pack",
                "--model",
                hugging_face,
                "--output",
                "/nonexistent/x.tsl",
            ],
            1,
            &["/nonexistent/x.tsl"],
        ),
        (
            &["run", "--model", moe],
            1,
            &[
                "model_type `nllb-moe`",
                "is not supported",
                "supported: marian, bart",
            ],
        ),
        (
            &["run", "--model", golden, "--src-len", "999"],
            1,
            &["source length 999"],
        ),
        (&["run", "--beam"], 2, &["--beam", "value is required"]),
        (
            &["run", "--weights", "f64"],
            2,
            &["'f64'", "f32", "bf16-dot"],
        ),
        (&["run", "--beam", "0"], 2, &["--beam", "at least 1"]),
        (
            &["run", "--threads", "100000"],
            2,
            &["--threads", "more than", "cores available"],
        ),
        (
            &["bench", "--threads", "100000"],
            2,
            &["--threads", "cores available"],
        ),
        (
            &["run", "--model", truncated],
            1,
            &["model.safetensors is truncated", "tensor data is missing"],
        ),
        (&["bench", "--runs", "many"], 2, &["--runs", "not a count"]),
        (
            &["run", "--model", "a", "--config", "b"],
            2,
            &["cannot be used with"],
        ),
        (
            &["run", "--ignore-eos", "--stop-at-eos"],
            2,
            &["cannot be used with"],
        ),
        (&["frobnicate"], 2, &["frobnicate"]),
        (&["--text", "one", "plan"], 2, &["plan"]),
        (
            &["run", "--model", "/nonexistent/model"],
            1,
            &["/nonexistent/model"],
        ),
        (
            &["run", "--config", tiny, "--beam", "3", "--src-len", "4"],
            1,
            &["beam width 3"],
        ),
        (
            &["plan", "--config", tiny, "--max-src-len", "99"],
            1,
            &["max_src_len", "99"],
        ),
        (
            &["plan", "--config", "/nonexistent/config.json"],
            1,
            &["/nonexistent/config.json"],
        ),
    ];
    for (args, status, words) in cases {
        let output = tessel(args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(status), "{args:?}: {message}");
        for word in words {
            assert!(message.contains(word), "{args:?}: no {word} in {message}");
        }
        assert!(!message.contains("panicked"), "{args:?}: {message}");
    }
}

#[test]
fn an_unknown_isa_level_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .env("TESSEL_ISA", "avx9000")
        .args(["--text", "one"])
        .output()
        .expect("the tessel binary runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("tessel: TESSEL_ISA: "),
        "{}",
        stderr(&output)
    );
}
