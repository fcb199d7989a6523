//! Loading: config validation and every way a weights file can be wrong, each a typed error
//! naming the tensor; a round trip through `load_dir` equals `from_safetensors_bytes`.

use std::path::{Path, PathBuf};

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tessel_model::{Config, ConfigError, LoadError, Model, Session};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/post_relu")
}

fn config() -> Config {
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    Config::from_json(&text).unwrap()
}

fn weights() -> Vec<u8> {
    std::fs::read(fixture().join("model.safetensors")).unwrap()
}

/// Rewrites the fixture's tensors with `edit` and loads the result.
fn load_edited<'a>(
    bytes: &'a [u8],
    edit: impl FnOnce(&mut Vec<(String, TensorView<'a>)>),
) -> Result<Model<'static>, LoadError> {
    let file = SafeTensors::deserialize(bytes).unwrap();
    let mut tensors = file.tensors();
    edit(&mut tensors);
    let out = safetensors::serialize(tensors, &None).unwrap();
    Model::from_safetensors_bytes(config(), &out)
}

#[test]
fn the_fixture_loads_from_a_directory_and_from_bytes_alike() {
    let a = Model::load_dir(&fixture()).unwrap();
    let b = Model::from_safetensors_bytes(config(), &weights()).unwrap();
    assert_eq!(a.weight_bytes(), b.weight_bytes());
    let isa = tessel_kernels::Isa::scalar();
    let (mut sa, mut sb) = (
        Session::new(&a, isa).expect("session"),
        Session::new(&b, isa).expect("session"),
    );
    sa.encode(&[3, 4, 5]).unwrap();
    sb.encode(&[3, 4, 5]).unwrap();
    assert_eq!(
        sa.decode_step(&[1]).unwrap().to_vec(),
        sb.decode_step(&[1]).unwrap().to_vec()
    );
}

#[test]
fn a_missing_tensor_is_named() {
    let name = "decoder.layers.1.multihead_attn.in_proj_weight";
    let bytes = weights();
    let err = load_edited(&bytes, |t| t.retain(|(n, _)| n != name)).unwrap_err();
    assert!(
        matches!(&err, LoadError::Missing { name: n } if n == name),
        "{err}"
    );
}

#[test]
fn an_extra_tensor_is_named() {
    let extra = vec![0u8; 16];
    let bytes = weights();
    let err = load_edited(&bytes, |t| {
        t.push((
            "decoder.layers.9.norm1.weight".to_owned(),
            TensorView::new(Dtype::F32, vec![4], &extra).unwrap(),
        ))
    })
    .unwrap_err();
    assert!(
        matches!(&err, LoadError::Unexpected { name } if name == "decoder.layers.9.norm1.weight"),
        "{err}"
    );
}

