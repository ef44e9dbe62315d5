//! The subset of `onnx.proto` the importer reads, as `prost` messages.
//!
//! Field numbers follow the official `onnx/onnx.proto`. Fields we never read are left out (prost
//! skips unknown fields); sub-graphs and sparse tensors are kept as raw bytes so that their presence
//! can be reported without decoding recursive messages.

/// `ModelProto`: the top-level container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(string, tag = "3")]
    pub producer_version: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

/// `OperatorSetIdProto`: one imported operator set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `GraphProto`: nodes, initializers, inputs and outputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// `SparseTensorProto`s, undecoded (not supported).
    #[prost(bytes = "vec", repeated, tag = "15")]
    pub sparse_initializer: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// `NodeProto`: one operator instance.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(string, tag = "7")]
    pub domain: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

/// `AttributeProto.AttributeType` values.
pub mod attribute_type {
    pub const UNDEFINED: i32 = 0;
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const TENSOR: i32 = 4;
    pub const GRAPH: i32 = 5;
    pub const FLOATS: i32 = 6;
    pub const INTS: i32 = 7;
    pub const STRINGS: i32 = 8;
    pub const TENSORS: i32 = 9;
    pub const GRAPHS: i32 = 10;
    pub const SPARSE_TENSOR: i32 = 11;
    pub const SPARSE_TENSORS: i32 = 12;
}

/// `AttributeProto`: a named attribute of a node.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "21")]
    pub ref_attr_name: String,
    /// One of [`attribute_type`].
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// A `GraphProto`, undecoded (sub-graphs are not supported).
    #[prost(bytes = "vec", optional, tag = "6")]
    pub g: Option<Vec<u8>>,
    /// A `SparseTensorProto`, undecoded.
    #[prost(bytes = "vec", optional, tag = "22")]
    pub sparse_tensor: Option<Vec<u8>>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    #[prost(bytes = "vec", repeated, tag = "11")]
    pub graphs: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "23")]
    pub sparse_tensors: Vec<Vec<u8>>,
}

/// `ValueInfoProto`: name and type of a graph input, output or intermediate value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto`: only tensor types are decoded; the other kinds are kept as bytes to be reported.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<type_proto::Tensor>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub sequence_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub map_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub sparse_tensor_type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub optional_type: Option<Vec<u8>>,
}

/// Nested messages of [`TypeProto`].
pub mod type_proto {
    /// `TypeProto.Tensor`: element type and (optional) shape.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// A [`super::data_type`] value.
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<super::TensorShapeProto>,
    }
}

/// `TensorShapeProto`: a list of (possibly symbolic) dimensions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<tensor_shape_proto::Dimension>,
}

/// Nested messages of [`TensorShapeProto`].
pub mod tensor_shape_proto {
    /// One dimension: a value, a symbolic name, or neither (unknown).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        #[prost(int64, optional, tag = "1")]
        pub dim_value: Option<i64>,
        #[prost(string, optional, tag = "2")]
        pub dim_param: Option<String>,
    }
}

/// `TensorProto.DataType` values.
pub mod data_type {
    pub const UNDEFINED: i32 = 0;
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;

    /// Upper-case name of a data type, as onnx.proto spells it.
    pub fn name(t: i32) -> String {
        match t {
            UNDEFINED => "UNDEFINED".into(),
            FLOAT => "FLOAT".into(),
            UINT8 => "UINT8".into(),
            INT8 => "INT8".into(),
            UINT16 => "UINT16".into(),
            INT16 => "INT16".into(),
            INT32 => "INT32".into(),
            INT64 => "INT64".into(),
            STRING => "STRING".into(),
            BOOL => "BOOL".into(),
            FLOAT16 => "FLOAT16".into(),
            DOUBLE => "DOUBLE".into(),
            UINT32 => "UINT32".into(),
            UINT64 => "UINT64".into(),
            BFLOAT16 => "BFLOAT16".into(),
            other => format!("data type {other}"),
        }
    }
}

/// `TensorProto.DataLocation::EXTERNAL`.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;

/// `TensorProto`: a constant tensor (initializer or attribute value).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// A [`data_type`] value.
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(message, optional, tag = "3")]
    pub segment: Option<tensor_proto::Segment>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// `DEFAULT` (0) or [`DATA_LOCATION_EXTERNAL`].
    #[prost(int32, optional, tag = "14")]
    pub data_location: Option<i32>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
}

