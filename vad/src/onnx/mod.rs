//! A small reader over the ONNX protobuf: the model, its graph (and the subgraphs of `If` and
//! `Loop` nodes), the nodes with their attributes, and the initializers as typed arrays.
//!
//! [`proto`] declares the subset of `onnx.proto` read, as `prost` messages. [`OnnxModel`]
//! decodes a file and answers the questions a checker of a fixed graph asks: the nodes in
//! order, an attribute as integers, floats or a string, an initializer's shape and its
//! elements as `f32` or `i64` (from `raw_data`, little-endian, or the typed repeated field).
//! Every malformed input is a [`VadError`], never a panic: lengths and element counts are
//! checked with overflow-checked arithmetic before any slice is taken, and data stored
//! outside the file is refused.

pub mod proto;

use prost::Message;

use crate::error::VadError;
use proto::{AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};

/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: i32 = 1;
/// `TensorProto.DataType.INT64`.
pub const INT64: i32 = 7;

/// A decoded ONNX model with a graph.
#[derive(Clone, Debug)]
pub struct OnnxModel {
    /// The model's fields other than the graph.
    proto: ModelProto,
    /// The graph, taken out of `proto`.
    graph: GraphProto,
}

impl OnnxModel {
    /// Decodes `bytes`. Fails with [`VadError::Decode`] when they are not a protobuf of
    /// `ModelProto` or the model has no graph.
    pub fn decode(bytes: &[u8]) -> Result<OnnxModel, VadError> {
        let mut proto = ModelProto::decode(bytes).map_err(|e| VadError::Decode(e.to_string()))?;
        let graph = proto
            .graph
            .take()
            .ok_or_else(|| VadError::Decode("the model has no graph".into()))?;
        Ok(OnnxModel { proto, graph })
    }

    /// The decoded message, without its graph (see [`OnnxModel::graph`]).
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// The main graph.
    pub fn graph(&self) -> &GraphProto {
        &self.graph
    }

    /// The version of the default (`ai.onnx`) operator set, if the model imports it.
    pub fn opset(&self) -> Option<i64> {
        self.proto
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map(|o| o.version)
    }
}

/// Every subgraph held by `node`'s attributes (the `then_branch`/`else_branch` of `If`, the
/// `body` of `Loop`), in attribute order.
pub fn subgraphs(node: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    node.attribute
        .iter()
        .flat_map(|a| a.g.as_deref().into_iter().chain(a.graphs.iter()))
}

/// The initializer named `name` in `graph` or, failing that, in any subgraph of its nodes
/// (searched depth first).
pub fn find_initializer<'g>(graph: &'g GraphProto, name: &str) -> Option<&'g TensorProto> {
    graph
        .initializer
        .iter()
        .find(|t| t.name == name)
        .or_else(|| {
            graph
                .node
                .iter()
                .flat_map(subgraphs)
                .find_map(|g| find_initializer(g, name))
        })
}

/// The attribute named `name` of `node`.
pub fn attribute<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

/// The tensor's shape as `usize`s; a negative dimension is an error.
pub fn dims(tensor: &TensorProto) -> Result<Vec<usize>, VadError> {
    tensor
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| tensor_error(tensor, format!("dimension {d}"))))
        .collect()
}

/// The number of elements of `tensor`'s shape, overflow-checked.
fn element_count(tensor: &TensorProto) -> Result<usize, VadError> {
    dims(tensor)?.iter().try_fold(1usize, |n, &d| {
        n.checked_mul(d)
            .ok_or_else(|| tensor_error(tensor, "the shape's element count overflows".into()))
    })
}

fn tensor_error(tensor: &TensorProto, reason: String) -> VadError {
    VadError::Tensor {
        name: tensor.name.clone(),
        reason,
    }
}

/// Checks the tensor is stored in the file, has `data_type` and holds its shape's element
/// count in `raw_data` (`width` bytes each) or in a typed field of `typed_len` elements.
/// Returns the element count and whether `raw_data` holds them.
fn check_storage(
    tensor: &TensorProto,
    data_type: i32,
    width: usize,
    typed_len: usize,
) -> Result<(usize, bool), VadError> {
    if tensor.data_location != 0 {
        return Err(tensor_error(tensor, "data stored outside the file".into()));
    }
    if tensor.data_type != data_type {
        return Err(tensor_error(
            tensor,
            format!(
                "element type {} where {} was expected",
                tensor.data_type, data_type
            ),
        ));
    }
    let count = element_count(tensor)?;
    let raw = !tensor.raw_data.is_empty();
    let held = if raw {
        if !tensor.raw_data.len().is_multiple_of(width) {
            return Err(tensor_error(
                tensor,
                format!(
                    "raw_data of {} bytes is not whole elements",
                    tensor.raw_data.len()
                ),
            ));
        }
        tensor.raw_data.len() / width
    } else {
        typed_len
    };
    if held != count {
        return Err(tensor_error(
            tensor,
            format!(
                "holds {held} elements, its shape {:?} needs {count}",
                tensor.dims
            ),
        ));
    }
    Ok((count, raw))
}

/// The elements of a `FLOAT` tensor.
pub fn floats(tensor: &TensorProto) -> Result<Vec<f32>, VadError> {
    let (_, raw) = check_storage(tensor, FLOAT, 4, tensor.float_data.len())?;
    if raw {
        Ok(tensor
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    } else {
        Ok(tensor.float_data.clone())
    }
}

/// The elements of an `INT64` tensor.
pub fn int64s(tensor: &TensorProto) -> Result<Vec<i64>, VadError> {
    let (_, raw) = check_storage(tensor, INT64, 8, tensor.int64_data.len())?;
    if raw {
        Ok(tensor
            .raw_data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect())
    } else {
        Ok(tensor.int64_data.clone())
    }
}
