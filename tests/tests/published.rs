//! Checkpoints in the layouts and dimensions of published models (`tests/published/<row>/`,
//! made by `tools/make_published_golden.py`): the published `config.json` (layer counts cut
//! to 2 per stack) and `generation_config.json`, random weights regenerated at test time from
//! the row's manifest (see `tessel_tests::published`), opened as a user opens a downloaded
//! directory (`Directory::open`, then `load`) and held to `transformers` in float64 at every
//! ISA level: teacher-forced logits within 1e-4 of the logit scale at 256 columns a step (the
//! 32 largest and 224 drawn ones), greedy and beam-4 tokens identical. Then the row's
//! CTranslate2 conversion (`ct2.json`, made by `tools/make_published_ct2.py` with the
//! converter itself), rebuilt from the same weights with every variable's digest checked
//! against the converter's (`tessel_tests::published_ct2`), is held to the same references,
//! and where the row has one its int8 conversion (`ct2_int8.json`) to CTranslate2's runs on it
//! (`check_int8`).
//!
//! `TESSEL_PUBLISHED_ROWS=a,b` runs only the rows named; `TESSEL_PUBLISHED_CT2=0` skips the
//! conversions; `TESSEL_PUBLISHED_MAX_VALUES` skips
//! rows of more values than it says; each skip is printed. `TESSEL_PUBLISHED_CACHE` names the
//! directory the weights are generated into (default `target/tmp/published`); a row's weights
//! are deleted once it is checked unless `TESSEL_PUBLISHED_KEEP` (`all` or row names) keeps
//! them, so a cross-compiled run under qemu reads the files the native run kept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tessel_kernels::Isa;
use tessel_model::load::directory::{Directory, LoadSettings};
use tessel_model::{Model, Request, SearchOptions, Session, WeightType};
use tessel_tests::for_each_isa;
use tessel_tests::published::{materialize, Entry, Manifest};
use tessel_tests::published_ct2::{self, Converted, Runtime};

fn rows() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("published");
    let mut rows: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("row").path())
        .filter(|path| path.join("manifest.json").is_file())
        .filter(|path| match std::env::var("TESSEL_PUBLISHED_ROWS") {
            Ok(only) => only.split(',').any(|row| path.ends_with(row)),
            Err(_) => true,
        })
        .collect();
    rows.sort();
    rows
}

