//! The subset of the TFLite flatbuffer schema (`schema.fbs`) that the importer reads: field ids,
//! enum values, and `flatbuffers::Verifiable` implementations used to check a file's structure
//! before anything is read from it.
//!
//! Field ids are the schema's declaration order (a union field takes two ids: its type, then its
//! value); the vtable offset of field `id` is `4 + 2 * id`.

use flatbuffers::{
    ForwardsUOffset, InvalidFlatbuffer, Vector, Verifiable, Verifier, VerifierOptions,
};

/// Field ids of `table Model`.
pub mod model {
    pub const VERSION: usize = 0;
    pub const OPERATOR_CODES: usize = 1;
    pub const SUBGRAPHS: usize = 2;
    pub const DESCRIPTION: usize = 3;
    pub const BUFFERS: usize = 4;
}

/// Field ids of `table OperatorCode`.
pub mod operator_code {
    pub const DEPRECATED_BUILTIN_CODE: usize = 0;
    pub const CUSTOM_CODE: usize = 1;
    pub const VERSION: usize = 2;
    pub const BUILTIN_CODE: usize = 3;
}

/// Field ids of `table SubGraph`.
pub mod subgraph {
    pub const TENSORS: usize = 0;
    pub const INPUTS: usize = 1;
    pub const OUTPUTS: usize = 2;
    pub const OPERATORS: usize = 3;
    pub const NAME: usize = 4;
}

/// Field ids of `table Tensor`.
pub mod tensor {
    pub const SHAPE: usize = 0;
    pub const TYPE: usize = 1;
    pub const BUFFER: usize = 2;
    pub const NAME: usize = 3;
    pub const QUANTIZATION: usize = 4;
    pub const IS_VARIABLE: usize = 5;
    pub const SPARSITY: usize = 6;
    pub const SHAPE_SIGNATURE: usize = 7;
}

/// Field ids of `table QuantizationParameters`.
pub mod quantization {
    pub const MIN: usize = 0;
    pub const MAX: usize = 1;
    pub const SCALE: usize = 2;
    pub const ZERO_POINT: usize = 3;
    pub const DETAILS_TYPE: usize = 4;
    pub const DETAILS: usize = 5;
    pub const QUANTIZED_DIMENSION: usize = 6;
}

/// Field ids of `table Buffer`.
pub mod buffer {
    pub const DATA: usize = 0;
    /// Offset of the data from the start of the file, for data stored after the flatbuffer.
    pub const OFFSET: usize = 1;
    pub const SIZE: usize = 2;
}

/// Field ids of `table Operator`.
pub mod operator {
    pub const OPCODE_INDEX: usize = 0;
    pub const INPUTS: usize = 1;
    pub const OUTPUTS: usize = 2;
    pub const BUILTIN_OPTIONS_TYPE: usize = 3;
    pub const BUILTIN_OPTIONS: usize = 4;
    pub const CUSTOM_OPTIONS: usize = 5;
    pub const INTERMEDIATES: usize = 8;
}

/// Index of each options table in `union BuiltinOptions` (the value of `builtin_options_type`).
pub mod options_type {
    pub const CONV_2D: u8 = 1;
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    pub const POOL_2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
    pub const SOFTMAX: u8 = 9;
    pub const CONCATENATION: u8 = 10;
    pub const ADD: u8 = 11;
    pub const RESIZE_BILINEAR: u8 = 15;
    pub const MUL: u8 = 21;
    pub const REDUCER: u8 = 27;
    pub const SUB: u8 = 28;
    pub const RESIZE_NEAREST_NEIGHBOR: u8 = 74;
    // movea
    pub const STRIDED_SLICE: u8 = 32;
    pub const SPLIT: u8 = 35;
    pub const SHAPE: u8 = 55;
    pub const PACK: u8 = 59;
    pub const UNPACK: u8 = 64;
    pub const SPLIT_V: u8 = 79;
    pub const TRANSPOSE_CONV: u8 = 49;
    pub const UNIDIRECTIONAL_SEQUENCE_LSTM: u8 = 71;
    pub const BATCH_MATMUL: u8 = 101;
    // moveb
    pub const SPACE_TO_DEPTH: u8 = 19;
    pub const GATHER: u8 = 23;
    pub const MIRROR_PAD: u8 = 77;
    pub const DEPTH_TO_SPACE: u8 = 94;
    pub const LEAKY_RELU: u8 = 75;
    pub const GELU: u8 = 116;
}

