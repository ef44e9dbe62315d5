//! The one table of operators the compiler accepts: their TFLite and ONNX names, what the NPU
//! lowering takes, and the CPU fallback. The importers' lists of supported operators
//! (their error messages and the TFLite operator-code check) are derived from it, and
//! `SUPPORTED_OPS.md` at the repository root is generated from it ([`markdown`]; a test fails
//! when the file is stale; `UPDATE_SUPPORTED_OPS=1 cargo test -p npu-build supported_ops`
//! rewrites it).
//!
//! ```
//! let conv = npu_build::operators::OPERATORS.iter().find(|o| o.ir == "Conv2D").unwrap();
//! assert!(conv.tflite.contains(&"CONV_2D") && conv.onnx.contains(&"Conv"));
//! ```

/// One row of the operator table.
#[derive(Clone, Copy, Debug)]
pub struct Operator {
    /// The IR operator the row maps to (as `npu report` and error messages name it).
    pub ir: &'static str,
    /// TFLite builtin operators imported as it.
    pub tflite: &'static [&'static str],
    /// ONNX operators (QDQ form) imported as it.
    pub onnx: &'static [&'static str],
    /// What the Ethos-U55/U65 lowering takes; anything else runs on the CPU.
    pub npu: &'static str,
    /// The CPU kernel (used when the NPU refuses an instance).
    pub cpu: &'static str,
}

const I8: &str = "int8, uint8";

