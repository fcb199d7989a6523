//! The parts of ONNX's `ModelProto` (onnx.proto, proto3) a graph reader needs, as `prost`
//! messages declared by hand: the graph, its nodes and their attributes (subgraphs of `If`
//! and `Loop` included), and tensors stored inline (`raw_data` or the typed repeated fields).
//! Fields not listed here are skipped by the decoder.

/// `ModelProto`: the top-level message of a `.onnx` file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// The IR version of the file format.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// The operator sets the graph's nodes come from.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// The tool that wrote the file.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// Its version.
    #[prost(string, tag = "3")]
    pub producer_version: String,
    /// The computation.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

/// `OperatorSetIdProto`: an operator set and its version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// The domain; empty for the default `ai.onnx` set.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// The operator set version.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto`: nodes in topological order, constant tensors, named inputs and outputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// The nodes, in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// The graph's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Named constant tensors (weights).
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Sparse constant tensors (never read: their presence is refused by readers that
    /// check a graph).
    #[prost(message, repeated, tag = "15")]
    pub sparse_initializer: Vec<SparseTensorProto>,
    /// The graph's inputs.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// The graph's outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

/// `SparseTensorProto`, kept only so its presence can be seen.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SparseTensorProto {
    /// The non-zero values.
    #[prost(message, optional, tag = "1")]
    pub values: Option<TensorProto>,
}

/// `ValueInfoProto`: a named value; only the name is read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// The value's name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `NodeProto`: one operator call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Names of the inputs; an empty name is an omitted optional input.
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Names of the outputs.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// The node's name (may be empty).
    #[prost(string, tag = "3")]
    pub name: String,
    /// The operator (`Conv`, `LSTM`, ...).
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// The operator's domain; empty for `ai.onnx`.
    #[prost(string, tag = "7")]
    pub domain: String,
    /// The attributes.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

/// `AttributeProto`: a named attribute value; `type` says which field holds it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `AttributeType`: 1 float, 2 int, 3 string, 4 tensor, 5 graph, 6 floats, 7 ints,
    /// 8 strings, 9 tensors, 10 graphs (others are not read).
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    /// A float.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// An integer.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// A string (bytes).
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// A tensor.
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// A subgraph (the branches of `If`, the body of `Loop`).
    #[prost(message, optional, boxed, tag = "6")]
    pub g: Option<Box<GraphProto>>,
    /// Floats.
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    /// Integers.
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    /// Strings (bytes).
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// Tensors.
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    /// Subgraphs.
    #[prost(message, repeated, tag = "11")]
    pub graphs: Vec<GraphProto>,
}

/// `TensorProto`: a tensor's shape, element type and data, stored inline in `raw_data`
/// (little-endian) or in the repeated field of its type, or outside the file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// The shape.
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// `TensorProto.DataType`: 1 float, 7 int64, others not read.
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// Float elements (`float`, and `float16`/`bfloat16` bit patterns use `int32_data`).
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// `int32` elements (and narrower types).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// `int64` elements.
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// The tensor's name.
    #[prost(string, tag = "8")]
    pub name: String,
    /// The elements as little-endian bytes, when stored so.
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// `double` elements.
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// Where the data lives: 0 in this message, 1 in an external file.
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}