/// Field ids of the builtin options tables we read.
pub mod opts {
    /// `Conv2DOptions` and `DepthwiseConv2DOptions` share their first three fields.
    pub const PADDING: usize = 0;
    pub const STRIDE_W: usize = 1;
    pub const STRIDE_H: usize = 2;
    pub const CONV_ACTIVATION: usize = 3;
    pub const CONV_DILATION_W: usize = 4;
    pub const CONV_DILATION_H: usize = 5;
    pub const DW_ACTIVATION: usize = 4;
    pub const DW_DILATION_W: usize = 5;
    pub const DW_DILATION_H: usize = 6;
    pub const POOL_FILTER_W: usize = 3;
    pub const POOL_FILTER_H: usize = 4;
    pub const POOL_ACTIVATION: usize = 5;
    pub const FC_ACTIVATION: usize = 0;
    pub const FC_WEIGHTS_FORMAT: usize = 1;
    pub const FC_KEEP_NUM_DIMS: usize = 2;
    pub const FC_ASYMMETRIC_QUANTIZE_INPUTS: usize = 3;
    pub const SOFTMAX_BETA: usize = 0;
    pub const CONCAT_AXIS: usize = 0;
    pub const CONCAT_ACTIVATION: usize = 1;
    /// `AddOptions`, `SubOptions`, `MulOptions`.
    pub const BINARY_ACTIVATION: usize = 0;
    pub const REDUCER_KEEP_DIMS: usize = 0;
    pub const BILINEAR_ALIGN_CORNERS: usize = 2;
    pub const BILINEAR_HALF_PIXEL_CENTERS: usize = 3;
    pub const NEAREST_ALIGN_CORNERS: usize = 0;
    pub const NEAREST_HALF_PIXEL_CENTERS: usize = 1;
    // movea
    pub const SS_BEGIN_MASK: usize = 0;
    pub const SS_END_MASK: usize = 1;
    pub const SS_ELLIPSIS_MASK: usize = 2;
    pub const SS_NEW_AXIS_MASK: usize = 3;
    pub const SS_SHRINK_AXIS_MASK: usize = 4;
    pub const SS_OFFSET: usize = 5;
    /// `SplitOptions` and `SplitVOptions`.
    pub const SPLIT_NUM_SPLITS: usize = 0;
    pub const PACK_VALUES_COUNT: usize = 0;
    pub const PACK_AXIS: usize = 1;
    pub const UNPACK_NUM: usize = 0;
    pub const UNPACK_AXIS: usize = 1;
    pub const SHAPE_OUT_TYPE: usize = 0;
    /// `TransposeConvOptions`: padding, stride_w, stride_h as Conv2DOptions, then:
    pub const TCONV_ACTIVATION: usize = 3;
    pub const BMM_ADJ_X: usize = 0;
    pub const BMM_ADJ_Y: usize = 1;
    pub const BMM_ASYMMETRIC_QUANTIZE_INPUTS: usize = 2;
    // moveb
    /// `SpaceToDepthOptions` and `DepthToSpaceOptions`.
    pub const BLOCK_SIZE: usize = 0;
    pub const GATHER_AXIS: usize = 0;
    pub const GATHER_BATCH_DIMS: usize = 1;
    /// `MirrorPadOptions.mode`: 0 REFLECT, 1 SYMMETRIC.
    pub const MIRROR_PAD_MODE: usize = 0;
    pub const LEAKY_RELU_ALPHA: usize = 0;
    // UnidirectionalSequenceLSTMOptions
    pub const LSTM_ACTIVATION: usize = 0;
    pub const LSTM_CELL_CLIP: usize = 1;
    pub const LSTM_PROJ_CLIP: usize = 2;
    pub const LSTM_TIME_MAJOR: usize = 3;
    pub const LSTM_ASYMMETRIC_QUANTIZE_INPUTS: usize = 4;
    pub const LSTM_DIAGONAL_RECURRENT: usize = 5;
    pub const GELU_APPROXIMATE: usize = 0;
}

