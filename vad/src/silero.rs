//! Silero VAD v6's 16 kHz graph, as faster-whisper ships it (`silero_vad_v6.onnx`, exported
//! by PyTorch 2.8 at opset 18), checked node by node and read into [`SileroWeights`].
//!
//! The graph takes `input` (`windows × 576`: 64 samples of context then a 512-sample window,
//! one row per window), `h` and `c` (`1 × 1 × 128`, the LSTM state), and returns one speech
//! probability per window with the new state. Its 25 nodes, in order:
//!
//! 1. `Pad` (reflect, 128 samples each side), `Unsqueeze`, `Conv` with a fixed `258 × 1 × 256`
//!    basis at stride 128 (the real and imaginary parts of a Hann-windowed 256-point DFT,
//!    129 bins each, over 5 frames), two `Slice`s dropping the first frame and splitting the
//!    parts, `Pow` 2, `Pow` 2, `Add`, `Sqrt`: the STFT magnitude, 4 frames × 129 bins;
//! 2. four `Conv` (width 3, padding 1; strides 1, 2, 2, 1; channels 129 → 128 → 64 → 64 →
//!    128), each followed by `Relu`: one frame of 128 features per window;
//! 3. `Transpose` to a sequence over the windows, `LSTM` (hidden 128, forward, gates
//!    `i o f c`, one bias pair), `Squeeze`, `Relu`, `Transpose`, a `1 × 1` `Conv` to one
//!    channel, `Sigmoid`, `Reshape` to one probability per window.
//!
//! [`SileroWeights::read`] checks every one of them: operator, wiring (each node reads the
//! previous one's output, the graph's inputs and outputs where they belong), every attribute
//! (an attribute this reader does not know is refused; an absent one must have its
//! expected default), every constant (pads, slice bounds, exponents, axes, shapes) and every
//! weight's shape. Any difference is a [`VadError::Graph`] naming the node and what differs,
//! so a model tessel would run differently from onnxruntime is never run.

use crate::error::VadError;
use crate::onnx::proto::{GraphProto, NodeProto};
use crate::onnx::{self, OnnxModel};

/// Samples of one window.
pub const WINDOW: usize = 512;
/// Samples of context before each window (the end of the previous one).
pub const CONTEXT: usize = 64;
/// Samples of one model input row: the context then the window.
pub const INPUT: usize = CONTEXT + WINDOW;
/// Samples of reflection padding the graph adds at each end of a row.
pub const PAD: usize = 128;
/// Samples per STFT frame.
pub const FFT: usize = 256;
/// STFT hop.
pub const HOP: usize = 128;
/// Frequency bins of the STFT.
pub const BINS: usize = FFT / 2 + 1;
/// STFT frames kept per window (the first of the five is dropped).
pub const FRAMES: usize = 4;
/// The LSTM's hidden size.
pub const HIDDEN: usize = 128;
/// Taps of every encoder convolution.
pub const TAPS: usize = 3;

/// The encoder convolutions: (input channels, output channels, stride).
pub const CONVS: [(usize, usize, usize); 4] =
    [(BINS, 128, 1), (128, 64, 2), (64, 64, 2), (64, 128, 1)];

/// One encoder convolution's weights as the file stores them.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvWeights {
    /// `[out][in][tap]`.
    pub weight: Vec<f32>,
    /// `[out]`.
    pub bias: Vec<f32>,
}

/// Every weight of the graph, in the file's layouts.
#[derive(Clone, Debug, PartialEq)]
pub struct SileroWeights {
    /// The STFT basis, `[2 · BINS][FFT]`: real parts then imaginary parts.
    pub basis: Vec<f32>,
    /// The four encoder convolutions.
    pub convs: [ConvWeights; 4],
    /// The LSTM's input weights `W`, `[4 · HIDDEN][HIDDEN]`, gates `i o f c`.
    pub lstm_w: Vec<f32>,
    /// The LSTM's recurrent weights `R`, `[4 · HIDDEN][HIDDEN]`.
    pub lstm_r: Vec<f32>,
    /// The LSTM's biases `Wb` then `Rb`, `[8 · HIDDEN]`.
    pub lstm_b: Vec<f32>,
    /// The decoder's `1 × 1` convolution, `[HIDDEN]`.
    pub decoder_w: Vec<f32>,
    /// Its bias.
    pub decoder_b: f32,
}

