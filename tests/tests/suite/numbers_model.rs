//! The embedded numbers model, `assets/numbers` (English number words to digits, trained by
//! `tools/train_numbers.py`): each line of the held-out set `heldout.tsv` (numbers never drawn
//! in training) is tokenised as its `vocab.json` says and decoded greedily. At every ISA level
//! the exact-match accuracy is at least [`MIN_ACCURACY`], and tessel's output is PyTorch's
//! (`pytorch_greedy.tsv`: greedy decoding in float64 on the same float16 weights) on every line
//! whose greedy path PyTorch decided by a top-1 minus top-2 logit gap above [`MIN_MARGIN`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tessel_kernels::{Isa, Level};
use tessel_model::{Limits, Model, Request, SearchOptions, Session};
use tessel_tests::for_each_isa;

/// Exact-match accuracy the model must reach on the held-out set.
const MIN_ACCURACY: f64 = 0.99;

/// Greedy paths decided by a smaller logit gap may legitimately differ between float64 and
/// tessel's float32 (relative logit error ~1e-5 on the golden fixtures).
const MIN_MARGIN: f64 = 1e-3;

/// The SIMD levels of x86-64 read every held-out line (1684, under a second of CPU at AVX-512).
/// The scalar level (about 5 ms a line) reads every `SCALAR_STRIDE`-th line (211), and NEON,
/// which CI runs under qemu 10 to 50 times slower, every `NEON_STRIDE`-th (53).
const SCALAR_STRIDE: usize = 8;

/// See [`SCALAR_STRIDE`].
const NEON_STRIDE: usize = 32;

/// Greedy steps: the longest answer, nine digits and EOS (as `tools/train_numbers.py` decodes).
const MAX_STEPS: usize = 10;

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("assets")
        .join("numbers")
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The symbols of `vocab.json` and its tokenisation rule.
struct Vocab {
    source: HashMap<char, u32>,
    unk: u32,
    target: Vec<String>,
    eos: u32,
}

impl Vocab {
    fn load(dir: &Path) -> Vocab {
        let json: serde_json::Value =
            serde_json::from_str(&read(dir, "vocab.json")).expect("vocab.json parses");
        let symbols = |side: &str| -> Vec<String> {
            json[side]["symbols"]
                .as_array()
                .unwrap_or_else(|| panic!("vocab.json: {side}.symbols"))
                .iter()
                .map(|s| s.as_str().expect("symbol is a string").to_owned())
                .collect()
        };
        let id = |side: &str, key: &str| -> u32 {
            let value = json[side][key].as_u64();
            let value = value.unwrap_or_else(|| panic!("vocab.json: {side}.{key}"));
            u32::try_from(value).expect("id fits u32")
        };
        let mut source = HashMap::new();
        for (i, symbol) in symbols("source").iter().enumerate() {
            let mut chars = symbol.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                source.insert(c, u32::try_from(i).expect("id fits u32"));
            }
        }
        Vocab {
            source,
            unk: id("source", "unk_id"),
            target: symbols("target"),
            eos: id("target", "eos_id"),
        }
    }

    /// Lower-case, whitespace runs collapsed to one space and trimmed, one id per character,
    /// unknown characters to `unk`.
    fn tokenize(&self, text: &str) -> Vec<u32> {
        let text = text.to_lowercase();
        let words: Vec<&str> = text.split_whitespace().collect();
        words
            .join(" ")
            .chars()
            .map(|c| self.source.get(&c).copied().unwrap_or(self.unk))
            .collect()
    }

    /// The symbols of `tokens` up to EOS; a `?` marks output that never produced EOS.
    fn detokenize(&self, tokens: &[u32]) -> String {
        let mut text = String::new();
        for &t in tokens {
            if t == self.eos {
                return text;
            }
            text.push_str(&self.target[t as usize]);
        }
        text.push('?');
        text
    }
}

/// Words, expected digits, PyTorch's greedy output and its decision margin.
struct Line {
    words: String,
    digits: String,
    pytorch: String,
    margin: f64,
}

fn read_lines(dir: &Path) -> Vec<Line> {
    let heldout = read(dir, "heldout.tsv");
    let pytorch = read(dir, "pytorch_greedy.tsv");
    let lines: Vec<Line> = heldout
        .lines()
        .zip(pytorch.lines())
        .map(|(h, p)| {
            let (words, digits) = h.split_once('\t').expect("words<TAB>digits");
            let p: Vec<&str> = p.split('\t').collect();
            assert_eq!(
                p.len(),
                3,
                "pytorch_greedy.tsv: words<TAB>output<TAB>margin"
            );
            assert_eq!(p[0], words, "pytorch_greedy.tsv follows heldout.tsv");
            Line {
                words: words.to_owned(),
                digits: digits.to_owned(),
                pytorch: p[1].to_owned(),
                margin: p[2].parse().expect("margin"),
            }
        })
        .collect();
    assert_eq!(lines.len(), heldout.lines().count());
    assert_eq!(lines.len(), pytorch.lines().count());
    lines
}