/// `enum TensorType` values we map to IR types.
pub mod tensor_type {
    pub const FLOAT32: i8 = 0;
    pub const INT32: i8 = 2;
    pub const UINT8: i8 = 3;
    pub const INT64: i8 = 4;
    pub const INT16: i8 = 7;
    pub const INT8: i8 = 9;
}

/// Name of a `TensorType` value, for messages.
pub fn tensor_type_name(t: i8) -> String {
    const NAMES: [&str; 23] = [
        "FLOAT32",
        "FLOAT16",
        "INT32",
        "UINT8",
        "INT64",
        "STRING",
        "BOOL",
        "INT16",
        "COMPLEX64",
        "INT8",
        "FLOAT64",
        "COMPLEX128",
        "UINT64",
        "RESOURCE",
        "VARIANT",
        "UINT32",
        "UINT16",
        "INT4",
        "BFLOAT16",
        "INT2",
        "UINT4",
        "FLOAT8_E4M3FN",
        "FLOAT8_E5M2",
    ];
    usize::try_from(t)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("type {t}"), |s| (*s).to_string())
}

/// `enum BuiltinOperator` values of the operators we import.
pub mod builtin {
    pub const ADD: i32 = 0;
    pub const AVERAGE_POOL_2D: i32 = 1;
    pub const CONCATENATION: i32 = 2;
    pub const CONV_2D: i32 = 3;
    pub const DEPTHWISE_CONV_2D: i32 = 4;
    pub const DEQUANTIZE: i32 = 6;
    pub const FULLY_CONNECTED: i32 = 9;
    pub const MAX_POOL_2D: i32 = 17;
    pub const MUL: i32 = 18;
    pub const RELU: i32 = 19;
    pub const RELU_N1_TO_1: i32 = 20;
    pub const RELU6: i32 = 21;
    pub const RESHAPE: i32 = 22;
    pub const RESIZE_BILINEAR: i32 = 23;
    pub const SOFTMAX: i32 = 25;
    pub const CUSTOM: i32 = 32;
    pub const PAD: i32 = 34;
    pub const MEAN: i32 = 40;
    pub const SUB: i32 = 41;
    pub const PADV2: i32 = 60;
    pub const RESIZE_NEAREST_NEIGHBOR: i32 = 97;
    pub const QUANTIZE: i32 = 114;
    // movea
    pub const SQUEEZE: i32 = 43;
    pub const STRIDED_SLICE: i32 = 45;
    pub const SPLIT: i32 = 49;
    pub const SLICE: i32 = 65;
    pub const EXPAND_DIMS: i32 = 70;
    pub const SHAPE: i32 = 77;
    pub const PACK: i32 = 83;
    pub const UNPACK: i32 = 88;
    pub const SPLIT_V: i32 = 102;
    pub const TRANSPOSE_CONV: i32 = 67;
    pub const UNIDIRECTIONAL_SEQUENCE_LSTM: i32 = 44;
    pub const BATCH_MATMUL: i32 = 126;
    // moveb
    pub const DEPTH_TO_SPACE: i32 = 5;
    pub const SPACE_TO_DEPTH: i32 = 26;
    pub const GATHER: i32 = 36;
    pub const TRANSPOSE: i32 = 39;
    pub const TILE: i32 = 69;
    pub const MIRROR_PAD: i32 = 100;
    pub const REVERSE_V2: i32 = 105;
    pub const BATCH_TO_SPACE_ND: i32 = 37;
    pub const SPACE_TO_BATCH_ND: i32 = 38;
    pub const PRELU: i32 = 54;
    pub const MAXIMUM: i32 = 55;
    pub const MINIMUM: i32 = 57;
    pub const NEG: i32 = 59;
    pub const SQUARED_DIFFERENCE: i32 = 99;
    pub const ABS: i32 = 101;
    pub const ARG_MAX: i32 = 56;
    pub const SUM: i32 = 74;
    pub const ARG_MIN: i32 = 79;
    pub const REDUCE_MAX: i32 = 82;
    pub const REDUCE_MIN: i32 = 89;
    pub const REDUCE_PROD: i32 = 81;
    pub const LOGISTIC: i32 = 14;
    pub const TANH: i32 = 28;
    pub const EXP: i32 = 47;
    pub const LOG: i32 = 73;
    pub const LEAKY_RELU: i32 = 98;
    pub const ELU: i32 = 111;
    pub const HARD_SWISH: i32 = 117;
    pub const GELU: i32 = 150;
    pub const RELU_0_TO_1: i32 = 152;
    pub const SQRT: i32 = 75;
    pub const RSQRT: i32 = 76;
}