/// An expected attribute value.
#[derive(Clone, Copy, Debug)]
enum Value {
    Int(i64),
    Ints(&'static [i64]),
    Str(&'static str),
}

/// An attribute a node may carry: its name, its value, and whether it may be absent (its
/// value is then the operator's default).
type Attr = (&'static str, Value, bool);

/// Walks the graph's nodes in order.
struct Checker<'g> {
    graph: &'g GraphProto,
    next: usize,
}

fn graph_error(message: String) -> VadError {
    VadError::Graph(message)
}

impl<'g> Checker<'g> {
    /// The next node, which must be `op` from the default domain with `inputs` inputs.
    fn node(&mut self, op: &str, inputs: usize) -> Result<&'g NodeProto, VadError> {
        let graph: &'g GraphProto = self.graph;
        let index = self.next;
        let node = graph.node.get(index).ok_or_else(|| {
            graph_error(format!(
                "the graph ends after {index} nodes, expected a {op} next"
            ))
        })?;
        self.next += 1;
        if node.op_type != op || !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(graph_error(format!(
                "node {index} (`{}`) is {} {}, expected {op}",
                node.name, node.domain, node.op_type
            )));
        }
        if node.input.len() != inputs || node.output.is_empty() {
            return Err(graph_error(format!(
                "node {index} ({op} `{}`) has {} inputs and {} outputs, expected {inputs} inputs",
                node.name,
                node.input.len(),
                node.output.len()
            )));
        }
        Ok(node)
    }

    /// The initializer `name` as floats of shape `shape`.
    fn floats(&self, node: &NodeProto, name: &str, shape: &[usize]) -> Result<Vec<f32>, VadError> {
        let tensor = onnx::find_initializer(self.graph, name).ok_or_else(|| {
            graph_error(format!(
                "{} `{}` reads `{name}`, which is not an initializer",
                node.op_type, node.name
            ))
        })?;
        let dims = onnx::dims(tensor)?;
        if dims != shape {
            return Err(graph_error(format!(
                "weight `{name}` has shape {dims:?}, expected {shape:?}"
            )));
        }
        onnx::floats(tensor)
    }

    /// The initializer `name` as integers.
    fn ints(&self, node: &NodeProto, name: &str) -> Result<Vec<i64>, VadError> {
        let tensor = onnx::find_initializer(self.graph, name).ok_or_else(|| {
            graph_error(format!(
                "{} `{}` reads `{name}`, which is not an initializer",
                node.op_type, node.name
            ))
        })?;
        onnx::int64s(tensor)
    }

    /// Checks that the integer constant `name` read by `node` is `expected`.
    fn constant(&self, node: &NodeProto, name: &str, expected: &[i64]) -> Result<(), VadError> {
        let got = self.ints(node, name)?;
        if got != expected {
            return Err(graph_error(format!(
                "{} `{}`: constant `{name}` is {got:?}, expected {expected:?}",
                node.op_type, node.name
            )));
        }
        Ok(())
    }
}

/// Checks `node`'s attributes against `allowed` (see [`Attr`]).
fn check_attributes(node: &NodeProto, allowed: &[Attr]) -> Result<(), VadError> {
    let what = || format!("{} `{}`", node.op_type, node.name);
    for attribute in &node.attribute {
        let Some((_, expected, _)) = allowed.iter().find(|(name, _, _)| *name == attribute.name)
        else {
            return Err(graph_error(format!(
                "{}: attribute `{}` is not supported",
                what(),
                attribute.name
            )));
        };
        let matches = match *expected {
            Value::Int(v) => attribute.r#type == 2 && attribute.i == v,
            Value::Ints(v) => attribute.r#type == 7 && attribute.ints == v,
            Value::Str(v) => attribute.r#type == 3 && attribute.s == v.as_bytes(),
        };
        if !matches {
            return Err(graph_error(format!(
                "{}: attribute `{}` is not {:?}",
                what(),
                attribute.name,
                expected
            )));
        }
    }
    for (name, expected, optional) in allowed {
        if !optional && onnx::attribute(node, name).is_none() {
            return Err(graph_error(format!(
                "{}: attribute `{name}` ({expected:?}) is missing",
                what()
            )));
        }
    }
    Ok(())
}

/// Checks that `node` reads `name` as its input `index`.
fn reads(node: &NodeProto, index: usize, name: &str) -> Result<(), VadError> {
    if node.input.get(index).map(String::as_str) != Some(name) {
        return Err(graph_error(format!(
            "{} `{}` input {index} is `{}`, expected `{name}`",
            node.op_type,
            node.name,
            node.input.get(index).map(String::as_str).unwrap_or("")
        )));
    }
    Ok(())
}

