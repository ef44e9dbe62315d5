//! Every fixture's `.onnx` (tf2onnx's QDQ encoding of the `.tflite` twin):
//! - through the reference interpreter, byte-identical to TFLite's reference-kernel outputs
//!   (`io/output_K.npy`) for all three inputs;
//! - imported into the same IR as the `.tflite` twin: operators, attributes, shapes, types,
//!   quantization and constant bytes (tensor names differ between the formats).

use npu_build::ir::{Graph, TensorId};
use npu_build::value::Value;
use npu_tests::io_file;

fn load(model: &str, ext: &str) -> Graph {
    let path = npu_tests::fixtures_dir()
        .join(model)
        .join(format!("{model}.{ext}"));
    npu_build::import::load(&path).unwrap_or_else(|e| panic!("{model}.{ext}: import failed: {e}"))
}

/// Runs `model.onnx` on the fixture inputs and compares every output byte.
fn outputs_match(model: &str) {
    let graph = load(model, "onnx");
    let io = npu_tests::fixtures_dir().join(model).join("io");
    let (n_in, n_out) = (graph.inputs.len(), graph.outputs.len());
    let mut failures = Vec::new();
    for k in 0..3 {
        let inputs: Vec<Value> = (0..n_in)
            .map(|j| Value::read_npy(&io_file(&io, "input", k, j, n_in)).expect("fixture input"))
            .collect();
        let outputs = npu_build::reference::run(&graph, &inputs)
            .unwrap_or_else(|e| panic!("{model}.onnx: input {k}: run failed: {e}"));
        assert_eq!(outputs.len(), n_out, "{model}: output count");
        for (j, got) in outputs.iter().enumerate() {
            let want =
                Value::read_npy(&io_file(&io, "output", k, j, n_out)).expect("fixture output");
            if got.shape != want.shape || got.dtype() != want.dtype() {
                failures.push(format!(
                    "input {k}, output {j}: got {:?} {} but expected {:?} {}",
                    got.shape,
                    got.dtype(),
                    want.shape,
                    want.dtype()
                ));
                continue;
            }
            let (a, b) = (got.data.to_le_bytes(), want.data.to_le_bytes());
            let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
            if differing > 0 {
                let first = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(0);
                failures.push(format!(
                    "input {k}, output {j}: {differing} of {} bytes differ (first at byte {first}: {} != {})",
                    a.len(),
                    a[first],
                    b[first]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{model}.onnx:\n{}",
        failures.join("\n")
    );
}

/// Describes tensor `id` of `g` for comparison, without its name. A one-element constant is
/// described without its rank: `[]` (TFLite) and `[1, 1, 1, 1]` (ONNX) broadcast alike, and the
/// operator's output shape is compared on its own.
fn tensor_desc(g: &Graph, id: TensorId) -> String {
    let t = &g.tensors[id];
    let shape = if t.is_const() && t.elements() == 1 {
        "one element".to_string()
    } else {
        format!("{:?}", t.shape)
    };
    format!(
        "{} {} quant={:?} data={}",
        shape,
        t.dtype,
        t.quant,
        match &t.data {
            Some(d) => format!("{} bytes, checksum {}", d.len(), fnv(d)),
            None => "activation".into(),
        }
    )
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The ONNX import must give the TFLite import's IR, op by op, except for names.
/// `ops_without_quant` lists ops whose ONNX operands may lack quantization because the ONNX file
/// carries none (integer ops without QuantizeLinear/DequantizeLinear around them).
fn ir_matches_twin(model: &str, ops_without_quant: &[usize]) {
    let onnx = load(model, "onnx");
    let tflite = load(model, "tflite");
    let mut diffs = Vec::new();
    if onnx.ops.len() != tflite.ops.len() {
        diffs.push(format!(
            "{} ops vs {} ops",
            onnx.ops.len(),
            tflite.ops.len()
        ));
    }
    for (k, (a, b)) in onnx.ops.iter().zip(&tflite.ops).enumerate() {
        if a.kind != b.kind {
            diffs.push(format!("op {k}: {:?} vs {:?}", a.kind, b.kind));
        }
        if a.inputs.len() != b.inputs.len() || a.outputs.len() != b.outputs.len() {
            diffs.push(format!("op {k} ({}): operand counts differ", a.kind.name()));
            continue;
        }
        // Add and Mul are commutative: an exporter may write their operands either way round.
        let mut b_inputs = b.inputs.clone();
        if matches!(a.kind.name(), "Add" | "Mul")
            && a.inputs.len() == 2
            && tensor_desc(&onnx, a.inputs[0]) == tensor_desc(&tflite, b.inputs[1])
            && tensor_desc(&onnx, a.inputs[1]) == tensor_desc(&tflite, b.inputs[0])
        {
            b_inputs.swap(0, 1);
        }
        let pairs = a
            .inputs
            .iter()
            .zip(&b_inputs)
            .chain(a.outputs.iter().zip(&b.outputs));
        for (pos, (&x, &y)) in pairs.enumerate() {
            let (mut dx, dy) = (tensor_desc(&onnx, x), tensor_desc(&tflite, y));
            if onnx.tensors[x].quant.is_none() && ops_without_quant.contains(&k) {
                // Compare everything but the quantization the ONNX file does not give.
                let mut t = onnx.tensors[x].clone();
                t.quant = tflite.tensors[y].quant.clone();
                let mut g = onnx.clone();
                g.tensors[x] = t;
                dx = tensor_desc(&g, x);
            }
            if dx != dy {
                diffs.push(format!(
                    "op {k} ({}) operand {pos}:\n  onnx   {dx}\n  tflite {dy}",
                    a.kind.name()
                ));
            }
        }
    }
    for (what, ga, gb) in [
        ("input", &onnx.inputs, &tflite.inputs),
        ("output", &onnx.outputs, &tflite.outputs),
    ] {
        if ga.len() != gb.len() {
            diffs.push(format!("{} vs {} graph {what}s", ga.len(), gb.len()));
        }
        for (&x, &y) in ga.iter().zip(gb) {
            let (sx, sy) = (&onnx.tensors[x], &tflite.tensors[y]);
            if sx.shape != sy.shape || sx.dtype != sy.dtype {
                diffs.push(format!(
                    "graph {what}: {:?} {} vs {:?} {}",
                    sx.shape, sx.dtype, sy.shape, sy.dtype
                ));
            }
        }
    }
    // Exporters may order independent operators differently: the same operators in another
    // topological order are the same graph.
    if !diffs.is_empty() && onnx.ops.len() == tflite.ops.len() && same_op_multiset(&onnx, &tflite) {
        diffs.clear();
    }
    assert!(
        diffs.is_empty(),
        "{model}: the ONNX and TFLite imports differ:\n{}",
        diffs.join("\n")
    );
}

/// Each graph's operators described without names (operands of Add and Mul sorted), as
/// sorted lists: equal when the graphs hold the same operators in any order.
fn same_op_multiset(a: &Graph, b: &Graph) -> bool {
    let describe = |g: &Graph| {
        let mut all: Vec<String> = g
            .ops
            .iter()
            .map(|op| {
                let mut ins: Vec<String> = op.inputs.iter().map(|&t| tensor_desc(g, t)).collect();
                if matches!(op.kind.name(), "Add" | "Mul") {
                    ins.sort();
                }
                let outs: Vec<String> = op.outputs.iter().map(|&t| tensor_desc(g, t)).collect();
                format!("{:?} {ins:?} -> {outs:?}", op.kind)
            })
            .collect();
        all.sort();
        all
    };
    describe(a) == describe(b)
}

/// net_ds_cnn and net_resnet8 end in Keras' Flatten before Dense: TFLite's FULLY_CONNECTED
/// flattens its 4-D input itself, tf2onnx writes a Reshape before the Gemm, one operator more
/// in the ONNX IR. Their outputs are compared with TFLite's; their IRs cannot be.
#[test]
fn flattening_networks_reference_outputs() {
    outputs_match("net_ds_cnn");
    outputs_match("net_resnet8");
}

macro_rules! fixture_tests {
    ($($name:ident: $model:literal, [$($free:literal),*];)*) => {
        mod reference_outputs {
            $(
                #[test]
                fn $name() {
                    super::outputs_match($model);
                }
            )*
        }
        mod same_ir_as_tflite {
            $(
                #[test]
                fn $name() {
                    super::ir_matches_twin($model, &[$($free),*]);
                }
            )*
        }
    };
}

fixture_tests! {
    op_add: "op_add", [];
    op_avgpool2x2: "op_avgpool2x2", [];
    // tf2onnx writes this Concat on the int8 tensors directly, with no quantization anywhere.
    op_concat: "op_concat", [0];
    op_conv1x1: "op_conv1x1", [];
    digits: "digits", [];
    net_convnext_block: "net_convnext_block", [];
    net_vit_block: "net_vit_block", [];
    op_conv3x3_s1_relu6: "op_conv3x3_s1_relu6", [];
    op_conv3x3_s2: "op_conv3x3_s2", [];
    op_conv5x5_valid: "op_conv5x5_valid", [];
    op_dwconv3x3_s1: "op_dwconv3x3_s1", [];
    op_dwconv3x3_s2: "op_dwconv3x3_s2", [];
    op_fc: "op_fc", [];
    op_global_avgpool: "op_global_avgpool", [];
    op_maxpool3x3_s2: "op_maxpool3x3_s2", [];
    op_mul: "op_mul", [];
    op_reshape_fc: "op_reshape_fc", [];
    op_resize_nearest: "op_resize_nearest", [];
    op_softmax: "op_softmax", [];
    mv2_224: "mv2_224", [];
    // movea: tf2onnx writes these on the int8 tensors directly, with no quantization.
    op_slice: "op_slice", [0];
    op_strided_slice: "op_strided_slice", [0];
    op_split: "op_split", [0, 1];
    op_split_v: "op_split_v", [0, 1];
    op_pack: "op_pack", [0, 1, 2];
    op_unpack: "op_unpack", [0, 1];
    op_expand_dims: "op_expand_dims", [0];
    op_squeeze: "op_squeeze", [0];
    op_concat_h: "op_concat_h", [0];
    // matmul
    op_fc_3d: "op_fc_3d", [];
    op_transpose_conv_s1_valid: "op_transpose_conv_s1_valid", [];
    op_transpose_conv_s2: "op_transpose_conv_s2", [];
    op_transpose_conv_s3: "op_transpose_conv_s3", [];
    op_batch_matmul: "op_batch_matmul", [];
    op_transpose_conv_s21_valid_relu: "op_transpose_conv_s21_valid_relu", [];
    op_transpose_conv_s4_k3: "op_transpose_conv_s4_k3", [];
    op_batch_matmul_adj_y: "op_batch_matmul_adj_y", [];
    // moveb
    // tf2onnx writes these on the int8 tensors directly, with no quantization anywhere.
    op_transpose: "op_transpose", [0];
    op_tile: "op_tile", [0];
    op_mirror_pad: "op_mirror_pad", [];
    op_reverse: "op_reverse", [];
    op_gather: "op_gather", [0];
    op_depth_to_space: "op_depth_to_space", [0];
    op_space_to_depth: "op_space_to_depth", [];
    op_tile_wc: "op_tile_wc", [0];
    // elem
    op_abs: "op_abs", [];
    op_neg: "op_neg", [];
    op_maximum: "op_maximum", [];
    op_minimum: "op_minimum", [];
    op_squared_difference: "op_squared_difference", [];
    op_prelu: "op_prelu", [];
    op_add_broadcast: "op_add_broadcast", [];
    // reduce
    op_sum: "op_sum", [];
    op_reduce_max: "op_reduce_max", [];
    op_reduce_min: "op_reduce_min", [];
    op_arg_max: "op_arg_max", [];
    op_mean_channels: "op_mean_channels", [];
    op_arg_min_i64: "op_arg_min_i64", [];
    op_sum_w: "op_sum_w", [];
    op_reduce_max_hw: "op_reduce_max_hw", [];
    op_reduce_min_neg_axis: "op_reduce_min_neg_axis", [];
    op_mean_h: "op_mean_h", [];
    op_mean_w_c: "op_mean_w_c", [];
    // act
    op_logistic: "op_logistic", [];
    op_tanh: "op_tanh", [];
    op_hard_swish: "op_hard_swish", [];
    op_leaky_relu: "op_leaky_relu", [];
    op_elu: "op_elu", [];
    op_gelu: "op_gelu", [];
    op_exp: "op_exp", [];
    op_relu_0_to_1: "op_relu_0_to_1", [];
    op_log: "op_log", [];
    op_rsqrt: "op_rsqrt", [];
    op_logistic_int16: "op_logistic_int16", [];
    op_logistic_int16_all: "op_logistic_int16_all", [];
    op_logistic_int16_pot: "op_logistic_int16_pot", [];
    op_tanh_int16: "op_tanh_int16", [];
    op_tanh_int16_all: "op_tanh_int16_all", [];
    op_tanh_int16_pot: "op_tanh_int16_pot", [];
    net_mnv3s: "net_mnv3s", [];
    net_effb0: "net_effb0", [];
    net_unet: "net_unet", [];
    net_vit_encoder: "net_vit_encoder", [];
    op_slice_to_end: "op_slice_to_end", [0];
    op_split_h: "op_split_h", [0, 1, 2, 3];
    op_split_v_w: "op_split_v_w", [0, 1];
    op_pack_last: "op_pack_last", [0, 1, 2];
    op_unpack_last: "op_unpack_last", [0, 1, 2];
    op_flatten_shape: "op_flatten_shape", [];
    op_concat_w: "op_concat_w", [0];
}

/// Every fixture directory with an `.onnx` twin of a `.tflite` is covered by the list above.
#[test]
fn every_fixture_is_listed() {
    let listed = [
        "op_add",
        "op_avgpool2x2",
        "op_concat",
        "op_conv1x1",
        "digits",
        "net_convnext_block",
        "net_vit_block",
        "op_conv3x3_s1_relu6",
        "op_conv3x3_s2",
        "op_conv5x5_valid",
        "op_dwconv3x3_s1",
        "op_dwconv3x3_s2",
        "op_fc",
        "op_global_avgpool",
        "op_maxpool3x3_s2",
        "op_mul",
        "op_reshape_fc",
        "op_resize_nearest",
        "op_softmax",
        "mv2_224",
        // movea
        "op_slice",
        "op_strided_slice",
        "op_split",
        "op_split_v",
        "op_pack",
        "op_unpack",
        "op_expand_dims",
        "op_squeeze",
        "op_concat_h",
        // matmul
        "op_fc_3d",
        "op_transpose_conv_s1_valid",
        "op_transpose_conv_s2",
        "op_transpose_conv_s3",
        "op_batch_matmul",
        "op_transpose_conv_s21_valid_relu",
        "op_transpose_conv_s4_k3",
        "op_batch_matmul_adj_y",
        // moveb
        "op_transpose",
        "op_tile",
        "op_mirror_pad",
        "op_reverse",
        "op_gather",
        "op_depth_to_space",
        "op_space_to_depth",
        "op_tile_wc",
        // elem
        "op_abs",
        "op_neg",
        "op_maximum",
        "op_minimum",
        "op_squared_difference",
        "op_prelu",
        "op_add_broadcast",
        // reduce
        "op_sum",
        "op_reduce_max",
        "op_reduce_min",
        "op_arg_max",
        "op_mean_channels",
        "op_arg_min_i64",
        "op_sum_w",
        "op_reduce_max_hw",
        "op_reduce_min_neg_axis",
        "op_mean_h",
        "op_mean_w_c",
        // act
        "op_logistic",
        "op_tanh",
        "op_hard_swish",
        "op_leaky_relu",
        "op_elu",
        "op_gelu",
        "op_exp",
        "op_relu_0_to_1",
        "op_log",
        "op_rsqrt",
        "op_logistic_int16",
        "op_logistic_int16_all",
        "op_logistic_int16_pot",
        "op_tanh_int16",
        "op_tanh_int16_all",
        "op_tanh_int16_pot",
        "net_mnv3s",
        "net_effb0",
        "net_unet",
        "net_vit_encoder",
        "net_ds_cnn",
        "net_resnet8",
        "op_slice_to_end",
        "op_split_h",
        "op_split_v_w",
        "op_pack_last",
        "op_unpack_last",
        "op_flatten_shape",
        "op_concat_w",
    ];
    let dir = npu_tests::fixtures_dir();
    let mut found = Vec::new();
    for e in std::fs::read_dir(&dir).expect("fixtures directory") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        let d = dir.join(&name);
        if d.join(format!("{name}.onnx")).exists() && d.join(format!("{name}.tflite")).exists() {
            found.push(name);
        }
    }
    found.sort();
    let mut want: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(found, want);
}