/// Name of a `BuiltinOperator` value, for messages (`CONV_2D`, ...).
pub fn builtin_name(code: i32) -> String {
    const NAMES: [&str; 162] = [
        "ADD",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "DEPTH_TO_SPACE",
        "DEQUANTIZE",
        "EMBEDDING_LOOKUP",
        "FLOOR",
        "FULLY_CONNECTED",
        "HASHTABLE_LOOKUP",
        "L2_NORMALIZATION",
        "L2_POOL_2D",
        "LOCAL_RESPONSE_NORMALIZATION",
        "LOGISTIC",
        "LSH_PROJECTION",
        "LSTM",
        "MAX_POOL_2D",
        "MUL",
        "RELU",
        "RELU_N1_TO_1",
        "RELU6",
        "RESHAPE",
        "RESIZE_BILINEAR",
        "RNN",
        "SOFTMAX",
        "SPACE_TO_DEPTH",
        "SVDF",
        "TANH",
        "CONCAT_EMBEDDINGS",
        "SKIP_GRAM",
        "CALL",
        "CUSTOM",
        "EMBEDDING_LOOKUP_SPARSE",
        "PAD",
        "UNIDIRECTIONAL_SEQUENCE_RNN",
        "GATHER",
        "BATCH_TO_SPACE_ND",
        "SPACE_TO_BATCH_ND",
        "TRANSPOSE",
        "MEAN",
        "SUB",
        "DIV",
        "SQUEEZE",
        "UNIDIRECTIONAL_SEQUENCE_LSTM",
        "STRIDED_SLICE",
        "BIDIRECTIONAL_SEQUENCE_RNN",
        "EXP",
        "TOPK_V2",
        "SPLIT",
        "LOG_SOFTMAX",
        "DELEGATE",
        "BIDIRECTIONAL_SEQUENCE_LSTM",
        "CAST",
        "PRELU",
        "MAXIMUM",
        "ARG_MAX",
        "MINIMUM",
        "LESS",
        "NEG",
        "PADV2",
        "GREATER",
        "GREATER_EQUAL",
        "LESS_EQUAL",
        "SELECT",
        "SLICE",
        "SIN",
        "TRANSPOSE_CONV",
        "SPARSE_TO_DENSE",
        "TILE",
        "EXPAND_DIMS",
        "EQUAL",
        "NOT_EQUAL",
        "LOG",
        "SUM",
        "SQRT",
        "RSQRT",
        "SHAPE",
        "POW",
        "ARG_MIN",
        "FAKE_QUANT",
        "REDUCE_PROD",
        "REDUCE_MAX",
        "PACK",
        "LOGICAL_OR",
        "ONE_HOT",
        "LOGICAL_AND",
        "LOGICAL_NOT",
        "UNPACK",
        "REDUCE_MIN",
        "FLOOR_DIV",
        "REDUCE_ANY",
        "SQUARE",
        "ZEROS_LIKE",
        "FILL",
        "FLOOR_MOD",
        "RANGE",
        "RESIZE_NEAREST_NEIGHBOR",
        "LEAKY_RELU",
        "SQUARED_DIFFERENCE",
        "MIRROR_PAD",
        "ABS",
        "SPLIT_V",
        "UNIQUE",
        "CEIL",
        "REVERSE_V2",
        "ADD_N",
        "GATHER_ND",
        "COS",
        "WHERE",
        "RANK",
        "ELU",
        "REVERSE_SEQUENCE",
        "MATRIX_DIAG",
        "QUANTIZE",
        "MATRIX_SET_DIAG",
        "ROUND",
        "HARD_SWISH",
        "IF",
        "WHILE",
        "NON_MAX_SUPPRESSION_V4",
        "NON_MAX_SUPPRESSION_V5",
        "SCATTER_ND",
        "SELECT_V2",
        "DENSIFY",
        "SEGMENT_SUM",
        "BATCH_MATMUL",
        "PLACEHOLDER_FOR_GREATER_OP_CODES",
        "CUMSUM",
        "CALL_ONCE",
        "BROADCAST_TO",
        "RFFT2D",
        "CONV_3D",
        "IMAG",
        "REAL",
        "COMPLEX_ABS",
        "HASHTABLE",
        "HASHTABLE_FIND",
        "HASHTABLE_IMPORT",
        "HASHTABLE_SIZE",
        "REDUCE_ALL",
        "CONV_3D_TRANSPOSE",
        "VAR_HANDLE",
        "READ_VARIABLE",
        "ASSIGN_VARIABLE",
        "BROADCAST_ARGS",
        "RANDOM_STANDARD_NORMAL",
        "BUCKETIZE",
        "RANDOM_UNIFORM",
        "MULTINOMIAL",
        "GELU",
        "DYNAMIC_UPDATE_SLICE",
        "RELU_0_TO_1",
        "UNSORTED_SEGMENT_PROD",
        "UNSORTED_SEGMENT_MAX",
        "UNSORTED_SEGMENT_SUM",
        "ATAN2",
        "UNSORTED_SEGMENT_MIN",
        "SIGN",
        "BITCAST",
        "BITWISE_XOR",
        "RIGHT_SHIFT",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("BUILTIN_{code}"), |s| (*s).to_string())
}

