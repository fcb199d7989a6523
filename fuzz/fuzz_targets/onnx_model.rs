//! Silero VAD models from arbitrary bytes: the first byte picks arbitrary bytes as an ONNX
//! file, or the real model (`assets/silero_vad_v6.onnx`) edited through its decoded protobuf
//! (an initializer's shape, element type, storage or bytes; a node's operator, input or
//! attribute; a node dropped or duplicated) and written back. Oracle: every load is `Ok` or a
//! typed `VadError`, never a panic; what loads runs the rest of the input as samples, one
//! probability per window plus one, each in [0, 1] (NaN where an edit made a weight NaN).
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tessel_vad::onnx::proto::ModelProto;
use tessel_vad::{Vad, WINDOW};

static MODEL: &[u8] = include_bytes!("../../assets/silero_vad_v6.onnx");

/// Applies the edit described by `spec` to the decoded model.
fn edit(model: &mut ModelProto, spec: &[u8]) {
    let Some(graph) = model.graph.as_mut() else {
        return;
    };
    let pick = |n: usize, b: u8| usize::from(b) % n.max(1);
    let value = i64::from(spec[3] as i8);
    let tensors = graph.initializer.len();
    match spec[0] % 9 {
        0 => {
            if let Some(t) = graph.initializer.get_mut(pick(tensors, spec[1])) {
                let at = pick(t.dims.len(), spec[2]);
                match t.dims.get_mut(at) {
                    Some(d) => *d = value.wrapping_mul(1 << (spec[4] % 40)),
                    None => t.dims.push(value),
                }
            }
        }
        1 => {
            if let Some(t) = graph.initializer.get_mut(pick(tensors, spec[1])) {
                t.data_type = i32::from(spec[2] % 20);
            }
        }
        2 => {
            if let Some(t) = graph.initializer.get_mut(pick(tensors, spec[1])) {
                let len = t.raw_data.len();
                t.raw_data.truncate(len.saturating_sub(usize::from(spec[2])));
                t.data_location = i32::from(spec[4] % 3 == 0);
            }
        }
        3 => {
            if let Some(t) = graph.initializer.get_mut(pick(tensors, spec[1])) {
                let at = pick(t.raw_data.len(), spec[2]);
                if let Some(b) = t.raw_data.get_mut(at) {
                    *b = spec[3];
                }
                // Move the data to the typed field.
                if spec[4] % 4 == 0 && t.data_type == 1 {
                    t.float_data = t
                        .raw_data
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    t.raw_data.clear();
                }
            }
        }
        4 => {
            const OPS: [&str; 6] = ["Conv", "Relu", "LSTM", "If", "Slice", ""];
            let n = graph.node.len();
            if let Some(node) = graph.node.get_mut(pick(n, spec[1])) {
                node.op_type = OPS[pick(OPS.len(), spec[2])].into();
            }
        }
        5 => {
            let n = graph.node.len();
            let other = graph.node.get(pick(n, spec[3])).and_then(|x| x.output.first().cloned());
            if let Some(node) = graph.node.get_mut(pick(n, spec[1])) {
                let k = pick(node.input.len(), spec[2]);
                if let (Some(input), Some(other)) = (node.input.get_mut(k), other) {
                    *input = other;
                }
            }
        }
        6 => {
            let n = graph.node.len();
            if let Some(node) = graph.node.get_mut(pick(n, spec[1])) {
                let k = pick(node.attribute.len(), spec[2]);
                if let Some(a) = node.attribute.get_mut(k) {
                    a.i = value;
                    a.ints.push(value);
                    a.r#type = i32::from(spec[4] % 12);
                }
            }
        }
        7 => {
            if !graph.node.is_empty() {
                let at = pick(graph.node.len(), spec[1]);
                graph.node.remove(at);
            }
        }
        _ => {
            if let Some(node) = graph.node.get(pick(graph.node.len(), spec[1])).cloned() {
                graph.node.insert(pick(graph.node.len(), spec[2]), node);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (vad, samples) = if mode % 2 == 0 {
        (Vad::from_bytes(rest), &[][..])
    } else {
        let Some((spec, samples)) = rest.split_first_chunk::<5>() else {
            return;
        };
        let mut model = ModelProto::decode(MODEL).expect("the committed model decodes");
        edit(&mut model, spec);
        (Vad::from_bytes(&model.encode_to_vec()), samples)
    };
    let Ok(vad) = vad else {
        return;
    };
    let audio: Vec<f32> = samples
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .take(4 * WINDOW)
        .collect();
    let probabilities = vad.speech_probabilities(&audio).expect("a loaded model runs");
    assert_eq!(probabilities.len(), audio.len() / WINDOW + 1);
    // An edited weight may be NaN or infinite; a probability is then NaN, never outside [0, 1].
    assert!(probabilities.iter().all(|p| p.is_nan() || (0.0..=1.0).contains(p)));
});
