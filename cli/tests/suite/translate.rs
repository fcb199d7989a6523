//! `tessel translate`'s decoding flags end to end: each flag's output equals the library call
//! ([`Translator`]) with the same option set, and does what the option means (lengths, bans,
//! the target prefix, scores under length penalties, seeded sampling); bad values are refused
//! with a message. On the random-weight Marian and NLLB models of `tests/decoding/` (made by
//! `tools/make_decoding_golden.py`) and the BART model of `tests/translation/`.
//!
//! Inputs: a failing line gets an empty output line and its error on stderr while the others
//! are translated, outputs come out (flushed) as they are done, line breaks in an output are
//! escaped, and bad flags, the wrong kind of model or a truncated weights file are refused
//! before the model loads.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tessel_model::isa_env::isa_from_env;
use tessel_model::{EarlyStopping, Sampling};
use tessel_pipeline::{LoadSettings, TranslateOptions, Translation, Translator};

const TEXTS: [&str; 2] = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A temporary copy of the repository directory `from`, its own for every call, since tests
/// run in parallel.
fn copy_dir(from: &str) -> PathBuf {
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let copy = COPIES.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tessel-cli-translate-{}-{}-{copy}",
        from.replace('/', "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(root().join(from)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// A temporary copy of a fixture model directory (Marian's source.spm copied in).
fn model_dir(name: &str) -> PathBuf {
    let root = root();
    let dir = copy_dir(&format!("tests/decoding/{name}/hf"));
    if name == "marian" {
        let spm = root.join("text/tests/fixtures/spm/unigram.model");
        std::fs::copy(spm, dir.join("source.spm")).unwrap();
    }
    dir
}

/// The languages the fixture model needs.
fn languages(name: &str) -> (Option<&'static str>, Option<&'static str>) {
    match name {
        "nllb" => (Some("eng_Latn"), Some("fra_Latn")),
        _ => (None, None),
    }
}

struct Model {
    name: &'static str,
    dir: PathBuf,
    translator: Translator,
}

impl Model {
    fn load(name: &'static str) -> Model {
        Model::load_with(name, |_| {})
    }

    /// The fixture model after `edit` changed its directory's files.
    fn load_with(name: &'static str, edit: impl FnOnce(&Path)) -> Model {
        let dir = model_dir(name);
        edit(&dir);
        let (src, tgt) = languages(name);
        let translator = Translator::load(&dir, LoadSettings::default(), src, tgt).unwrap();
        Model {
            name,
            dir,
            translator,
        }
    }

    /// `tessel translate --model DIR [languages] flags TEXTS...`.
    fn tessel(&self, flags: &[&str]) -> Output {
        let mut args = vec!["translate", "--model", self.dir.to_str().unwrap()];
        let (src, tgt) = languages(self.name);
        if let (Some(src), Some(tgt)) = (src, tgt) {
            args.extend(["--src-lang", src, "--tgt-lang", tgt]);
        }
        args.extend(flags);
        args.extend(TEXTS);
        Command::new(env!("CARGO_BIN_EXE_tessel"))
            .args(&args)
            .output()
            .expect("the tessel binary runs")
    }

    /// `tessel translate --model DIR [languages] flags` reading `input` on standard input.
    fn tessel_stdin(&self, flags: &[&str], input: &[u8]) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessel"))
            .args(["translate", "--model", self.dir.to_str().unwrap()])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the tessel binary runs");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// The standard output of a run that must succeed.
    fn run(&self, flags: &[&str]) -> String {
        let out = self.tessel(flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{flags:?}: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The library's hypotheses for every text with `options`.
    fn library(&self, options: &TranslateOptions) -> Vec<Vec<Translation>> {
        let isa = isa_from_env().unwrap();
        let mut session = self.translator.session(isa, 1).unwrap();
        let results = session.translate_lines(&TEXTS, options);
        results.into_iter().map(Result::unwrap).collect()
    }

    /// The search defaults with `change` applied.
    fn options(&self, change: impl FnOnce(&mut TranslateOptions)) -> TranslateOptions {
        let mut options = self.translator.search_defaults().clone();
        change(&mut options);
        options
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `text` as the command writes it: backslash, newline, carriage return and tab escaped.
fn escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
        .replace('\t', "\\t")
}

/// What the command prints for `results`: the text, or `index<TAB>score<TAB>text` lines.
fn printed(results: &[Vec<Translation>], nbest: usize) -> String {
    let mut out = String::new();
    for hyps in results {
        if nbest == 1 {
            out += &format!("{}\n", escaped(&hyps[0].text));
        } else {
            for (i, h) in hyps.iter().enumerate() {
                out += &format!("{i}\t{:.4}\t{}\n", h.score, escaped(&h.text));
            }
        }
    }
    out
}

#[test]
fn each_decoding_flag_equals_the_library_option() {
    for name in ["marian", "nllb"] {
        flags_equal_the_library(&Model::load(name));
    }
    // The minimum length is what made the output that long.
    let m = Model::load("nllb");
    let plain = m.library(&m.options(|_| {}));
    let long = m.library(&m.options(|o| o.decode.min_length = 12));
    assert!(plain[0][0].tokens.len() < 11, "{:?}", plain[0][0].tokens);
    assert!(long[0][0].tokens.len() >= 11, "{:?}", long[0][0].tokens);
    // Stopping once four hypotheses have finished loses the longer ones found later.
    let nbest = |when| {
        m.library(&m.options(|o| {
            o.decode.num_hypotheses = 4;
            o.decode.early_stopping = when;
        }))
    };
    let (full, heuristic) = (
        nbest(EarlyStopping::WhenFull),
        nbest(EarlyStopping::Heuristic),
    );
    let longest = |hyps: &[Translation]| hyps.iter().map(|h| h.tokens.len()).max();
    assert!(longest(&full[0]) < longest(&heuristic[0]));
}

fn flags_equal_the_library(m: &Model) {
    type Change = fn(&mut TranslateOptions);
    let cases: [(&[&str], Change); 10] = [
        (&[], |_| {}),
        (&["--beam", "1"], |o| o.decode.search.beam = 1),
        (&["--length-penalty", "2.5"], |o| {
            o.decode.search.length_penalty = 2.5
        }),
        (&["--min-length", "12"], |o| o.decode.min_length = 12),
        (&["--max-length-ratio", "0.2,1"], |o| {
            o.decode.max_length_ratio = Some((0.2, 1))
        }),
        (&["--repetition-penalty", "1.8", "--beam", "1"], |o| {
            o.decode.repetition_penalty = 1.8;
            o.decode.search.beam = 1;
        }),
        (&["--no-repeat-ngram-size", "2", "--beam", "1"], |o| {
            o.decode.no_repeat_ngram_size = 2;
            o.decode.search.beam = 1;
        }),
        (&["--max-length", "3"], |o| {
            o.decode.max_new_tokens = Some(3)
        }),
        (&["--early-stopping", "true", "--nbest", "4"], |o| {
            o.decode.early_stopping = EarlyStopping::WhenFull;
            o.decode.num_hypotheses = 4;
        }),
        (&["--early-stopping", "never", "--nbest", "4"], |o| {
            o.decode.early_stopping = EarlyStopping::Never;
            o.decode.num_hypotheses = 4;
        }),
    ];
    for (flags, change) in cases {
        let options = m.options(change);
        let want = m.library(&options);
        let nbest = options.decode.num_hypotheses;
        assert_eq!(m.run(flags), printed(&want, nbest), "{} {flags:?}", m.name);
        for (hyps, text) in want.iter().zip(TEXTS) {
            let tokens = &hyps[0].tokens;
            let decode = &options.decode;
            // What the option means, on the tokens (EOS is the last token when produced).
            assert!(tokens.len() + 1 >= decode.min_length, "{flags:?}");
            if let Some((a, b)) = decode.max_length_ratio {
                let source = m.translator.tokenizer().encode(text).unwrap().len();
                let cap = (a * source as f32).ceil() as usize + b;
                assert!(tokens.len() <= cap, "{flags:?}");
            }
            if decode.no_repeat_ngram_size == 2 {
                let mut context = vec![decode.decoder_start.unwrap()];
                context.extend(tokens);
                for (i, pair) in context.windows(2).enumerate() {
                    assert!(!context[i + 1..].windows(2).any(|p| p == pair), "{flags:?}");
                }
            }
        }
    }
}

#[test]
fn length_penalties_rescale_the_nbest_scores() {
    let m = Model::load("nllb");
    let mut lists = Vec::new();
    for alpha in ["0", "1", "2"] {
        let flags = ["--nbest", "4", "--length-penalty", alpha];
        let options = m.options(|o| {
            o.decode.num_hypotheses = 4;
            o.decode.search.length_penalty = alpha.parse().unwrap();
        });
        let want = m.library(&options);
        assert_eq!(m.run(&flags), printed(&want, 4), "{flags:?}");
        assert!(want.iter().all(|hyps| hyps.len() == 4));
        lists.push(want);
    }
    // A hypothesis found under two penalties scores sum / len^α under each.
    let mut shared = 0;
    for (a, list_a) in lists.iter().enumerate() {
        for (b, list_b) in lists.iter().enumerate().skip(a + 1) {
            for (hyps_a, hyps_b) in list_a.iter().zip(list_b) {
                for ha in hyps_a {
                    for hb in hyps_b.iter().filter(|hb| hb.tokens == ha.tokens) {
                        let len = ha.tokens.len() as f32;
                        let rescaled = ha.score * len.powi(a as i32) / len.powi(b as i32);
                        assert!((rescaled - hb.score).abs() <= 1e-4 * hb.score.abs());
                        shared += 1;
                    }
                }
            }
        }
    }
    assert!(shared > 0, "no hypothesis common to two penalties");
}

#[test]
fn a_prefix_is_forced_after_the_target_language() {
    let m = Model::load("nllb");
    let prefix = m.translator.target_prefix("Le chat").unwrap();
    let lang = m.translator.tokenizer().forced_bos_id().unwrap().unwrap();
    let eos = m.translator.tokenizer().eos_id().unwrap();
    assert!(!prefix.is_empty());
    assert!(
        !prefix.contains(&lang) && !prefix.contains(&eos),
        "{prefix:?}"
    );
    for beam in ["1", "4"] {
        let flags = ["--prefix", "Le chat", "--beam", beam];
        let options = m.options(|o| {
            o.decode.prefix = prefix.clone();
            o.decode.search.beam = beam.parse().unwrap();
        });
        let want = m.library(&options);
        assert_eq!(m.run(&flags), printed(&want, 1), "{flags:?}");
        for hyps in &want {
            let tokens = &hyps[0].tokens;
            assert_eq!(tokens[0], lang);
            assert_eq!(tokens[1..=prefix.len()], prefix[..], "{flags:?}");
            assert!(hyps[0].text.starts_with("Le chat"), "{:?}", hyps[0].text);
        }
    }
}

#[test]
fn sampling_is_reproducible_with_a_seed() {
    let m = Model::load("marian");
    let flags = [
        "--sample",
        "--temperature",
        "1.5",
        "--top-k",
        "0",
        "--seed",
        "7",
    ];
    let sampled = |seed: u64| {
        let mut s = m.translator.sampling(seed);
        (s.temperature, s.top_k) = (1.5, 0);
        m.options(|o| {
            o.decode.search.sampling = Some(s);
            o.decode.search.beam = 1;
        })
    };
    let first = m.run(&flags);
    assert_eq!(first, m.run(&flags), "the same seed draws the same tokens");
    assert_eq!(first, printed(&m.library(&sampled(7)), 1));
    // Other seeds draw other outputs (at temperature 1.5 over the whole vocabulary).
    let mut outputs: Vec<String> = (0..6)
        .map(|seed| {
            let seed = seed.to_string();
            m.run(&["--temperature", "1.5", "--top-k", "0", "--seed", &seed])
        })
        .collect();
    outputs.sort();
    outputs.dedup();
    assert!(outputs.len() > 1, "six seeds, one output: {outputs:?}");
    // Sampling among the one most likely token, or at temperature 0, is greedy search.
    let greedy = m.run(&["--beam", "1"]);
    assert_eq!(m.run(&["--top-k", "1", "--seed", "3"]), greedy);
    assert_eq!(m.run(&["--temperature", "0", "--seed", "3"]), greedy);
    // Top-p: the library's draw with the same seed.
    let mut s: Sampling = m.translator.sampling(11);
    s.top_p = 0.5;
    let options = m.options(|o| {
        o.decode.search.sampling = Some(s);
        o.decode.search.beam = 1;
    });
    assert_eq!(
        m.run(&["--top-p", "0.5", "--seed", "11"]),
        printed(&m.library(&options), 1)
    );
}

#[test]
fn a_generation_config_with_do_sample_samples_by_default() {
    let sampled = Model::load_with("marian", |dir| {
        let path = dir.join("generation_config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["do_sample"] = true.into();
        config["temperature"] = 2.0.into();
        config["top_k"] = 0.into();
        std::fs::write(&path, config.to_string()).unwrap();
    });
    let defaults = sampled.translator.sampling_defaults();
    assert!(defaults.do_sample);
    let s = sampled.translator.sampling(5);
    assert_eq!((s.temperature, s.top_k, s.top_p), (2.0, 0, 1.0));
    let options = sampled.options(|o| {
        o.decode.search.sampling = Some(s);
        o.decode.search.beam = 1;
    });
    assert_eq!(
        sampled.run(&["--seed", "5"]),
        printed(&sampled.library(&options), 1)
    );
    // --no-sample: the generation config's beam search.
    assert_eq!(sampled.translator.search_defaults().decode.search.beam, 4);
    let search = sampled.library(sampled.translator.search_defaults());
    assert_eq!(sampled.run(&["--no-sample"]), printed(&search, 1));
}

#[test]
fn bad_decoding_flags_are_refused_with_a_message() {
    let m = Model::load("marian");
    let cases: [(&[&str], &str); 12] = [
        (&["--length-penalty", "nan"], "must be finite"),
        (&["--length-penalty", "x"], "not a number"),
        (&["--repetition-penalty", "0"], "must be above 0"),
        (&["--temperature", "-1"], "must not be negative"),
        (&["--top-p", "0"], "must be above 0 and at most 1"),
        (&["--top-p", "1.5"], "must be above 0 and at most 1"),
        (&["--max-length-ratio", "1.5,x"], "B is not a count"),
        (&["--min-length", "-2"], "--min-length"),
        (
            &["--early-stopping", "always"],
            "must be true, false or never",
        ),
        (&["--seed", "3"], "--seed applies to sampling"),
        (
            &["--sample", "--beam", "4"],
            "sampling draws one hypothesis",
        ),
        (
            &["--temperature", "1", "--no-sample"],
            "cannot be used with",
        ),
    ];
    for (flags, message) in cases {
        let out = m.tessel(flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} succeeded");
        assert!(stderr.contains(message), "{flags:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{flags:?}: {stderr}");
    }
}

/// Runs `tessel translate` with `args` (no standard input).
fn tessel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessel"))
        .arg("translate")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the tessel binary runs")
}

#[test]
fn a_failing_line_keeps_every_other_line() {
    let m = Model::load("marian");
    let want = m.library(&m.options(|_| {}));
    let long = "fox ".repeat(100);
    let mut input = format!("{}\n{long}\n{}\r\n", TEXTS[0], TEXTS[1]).into_bytes();
    input.extend_from_slice(b"\xff\xfe\n");
    let runs: [&[&str]; 6] = [
        &["--batch-size", "1"],
        &["--batch-size", "1", "--threads", "2"],
        &[],
        &["--batch-size", "3"],
        &["--batch-size", "2", "--threads", "2"],
        &["--batch-type", "tokens", "--batch-size", "40"],
    ];
    for flags in runs {
        let out = m.tessel_stdin(flags, &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!(
                "{}\n\n{}\n\n",
                escaped(&want[0][0].text),
                escaped(&want[1][0].text)
            ),
            "{flags:?}"
        );
        for message in [
            "tessel: line 2: the source is",
            "tessel: line 4: the line is not valid UTF-8",
            "tessel: 2 of 4 inputs failed",
        ] {
            assert!(stderr.contains(message), "no {message:?} in {stderr}");
        }
    }
    // --nbest K: K lines for every input, the failed ones without score or text.
    let out = m.tessel_stdin(&["--nbest", "2"], &input);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{stdout}");
    assert_eq!(lines[2..4], ["0\t\t", "1\t\t"]);
    assert!(lines[4].starts_with("0\t-") && lines[4].ends_with(&want[1][0].text));
    // Texts given as arguments are numbered as such (the long one first).
    let out = m.tessel(&[&long]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("tessel: text 1: the source is"), "{stderr}");
    assert!(stderr.contains("1 of 3 inputs failed"), "{stderr}");
}

/// `--batch-size` prints what each line gets alone, for beam search with n-best lists, greedy
/// search and sampling with a seed, over lines of many lengths (so batches hold sources of
/// different lengths and searches that end at different steps).
#[test]
fn a_batch_prints_what_each_line_gets_alone() {
    let words = "the quick brown fox jumps over the lazy dog and runs far away".split(' ');
    let words: Vec<&str> = words.collect();
    let input: String = (1..=words.len())
        .map(|n| format!("{}\n", words[..(n * 5) % words.len() + 1].join(" ")))
        .collect();
    for name in ["marian", "nllb"] {
        let m = Model::load(name);
        let mut lang_flags = Vec::new();
        if let (Some(src), Some(tgt)) = languages(name) {
            lang_flags.extend(["--src-lang", src, "--tgt-lang", tgt]);
        }
        let searches: [&[&str]; 3] = [
            &["--beam", "4", "--nbest", "2"],
            &["--beam", "1"],
            &["--sample", "--temperature", "1.5", "--seed", "5"],
        ];
        for search in searches {
            let alone = [&lang_flags[..], search].concat();
            let want = m.tessel_stdin(&alone, input.as_bytes());
            assert!(
                want.status.success(),
                "{}",
                String::from_utf8_lossy(&want.stderr)
            );
            for batch in ["4", "16"] {
                let flags = [&alone[..], &["--batch-size", batch]].concat();
                let got = m.tessel_stdin(&flags, input.as_bytes());
                assert!(
                    got.status.success(),
                    "{}",
                    String::from_utf8_lossy(&got.stderr)
                );
                assert_eq!(got.stdout, want.stdout, "{name} {flags:?}");
            }
        }
    }
}

/// `--batch-type tokens` (CTranslate2's `batch_type="tokens"`: `--batch-size` counts source
/// tokens, each line as long as its batch's longest) prints what `--batch-size 1` and
/// `--batch-size 4` print, in input order, whatever the budget: every line a batch of its own
/// (1 token), a few lines a batch, all of them in one; from standard input and from TEXT
/// arguments; for beam search with n-best lists, greedy search and sampling with a seed.
#[test]
fn a_token_budget_prints_what_each_line_gets_alone() {
    let words = "the quick brown fox jumps over the lazy dog and runs far away".split(' ');
    let words: Vec<&str> = words.collect();
    let lines: Vec<String> = (1..=words.len())
        .map(|n| words[..(n * 5) % words.len() + 1].join(" "))
        .collect();
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let budgets: [&[&str]; 4] = [
        &["--batch-size", "4"],
        &["--batch-type", "tokens", "--batch-size", "1"],
        &["--batch-type", "tokens", "--batch-size", "24"],
        &["--batch-type", "tokens", "--batch-size", "4096"],
    ];
    for name in ["marian", "nllb"] {
        let m = Model::load(name);
        let mut lang_flags = Vec::new();
        if let (Some(src), Some(tgt)) = languages(name) {
            lang_flags.extend(["--src-lang", src, "--tgt-lang", tgt]);
        }
        let searches: [&[&str]; 3] = [
            &["--beam", "4", "--nbest", "2"],
            &["--beam", "1"],
            &["--sample", "--temperature", "1.5", "--seed", "5"],
        ];
        for search in searches {
            let alone = [&lang_flags[..], search, &["--batch-size", "1"]].concat();
            let want = m.tessel_stdin(&alone, input.as_bytes());
            let stderr = String::from_utf8_lossy(&want.stderr);
            assert!(want.status.success(), "{stderr}");
            for budget in budgets {
                let flags = [&lang_flags[..], search, budget].concat();
                let got = m.tessel_stdin(&flags, input.as_bytes());
                let stderr = String::from_utf8_lossy(&got.stderr);
                assert!(got.status.success(), "{flags:?}: {stderr}");
                assert_eq!(got.stdout, want.stdout, "{name} {flags:?}");
            }
        }
        // The lines as TEXT arguments (the session planned for no more slots than texts).
        let mut args = vec!["--model", m.dir.to_str().unwrap()];
        args.extend(&lang_flags);
        args.extend([
            "--beam",
            "1",
            "--batch-type",
            "tokens",
            "--batch-size",
            "30",
        ]);
        args.extend(lines.iter().map(String::as_str));
        let got = tessel(&args);
        let want = m.tessel_stdin(
            &[&lang_flags[..], &["--beam", "1", "--batch-size", "1"]].concat(),
            input.as_bytes(),
        );
        let stderr = String::from_utf8_lossy(&got.stderr);
        assert!(got.status.success(), "{stderr}");
        assert_eq!(got.stdout, want.stdout, "{name}: TEXT arguments");
    }
}

#[test]
fn each_output_is_written_as_soon_as_it_is_done() {
    let m = Model::load("marian");
    let want = m.library(&m.options(|_| {}));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessel"))
        .args(["translate", "--model", m.dir.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tessel binary runs");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", TEXTS[0]).unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
    });
    // Standard input is still open: the first output must come before it ends.
    let first = rx.recv_timeout(Duration::from_secs(60));
    drop(stdin);
    let status = child.wait().unwrap();
    let first = first.expect("no output while the input was still open");
    assert_eq!(first.unwrap().unwrap(), escaped(&want[0][0].text));
    assert!(status.success());
}

#[test]
fn outputs_with_line_breaks_stay_on_one_line() {
    // The BART fixture's word-level vocabulary, every odd word renamed to end with a carriage
    // return, a newline and a backslash.
    let dir = copy_dir("tests/translation/bart/hf");
    let path = dir.join("tokenizer.json");
    let mut tokenizer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vocab = tokenizer["model"]["vocab"].as_object_mut().unwrap();
    let renamed: Vec<(String, serde_json::Value)> = std::mem::take(vocab)
        .into_iter()
        .map(|(word, id)| {
            let odd = word[1..].parse::<u32>().is_ok_and(|n| n % 2 == 1);
            match word.strip_prefix('w') {
                Some(_) if odd => (format!("{word}\r\n\\"), id),
                _ => (word, id),
            }
        })
        .collect();
    vocab.extend(renamed);
    std::fs::write(&path, tokenizer.to_string()).unwrap();
    let inputs = ["w2 w4 w6 w8", "w10 w12 w14"];
    let translator = Translator::load(&dir, LoadSettings::default(), None, None).unwrap();
    let mut session = translator.session(isa_from_env().unwrap(), 1).unwrap();
    let want: Vec<String> = session
        .translate_lines(&inputs, translator.defaults())
        .into_iter()
        .map(|r| r.unwrap()[0].text.clone())
        .collect();
    assert!(want.iter().any(|t| t.contains('\n')), "{want:?}");
    let mut args = vec!["--model", dir.to_str().unwrap()];
    args.extend(inputs);
    let out = tessel(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), inputs.len(), "{stdout:?}");
    let expected: String = want.iter().map(|t| escaped(t) + "\n").collect();
    assert_eq!(stdout, expected);
    assert!(stdout.contains("\\r\\n\\\\"), "{stdout:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_are_refused_before_the_model_loads() {
    // A directory that does not exist: each flag's own message comes first.
    let cases: [(&[&str], i32, &str); 13] = [
        (&["--beam", "0"], 2, "0 is outside 1..=64"),
        (&["--batch-size", "0"], 2, "at least 1"),
        (
            &["--batch-size", "1000"],
            1,
            "--batch-size 1000 is more than 256 texts",
        ),
        (
            &["--batch-type", "tokens", "--batch-size", "2000000"],
            2,
            "2000000 is more than 1048576",
        ),
        (
            &["--batch-type", "words", "--batch-size", "8"],
            2,
            "invalid value 'words' for '--batch-type <TYPE>'",
        ),
        (
            &["--batch-type", "tokens"],
            1,
            "--batch-type tokens needs --batch-size N",
        ),
        (
            &["--batch-type", "tokens", "--batch-size", "0"],
            2,
            "at least 1",
        ),
        (&["--beam", "1000"], 2, "1000 is outside 1..=64"),
        (&["--threads", "100000"], 2, "cores available"),
        (&["--threads", "0"], 2, "at least 1"),
        (
            &["--nbest", "5", "--beam", "4"],
            1,
            "--nbest 5 is more than the beam width 4 (--beam)",
        ),
        (
            &["--min-length", "100", "--max-length", "10"],
            1,
            "--min-length 100 is more than --max-length 10 allows",
        ),
        (&[], 1, "/nonexistent/model: no such file or directory"),
    ];
    for (flags, status, message) in cases {
        let mut args = vec!["--model", "/nonexistent/model", "a text"];
        args.extend(flags);
        let out = tessel(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{flags:?}: {stderr}");
        assert!(stderr.contains(message), "{flags:?}: {stderr}");
    }
    // Where the generation config gives the beam, --nbest is checked against it.
    let m = Model::load("marian");
    let out = m.tessel(&["--nbest", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("beam width 4 (the generation config's num_beams)"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_wrong_model_or_a_damaged_one_is_named() {
    let truncated = copy_dir("tests/translation/bart/hf");
    let weights = truncated.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    let headless = copy_dir("tests/translation/bart/hf");
    std::fs::write(headless.join("model.safetensors"), &bytes[..5]).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let moe = copy_dir("tests/translation/bart/hf");
    let config = std::fs::read_to_string(moe.join("config.json")).unwrap();
    let config = config.replace("\"model_type\": \"bart\"", "\"model_type\": \"nllb-moe\"");
    std::fs::write(moe.join("config.json"), config).unwrap();
    let whisper_ct2 = root().join("tests/transcribe/tiny_en_32/model");
    let whisper_hf = root().join("tests/whisper/tiny_like_80/hf");
    let cases: [(&Path, &[&str]); 5] = [
        (
            &whisper_ct2,
            &[
                "is a CTranslate2 Whisper model (speech recognition); `translate` needs a \
                 translation model",
                "tessel transcribe --task translate",
            ],
        ),
        (
            &whisper_hf,
            &["is a Hugging Face Whisper model (speech recognition)"],
        ),
        (
            &truncated,
            &["model.safetensors is truncated", "tensor data is missing"],
        ),
        (&headless, &["model.safetensors is truncated: 5 bytes"]),
        (&moe, &["model_type `nllb-moe`", "supported: marian"]),
    ];
    for (dir, messages) in cases {
        let out = tessel(&["--model", dir.to_str().unwrap(), "w1 w2"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{dir:?}: {stderr}");
        assert!(stderr.contains(dir.to_str().unwrap()), "{stderr}");
        for message in messages {
            assert!(stderr.contains(message), "{dir:?}: {stderr}");
        }
    }
    for dir in [truncated, headless, moe] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn the_generation_configs_beam_is_planned_for() {
    let with_beams = |beams: u64| {
        let dir = copy_dir("tests/translation/bart/hf");
        let path = dir.join("generation_config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["num_beams"] = beams.into();
        std::fs::write(&path, config.to_string()).unwrap();
        dir
    };
    // Wider than any fixed plan the command could make without reading the config.
    let wide = with_beams(12);
    let wide = wide.to_str().unwrap();
    let by_config = tessel(&["--model", wide, "w1 w2 w3"]);
    let by_flag = tessel(&["--model", wide, "--beam", "12", "w1 w2 w3"]);
    assert!(by_config.status.success(), "{by_config:?}");
    assert_eq!(by_config.stdout, by_flag.stdout);
    // Wider than `--beam` may ask for: refused, naming the way out.
    let absurd = with_beams(100);
    let out = tessel(&["--model", absurd.to_str().unwrap(), "w1 w2 w3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("the beam width 100 (the generation config's num_beams) is more than the 64"),
        "{stderr}"
    );
}

/// `tessel summarize` reads a whole document (standard input, `--input FILE`, or each TEXT)
/// as one text: its output is the library's translation of the trimmed document, inner line
/// breaks included, and its report names the source tokens; `--progress` adds a progress line.
#[test]
fn summarize_reads_a_whole_document_as_one_text() {
    let dir = root().join("tests/translation/bart/hf");
    let document = "w2 w4 w6\nw8 w10\n\nw12 w14 w16 w18\n";
    let translator = Translator::load(&dir, LoadSettings::default(), None, None).unwrap();
    let options = translator.defaults();
    let mut session = translator.session(isa_from_env().unwrap(), 1).unwrap();
    let want = session.translate_with(document.trim(), options).unwrap()[0]
        .text
        .clone();
    let sources = translator
        .source_ids(document.trim(), 1024, options)
        .unwrap();
    let summarize_with = |model: &Path, args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessel"))
            .arg("summarize")
            .args(["--model", model.to_str().unwrap()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the tessel binary runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let summarize = |args: &[&str], stdin: &str| summarize_with(&dir, args, stdin);
    let out = summarize(&[], document);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{want}\n"));
    let report = format!("summarize: {} source tokens, encoder", sources.len());
    assert!(stderr.contains(&report), "{stderr}");
    let file = std::env::temp_dir().join(format!("tessel-summarize-{}.txt", std::process::id()));
    std::fs::write(&file, document).unwrap();
    let out = summarize(&["--input", file.to_str().unwrap()], "");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{want}\n"));
    // --progress: the same output, a line per decoder step on standard error, erased.
    let out = summarize(&["--input", file.to_str().unwrap(), "--progress"], "");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{want}\n"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let steps = format!(
        "\rsummarize: {} source tokens encoded, 1 tokens decoded",
        sources.len()
    );
    assert!(stderr.starts_with("\rsummarize: encoding"), "{stderr:?}");
    assert!(stderr.contains(&steps), "{stderr:?}");
    assert!(stderr.contains(&report), "{stderr:?}");
    let _ = std::fs::remove_file(&file);
    let out = summarize(&[document.trim(), "w3 w5"], "");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(stdout.lines().next(), Some(want.as_str()), "{stdout}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let whisper = root().join("tests/whisper/tiny_like_80/hf");
    let out = summarize_with(&whisper, &[], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a translation model"));
}

/// `tessel summarize` on an LED directory: `--global-tokens` and `--max-source-len` reach the
/// session (the output is the library's with the same settings; a smaller plan reports a
/// smaller arena), and a source longer than `--max-source-len` is refused.
#[test]
fn summarize_sets_global_tokens_and_the_planned_source_length() {
    let dir = root().join("tests/translation/led/hf");
    let document = "w2 w4 w6 w8 w10 w12 w14 w16 w18 w20 w22 w24 w26 w28 w30 w32 w34";
    let translator = Translator::load(&dir, LoadSettings::default(), None, None).unwrap();
    let options = translator.defaults();
    let library = |translator: &Translator| {
        let mut session = translator.session(isa_from_env().unwrap(), 1).unwrap();
        session.translate_with(document, options).unwrap()[0]
            .text
            .clone()
    };
    let summarize = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tessel"))
            .arg("summarize")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the tessel binary runs")
    };
    let arena = |stderr: &str| -> usize {
        let tail = stderr.split("arena ").nth(1).expect("an arena figure");
        tail.split(' ').next().unwrap().parse().unwrap()
    };
    let first = summarize(&["--model", dir.to_str().unwrap(), document]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        format!("{}\n", library(&translator))
    );
    let none = summarize(&[
        "--model",
        dir.to_str().unwrap(),
        "--global-tokens",
        "0",
        "--max-source-len",
        "20",
        document,
    ]);
    assert!(
        none.status.success(),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
    let planned = translator.with_global_tokens(0).with_max_source_len(20);
    assert_eq!(
        String::from_utf8_lossy(&none.stdout),
        format!("{}\n", library(&planned))
    );
    assert_ne!(
        first.stdout, none.stdout,
        "global attention changes the summary"
    );
    let (full, small) = (
        arena(&String::from_utf8_lossy(&first.stderr)),
        arena(&String::from_utf8_lossy(&none.stderr)),
    );
    assert!(small < full, "{small} < {full}");
    let long = summarize(&[
        "--model",
        dir.to_str().unwrap(),
        "--max-source-len",
        "8",
        document,
    ]);
    assert!(!long.status.success());
    let stderr = String::from_utf8_lossy(&long.stderr);
    assert!(stderr.contains("8"), "{stderr}");
}
