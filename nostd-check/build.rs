//! Prepares the real model the freestanding binary runs: packs the numbers model
//! (`assets/numbers/`) into the core's image format with tessel-model's own writer (std, on
//! the build host), sizes the session buffer for its limits, and writes the vocabulary as
//! tables a `no_std` program can read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

use tessel_model::{session, ArenaPlan, Config, Limits, Model};

/// The numbers model's files, relative to this crate.
const ASSETS: &str = "../assets/numbers";

fn main() {
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join(ASSETS);
    for file in ["config.json", "model.safetensors", "vocab.json"] {
        println!("cargo:rerun-if-changed={}", assets.join(file).display());
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let config = Config::from_json(&read_text(&assets.join("config.json"))).expect("config.json");
    let weights = fs::read(assets.join("model.safetensors")).expect("model.safetensors");
    let model = Model::from_safetensors_bytes(config.clone(), &weights).expect("the model loads");
    let image = model.pack().expect("the model packs");
    fs::write(out.join("numbers.tessel"), image).expect("write the image");

    let vocab: serde_json::Value =
        serde_json::from_str(&read_text(&assets.join("vocab.json"))).expect("vocab.json");
    let limits = Limits {
        max_src_len: side_len(&vocab, "source"),
        max_tgt_len: side_len(&vocab, "target"),
        max_beam: 1,
        max_batch: 1,
        encode_sources: 1,
        threads: 1,
        cross_kv: tessel_model::MemoryType::F32,
    };
    let plan = ArenaPlan::with_limits(&config, limits).expect("limits within the config");
    let mut tables = String::new();
    writeln!(tables, "/// Longest source, in characters.").unwrap();
    writeln!(
        tables,
        "pub const MAX_SOURCE: usize = {};",
        limits.max_src_len
    )
    .unwrap();
    writeln!(tables, "/// Most target positions.").unwrap();
    writeln!(
        tables,
        "pub const MAX_TARGET: usize = {};",
        limits.max_tgt_len
    )
    .unwrap();
    writeln!(tables, "/// Bytes of the session buffer for these limits.").unwrap();
    let buffer = session::buffer_bytes(&plan);
    writeln!(tables, "pub const BUFFER_BYTES: usize = {buffer};").unwrap();
    writeln!(tables, "/// Blocks of both stacks.").unwrap();
    let blocks = config.encoder_layers + config.decoder_layers;
    writeln!(tables, "pub const BLOCKS: usize = {blocks};").unwrap();
    writeln!(
        tables,
        "/// Source symbols (one character each) and their ids."
    )
    .unwrap();
    writeln!(tables, "pub const SOURCE: &[(char, u32)] = &[").unwrap();
    for (id, symbol) in symbols(&vocab, "source").iter().enumerate() {
        let mut chars = symbol.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            writeln!(tables, "    ({c:?}, {id}),").unwrap();
        }
    }
    writeln!(tables, "];").unwrap();
    writeln!(tables, "/// Target symbols by id.").unwrap();
    let target = symbols(&vocab, "target");
    writeln!(
        tables,
        "pub const TARGET: [&str; {}] = {target:?};",
        target.len()
    )
    .unwrap();
    fs::write(out.join("numbers_vocab.rs"), tables).expect("write the tables");
}

fn read_text(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn side_len(vocab: &serde_json::Value, side: &str) -> usize {
    let len = vocab[side]["max_len"].as_u64().expect("max_len");
    usize::try_from(len).expect("max_len fits usize")
}

fn symbols(vocab: &serde_json::Value, side: &str) -> Vec<String> {
    vocab[side]["symbols"]
        .as_array()
        .expect("symbols")
        .iter()
        .map(|s| s.as_str().expect("a symbol is a string").to_owned())
        .collect()
}
