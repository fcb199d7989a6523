//! CTranslate2 loading error paths: every malformed or unsupported input is a typed
//! [`Ct2Error`] naming what is wrong, and no byte string makes the loader panic (truncated and
//! corrupted `model.bin` files, property-tested). Also: older binary versions (3, item sizes
//! instead of dtype ids) load to the same model.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tessel_model::load::ct2::{self, Ct2Error, Ct2Options, Ct2Tokens, Dtype, Vocabulary};
use tessel_model::Session;
use tessel_tests::cases;
use tessel_tests::ct2_bin::{self, entries, write, Entry};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ct2").join(name)
}

const POST: &str = "post_relu_sinusoidal_f32";
const SHARED: &str = "pre_gelu_shared_learned_f16";

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name).join("model.bin")).unwrap()
}

fn vocabulary(name: &str) -> Vocabulary {
    Vocabulary::read(&fixture(name), "shared_vocabulary")
        .unwrap()
        .unwrap()
}

fn load(model_bin: &[u8], name: &str) -> Result<ct2::Ct2Model, Ct2Error> {
    let v = vocabulary(name);
    ct2::from_parts(
        model_bin,
        Ct2Tokens::default(),
        v.clone(),
        v,
        Ct2Options::default(),
    )
}

/// The fixture `name` rewritten after `edit` of its variables.
fn edited(name: &str, edit: impl FnOnce(&mut Vec<Entry>, &mut Vec<(String, String)>)) -> Vec<u8> {
    ct2_bin::edited(&bytes(name), edit)
}

fn logits_of(model: &ct2::Ct2Model) -> Vec<f32> {
    let mut s = Session::new(&model.model, tessel_kernels::Isa::scalar()).unwrap();
    s.encode(&[5, 17, 3]).unwrap();
    s.decode_step(&[model.model.config().bos_id])
        .unwrap()
        .to_vec()
}

#[test]
fn rewriting_a_fixture_reproduces_its_bytes() {
    for name in [POST, SHARED] {
        assert_eq!(edited(name, |_, _| {}), bytes(name), "{name}");
    }
    let file_bytes = bytes(SHARED);
    let file = ct2::parse(&file_bytes).unwrap();
    assert_eq!(
        (file.version, file.spec.as_str(), file.revision),
        (6, "TransformerSpec", 7)
    );
    // Shared embeddings are stored once, as an alias.
    assert_eq!(entries(&file).1.len(), 1);
}

#[test]
fn binary_version_3_with_item_sizes_loads_the_same_model() {
    let original = bytes(POST);
    let file = ct2::parse(&original).unwrap();
    let (vars, aliases) = entries(&file);
    let v3 = write(3, &file.spec, &vars, &aliases);
    assert_ne!(v3, original);
    let a = load(&original, POST).unwrap();
    let b = load(&v3, POST).unwrap();
    assert_eq!(logits_of(&a), logits_of(&b));
    // Version 1: no spec name, no aliases.
    assert_eq!(ct2::parse(&write(1, "", &vars, &[])).unwrap().spec, "");
}

#[test]
fn bfloat16_variables_load_as_their_exact_f32_values() {
    // Every f32 variable rewritten as bf16 (its upper half), and as f32 with the lower half
    // cleared: the same numbers, so the same model.
    let rewrite = |as_bf16: bool| {
        edited(POST, |v, _| {
            for e in v.iter_mut().filter(|e| e.2 == Dtype::F32) {
                let halves = e.3.chunks_exact(4).map(|c| [c[2], c[3]]);
                e.3 = if as_bf16 {
                    halves.flatten().collect()
                } else {
                    halves.flat_map(|[a, b]| [0, 0, a, b]).collect()
                };
                if as_bf16 {
                    e.2 = Dtype::Bf16;
                }
            }
        })
    };
    let bf16 = load(&rewrite(true), POST).unwrap();
    let f32 = load(&rewrite(false), POST).unwrap();
    assert_eq!(logits_of(&bf16), logits_of(&f32));
    assert_eq!(
        ct2::Ct2Tokens::from_json("{}").unwrap(),
        Ct2Tokens::default()
    );
}