/// The attributes of a 1-D `Conv` of `kernel` taps, `stride` and `pad` at each end.
fn conv_attributes(kernel: i64, stride: &'static [i64], pads: &'static [i64]) -> [Attr; 5] {
    let kernel: &'static [i64] = match kernel {
        1 => &[1],
        3 => &[3],
        _ => &[256],
    };
    [
        ("dilations", Value::Ints(&[1]), true),
        ("group", Value::Int(1), true),
        ("kernel_shape", Value::Ints(kernel), false),
        ("pads", Value::Ints(pads), pads == [0, 0]),
        ("strides", Value::Ints(stride), stride == [1]),
    ]
}

impl SileroWeights {
    /// Checks `model` is the graph described in the module documentation and reads its
    /// weights.
    pub fn read(model: &OnnxModel) -> Result<SileroWeights, VadError> {
        match model.opset() {
            Some(v) if v >= 13 => {}
            other => {
                return Err(graph_error(format!(
                    "operator set {other:?}; 13 or later is expected (Slice, Squeeze and \
                     Unsqueeze with constant inputs)"
                )))
            }
        }
        let graph = model.graph();
        let names = |values: &[onnx::proto::ValueInfoProto]| -> Vec<String> {
            values.iter().map(|v| v.name.clone()).collect()
        };
        let (inputs, outputs) = (names(&graph.input), names(&graph.output));
        if inputs.len() != 3 || outputs.len() != 3 {
            return Err(graph_error(format!(
                "the graph has inputs {inputs:?} and outputs {outputs:?}, expected three each \
                 (input, h, c; speech_probs, hn, cn)"
            )));
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(graph_error("sparse initializers are not supported".into()));
        }
        let mut c = Checker { graph, next: 0 };

        // The STFT magnitude.
        let pad = c.node("Pad", 2)?;
        reads(pad, 0, &inputs[0])?;
        check_attributes(pad, &[("mode", Value::Str("reflect"), false)])?;
        c.constant(pad, &pad.input[1], &[0, PAD as i64, 0, PAD as i64])?;
        let unsqueeze = c.node("Unsqueeze", 2)?;
        reads(unsqueeze, 0, &pad.output[0])?;
        check_attributes(unsqueeze, &[])?;
        c.constant(unsqueeze, &unsqueeze.input[1], &[1])?;
        let stft = c.node("Conv", 2)?;
        reads(stft, 0, &unsqueeze.output[0])?;
        check_attributes(stft, &conv_attributes(256, &[HOP as i64], &[0, 0]))?;
        let basis = c.floats(stft, &stft.input[1], &[2 * BINS, 1, FFT])?;
        let mut parts = [String::new(), String::new()];
        for (part, first_bin) in parts.iter_mut().zip([0, BINS]) {
            let slice = c.node("Slice", 5)?;
            reads(slice, 0, &stft.output[0])?;
            check_attributes(slice, &[])?;
            let starts = c.ints(slice, &slice.input[1])?;
            let ends = c.ints(slice, &slice.input[2])?;
            c.constant(slice, &slice.input[3], &[1, 2])?;
            c.constant(slice, &slice.input[4], &[1, 1])?;
            // Bins `first_bin..first_bin + BINS` and frames `1..`: the ends may be any value at
            // or past the end of the axis (exporters write i64::MAX).
            let bin_end = first_bin + BINS;
            let end_ok = ends.len() == 2
                && (ends[0] == bin_end as i64
                    || (bin_end == 2 * BINS && ends[0] >= bin_end as i64))
                && ends[1] >= (FRAMES + 1) as i64;
            if starts != [first_bin as i64, 1] || !end_ok {
                return Err(graph_error(format!(
                    "Slice `{}` takes starts {starts:?} ends {ends:?}, expected bins \
                     {first_bin}..{bin_end} of frames 1..",
                    slice.name
                )));
            }
            *part = slice.output[0].clone();
        }
        let mut squares = [String::new(), String::new()];
        for (square, part) in squares.iter_mut().zip(&parts) {
            let pow = c.node("Pow", 2)?;
            reads(pow, 0, part)?;
            check_attributes(pow, &[])?;
            let two = c.floats(pow, &pow.input[1], &[])?;
            if two != [2.0] {
                return Err(graph_error(format!(
                    "Pow `{}` raises to {two:?}, expected 2",
                    pow.name
                )));
            }
            *square = pow.output[0].clone();
        }
        let add = c.node("Add", 2)?;
        let summed = (add.input[0] == squares[0] && add.input[1] == squares[1])
            || (add.input[0] == squares[1] && add.input[1] == squares[0]);
        if !summed {
            return Err(graph_error(format!(
                "Add `{}` does not sum the two squared parts",
                add.name
            )));
        }
        check_attributes(add, &[])?;
        let sqrt = c.node("Sqrt", 1)?;
        reads(sqrt, 0, &add.output[0])?;
        check_attributes(sqrt, &[])?;

        // The encoder.
        let mut previous = sqrt.output[0].clone();
        let mut convs = Vec::with_capacity(4);
        for (channels, out, stride) in CONVS {
            let conv = c.node("Conv", 3)?;
            reads(conv, 0, &previous)?;
            let strides: &'static [i64] = if stride == 1 { &[1] } else { &[2] };
            check_attributes(conv, &conv_attributes(3, strides, &[1, 1]))?;
            let weight = c.floats(conv, &conv.input[1], &[out, channels, TAPS])?;
            let bias = c.floats(conv, &conv.input[2], &[out])?;
            let relu = c.node("Relu", 1)?;
            reads(relu, 0, &conv.output[0])?;
            check_attributes(relu, &[])?;
            previous = relu.output[0].clone();
            convs.push(ConvWeights { weight, bias });
        }

        // The decoder.
        let transpose = c.node("Transpose", 1)?;
        reads(transpose, 0, &previous)?;
        check_attributes(transpose, &[("perm", Value::Ints(&[0, 2, 1]), false)])?;
        let lstm = c.node("LSTM", 7)?;
        reads(lstm, 0, &transpose.output[0])?;
        reads(lstm, 4, "")?;
        reads(lstm, 5, &inputs[1])?;
        reads(lstm, 6, &inputs[2])?;
        check_attributes(
            lstm,
            &[
                ("hidden_size", Value::Int(HIDDEN as i64), false),
                ("direction", Value::Str("forward"), true),
                ("layout", Value::Int(0), true),
                ("input_forget", Value::Int(0), true),
            ],
        )?;
        if lstm.output.len() != 3 || lstm.output[1] != outputs[1] || lstm.output[2] != outputs[2] {
            return Err(graph_error(format!(
                "LSTM `{}` outputs {:?}, expected Y and the graph outputs {} and {}",
                lstm.name, lstm.output, outputs[1], outputs[2]
            )));
        }
        let lstm_w = c.floats(lstm, &lstm.input[1], &[1, 4 * HIDDEN, HIDDEN])?;
        let lstm_r = c.floats(lstm, &lstm.input[2], &[1, 4 * HIDDEN, HIDDEN])?;
        let lstm_b = c.floats(lstm, &lstm.input[3], &[1, 8 * HIDDEN])?;
        let squeeze = c.node("Squeeze", 2)?;
        reads(squeeze, 0, &lstm.output[0])?;
        check_attributes(squeeze, &[])?;
        c.constant(squeeze, &squeeze.input[1], &[1])?;
        let relu = c.node("Relu", 1)?;
        reads(relu, 0, &squeeze.output[0])?;
        check_attributes(relu, &[])?;
        let transpose = c.node("Transpose", 1)?;
        reads(transpose, 0, &relu.output[0])?;
        check_attributes(transpose, &[("perm", Value::Ints(&[1, 2, 0]), false)])?;
        let conv = c.node("Conv", 3)?;
        reads(conv, 0, &transpose.output[0])?;
        check_attributes(conv, &conv_attributes(1, &[1], &[0, 0]))?;
        let decoder_w = c.floats(conv, &conv.input[1], &[1, HIDDEN, 1])?;
        let decoder_b = c.floats(conv, &conv.input[2], &[1])?;
        let sigmoid = c.node("Sigmoid", 1)?;
        reads(sigmoid, 0, &conv.output[0])?;
        check_attributes(sigmoid, &[])?;
        let reshape = c.node("Reshape", 2)?;
        reads(reshape, 0, &sigmoid.output[0])?;
        check_attributes(reshape, &[("allowzero", Value::Int(0), true)])?;
        c.constant(reshape, &reshape.input[1], &[-1])?;
        if reshape.output.first() != Some(&outputs[0]) {
            return Err(graph_error(format!(
                "the last node does not write the graph output `{}`",
                outputs[0]
            )));
        }
        if c.next != graph.node.len() {
            return Err(graph_error(format!(
                "{} nodes follow the last expected one",
                graph.node.len() - c.next
            )));
        }
        let convs: [ConvWeights; 4] = convs
            .try_into()
            .map_err(|_| graph_error("four encoder convolutions expected".into()))?;
        Ok(SileroWeights {
            basis,
            convs,
            lstm_w,
            lstm_r,
            lstm_b,
            decoder_w,
            decoder_b: decoder_b[0],
        })
    }
}