/// Every operator, in the order of `SUPPORTED_OPS.md`.
pub const OPERATORS: &[Operator] = &[
    Operator {
        ir: "Conv2D",
        tflite: &["CONV_2D"],
        onnx: &["Conv"],
        npu: "8-bit activations, int8 weights per tensor or per channel; any stride (above 3 split into pieces), dilation, padding up to 127 per side; grouped convolutions with one channel per group become depthwise; 16-bit activations refused",
        cpu: I8,
    },
    Operator {
        ir: "DepthwiseConv2D",
        tflite: &["DEPTHWISE_CONV_2D"],
        onnx: &[],
        npu: "as Conv2D; a depth multiplier above 1 becomes a full convolution with zero weights off the diagonal",
        cpu: I8,
    },
    Operator {
        ir: "FullyConnected",
        tflite: &["FULLY_CONNECTED"],
        onnx: &["Gemm", "MatMul"],
        npu: "constant weights; 2-D and 3-D inputs (keep_num_dims); a MatMul of two activations is BatchMatMul",
        cpu: I8,
    },
    Operator {
        ir: "BatchMatMul",
        tflite: &["BATCH_MATMUL"],
        onnx: &[],
        npu: "int8 with equal batch axes, any adjoints, up to 1024 output rows (Vela's form: transpose copies, per row a MUL and a REDUCE_SUM)",
        cpu: "int8, with adjoints and broadcast batches",
    },
    Operator {
        ir: "UnidirectionalSequenceLstm",
        tflite: &["UNIDIRECTIONAL_SEQUENCE_LSTM"],
        onnx: &[],
        npu: "TFLite's integer LSTM (int8 input and hidden state, int16 cell state; no CIFG, peephole, projection or layer normalisation), batch or time major: per step Vela's decomposition into fully-connected, element-wise and built-in SIGMOID/TANH operations; the states persist between runs",
        cpu: "the same, TFLite's 8x8->16 integer kernel",
    },
    Operator {
        ir: "TransposeConv2D",
        tflite: &["TRANSPOSE_CONV"],
        onnx: &["ConvTranspose"],
        npu: "any stride, padding and output size, with or without bias: one stride-1 convolution per output phase, written through a strided view of the output",
        cpu: I8,
    },
    Operator {
        ir: "Add / Sub / Mul",
        tflite: &["ADD", "SUB", "MUL"],
        onnx: &["Add", "Sub", "Mul"],
        npu: "8-bit (Mul also int16); numpy broadcasting at any rank that folds to [H, W, C] with one broadcast operand; scalar constants",
        cpu: "int8, uint8, int16, int32",
    },
    Operator {
        ir: "Maximum / Minimum",
        tflite: &["MAXIMUM", "MINIMUM"],
        onnx: &["Max", "Min"],
        npu: "8-bit and int16, any quantizations (stored values compared), broadcasting as Add",
        cpu: "int8, uint8, int16, int32",
    },
    Operator {
        ir: "SquaredDifference",
        tflite: &["SQUARED_DIFFERENCE"],
        onnx: &[],
        npu: "int8, TFLite's int32 steps (5-6 operations), broadcasting as Add",
        cpu: "int8, int32",
    },
    Operator {
        ir: "Abs / Neg",
        tflite: &["ABS", "NEG"],
        onnx: &["Abs", "Neg"],
        npu: "int8 (ABS elementwise; NEG as a wrapping table)",
        cpu: "int8",
    },
    Operator {
        ir: "PRelu",
        tflite: &["PRELU"],
        onnx: &["PRelu"],
        npu: "8-bit, any alpha (per channel or broadcast), exact; one alpha for every element is one table operation",
        cpu: I8,
    },
    Operator {
        ir: "AveragePool / MaxPool",
        tflite: &["AVERAGE_POOL_2D", "MAX_POOL_2D"],
        onnx: &["AveragePool", "MaxPool", "GlobalMaxPool"],
        npu: "8-bit and int16; kernels up to 256 rows and 65536 elements; padding (average: valid-count divisors)",
        cpu: "int8, uint8, int16",
    },
    Operator {
        ir: "Mean",
        tflite: &["MEAN"],
        onnx: &["ReduceMean", "GlobalAveragePool"],
        npu: "8-bit; axes that re-view as spatial axes of [H, W, C] (channels included), up to 2^23 elements",
        cpu: I8,
    },
    Operator {
        ir: "ReduceSum",
        tflite: &["SUM"],
        onnx: &["ReduceSum"],
        npu: "8-bit, axes as Mean, when a fixed-point rescale equals TFLite's single-precision one for every possible sum (checked at compile time)",
        cpu: "int8, uint8, int16",
    },
    Operator {
        ir: "ReduceMax / ReduceMin",
        tflite: &["REDUCE_MAX", "REDUCE_MIN"],
        onnx: &["ReduceMax", "ReduceMin"],
        npu: "axes forming one run after merging, up to 256 reduced elements; MAX any type, MIN 8-bit",
        cpu: "int8, uint8, int16",
    },
    Operator {
        ir: "ArgMax / ArgMin",
        tflite: &["ARG_MAX", "ARG_MIN"],
        onnx: &["ArgMax", "ArgMin"],
        npu: "8-bit input, int32 index, axis of at most 128 elements",
        cpu: "int8, uint8, int16; int32 or int64 index",
    },
    Operator {
        ir: "Softmax",
        tflite: &["SOFTMAX"],
        onnx: &["Softmax"],
        npu: "8-bit over the last axis, output quantized as TFLite requires (1/256, type minimum); 27 operations",
        cpu: "int8, uint8, f32 islands",
    },
    Operator {
        ir: "Table activations",
        tflite: &[
            "LOGISTIC",
            "TANH",
            "HARD_SWISH",
            "LEAKY_RELU",
            "ELU",
            "GELU",
            "EXP",
            "LOG",
            "RSQRT",
            "SQRT",
            "RELU_0_TO_1",
        ],
        onnx: &[
            "Sigmoid",
            "Tanh",
            "HardSwish",
            "HardSigmoid",
            "LeakyRelu",
            "Elu",
            "Gelu",
            "Erf",
            "Exp",
            "Log",
        ],
        npu: "8-bit: one 256-entry table, fused into the operation before when it does not clamp (x * sigmoid(x) and x * HardSigmoid(x) included); float islands (dequantize, f32 element-wise functions such as a float NEG, quantize) tabulated into one table at import; int16 LOGISTIC/TANH (16x8 models, output 1/32768): one pooling with the built-in SIGMOID/TANH; other 16-bit functions refused",
        cpu: "int8, uint8; int16 LOGISTIC/TANH",
    },
    Operator {
        ir: "Activation (clamp)",
        tflite: &["RELU", "RELU6", "RELU_N1_TO_1"],
        onnx: &["Relu", "Clip"],
        npu: "fused into the producing operation's clamp, or a rescaling copy",
        cpu: "int8, uint8, int16",
    },
    Operator {
        ir: "Quantize / Dequantize",
        tflite: &["QUANTIZE", "DEQUANTIZE"],
        onnx: &["QuantizeLinear", "DequantizeLinear"],
        npu: "requantization between 8/16-bit types (one rescaling pool); QDQ pairs fold into the operators between them",
        cpu: "all integer types, f32 at the model's edges",
    },
    Operator {
        ir: "Concat",
        tflite: &["CONCATENATION", "PACK"],
        onnx: &["Concat"],
        npu: "any axis (written in place or copied; requantized inputs rescaled)",
        cpu: "any type",
    },
    Operator {
        ir: "Slice",
        tflite: &["SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "UNPACK"],
        onnx: &["Slice", "Split"],
        npu: "one copy of a box with positive steps along H and W; channel steps, negative steps and boxes cutting folded leading dimensions on the CPU",
        cpu: "any type",
    },
    Operator {
        ir: "Reshape",
        tflite: &["RESHAPE", "SQUEEZE", "EXPAND_DIMS"],
        onnx: &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"],
        npu: "a view when dense, else a copy",
        cpu: "any type",
    },
    Operator {
        ir: "Pad / MirrorPad",
        tflite: &["PAD", "PADV2", "MIRROR_PAD"],
        onnx: &["Pad"],
        npu: "constant padding as border fills plus a copy; reflect/symmetric/edge as strided copies",
        cpu: "any type",
    },
    Operator {
        ir: "Resize",
        tflite: &["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"],
        onnx: &["Resize"],
        npu: "8-bit, factors 2, 4 and 8 (nearest and bilinear, aligned corners or not); other factors on the CPU",
        cpu: I8,
    },
    Operator {
        ir: "Transpose / Tile / Reverse / Gather / DepthToSpace / SpaceToDepth",
        tflite: &[
            "TRANSPOSE",
            "TILE",
            "REVERSE_V2",
            "GATHER",
            "DEPTH_TO_SPACE",
            "SPACE_TO_DEPTH",
        ],
        onnx: &[
            "Transpose",
            "Tile",
            "ReverseSequence",
            "Gather",
            "DepthToSpace",
            "SpaceToDepth",
        ],
        npu: "strided 1x1 copies where the permutation maps onto [H, W, C] boxes with channels innermost on both sides (constant gather indices)",
        cpu: "any type",
    },
    Operator {
        ir: "SpaceToBatch / BatchToSpace",
        tflite: &["SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"],
        onnx: &[],
        npu: "folded into a dilated convolution when they surround one; otherwise no (CPU)",
        cpu: "any type",
    },
    Operator {
        ir: "Float island (FloatUnary / FloatBinary / FloatReduce / LayerNorm / f32 Softmax)",
        tflite: &[],
        onnx: &["LayerNormalization", "Div", "Pow", "Sqrt", "Reciprocal"],
        npu: "no (the NPU has no floating point): what onnxruntime's quantizer leaves in float between DequantizeLinear and QuantizeLinear (LayerNormalization always; Add, Mul, Softmax, ReduceMean, ... when told to) runs on the CPU in f32; chains of element-wise functions of one 8-bit tensor are tabulated instead",
        cpu: "f32 (onnxruntime's arithmetic; docs/onnx.md)",
    },
    Operator {
        ir: "(folded)",
        tflite: &["SHAPE", "REDUCE_PROD"],
        onnx: &["Constant"],
        npu: "constant-folded at import (static shapes)",
        cpu: "-",
    },
];

/// Every TFLite operator of the table.
pub fn tflite_names() -> impl Iterator<Item = &'static str> {
    OPERATORS.iter().flat_map(|o| o.tflite.iter().copied())
}