/// Greedy digits of `words`.
fn read_number(session: &mut Session<&Model>, vocab: &Vocab, words: &str) -> String {
    session.encode(&vocab.tokenize(words)).expect("encode");
    let hyps = session
        .generate(Request::new(SearchOptions::greedy(MAX_STEPS)))
        .expect("greedy");
    vocab.detokenize(hyps.best().expect("one hypothesis").tokens)
}

/// How many lines apart the lines read at `isa` are.
fn stride(isa: Isa) -> usize {
    match isa.level() {
        Level::Scalar => SCALAR_STRIDE,
        Level::Neon => NEON_STRIDE,
        Level::Avx2 | Level::Avx512 => 1,
    }
}

#[test]
fn numbers_model_reads_held_out_numbers_as_pytorch_does() {
    let dir = model_dir();
    let model = Model::load_dir(&dir).expect("assets/numbers loads");
    let vocab = Vocab::load(&dir);
    let lines = read_lines(&dir);
    let limits = Limits {
        max_beam: 1,
        ..Limits::of(model.config())
    };
    for_each_isa(|isa| {
        let mut session = Session::with_limits(&model, isa, limits).expect("session");
        let (mut read, mut correct, mut decided) = (0usize, 0usize, 0usize);
        for line in lines.iter().step_by(stride(isa)) {
            read += 1;
            let got = read_number(&mut session, &vocab, &line.words);
            correct += usize::from(got == line.digits);
            if line.margin > MIN_MARGIN {
                decided += 1;
                assert_eq!(
                    got, line.pytorch,
                    "{isa}: {:?} (PyTorch margin {})",
                    line.words, line.margin
                );
            }
        }
        assert!(
            decided * 10 >= read * 9,
            "{isa}: only {decided} of {read} lines have a clear PyTorch greedy path"
        );
        let accuracy = correct as f64 / read as f64;
        eprintln!(
            "numbers model {isa}: exact match {correct}/{read} = {accuracy:.4}; identical to \
             PyTorch on all {decided} lines decided by a gap above {MIN_MARGIN}"
        );
        assert!(
            accuracy >= MIN_ACCURACY,
            "{isa}: exact match {accuracy:.4} below {MIN_ACCURACY}"
        );
    });
}

#[test]
fn numbers_model_reads_the_issue_examples() {
    let dir = model_dir();
    let model = Model::load_dir(&dir).expect("assets/numbers loads");
    let vocab = Vocab::load(&dir);
    let examples = [
        ("four hundred and twelve thousand and seven", "412007"),
        ("Nineteen", "19"),
        ("two million  three hundred thousand", "2300000"),
    ];
    for_each_isa(|isa| {
        let mut session = Session::new(&model, isa).expect("session");
        for (words, digits) in examples {
            assert_eq!(read_number(&mut session, &vocab, words), digits, "{isa}");
        }
    });
}

/// With int8 linear weights (quantised at load), greedy answers equal PyTorch's on every line
/// whose PyTorch greedy path is decided by a logit gap above this. Measured: every line of the
/// held-out set is read as PyTorch reads it, at every level (the test prints the counts).
const INT8_MIN_MARGIN: f64 = 1.0;

#[test]
fn numbers_model_with_int8_weights_keeps_its_answers() {
    let dir = model_dir();
    let options = tessel_model::LoadOptions::weights(tessel_model::WeightType::Int8);
    let model = Model::load_dir_with(&dir, &options).expect("assets/numbers loads as int8");
    let vocab = Vocab::load(&dir);
    let lines = read_lines(&dir);
    let limits = Limits {
        max_beam: 1,
        ..Limits::of(model.config())
    };
    for_each_isa(|isa| {
        let mut session = Session::with_limits(&model, isa, limits).expect("session");
        let (mut read, mut correct, mut same) = (0usize, 0usize, 0usize);
        let mut widest_differing = 0.0f64;
        for line in lines.iter().step_by(stride(isa)) {
            read += 1;
            let got = read_number(&mut session, &vocab, &line.words);
            correct += usize::from(got == line.digits);
            if got == line.pytorch {
                same += 1;
            } else {
                widest_differing = widest_differing.max(line.margin);
                assert!(
                    line.margin <= INT8_MIN_MARGIN,
                    "{isa}: int8 reads {:?} as {got}, PyTorch as {} (margin {})",
                    line.words,
                    line.pytorch,
                    line.margin
                );
            }
        }
        let accuracy = correct as f64 / read as f64;
        eprintln!(
            "numbers model int8 {isa}: exact match {correct}/{read} = {accuracy:.4}; same answer \
             as PyTorch on {same}/{read}; largest PyTorch margin of a differing line \
             {widest_differing}"
        );
        assert!(
            accuracy >= MIN_ACCURACY,
            "{isa}: int8 exact match {accuracy:.4} below {MIN_ACCURACY}"
        );
    });
}