#[test]
fn root_level_attributes_of_older_files_are_read() {
    // Older TransformerSpec files kept `num_heads` (and other attributes) at the root.
    let b = edited(POST, |v, _| {
        v.retain(|e| e.0 != "decoder/num_heads");
        v.iter_mut().find(|e| e.0 == "encoder/num_heads").unwrap().0 = "num_heads".into();
    });
    let old = load(&b, POST).unwrap();
    assert_eq!(old.model.config().heads, 2);
    assert_eq!(
        logits_of(&old),
        logits_of(&load(&bytes(POST), POST).unwrap())
    );
}

#[test]
fn separate_source_and_target_vocabularies_are_read() {
    let dir = std::env::temp_dir().join(format!("tessel-ct2-vocab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.bin"), bytes(POST)).unwrap();
    let shared = std::fs::read(fixture(POST).join("shared_vocabulary.json")).unwrap();
    std::fs::write(dir.join("source_vocabulary.json"), &shared).unwrap();
    std::fs::write(dir.join("target_vocabulary.json"), &shared).unwrap();
    let loaded = ct2::load_dir(&dir, Ct2Options::default()).unwrap();
    assert_eq!(loaded.vocab.target.token(2), Some("</s>"));
    std::fs::write(dir.join("source_vocabulary.json"), r#"["<s>"]"#).unwrap();
    let err = ct2::load_dir(&dir, Ct2Options::default());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(err, Err(Ct2Error::Vocabulary { .. })));
}

#[test]
fn header_errors_are_typed() {
    let mut b = bytes(POST);
    b[0] = 7;
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::UnsupportedVersion(7))
    ));
    let b = bytes(POST);
    assert!(matches!(
        load(&b[..3], POST),
        Err(Ct2Error::Truncated { .. })
    ));
    let mut long = b.clone();
    long.push(0);
    assert!(matches!(
        load(&long, POST),
        Err(Ct2Error::TrailingBytes { .. })
    ));
    let whisper = ct2::parse(&b).map(|f| {
        let (v, a) = entries(&f);
        write(6, "WhisperSpec", &v, &a)
    });
    assert!(matches!(
        load(&whisper.unwrap(), POST),
        Err(Ct2Error::UnsupportedSpec(s)) if s == "WhisperSpec"
    ));
}

#[test]
fn variable_errors_name_the_variable() {
    let q = "decoder/layer_0/attention/linear_0/weight";
    let b = edited(POST, |v, _| {
        v.iter_mut().find(|e| e.0 == q).unwrap().2 = Dtype::I32
    });
    assert!(matches!(load(&b, POST), Err(Ct2Error::UnsupportedDtype { name, .. }) if name == q));
    // int8 without its scale.
    let b = edited(POST, |v, _| {
        let e = v.iter_mut().find(|e| e.0 == q).unwrap();
        e.2 = Dtype::I8;
        e.3.truncate(e.3.len() / 4);
    });
    assert!(matches!(load(&b, POST), Err(Ct2Error::Missing(n)) if n.ends_with("weight_scale")));
    let b = edited(POST, |v, _| v.retain(|e| e.0 != q));
    assert!(matches!(load(&b, POST), Err(Ct2Error::Missing(n)) if n == q));
    let b = edited(POST, |v, _| {
        v.iter_mut().find(|e| e.0 == q).unwrap().1 = vec![8, 32]
    });
    assert!(matches!(load(&b, POST), Err(Ct2Error::Shape { name, .. }) if name == q));
    let b = edited(POST, |_, a| a.push(("x".into(), "nowhere".into())));
    assert!(matches!(load(&b, POST), Err(Ct2Error::DanglingAlias { alias, .. }) if alias == "x"));
    let b = edited(POST, |v, _| {
        let e = v.iter_mut().find(|e| e.0 == q).unwrap();
        e.3[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
    });
    assert!(matches!(load(&b, POST), Err(Ct2Error::Model(_))));
}

#[test]
fn unsupported_features_are_refused_by_name() {
    let rel = "encoder/layer_0/self_attention/relative_position_keys";
    let b = edited(POST, |v, _| {
        v.push((rel.into(), vec![2, 8], Dtype::F32, vec![0; 64]))
    });
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::UnsupportedFeature { variable, .. }) if variable == rel
    ));
    let b = edited(POST, |v, _| {
        v.iter_mut().find(|e| e.0 == "decoder/alibi").unwrap().3 = vec![1]
    });
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::UnsupportedFeature { variable, .. }) if variable == "decoder/alibi"
    ));
    let b = edited(POST, |v, _| {
        for e in v.iter_mut().filter(|e| e.0.ends_with("/activation")) {
            e.3 = vec![4]; // GELUSigmoid
        }
    });
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::UnsupportedFeature { variable, .. }) if variable == "encoder/activation"
    ));
    let b = edited(POST, |v, _| {
        v.iter_mut()
            .find(|e| e.0 == "encoder/activation")
            .unwrap()
            .3 = vec![3]
    });
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::Attribute { name, .. }) if name == "decoder/activation"
    ));
    let b = edited(POST, |v, _| {
        v.push(("decoder/mystery".into(), vec![1], Dtype::F32, vec![0; 4]))
    });
    assert!(matches!(
        load(&b, POST),
        Err(Ct2Error::UnsupportedFeature { variable, .. }) if variable == "decoder/mystery"
    ));
}