fn max_values() -> usize {
    std::env::var("TESSEL_PUBLISHED_MAX_VALUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Whether the rows' CTranslate2 conversions are checked too (`TESSEL_PUBLISHED_CT2=0` skips
/// them: the conversions prove a loader, which runs the same at every level).
fn conversions() -> bool {
    std::env::var("TESSEL_PUBLISHED_CT2").map_or(true, |v| v != "0")
}

/// What the encoder reads: source ids, or a log-mel spectrogram for speech rows.
enum Source {
    Ids(Vec<u32>),
    Mel(Vec<f32>),
}

struct Expected {
    source: Source,
    forced: Vec<u32>,
    prompt: Vec<u32>,
    scale: f64,
    /// Per teacher-forced step, (column, logit).
    columns: Vec<Vec<(usize, f64)>>,
    greedy: Vec<u32>,
    /// Beam-4 tokens (text rows: Whisper's `generate` has rules of its own).
    beam4: Option<Vec<u32>>,
    margin: f64,
    float32_error: f64,
    /// Rows with an untied `lm_head`: how far the same weights projected with `shared` land
    /// from the reference at the checked columns, as a fraction of the scale.
    tied_head_distance: Option<f64>,
    /// Longformer rows: the source's first tokens with global attention.
    global_tokens: Option<usize>,
}

fn expected(row: &Path) -> Expected {
    let text = std::fs::read_to_string(row.join("expected.json")).expect("expected.json");
    let json: Value = serde_json::from_str(&text).expect("expected.json");
    let ids = |key: &str| -> Vec<u32> {
        json[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|v| v.as_u64().expect(key) as u32)
            .collect()
    };
    let columns = json["logits"]
        .as_array()
        .expect("logits")
        .iter()
        .map(|step| {
            step.as_array()
                .expect("step")
                .iter()
                .map(|pair| {
                    let column = pair[0].as_u64().expect("column") as usize;
                    (column, pair[1].as_f64().expect("logit"))
                })
                .collect()
        })
        .collect();
    let source = match json.get("mel") {
        Some(mel) => {
            let seed = json["mel_seed"].as_u64().expect("mel_seed");
            Source::Mel(Entry::from_json(mel).generate_checked(seed))
        }
        None => Source::Ids(ids("src_ids")),
    };
    Expected {
        source,
        forced: ids("decoder_input_ids"),
        prompt: ids("prompt"),
        scale: json["logit_scale"].as_f64().expect("logit_scale"),
        columns,
        greedy: ids("greedy_tokens"),
        beam4: json.get("beam4_tokens").map(|_| ids("beam4_tokens")),
        margin: json["greedy_margin"].as_f64().expect("greedy_margin"),
        float32_error: json["float32_error"].as_f64().expect("float32_error"),
        tied_head_distance: json
            .get("tied_head_distance")
            .map(|v| v.as_f64().expect("distance")),
        global_tokens: json
            .get("global_tokens")
            .map(|v| v.as_u64().expect("global_tokens") as usize),
    }
}

fn check_logits(session: &mut Session<&Model>, expected: &Expected, what: &str) {
    let bound = 1e-4 * expected.scale.max(1.0);
    for (step, (&token, columns)) in expected.forced.iter().zip(&expected.columns).enumerate() {
        let logits = session.decode_step(&[token]).unwrap();
        for &(column, want) in columns {
            let got = logits[column] as f64;
            assert!(
                (got - want).abs() <= bound,
                "{what}: step {step} column {column}: {got} against {want} (bound {bound})"
            );
        }
    }
}

fn search(session: &mut Session<&Model>, prompt: &[u32], beam: usize, total: usize) -> Vec<u32> {
    let options = SearchOptions::beam(beam, total - prompt.len());
    let hyps = session
        .generate(Request::new(options).prefix(prompt))
        .unwrap();
    let mut tokens = prompt.to_vec();
    tokens.extend_from_slice(hyps.best().unwrap().tokens);
    tokens
}

fn check_row(row: &Path, cache: &Path) {
    let name = row.file_name().unwrap().to_string_lossy().into_owned();
    let expected = expected(row);
    assert!(
        expected.margin > 20.0 * 1e-4 * expected.scale,
        "{name}: the fixture's greedy margin {} is too close to the bound",
        expected.margin
    );
    assert!(
        expected.float32_error < 0.5e-4,
        "{name}: float32 lands {} of the scale from float64 on these weights: ill-conditioned",
        expected.float32_error
    );
    check_untied_head(&name, row, &expected);
    let generated = materialize(row, cache);
    check_directory(&name, generated.dir(), &expected);
    // The CTranslate2 conversion of the same weights, as the converter wrote it (LED and
    // LongT5 have no converter).
    if !conversions() || !row.join("ct2.json").is_file() {
        return;
    }
    let (converted, int8) = published_ct2::convert(row, generated.dir(), cache);
    drop(generated);
    let what = format!("{name} (CTranslate2)");
    match converted.runtime() {
        Some(runtime) if !runtime.matches_transformers => {
            check_against_ctranslate2(&what, converted.dir(), &expected, runtime)
        }
        _ => check_directory(&what, converted.dir(), &expected),
    }
    drop(converted);
    if let Some(int8) = int8 {
        check_int8(&format!("{name} (CTranslate2 int8)"), &int8, &expected);
    }
}

/// A row whose published `config.json` says `tie_word_embeddings: false` (the T5 v1.1
/// family) stores its own `lm_head.weight`, as the published files do, drawn apart from
/// `shared` and far enough from it that the logits check fails on an engine that projects
/// with `shared`: the reference computed that way lands more than 20 bounds away.
fn check_untied_head(name: &str, row: &Path, expected: &Expected) {
    let text = std::fs::read_to_string(row.join("config.json")).expect("config.json");
    let config: Value = serde_json::from_str(&text).expect("config.json");
    if config["tie_word_embeddings"] != Value::Bool(false) {
        return;
    }
    let manifest = Manifest::read(row);
    let generator = |tensor: &str| {
        let entry = manifest.tensors.iter().find(|e| e.name == tensor);
        entry.map(|e| e.generator.clone())
    };
    let head = generator("lm_head.weight")
        .unwrap_or_else(|| panic!("{name}: untied, but no lm_head.weight"));
    assert_ne!(
        Some(head),
        generator("shared.weight"),
        "{name}: lm_head.weight drawn as shared.weight"
    );
    let distance = expected
        .tied_head_distance
        .unwrap_or_else(|| panic!("{name}: expected.json has no tied_head_distance"));
    assert!(
        distance > 20.0 * 1e-4,
        "{name}: projecting with shared lands only {distance} of the scale away"
    );
}

fn load(name: &str, dir: &Path) -> tessel_model::load::directory::Loaded {
    let directory = Directory::open(dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    let settings = LoadSettings {
        max_beam: 4,
        max_len: 64,
        weights: None,
    };
    directory
        .load(&settings)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A conversion that is not the checkpoint (CTranslate2 itself computes other logits than
/// transformers on it): held to what CTranslate2 computes, at the step the script ran it.
fn check_against_ctranslate2(name: &str, dir: &Path, expected: &Expected, runtime: &Runtime) {
    let loaded = load(name, dir);
    let bound = 1e-4 * expected.scale.max(1.0);
    for_each_isa(|isa| {
        let mut session = Session::new(&loaded.model, isa).unwrap();
        match &expected.source {
            Source::Ids(src) => session.encode(src).unwrap(),
            Source::Mel(mel) => session.encode_audio(mel).unwrap(),
        }
        for &token in &expected.forced[..runtime.step] {
            session.decode_step(&[token]).unwrap();
        }
        let logits = session
            .decode_step(&[expected.forced[runtime.step]])
            .unwrap();
        for &(column, want) in &runtime.columns {
            let got = logits[column] as f64;
            assert!(
                (got - want).abs() <= bound,
                "{name} at {isa}: column {column}: {got} against CTranslate2's {want}"
            );
        }
    });
}

/// Largest `|tessel int8 - tessel float32|` of a logit on a row's int8 conversion (the same
/// file loaded as stored and dequantised), relative to the logit scale (the largest unmasked
/// `|logit|` of CTranslate2's float32 run on it, at least 1), at any step recorded: what int8
/// activations add. These random weights at the published gains amplify a perturbation of
/// their activations a few hundred-fold (float32 lands up to 3.1e-5 of the scale from float64
/// on them), so int8's `1/254` steps reach the logits at a tenth of the scale. Measured at avx2
/// (printed by the test): 1.2e-2 (whisper-tiny, one step), 6.3e-2 (flan-t5-small), 0.12
/// (t5-small), 0.15 (bart-large-cnn), 0.16 (nllb-200-distilled-600M), 0.42
/// (opus-mt-en-de, the same with its output projection int8 or dequantised: 0.425 and 0.424).
const INT8_DRIFT_BOUND: f64 = 0.6;

/// Largest `|tessel int8 - CTranslate2 int8|` of a logit, relative to the same scale: a bound
/// that says little. CTranslate2's int8 GEMM on x86-64 without VNNI (oneDNN's u8·s8 kernel,
/// `vpmaddubsw`) adds adjacent products in saturating 16-bit lanes; the int8 values of these
/// uniform random weights fill their range, and about 4 % of the pairs of opus-mt-en-de's first
/// projection saturate on its first layer's input (an emulation, tests/published/README.md), so
/// CTranslate2's int8 run lands 0.33 to 0.83 of the scale from its float32 run where tessel's
/// exact integer sums land 0.012 to 0.42, and the two int8 runs are 0.33 (whisper-tiny) to 0.81
/// (flan-t5-small) apart, measured at avx2. The test holds tessel's drift under CTranslate2's
/// own instead. Tight agreement with CTranslate2's int8 (1e-4 of the scale) is held at cut
/// dimensions on Gaussian weights, where nothing saturates (`tests/ct2_int8`,
/// `int8_accuracy.rs`).
const INT8_CT2_BOUND: f64 = 1.0;

/// Per teacher-forced step from `first`, `model`'s logits at expected.json's columns of that
/// step, `steps` steps.
fn forced_columns(
    model: &Model,
    isa: Isa,
    expected: &Expected,
    first: usize,
    steps: usize,
) -> Vec<Vec<f64>> {
    let mut session = Session::new(model, isa).unwrap();
    match &expected.source {
        Source::Ids(src) => session.encode(src).unwrap(),
        Source::Mel(mel) => session.encode_audio(mel).unwrap(),
    }
    if first > 0 {
        session.prefill(&expected.forced[..first]).unwrap();
    }
    (first..first + steps)
        .map(|step| {
            let logits = session.decode_step(&[expected.forced[step]]).unwrap();
            expected.columns[step]
                .iter()
                .map(|&(column, _)| logits[column] as f64)
                .collect()
        })
        .collect()
}

/// Logits CTranslate2 masks (Whisper's `generate` sets its suppressed tokens to `-f32::MAX`
/// even on the prompt's steps): left out of scales and differences.
const MASKED: f64 = -1e30;

/// The largest `|a - b|` over the steps both hold, masked logits left out.
fn farthest(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    let pairs = a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y));
    pairs
        .filter(|&(x, y)| *x > MASKED && *y > MASKED)
        .fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

/// A row's rebuilt int8 conversion (`ct2_int8.json`), opened as a user opens a download. Its
/// linear layers stay int8, the output projection too (Marian's with its zero start row
/// appended as int8 zeros). Loaded dequantised (`weights: F32`), it computes CTranslate2's
/// float32 run of the same file within the float bound (1e-4 of the scale; measured 1.2e-6 to
/// 3.5e-5): the int8 values, scales and layout are read exactly. Loaded as stored, tessel's
/// int8 logits lie within [`INT8_DRIFT_BOUND`] of its float32 ones and no further from them
/// than CTranslate2's int8 run lies, within [`INT8_CT2_BOUND`] of CTranslate2's int8 run, and
/// its greedy tokens are CTranslate2's up to CTranslate2's first token whose top-2 margin is
/// under twice that bound (none, at these bounds and margins: the count is printed).
fn check_int8(name: &str, converted: &Converted, expected: &Expected) {
    let theirs = converted.run("int8").expect("ct2_int8.json: an int8 run");
    let float32 = converted
        .run("float32")
        .expect("ct2_int8.json: a float32 run");
    let (first, steps) = (float32.first_step, float32.logits.len());
    assert_eq!(theirs.first_step, first, "{name}: the runs' steps");
    let scale = float32
        .logits
        .iter()
        .flatten()
        .filter(|&&v| v > MASKED)
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let open = |weights| {
        let directory = Directory::open(converted.dir()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let settings = LoadSettings {
            max_beam: 4,
            max_len: 64,
            weights,
        };
        directory
            .load(&settings)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .model
    };
    let mut dequantised = Vec::new();
    {
        let model = open(Some(WeightType::F32));
        for_each_isa(|isa| dequantised.push(forced_columns(&model, isa, expected, first, steps)));
    }
    let model = open(None);
    let stacks = [model.encoder(), model.decoder()];
    for block in stacks.iter().flat_map(|s| s.blocks()) {
        let (_, attention) = block.self_attention_layer();
        let (_, ffn) = block.feed_forward_layer();
        for layer in [attention.qkv(), attention.output(), ffn.up(), ffn.output()] {
            assert_eq!(layer.weight_type(), WeightType::Int8, "{name}: int8 kept");
        }
    }
    // The output projection too (Marian's with its zero start row as an int8 row).
    assert_eq!(
        model.generator().weight_type(),
        WeightType::Int8,
        "{name}: int8 output projection kept"
    );
    let bound = INT8_CT2_BOUND * scale;
    let decided = theirs
        .margins
        .iter()
        .position(|&m| m <= 2.0 * bound)
        .unwrap_or(theirs.margins.len());
    let mut levels = dequantised.into_iter();
    for_each_isa(|isa| {
        let what = format!("{name} at {isa}");
        let wide = levels.next().expect("one run a level");
        let exact = farthest(&wide, &float32.logits) / scale;
        let ours = forced_columns(&model, isa, expected, first, steps);
        let drift = farthest(&ours, &wide) / scale;
        let apart = farthest(&ours, &theirs.logits) / scale;
        let their_drift = farthest(&theirs.logits, &wide) / scale;
        eprintln!(
            "{what} over {steps} steps, of scale {scale:.3}: dequantised {exact:.2e} from \
             CTranslate2 float32; int8 {drift:.2e} from float32 (CTranslate2's int8 \
             {their_drift:.2e}), {apart:.2e} from CTranslate2 int8; greedy decided for \
             {decided} of {}; output projection {:?}",
            theirs.margins.len(),
            model.generator().weight_type(),
        );
        assert!(
            exact <= 1e-4,
            "{what}: dequantised, {exact:e} from CTranslate2"
        );
        assert!(drift <= INT8_DRIFT_BOUND, "{what}: int8 drift {drift:e}");
        assert!(
            drift <= their_drift,
            "{what}: int8 {drift:e} from float32, CTranslate2's {their_drift:e}"
        );
        assert!(
            apart <= INT8_CT2_BOUND,
            "{what}: {apart:e} from CTranslate2 int8"
        );
        let mut session = Session::new(&model, isa).unwrap();
        match &expected.source {
            Source::Ids(src) => session.encode(src).unwrap(),
            Source::Mel(mel) => session.encode_audio(mel).unwrap(),
        }
        let greedy = search(&mut session, &expected.prompt, 1, theirs.greedy.len());
        let upto = expected.prompt.len() + decided;
        assert_eq!(
            greedy[..upto],
            theirs.greedy[..upto],
            "{what}: greedy up to CTranslate2's first margin under twice the bound"
        );
    });
}

/// Opens `dir` as a user opens a download and holds it to `expected` at every level.
fn check_directory(name: &str, dir: &Path, expected: &Expected) {
    let loaded = load(name, dir);
    let model = &loaded.model;
    for_each_isa(|isa| {
        let what = format!("{name} at {isa}");
        let mut session = Session::new(model, isa).unwrap();
        if let Some(tokens) = expected.global_tokens {
            session.set_global_tokens(tokens);
        }
        match &expected.source {
            Source::Ids(src) => session.encode(src).unwrap(),
            Source::Mel(mel) => session.encode_audio(mel).unwrap(),
        }
        check_logits(&mut session, expected, &what);
        let total = expected.greedy.len();
        let greedy = search(&mut session, &expected.prompt, 1, total);
        assert_eq!(greedy, expected.greedy, "{what}: greedy");
        if let Some(want) = &expected.beam4 {
            let beam4 = search(&mut session, &expected.prompt, 4, total);
            assert_eq!(&beam4, want, "{what}: beam 4");
        }
    });
}

/// Every row, the largest first, on as many threads as there are cores (at most 2: each
/// session is single-threaded and a large row holds a few GB).
#[test]
fn published_layouts_match_transformers_at_their_dimensions() {
    let cache = std::env::var_os("TESSEL_PUBLISHED_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("published"));
    let limit = max_values();
    let mut rows: Vec<(usize, PathBuf)> = rows()
        .into_iter()
        .map(|row| (Manifest::read(&row).values(), row))
        .collect();
    assert!(!rows.is_empty(), "no rows under tests/published");
    for (values, row) in &rows {
        if *values > limit {
            eprintln!(
                "skipped {}: {values} values over TESSEL_PUBLISHED_MAX_VALUES={limit}",
                row.display()
            );
        }
    }
    rows.retain(|(values, _)| *values <= limit);
    rows.sort_by_key(|(values, _)| std::cmp::Reverse(*values));
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some((_, row)) = rows.get(next.fetch_add(1, Ordering::Relaxed)) {
                    check_row(row, &cache);
                }
            });
        }
    });
}