/// Every ONNX operator of the table.
pub fn onnx_names() -> impl Iterator<Item = &'static str> {
    OPERATORS.iter().flat_map(|o| o.onnx.iter().copied())
}

fn cell(names: &[&str]) -> String {
    if names.is_empty() {
        "-".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `SUPPORTED_OPS.md`: the table, and the ONNX lists the importer keeps beside it.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Supported operators\n\n\
         Generated from `npu-build/src/operators.rs` (`UPDATE_SUPPORTED_OPS=1 cargo test -p \
         npu-build supported_ops` rewrites it; a test fails when it is stale). Every operator \
         has a CPU kernel bit-exact with the reference interpreter; an instance the NPU column \
         does not cover runs on the CPU, and `npu report` / `npu inspect` say which and why. \
         An operator outside this table is a compile error that lists every such operator of \
         the model.\n\n\
         | Operator | TFLite | ONNX | NPU (Ethos-U55/U65) | CPU kernel |\n\
         |---|---|---|---|---|\n",
    );
    for o in OPERATORS {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            o.ir,
            cell(o.tflite),
            cell(o.onnx),
            o.npu,
            o.cpu
        ));
    }
    let sorted = |v: &[&str]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        cell(&v)
    };
    s.push_str(&format!(
        "\n## ONNX beyond the table\n\n\
         - QOperator (onnxruntime `quant_format=QOperator`), mapped onto the rows above: {}.\n\
         - Float islands (an f32 operator between DequantizeLinear and QuantizeLinear, run on \
         the CPU as onnxruntime does): {}.\n\
         - Constant-folded when their inputs are constant (shape arithmetic): {}.\n",
        sorted(crate::import::onnx::qop::QOPERATOR),
        sorted(crate::import::onnx::island::FLOAT_ISLAND),
        sorted(crate::import::onnx::fold::FOLDABLE),
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SUPPORTED_OPS.md` is what [`markdown`] generates.
    #[test]
    fn supported_ops_md_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../SUPPORTED_OPS.md");
        let want = markdown();
        if std::env::var_os("UPDATE_SUPPORTED_OPS").is_some() {
            std::fs::write(path, &want).expect("write SUPPORTED_OPS.md");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "SUPPORTED_OPS.md is stale: run `UPDATE_SUPPORTED_OPS=1 cargo test -p npu-build supported_ops`"
        );
    }

    /// Each TFLite and ONNX name appears once, and every TFLite name is a schema operator.
    #[test]
    fn names_are_unique_and_known() {
        let mut t: Vec<&str> = tflite_names().collect();
        let n = t.len();
        t.sort_unstable();
        t.dedup();
        assert_eq!(t.len(), n, "a TFLite operator in two rows");
        let known: Vec<String> = (0..256)
            .map(crate::import::tflite::schema::builtin_name)
            .collect();
        for name in &t {
            assert!(
                known.iter().any(|k| k == name),
                "{name} is no TFLite builtin"
            );
        }
        let mut o: Vec<&str> = onnx_names().collect();
        let n = o.len();
        o.sort_unstable();
        o.dedup();
        assert_eq!(o.len(), n, "an ONNX operator in two rows");
    }
}