/// Nested messages of [`TensorProto`].
pub mod tensor_proto {
    /// A chunk of a tensor stored in several messages (not supported).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Segment {
        #[prost(int64, tag = "1")]
        pub begin: i64,
        #[prost(int64, tag = "2")]
        pub end: i64,
    }
}

/// `StringStringEntryProto`: a key/value pair.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

// Constructors, for building models in code (tests, fuzzing seeds, tools).

impl ModelProto {
    /// A model importing default-domain opset `opset`.
    pub fn new(opset: i64, graph: GraphProto) -> Self {
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: opset,
            }],
            producer_name: "npu-build".into(),
            producer_version: String::new(),
            graph: Some(graph),
        }
    }
}

impl NodeProto {
    /// A default-domain node.
    pub fn new(
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attribute: Vec<AttributeProto>,
    ) -> Self {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            op_type: op_type.into(),
            domain: String::new(),
            attribute,
        }
    }
}

impl AttributeProto {
    fn named(name: &str, r#type: i32) -> Self {
        AttributeProto {
            name: name.into(),
            r#type,
            ..Default::default()
        }
    }

    /// An `INT` attribute.
    pub fn int(name: &str, v: i64) -> Self {
        AttributeProto {
            i: Some(v),
            ..Self::named(name, attribute_type::INT)
        }
    }

    /// An `INTS` attribute.
    pub fn ints(name: &str, v: &[i64]) -> Self {
        AttributeProto {
            ints: v.to_vec(),
            ..Self::named(name, attribute_type::INTS)
        }
    }

    /// A `FLOAT` attribute.
    pub fn float(name: &str, v: f32) -> Self {
        AttributeProto {
            f: Some(v),
            ..Self::named(name, attribute_type::FLOAT)
        }
    }

    /// A `STRING` attribute.
    pub fn string(name: &str, v: &str) -> Self {
        AttributeProto {
            s: Some(v.as_bytes().to_vec()),
            ..Self::named(name, attribute_type::STRING)
        }
    }

    /// A `TENSOR` attribute.
    pub fn tensor(name: &str, t: TensorProto) -> Self {
        AttributeProto {
            t: Some(t),
            ..Self::named(name, attribute_type::TENSOR)
        }
    }
}

impl ValueInfoProto {
    /// A tensor value; a negative dimension is written as a symbolic one (`dim_param`).
    pub fn tensor(name: &str, elem_type: i32, dims: &[i64]) -> Self {
        let dim = dims
            .iter()
            .map(|&d| tensor_shape_proto::Dimension {
                dim_value: (d >= 0).then_some(d),
                dim_param: (d < 0).then(|| "batch".to_string()),
            })
            .collect();
        ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                tensor_type: Some(type_proto::Tensor {
                    elem_type,
                    shape: Some(TensorShapeProto { dim }),
                }),
                ..Default::default()
            }),
        }
    }
}

impl TensorProto {
    /// A tensor stored as little-endian `raw_data`.
    pub fn raw(name: &str, data_type: i32, dims: &[i64], raw_data: Vec<u8>) -> Self {
        TensorProto {
            name: name.into(),
            data_type,
            dims: dims.to_vec(),
            raw_data,
            ..Default::default()
        }
    }

    /// A FLOAT tensor.
    pub fn from_f32(name: &str, dims: &[i64], v: &[f32]) -> Self {
        Self::raw(
            name,
            data_type::FLOAT,
            dims,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }

    /// An INT8 tensor.
    pub fn from_i8(name: &str, dims: &[i64], v: &[i8]) -> Self {
        Self::raw(
            name,
            data_type::INT8,
            dims,
            v.iter().map(|&x| x as u8).collect(),
        )
    }

    /// An INT16 tensor.
    pub fn from_i16(name: &str, dims: &[i64], v: &[i16]) -> Self {
        Self::raw(
            name,
            data_type::INT16,
            dims,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }

    /// A UINT8 tensor.
    pub fn from_u8(name: &str, dims: &[i64], v: &[u8]) -> Self {
        Self::raw(name, data_type::UINT8, dims, v.to_vec())
    }

    /// An INT32 tensor.
    pub fn from_i32(name: &str, dims: &[i64], v: &[i32]) -> Self {
        Self::raw(
            name,
            data_type::INT32,
            dims,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }

    /// An INT64 tensor.
    pub fn from_i64(name: &str, dims: &[i64], v: &[i64]) -> Self {
        Self::raw(
            name,
            data_type::INT64,
            dims,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }
}