#[test]
fn directory_errors_are_typed() {
    let dir = std::env::temp_dir().join(format!("tessel-ct2-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.bin"), bytes(POST)).unwrap();
    assert!(matches!(
        ct2::load_dir(&dir, Ct2Options::default()),
        Err(Ct2Error::Vocabulary { .. })
    ));
    let tokens: Vec<String> = (0..39).map(|i| format!("t{i}")).collect();
    std::fs::write(dir.join("shared_vocabulary.txt"), tokens.join("\n")).unwrap();
    assert!(matches!(
        ct2::load_dir(&dir, Ct2Options::default()),
        Err(Ct2Error::Vocabulary { .. })
    ));
    std::fs::write(
        dir.join("shared_vocabulary.txt"),
        tokens.join("\n") + "\nt39\n",
    )
    .unwrap();
    // 40 tokens now, but no `<s>` to start decoding from.
    assert!(matches!(
        ct2::load_dir(&dir, Ct2Options::default()),
        Err(Ct2Error::MissingToken(t)) if t == "<s>"
    ));
    std::fs::write(
        dir.join("config.json"),
        r#"{"decoder_start_token": "t1", "eos_token": "t2"}"#,
    )
    .unwrap();
    let loaded = ct2::load_dir(&dir, Ct2Options::default()).unwrap();
    assert_eq!(
        (loaded.model.config().bos_id, loaded.model.config().eos_id),
        (1, 2)
    );
    std::fs::write(dir.join("config.json"), "{oops").unwrap();
    assert!(matches!(
        ct2::load_dir(&dir, Ct2Options::default()),
        Err(Ct2Error::Config(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(
        ct2::load_dir(&dir, Ct2Options::default()),
        Err(Ct2Error::Io { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    #[test]
    fn truncated_model_bin_is_an_error_never_a_panic(cut in 0usize..1 << 20) {
        let b = bytes(SHARED);
        let cut = cut % b.len();
        prop_assert!(load(&b[..cut], SHARED).is_err());
    }

    #[test]
    fn corrupted_model_bin_never_panics(
        flips in proptest::collection::vec((0usize..1 << 20, any::<u8>()), 1..8)
    ) {
        let mut b = bytes(SHARED);
        let len = b.len();
        // Mostly the header and names (the first KB), where corruption changes structure.
        for (i, x) in flips {
            let at = if i % 2 == 0 { i % 1024.min(len) } else { i % len };
            b[at] ^= x | 1;
        }
        let _ = load(&b, SHARED);
    }
}