/// Vtable offset of field `id`.
const fn vt(id: usize) -> u16 {
    (4 + 2 * id) as u16
}

type VResult = Result<(), InvalidFlatbuffer>;

/// Any table: only its vtable is checked (used for union members we never read into).
struct AnyTable;
impl Verifiable for AnyTable {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?.finish();
        Ok(())
    }
}

struct ModelV;
struct OperatorCodeV;
struct SubGraphV;
struct TensorV;
struct QuantizationV;
struct BufferV;
struct OperatorV;
/// Options tables holding scalars only (every one we read is of this kind).
struct ScalarOptionsV;

type Ints<'a> = ForwardsUOffset<Vector<'a, i32>>;
type Tables<'a, T> = ForwardsUOffset<Vector<'a, ForwardsUOffset<T>>>;

impl Verifiable for ModelV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<u32>("version", vt(model::VERSION), false)?
            .visit_field::<Tables<OperatorCodeV>>(
                "operator_codes",
                vt(model::OPERATOR_CODES),
                false,
            )?
            .visit_field::<Tables<SubGraphV>>("subgraphs", vt(model::SUBGRAPHS), false)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>(
                "description",
                vt(model::DESCRIPTION),
                false,
            )?
            .visit_field::<Tables<BufferV>>("buffers", vt(model::BUFFERS), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for OperatorCodeV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<i8>(
                "deprecated_builtin_code",
                vt(operator_code::DEPRECATED_BUILTIN_CODE),
                false,
            )?
            .visit_field::<ForwardsUOffset<Vector<u8>>>(
                "custom_code",
                vt(operator_code::CUSTOM_CODE),
                false,
            )?
            .visit_field::<i32>("version", vt(operator_code::VERSION), false)?
            .visit_field::<i32>("builtin_code", vt(operator_code::BUILTIN_CODE), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for SubGraphV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<Tables<TensorV>>("tensors", vt(subgraph::TENSORS), false)?
            .visit_field::<Ints>("inputs", vt(subgraph::INPUTS), false)?
            .visit_field::<Ints>("outputs", vt(subgraph::OUTPUTS), false)?
            .visit_field::<Tables<OperatorV>>("operators", vt(subgraph::OPERATORS), false)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("name", vt(subgraph::NAME), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for TensorV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<Ints>("shape", vt(tensor::SHAPE), false)?
            .visit_field::<i8>("type", vt(tensor::TYPE), false)?
            .visit_field::<u32>("buffer", vt(tensor::BUFFER), false)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("name", vt(tensor::NAME), false)?
            .visit_field::<ForwardsUOffset<QuantizationV>>(
                "quantization",
                vt(tensor::QUANTIZATION),
                false,
            )?
            .visit_field::<bool>("is_variable", vt(tensor::IS_VARIABLE), false)?
            .visit_field::<ForwardsUOffset<AnyTable>>("sparsity", vt(tensor::SPARSITY), false)?
            .visit_field::<Ints>("shape_signature", vt(tensor::SHAPE_SIGNATURE), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for QuantizationV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<f32>>>("min", vt(quantization::MIN), false)?
            .visit_field::<ForwardsUOffset<Vector<f32>>>("max", vt(quantization::MAX), false)?
            .visit_field::<ForwardsUOffset<Vector<f32>>>("scale", vt(quantization::SCALE), false)?
            .visit_field::<ForwardsUOffset<Vector<i64>>>(
                "zero_point",
                vt(quantization::ZERO_POINT),
                false,
            )?
            .visit_union::<u8, _>(
                "details_type",
                vt(quantization::DETAILS_TYPE),
                "details",
                vt(quantization::DETAILS),
                false,
                |_, v, pos| v.verify_union_variant::<ForwardsUOffset<AnyTable>>("details", pos),
            )?
            .visit_field::<i32>(
                "quantized_dimension",
                vt(quantization::QUANTIZED_DIMENSION),
                false,
            )?
            .finish();
        Ok(())
    }
}

impl Verifiable for BufferV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("data", vt(buffer::DATA), false)?
            .visit_field::<u64>("offset", vt(buffer::OFFSET), false)?
            .visit_field::<u64>("size", vt(buffer::SIZE), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for OperatorV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        v.visit_table(pos)?
            .visit_field::<u32>("opcode_index", vt(operator::OPCODE_INDEX), false)?
            .visit_field::<Ints>("inputs", vt(operator::INPUTS), false)?
            .visit_field::<Ints>("outputs", vt(operator::OUTPUTS), false)?
            .visit_union::<u8, _>(
                "builtin_options_type",
                vt(operator::BUILTIN_OPTIONS_TYPE),
                "builtin_options",
                vt(operator::BUILTIN_OPTIONS),
                false,
                |_, v, pos| {
                    v.verify_union_variant::<ForwardsUOffset<ScalarOptionsV>>(
                        "builtin_options",
                        pos,
                    )
                },
            )?
            .visit_field::<ForwardsUOffset<Vector<u8>>>(
                "custom_options",
                vt(operator::CUSTOM_OPTIONS),
                false,
            )?
            .visit_field::<Ints>("intermediates", vt(operator::INTERMEDIATES), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for ScalarOptionsV {
    fn run_verifier(v: &mut Verifier, pos: usize) -> VResult {
        // Every field we read from an options table is a scalar of at most 4 bytes among the
        // first seven fields; check those that are present lie inside the buffer.
        let mut t = v.visit_table(pos)?;
        for id in 0..7 {
            t = t.visit_field::<u8>("option", vt(id), false)?;
        }
        t.finish();
        Ok(())
    }
}

/// Verifies the structure of a TFLite flatbuffer (`TFL3`) before it is read.
///
/// The limits bound the work a hostile file can cause: the apparent size counts bytes reachable
/// through shared offsets, so a small file cannot expand into gigabytes of reads.
pub fn verify(buf: &[u8]) -> Result<(), String> {
    let opts = VerifierOptions {
        max_depth: 16,
        max_tables: 4_000_000,
        max_apparent_size: buf.len().saturating_mul(4).max(1 << 20),
        ignore_missing_null_terminator: true,
    };
    let mut v = Verifier::new(&opts, buf);
    <ForwardsUOffset<ModelV>>::run_verifier(&mut v, 0).map_err(|e| e.to_string())
}
