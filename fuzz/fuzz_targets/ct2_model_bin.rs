//! CTranslate2 `model.bin` files through `ct2::parse` and `ct2::from_parts`: arbitrary bytes,
//! and valid files of every supported kind (the committed fixtures: OpenNMT-style int8 and
//! float16, BART float16, T5 tied, Marian float16) edited variable by variable (dropped,
//! reshaped, retyped, overwritten, aliased, renamed onto another name) and written back.
//! Oracle: `Ok` or a typed `Ct2Error`, never a panic; what loads plans a session, encodes and
//! decodes a step with logits of the model's width.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_model::load::ct2::{self, Ct2Options, Ct2Tokens, Dtype, ModelBin, Vocabulary};
use tessel_model::Session;
use tessel_tests::ct2_bin::{self, Entry};

/// The valid files edited by [`Input::Edited`].
const BASES: [&[u8]; 5] = [
    include_bytes!("../../tests/ct2/post_relu_int8/model.bin"),
    include_bytes!("../../tests/ct2/pre_gelu_shared_learned_f16/model.bin"),
    include_bytes!("../../tests/translation/bart/ct2_f16/model.bin"),
    include_bytes!("../../tests/translation/t5_tied/ct2/model.bin"),
    include_bytes!("../../tests/translation/marian/ct2_f16/model.bin"),
];

const DTYPES: [Dtype; 6] = [
    Dtype::F32,
    Dtype::I8,
    Dtype::I16,
    Dtype::I32,
    Dtype::F16,
    Dtype::Bf16,
];

#[derive(Arbitrary, Debug)]
enum Edit {
    /// Removes a variable.
    Drop(u16),
    /// Sets one dimension of a variable (its bytes resized to match).
    Shape(u16, u8, u16),
    /// Reinterprets a variable's bytes as another dtype (its shape adjusted when they fit).
    Retype(u16, u8),
    /// Writes four bytes into a variable (NaN, inf, huge scalars, ...).
    Poke(u16, u16, [u8; 4]),
    /// Adds an alias named after variable `a` with a suffix, pointing to variable `b`.
    Alias(u16, u16, u8),
    /// Removes an alias.
    Unalias(u16),
    /// Gives variable `a` the name of variable `b` with a suffix (a duplicate when empty).
    Rename(u16, u16, u8),
}

#[derive(Arbitrary, Debug)]
enum Input {
    Raw(Vec<u8>),
    Edited { base: u8, edits: Vec<Edit> },
}

struct Parsed {
    version: u32,
    spec: String,
    vars: Vec<Entry>,
    aliases: Vec<(String, String)>,
}

fn parsed_bases() -> &'static Vec<Parsed> {
    static BASES_PARSED: OnceLock<Vec<Parsed>> = OnceLock::new();
    BASES_PARSED.get_or_init(|| {
        BASES
            .iter()
            .map(|bytes| {
                let file = ct2::parse(bytes).expect("committed fixture parses");
                let (vars, aliases) = ct2_bin::entries(&file);
                Parsed {
                    version: file.version,
                    spec: file.spec.clone(),
                    vars,
                    aliases,
                }
            })
            .collect()
    })
}

const SUFFIXES: [&str; 6] = [
    "",
    "/bias",
    "/beta",
    "_noact/weight",
    "/queries_scale",
    "_1",
];

fn apply(p: &mut Parsed, edit: Edit) {
    let n = p.vars.len();
    if n == 0 {
        return;
    }
    match edit {
        Edit::Drop(i) => {
            p.vars.remove(i as usize % n);
        }
        Edit::Shape(i, dim, value) => {
            let v = &mut p.vars[i as usize % n];
            if !v.1.is_empty() {
                let d = dim as usize % v.1.len();
                v.1[d] = value as usize % 300;
                let len = v.1.iter().product::<usize>() * v.2.size();
                v.3.resize(len, 0x3c);
            }
        }
        Edit::Retype(i, t) => {
            let v = &mut p.vars[i as usize % n];
            let dtype = DTYPES[t as usize % DTYPES.len()];
            let elements = v.3.len() / dtype.size();
            v.3.truncate(elements * dtype.size());
            v.2 = dtype;
            v.1 = if v.1.is_empty() && elements == 1 {
                Vec::new()
            } else {
                vec![elements]
            };
        }
        Edit::Poke(i, at, bytes) => {
            let v = &mut p.vars[i as usize % n];
            let len = v.3.len();
            if len >= 4 {
                let at = at as usize % (len - 3);
                v.3[at..at + 4].copy_from_slice(&bytes);
            }
        }
        Edit::Alias(a, b, s) => {
            let name = format!("{}{}", p.vars[a as usize % n].0, SUFFIXES[s as usize % 6]);
            let target = p.vars[b as usize % n].0.clone();
            p.aliases.push((name, target));
        }
        Edit::Unalias(i) => {
            if !p.aliases.is_empty() {
                let len = p.aliases.len();
                p.aliases.remove(i as usize % len);
            }
        }
        Edit::Rename(a, b, s) => {
            let name = format!("{}{}", p.vars[b as usize % n].0, SUFFIXES[s as usize % 6]);
            p.vars[a as usize % n].0 = name;
        }
    }
}

/// A vocabulary of `rows` tokens with CTranslate2's default specials first.
fn vocabulary(file: &ModelBin<'_>, name: &str) -> Vocabulary {
    let rows = file
        .variables
        .get(name)
        .and_then(|v| v.shape.first().copied())
        .unwrap_or(0)
        .min(1 << 12);
    let specials = ["<blank>", "<s>", "</s>", "<unk>"];
    Vocabulary::new(
        (0..rows)
            .map(|i| specials.get(i).map_or(format!("t{i}"), |s| (*s).to_owned()))
            .collect(),
    )
}

fn load(bytes: &[u8]) {
    let Ok(file) = ct2::parse(bytes) else {
        return;
    };
    let source_name = if file.variables.contains_key("encoder/embeddings_0/weight") {
        "encoder/embeddings_0/weight"
    } else {
        "encoder/embeddings/weight"
    };
    let source = vocabulary(&file, source_name);
    let target = vocabulary(&file, "decoder/embeddings/weight");
    let options = Ct2Options {
        max_src_len: 6,
        max_tgt_len: 6,
        max_beam: 2,
        weights: None,
    };
    let Ok(loaded) = ct2::from_parts(bytes, Ct2Tokens::default(), source, target, options) else {
        return;
    };
    let model = &loaded.model;
    let config = model.config();
    let mut session = Session::new(model, tessel_kernels::Isa::scalar()).expect("tiny arena");
    let src: Vec<u32> = (0..3).map(|i| i % config.src_vocab as u32).collect();
    session.encode(&src).expect("valid source");
    let logits = session.decode_step(&[config.bos_id]).expect("valid step");
    assert_eq!(logits.len(), config.tgt_vocab);
}

fuzz_target!(|input: Input| {
    match input {
        Input::Raw(bytes) => load(&bytes),
        Input::Edited { base, edits } => {
            let bases = parsed_bases();
            let b = &bases[base as usize % bases.len()];
            let mut p = Parsed {
                version: b.version,
                spec: b.spec.clone(),
                vars: b.vars.clone(),
                aliases: b.aliases.clone(),
            };
            for edit in edits.into_iter().take(8) {
                apply(&mut p, edit);
            }
            load(&ct2_bin::write(p.version, &p.spec, &p.vars, &p.aliases));
        }
    }
});
