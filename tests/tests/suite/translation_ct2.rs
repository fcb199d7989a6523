//! The translation families from CTranslate2 directories that `ct2-transformers-converter`
//! made from the Hugging Face fixtures (`tests/translation/*/ct2` in float32, `ct2_f16` in
//! float16 for marian, bart and t5, `ct2_bf16` in bfloat16 for bart; made by
//! `tools/make_translation_golden.py`): Marian, BART, mBART, M2M100 (NLLB's spec), T5 v1.1
//! gated-GELU (untied) and T5 v1.0 ReLU (tied).
//!
//! At every ISA level: teacher-forced logits within 1e-4 of the logit scale of `transformers`
//! in float64 (for 16-bit directories, of the float64 model whose parameters were rounded to
//! that type as the converter rounds them), and greedy and beam-4 tokens identical to
//! CTranslate2's `translate_batch` on the same directory. The references are cut to
//! CTranslate2's vocabulary (Marian's has no `<pad>`) and multiplied by the output scale
//! CTranslate2 applies where transformers does not (`t5`: `decoder/scale_outputs` = 48^-0.5,
//! see `tests/translation/README.md`), so tessel is held to what the directory means to
//! CTranslate2. Edited copies of the files check that the parts tessel cannot honour are typed
//! errors naming the variable.

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tessel_model::load::ct2::{
    self, Ct2Error, Ct2Model, Ct2Options, Ct2Tokens, Dtype, Vocabulary, START_LOGIT,
};
use tessel_model::{Model, Request, SearchOptions, Session, WeightType};
use tessel_tests::ct2_bin::{edited, Entry};
use tessel_tests::for_each_isa;
use tessel_tests::golden::{assert_teacher_forced_columns, ids, values};

/// Every fixture with a float32 CTranslate2 directory.
const FIXTURES: [&str; 10] = [
    "marian",
    "bart",
    "bart_ffn",
    "mbart",
    "m2m100",
    "t5",
    "t5_tied",
    "marian_untied",
    "t5_v1_1",
    "pegasus_computed",
];

/// The 16-bit directories: fixture, stored type.
const HALF: [(&str, WeightType); 4] = [
    ("marian", WeightType::F16),
    ("bart", WeightType::F16),
    ("bart", WeightType::Bf16),
    ("t5", WeightType::F16),
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("translation")
        .join(name)
}

fn read(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(fixture(name).join(file)).unwrap()
}

/// What one CTranslate2 directory must reproduce.
struct Case {
    dir: &'static str,
    src: Vec<u32>,
    forced: Vec<u32>,
    /// `forced.len() × vocabulary`, CTranslate2's vocabulary.
    logits: Vec<f64>,
    greedy: Vec<u32>,
    beam4: Vec<u32>,
}

/// The directory of `stored` weights of fixture `name` and what it must reproduce.
fn case(name: &str, stored: WeightType) -> Case {
    let expected = read(name, "expected.safetensors");
    let expected = SafeTensors::deserialize(&expected).unwrap();
    let ct2 = read(name, "ct2_expected.safetensors");
    let ct2 = SafeTensors::deserialize(&ct2).unwrap();
    let half = |dir, tag: &str| {
        (
            dir,
            values(&ct2, &format!("{tag}_logits")),
            ids(&ct2, &format!("{tag}_greedy_tokens")),
            ids(&ct2, &format!("{tag}_beam4_tokens")),
        )
    };
    let (dir, logits, greedy, beam4) = match stored {
        WeightType::F16 => half("ct2_f16", "f16"),
        WeightType::Bf16 => half("ct2_bf16", "bf16"),
        _ => (
            "ct2",
            values(&ct2, "logits"),
            ids(&expected, "ct2_greedy_tokens"),
            ids(&expected, "ct2_beam4_tokens"),
        ),
    };
    Case {
        dir,
        src: ids(&expected, "src_ids"),
        forced: ids(&expected, "decoder_input_ids"),
        logits,
        greedy,
        beam4,
    }
}