#[test]
fn a_misshaped_tensor_is_named_with_both_shapes() {
    let name = "encoder.layers.0.linear1.weight";
    let bytes = weights();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let original = file.tensor(name).unwrap();
    let (rows, cols) = (original.shape()[0], original.shape()[1]);
    let data = original.data().to_vec();
    let err = load_edited(&bytes, |t| {
        for (n, view) in t.iter_mut() {
            if n == name {
                *view = TensorView::new(Dtype::F32, vec![cols, rows], &data).unwrap();
            }
        }
    })
    .unwrap_err();
    match err {
        LoadError::Shape {
            name: n,
            expected,
            got,
        } => {
            assert_eq!(n, name);
            assert_eq!(expected, vec![rows, cols]);
            assert_eq!(got, vec![cols, rows]);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_wrong_dtype_is_named() {
    let name = "generator.bias";
    let bytes = weights();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let original = file.tensor(name).unwrap();
    let shape = original.shape().to_vec();
    // Integers are not weights (F32, F16 and BF16 are).
    let ints = vec![0u8; shape[0] * 4];
    let err = load_edited(&bytes, |t| {
        for (n, view) in t.iter_mut() {
            if n == name {
                *view = TensorView::new(Dtype::I32, shape.clone(), &ints).unwrap();
            }
        }
    })
    .unwrap_err();
    assert!(
        matches!(&err, LoadError::Dtype { name: n, .. } if n == name),
        "{err}"
    );
}

#[test]
fn non_finite_weights_are_refused() {
    let name = "encoder.norm.bias";
    let bytes = weights();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut data = file.tensor(name).unwrap().data().to_vec();
    data[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    let err = load_edited(&bytes, |t| {
        for (n, view) in t.iter_mut() {
            if n == name {
                *view = TensorView::new(Dtype::F32, view.shape().to_vec(), &data).unwrap();
            }
        }
    })
    .unwrap_err();
    assert!(
        matches!(&err, LoadError::NonFinite { name: n } if n == name),
        "{err}"
    );
}

#[test]
fn malformed_files_and_paths_are_typed_errors() {
    for bytes in [
        Vec::new(),
        vec![0u8; 7],
        vec![255u8; 64],
        weights()[..100].to_vec(),
    ] {
        let err = Model::from_safetensors_bytes(config(), &bytes).unwrap_err();
        assert!(matches!(err, LoadError::Malformed(_)), "{err}");
    }
    let err = Model::load_dir(Path::new("/nonexistent/tessel")).unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }), "{err}");
    // Weights of one config do not load under another.
    let wider = Config {
        d_ff: config().d_ff + 1,
        ..config()
    };
    let err = Model::from_safetensors_bytes(wider, &weights()).unwrap_err();
    assert!(matches!(err, LoadError::Shape { .. }), "{err}");
}

#[test]
fn invalid_configs_are_typed_errors() {
    let base = Config::transformer_base();
    assert_eq!(base.validate(), Ok(()));
    let cases: Vec<(Config, ConfigError)> = vec![
        (
            Config {
                d_model: 0,
                ..base.clone()
            },
            ConfigError::Zero("d_model"),
        ),
        (
            Config {
                max_beam: 0,
                ..base.clone()
            },
            ConfigError::Zero("max_beam"),
        ),
        (
            Config {
                heads: 7,
                ..base.clone()
            },
            ConfigError::HeadsDoNotDivide {
                d_model: 512,
                heads: 7,
            },
        ),
        (
            Config {
                eos_id: 32000,
                ..base.clone()
            },
            ConfigError::SpecialIdOutOfRange {
                which: "eos",
                id: 32000,
                vocab: 32000,
            },
        ),
        (
            Config {
                share_embeddings: true,
                src_vocab: 100,
                ..base.clone()
            },
            ConfigError::SharedVocabMismatch {
                src: 100,
                tgt: 32000,
            },
        ),
        (
            Config {
                layer_norm_eps: 0.0,
                ..base.clone()
            },
            ConfigError::BadEps(0.0),
        ),
        (
            Config {
                d_model: 1 << 30,
                heads: 1,
                ..base.clone()
            },
            ConfigError::TooLarge("d_model"),
        ),
        (
            // fuzz/findings: a few-KB weights file whose config asked for 2 × 512 MB of
            // sinusoidal position tables.
            Config {
                d_model: 8,
                heads: 1,
                d_head: None,
                d_ff: 8,
                encoder_layers: 1,
                decoder_layers: 1,
                src_vocab: 3,
                tgt_vocab: 3,
                max_src_len: 1 << 24,
                max_tgt_len: 1 << 24,
                bos_id: 0,
                eos_id: 1,
                pad_id: 2,
                ..base.clone()
            },
            ConfigError::TooLarge("max_src_len and max_tgt_len are limited to MAX_POSITIONS"),
        ),
        (
            // Every dimension within MAX_DIM, but the model itself is terabytes.
            Config {
                d_model: 1 << 16,
                heads: 1,
                d_ff: 1 << 20,
                ..base.clone()
            },
            ConfigError::TooLarge("the model exceeds MAX_MODEL_BYTES"),
        ),
    ];
    for (config, expected) in cases {
        assert_eq!(config.validate(), Err(expected.clone()));
        assert!(matches!(
            Model::random(config.clone(), 0),
            Err(LoadError::Config(e)) if e == expected
        ));
        assert!(tessel_model::ArenaPlan::new(&config).is_err());
    }
    assert!(matches!(Config::from_json("{"), Err(ConfigError::Parse(_))));
    assert!(matches!(
        Config::from_json(&base.to_json().replace("\"post\"", "\"sideways\"")),
        Err(ConfigError::Parse(_))
    ));
    assert_eq!(Config::from_json(&base.to_json()), Ok(base));
}

/// Serialises seeded values for every tensor `config` expects.
fn synthetic_file(config: &Config) -> Vec<u8> {
    let expected = Model::expected_tensors(config).unwrap();
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = expected
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let n: usize = shape.iter().product();
            let bytes = (0..n)
                .flat_map(|j| (((i * 31 + j * 7) % 13) as f32 * 0.01 - 0.06).to_le_bytes())
                .collect();
            (name, shape, bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(name, shape, bytes)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, &None).unwrap()
}

#[test]
fn every_config_toggle_loads_exactly_its_tensors() {
    let base = Config {
        d_model: 24,
        heads: 2,
        d_head: None,
        encoder_layers: 1,
        decoder_layers: 2,
        d_ff: 40,
        src_vocab: 19,
        tgt_vocab: 23,
        max_src_len: 8,
        max_tgt_len: 8,
        max_beam: 2,
        ..Config::transformer_base()
    };
    let no_biases = tessel_model::Biases {
        attention_in: false,
        attention_key: false,
        attention_out: false,
        ffn: false,
        generator: false,
    };
    let variants = [
        base.clone(),
        Config {
            biases: no_biases,
            ..base.clone()
        },
        Config {
            final_norm: false,
            scale_embeddings: false,
            activation: tessel_model::FfnActivation::GeluTanh,
            norm: tessel_model::NormPlacement::Pre,
            ..base.clone()
        },
        Config {
            share_embeddings: true,
            tie_output: true,
            src_vocab: 23,
            positions: tessel_model::Positions::Learned,
            ..base.clone()
        },
    ];
    let names = |c: &Config| -> Vec<String> {
        Model::expected_tensors(c)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    let full = names(&variants[0]);
    assert!(full.contains(&"decoder.layers.1.multihead_attn.in_proj_bias".to_owned()));
    assert!(full.contains(&"encoder.norm.weight".to_owned()));
    assert!(full.contains(&"generator.weight".to_owned()));
    let bare = names(&variants[1]);
    assert!(bare
        .iter()
        .all(|n| !n.ends_with("bias") || n.contains("norm")));
    let unnormed = names(&variants[2]);
    assert!(!unnormed
        .iter()
        .any(|n| n == "encoder.norm.weight" || n == "decoder.norm.bias"));
    let shared = names(&variants[3]);
    assert!(!shared
        .iter()
        .any(|n| n == "src_embed.weight" || n == "generator.weight"));
    assert!(shared.contains(&"tgt_pos.weight".to_owned()));
    for config in variants {
        let bytes = synthetic_file(&config);
        let model = Model::from_safetensors_bytes(config.clone(), &bytes)
            .unwrap_or_else(|e| panic!("{config:?}: {e}"));
        let mut session = Session::new(&model, tessel_kernels::Isa::best()).unwrap();
        session.encode(&[3, 4, 5, 6]).unwrap();
        let logits = session.decode_step(&[config.bos_id]).unwrap();
        assert_eq!(logits.len(), config.tgt_vocab);
        assert!(logits.iter().all(|v| v.is_finite()));
        // The same file is refused by a config that expects other tensors.
        let other = Config {
            biases: if config.biases.ffn {
                no_biases
            } else {
                tessel_model::Biases::default()
            },
            ..config
        };
        assert!(Model::from_safetensors_bytes(other, &bytes).is_err());
    }
}
