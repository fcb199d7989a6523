//! Malformed and foreign ONNX files are refused with typed errors, never a panic: bytes that
//! are not a protobuf, truncations and byte flips of the real model (a property test), and
//! one edit at a time of the real graph (an operator, an attribute, a constant, a weight's
//! shape or storage, the wiring), each naming what differs.

use std::path::Path;

use proptest::prelude::*;
use prost::Message;
use tessel_vad::onnx::proto::{AttributeProto, ModelProto, TensorProto};
use tessel_vad::{Vad, VadError};

fn model_bytes() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/silero_vad_v6.onnx");
    std::fs::read(path).expect("model file")
}

fn model() -> ModelProto {
    ModelProto::decode(&model_bytes()[..]).expect("decodes")
}

/// The error of loading `edit` applied to the real model.
fn load_edited(edit: impl FnOnce(&mut ModelProto)) -> VadError {
    let mut proto = model();
    edit(&mut proto);
    Vad::from_bytes(&proto.encode_to_vec()).expect_err("edited model must be refused")
}

fn initializer<'a>(proto: &'a mut ModelProto, name: &str) -> &'a mut TensorProto {
    proto
        .graph
        .as_mut()
        .unwrap()
        .initializer
        .iter_mut()
        .find(|t| t.name == name)
        .unwrap()
}

fn node_attribute<'a>(proto: &'a mut ModelProto, op: &str, name: &str) -> &'a mut AttributeProto {
    proto
        .graph
        .as_mut()
        .unwrap()
        .node
        .iter_mut()
        .find(|n| n.op_type == op)
        .unwrap()
        .attribute
        .iter_mut()
        .find(|a| a.name == name)
        .unwrap()
}

fn assert_graph_error(error: VadError, needle: &str) {
    match &error {
        VadError::Graph(message)
        | VadError::Tensor {
            reason: message, ..
        } if message.contains(needle) => {}
        other => panic!("expected an error naming {needle:?}, got {other}"),
    }
}

#[test]
fn the_real_model_loads() {
    assert!(Vad::from_bytes(&model_bytes()).is_ok());
}

#[test]
fn non_protobuf_bytes_are_decode_errors() {
    for bytes in [
        &b"\xff\xff\xff\xff"[..],
        b"\x0a\x05ab",
        b"not an onnx file at all",
    ] {
        assert!(
            matches!(Vad::from_bytes(bytes), Err(VadError::Decode(_))),
            "{bytes:?}"
        );
    }
    // A valid protobuf with no graph.
    assert!(matches!(Vad::from_bytes(&[]), Err(VadError::Decode(_))));
}

#[test]
fn a_missing_file_names_the_path() {
    let error = Vad::open(Path::new("/nonexistent/silero.onnx")).unwrap_err();
    assert!(matches!(error, VadError::Io { .. }));
    assert!(error.to_string().contains("/nonexistent/silero.onnx"));
}

#[test]
fn graph_edits_are_refused_naming_them() {
    assert_graph_error(
        load_edited(|p| p.graph.as_mut().unwrap().node[18].op_type = "GRU".into()),
        "expected LSTM",
    );
    assert_graph_error(
        load_edited(|p| node_attribute(p, "LSTM", "hidden_size").i = 64),
        "hidden_size",
    );
    assert_graph_error(
        load_edited(|p| {
            let lstm = p
                .graph
                .as_mut()
                .unwrap()
                .node
                .iter_mut()
                .find(|n| n.op_type == "LSTM");
            lstm.unwrap().attribute.push(AttributeProto {
                name: "clip".into(),
                r#type: 1,
                f: 3.0,
                ..Default::default()
            });
        }),
        "`clip` is not supported",
    );
    assert_graph_error(
        load_edited(|p| node_attribute(p, "Pad", "mode").s = b"constant".to_vec()),
        "mode",
    );
    assert_graph_error(
        load_edited(|p| {
            let pads = initializer(p, "/encoder/feature_extractor/padding/Reshape_1_output_0");
            pads.raw_data[8] = 64;
        }),
        "expected [0, 128, 0, 128]",
    );
    assert_graph_error(
        load_edited(|p| initializer(p, "encoder.conv_layers.1.weight").dims[0] = 32),
        "encoder.conv_layers.1.weight",
    );
    assert_graph_error(
        load_edited(|p| {
            let bias = initializer(p, "decoder.conv1d.bias");
            bias.raw_data.push(0);
        }),
        "not whole elements",
    );
    assert_graph_error(
        load_edited(|p| initializer(p, "onnx::LSTM_211").raw_data.truncate(400)),
        "needs 1024",
    );
    assert_graph_error(
        load_edited(|p| initializer(p, "onnx::LSTM_210").data_location = 1),
        "outside the file",
    );
    assert_graph_error(
        load_edited(|p| initializer(p, "onnx::LSTM_209").data_type = 10),
        "element type 10",
    );
    assert_graph_error(
        load_edited(|p| p.graph.as_mut().unwrap().node[9].input[0] = "input".into()),
        "input 0 is `input`",
    );
    assert_graph_error(
        load_edited(|p| {
            let graph = p.graph.as_mut().unwrap();
            let extra = graph.node[24].clone();
            graph.node.push(extra);
        }),
        "follow the last expected one",
    );
    assert_graph_error(
        load_edited(|p| {
            p.graph.as_mut().unwrap().node.truncate(20);
        }),
        "the graph ends after 20 nodes",
    );
    assert_graph_error(
        load_edited(|p| p.opset_import[0].version = 11),
        "operator set",
    );
    assert_graph_error(
        load_edited(|p| {
            p.graph.as_mut().unwrap().input.pop();
        }),
        "expected three each",
    );
}

#[test]
fn other_sample_rates_are_refused() {
    assert!(tessel_vad::check_sample_rate(16_000).is_ok());
    assert!(matches!(
        tessel_vad::check_sample_rate(8_000),
        Err(VadError::SampleRate(8_000))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tessel_tests::cases(64)))]

    /// Any prefix of the real model, and the real model with a few bytes changed, loads or
    /// fails with a typed error.
    #[test]
    fn truncated_or_flipped_models_never_panic(
        cut in 0usize..1_245_151,
        flips in proptest::collection::vec((0usize..1_245_151, any::<u8>()), 0..4),
    ) {
        let bytes = model_bytes();
        let _ = Vad::from_bytes(&bytes[..cut.min(bytes.len())]);
        let mut flipped = bytes.clone();
        for (at, value) in flips {
            let at = at % flipped.len();
            flipped[at] = value;
        }
        let _ = Vad::from_bytes(&flipped);
    }
}