/// The forced BOS of the Hugging Face generation config (CTranslate2's target prefix).
fn forced_bos(name: &str) -> Option<u32> {
    let text = read(name, "hf/generation_config.json");
    let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
    value["forced_bos_token_id"].as_u64().map(|v| v as u32)
}

fn load(name: &str, dir: &str) -> Ct2Model {
    let options = Ct2Options {
        max_src_len: 32,
        max_tgt_len: 32,
        max_beam: 4,
        weights: None,
    };
    ct2::load_dir(&fixture(name).join(dir), options).unwrap_or_else(|e| panic!("{name}/{dir}: {e}"))
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

fn check(name: &str, stored: WeightType) {
    let case = case(name, stored);
    let loaded = load(name, case.dir);
    let model = &loaded.model;
    let config = model.config();
    let vocab = loaded.vocab.target.len();
    let cross = model.decoder().blocks()[0].cross_attention().unwrap();
    assert_eq!(cross.output().weight_type(), stored, "{name}/{}", case.dir);
    assert_eq!(
        model.generator().weight_type(),
        stored,
        "{name}/{}",
        case.dir
    );
    // The decoder start of the references is the Hugging Face one (Marian: `<pad>`, which
    // CTranslate2 replaces by its zero start embedding; tessel by the row after its vocabulary).
    let mut forced = case.forced.clone();
    forced[0] = config.bos_id;
    let mut prompt = vec![config.bos_id];
    prompt.extend(forced_bos(name));
    let total = case.greedy.len();
    for_each_isa(|isa| {
        let what = format!("{name}/{} at {isa}", case.dir);
        let mut session = Session::new(model, isa).unwrap();
        session.encode(&case.src).unwrap();
        assert_teacher_forced_columns(&mut session, &forced, &case.logits, vocab, &what);
        if config.tgt_vocab > vocab {
            session.reset_decoder();
            let logits = session.decode_step(&[config.bos_id]).unwrap();
            assert!(logits[vocab..].iter().all(|&l| l == START_LOGIT), "{what}");
        }
        for (beam, want) in [(1, &case.greedy), (4, &case.beam4)] {
            let got = search(&mut session, &prompt, beam, total);
            assert_eq!(got[1..], want[1..], "{what}: beam {beam}");
        }
    });
}

#[test]
fn ctranslate2_directories_of_every_family_match_transformers_and_ctranslate2() {
    for name in FIXTURES {
        check(name, WeightType::F32);
    }
}

#[test]
fn sixteen_bit_ctranslate2_directories_keep_their_type_and_match_ctranslate2() {
    for (name, stored) in HALF {
        check(name, stored);
    }
}

#[test]
fn marian_starts_from_a_zero_row_after_its_vocabulary() {
    let loaded = load("marian", "ct2");
    let config = loaded.model.config();
    let vocab = loaded.vocab.target.len();
    assert_eq!(config.tgt_vocab, vocab + 1);
    assert_eq!(config.bos_id as usize, vocab);
    assert!(loaded.vocab.target.token(config.bos_id).is_none());
    let table = loaded.model.target_embedding().table();
    let d = config.d_model;
    let table = table.as_f32().expect("an f32 table");
    assert!(table[vocab * d..(vocab + 1) * d].iter().all(|&x| x == 0.0));
}

#[test]
fn t5_directories_map_to_rms_norms_relative_bias_and_their_feed_forward() {
    for (name, gated) in [("t5", true), ("t5_tied", false)] {
        let loaded = load(name, "ct2");
        let config = loaded.model.config();
        assert_eq!(
            config.norm_kind,
            tessel_model::config::NormKind::Rms,
            "{name}"
        );
        assert_eq!(config.gated_ffn, gated, "{name}");
        assert_eq!(config.attention_scale, Some(1.0), "{name}");
        assert!(config.relative_attention.is_some(), "{name}");
        assert!(!config.scale_embeddings, "{name}");
    }
}

/// `name`'s `ct2/model.bin` after `edit`, loaded with the directory's config and vocabulary.
fn load_edited(
    name: &str,
    edit: impl FnOnce(&mut Vec<Entry>, &mut Vec<(String, String)>),
) -> Result<Ct2Model, Ct2Error> {
    let dir = fixture(name).join("ct2");
    let bytes = edited(&std::fs::read(dir.join("model.bin")).unwrap(), edit);
    let tokens =
        Ct2Tokens::from_json(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let vocabulary = Vocabulary::read(&dir, "shared_vocabulary")
        .unwrap()
        .unwrap();
    ct2::from_parts(
        &bytes,
        tokens,
        vocabulary.clone(),
        vocabulary,
        Ct2Options::default(),
    )
}

fn refused(result: Result<Ct2Model, Ct2Error>, name: &str) {
    match result {
        Err(Ct2Error::UnsupportedFeature { variable, .. }) if variable == name => {}
        other => panic!("{name}: {:?}", other.map(|m| m.model.config().clone())),
    }
}

#[test]
fn family_parts_that_tessel_cannot_honour_are_typed_errors_naming_the_variable() {
    let distance = "encoder/layer_0/self_attention/relative_attention_max_distance";
    match load_edited("t5_tied", |v, _| v.retain(|e| e.0 != distance)) {
        Err(Ct2Error::Missing(name)) => assert_eq!(name, distance),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A second layer with its own relative bias table (CTranslate2 would use layer 0's).
    let own = "encoder/layer_1/self_attention/relative_attention_bias";
    refused(
        load_edited("t5_tied", |v, a| {
            a.retain(|(alias, _)| alias != own);
            let first = v
                .iter()
                .find(|e| e.0 == "encoder/layer_0/self_attention/relative_attention_bias")
                .unwrap()
                .clone();
            v.push((own.to_owned(), first.1, first.2, first.3));
        }),
        own,
    );
    let noact = "decoder/layer_1/ffn/linear_0_noact/weight";
    refused(load_edited("t5", |v, _| v.retain(|e| e.0 != noact)), noact);
    let scale = "decoder/layer_1/self_attention/queries_scale";
    refused(
        load_edited("t5", |v, _| {
            v.iter_mut().find(|e| e.0 == scale).unwrap().3 = 0.5f32.to_le_bytes().to_vec()
        }),
        scale,
    );
    refused(
        load_edited("bart", |v, _| {
            v.retain(|e| !e.0.starts_with("encoder/layernorm_embedding"))
        }),
        "decoder/layernorm_embedding/gamma",
    );
    refused(
        load_edited("marian", |v, _| {
            let value = 0.5f32.to_le_bytes().to_vec();
            v.push(("decoder/scale_outputs".into(), vec![], Dtype::F32, value))
        }),
        "decoder/scale_outputs",
    );
    // Heads differing between the stacks, which CTranslate2's converters never write.
    refused(
        load_edited("bart", |v, _| {
            let heads = v.iter_mut().find(|e| e.0 == "decoder/num_heads").unwrap();
            heads.3 = 2i16.to_le_bytes().to_vec();
        }),
        "decoder/num_heads",
    );
    let rotary = "decoder/layer_0/self_attention/rotary_dim";
    refused(
        load_edited("m2m100", |v, _| {
            v.push((
                rotary.into(),
                vec![],
                Dtype::I32,
                8i32.to_le_bytes().to_vec(),
            ))
        }),
        rotary,
    );
}

/// The logits of a few teacher-forced steps of `loaded` on the fixture's inputs.
fn forced_logits(loaded: &Ct2Model, name: &str) -> Vec<f32> {
    let case = case(name, WeightType::F32);
    let mut session = Session::new(&loaded.model, tessel_kernels::Isa::scalar()).unwrap();
    session.encode(&case.src).unwrap();
    let mut forced = case.forced;
    forced[0] = loaded.model.config().bos_id;
    let mut out = Vec::new();
    for token in forced {
        out.extend_from_slice(session.decode_step(&[token]).unwrap());
    }
    out
}

#[test]
fn stored_copies_instead_of_aliases_load_as_untied_and_unshared_with_equal_logits() {
    // transformers 5 always ties T5's lm_head, so the untied layout of transformers 4
    // checkpoints (a stored `decoder/projection/weight`) is made by replacing the aliases.
    for name in ["t5", "marian"] {
        let aliased = load(name, "ct2");
        let copies = load_edited(name, |v, a| {
            let table = v
                .iter()
                .find(|e| e.0 == "decoder/embeddings/weight")
                .unwrap()
                .clone();
            for alias in ["decoder/projection/weight", "encoder/embeddings_0/weight"] {
                a.retain(|(n, _)| n != alias);
                v.push((alias.to_owned(), table.1.clone(), table.2, table.3.clone()));
            }
        })
        .unwrap();
        let (tied, split) = (aliased.model.config(), copies.model.config());
        assert!(tied.tie_output && tied.share_embeddings, "{name}");
        assert!(!split.tie_output && !split.share_embeddings, "{name}");
        assert_eq!(
            forced_logits(&aliased, name),
            forced_logits(&copies, name),
            "{name}"
        );
    }
}

#[test]
fn marian_int8_projection_stays_int8_with_an_int8_zero_start_row() {
    // The Marian fixture with its (tied) target table quantised as
    // `ct2-transformers-converter --quantization int8` quantises it: per row, scale
    // `127 / max |w|`, values rounded half to even.
    let mut stored = (Vec::new(), Vec::new());
    let loaded = load_edited("marian", |v, _| {
        let entry = v
            .iter_mut()
            .find(|e| e.0 == "decoder/embeddings/weight")
            .unwrap();
        assert_eq!(entry.2, Dtype::F32);
        let d = entry.1[1];
        let values: Vec<f32> = entry
            .3
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (mut q, mut scales) = (Vec::new(), Vec::new());
        for row in values.chunks_exact(d) {
            let amax = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let scale = 127.0 / if amax == 0.0 { 127.0 } else { amax };
            scales.push(scale);
            q.extend(row.iter().map(|x| (x * scale).round_ties_even() as i8));
        }
        let shape = entry.1.clone();
        *entry = (
            entry.0.clone(),
            shape.clone(),
            Dtype::I8,
            q.iter().map(|&x| x as u8).collect(),
        );
        let scale_bytes = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
        v.push((
            "decoder/embeddings/weight_scale".to_owned(),
            vec![shape[0]],
            Dtype::F32,
            scale_bytes,
        ));
        stored = (q, scales);
    })
    .unwrap();
    let (q, scales) = stored;
    let config = loaded.model.config();
    let vocab = loaded.vocab.target.len();
    assert_eq!(config.bos_id as usize, vocab);
    let generator = loaded.model.generator();
    assert_eq!(generator.weight_type(), WeightType::Int8);
    let packed = generator.int8_weight().expect("int8 generator");
    let d = config.d_model;
    assert_eq!((packed.n(), packed.k()), (vocab + 1, d));
    // The file's rows and scales as stored, then the start row: int8 zeros, scale 1.
    for (j, s) in scales.iter().enumerate() {
        assert_eq!(packed.dequant(j), Some(1.0 / s), "channel {j}");
        for p in 0..d {
            assert_eq!(packed.get(j, p), Some(q[j * d + p]), "[{j}, {p}]");
        }
    }
    assert_eq!(packed.dequant(vocab), Some(1.0));
    assert!((0..d).all(|p| packed.get(vocab, p) == Some(0)));
    // The start row computes exactly its bias at every step.
    let case = case("marian", WeightType::F32);
    let mut forced = case.forced.clone();
    forced[0] = config.bos_id;
    for_each_isa(|isa| {
        let mut session = Session::new(&loaded.model, isa).unwrap();
        session.encode(&case.src).unwrap();
        for &token in &forced {
            let logits = session.decode_step(&[token]).unwrap();
            assert_eq!(logits.len(), vocab + 1, "{isa}");
            assert_eq!(logits[vocab], START_LOGIT, "{isa}");
            assert!(logits[..vocab].iter().all(|l| l.is_finite()), "{isa}");
        }
    });
}
