//! Importer behaviour on small models built in code: layouts, folding, QDQ forms, operator
//! attributes and their mapping, checked on the IR and (where the arithmetic is simple enough to
//! compute here independently) on the reference interpreter's results.

use prost::Message;

use super::proto::{
    AttributeProto as A, GraphProto, ModelProto, NodeProto, TensorProto as T, ValueInfoProto,
    data_type as dt,
};
use crate::error::{Error, Result};
use crate::import::{Format, from_bytes};
use crate::ir::{Activation, DType, Graph, OpKind, Padding, ResizeMode};
use crate::value::{Data, Value};

/// A model under construction.
#[derive(Default)]
struct M {
    nodes: Vec<NodeProto>,
    inits: Vec<T>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    opset: i64,
}

impl M {
    fn new() -> M {
        M {
            opset: 17,
            ..Default::default()
        }
    }

    fn input(mut self, name: &str, ty: i32, dims: &[i64]) -> M {
        self.inputs.push(ValueInfoProto::tensor(name, ty, dims));
        self
    }

    fn output(mut self, name: &str, ty: i32, dims: &[i64]) -> M {
        self.outputs.push(ValueInfoProto::tensor(name, ty, dims));
        self
    }

    fn init(mut self, t: T) -> M {
        self.inits.push(t);
        self
    }

    fn node(mut self, op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<A>) -> M {
        let name = format!("{op}_{}", self.nodes.len());
        self.nodes
            .push(NodeProto::new(op, &name, inputs, outputs, attrs));
        self
    }

    /// Scale `{name}_s` and int8 zero point `{name}_z`.
    fn qparams(self, name: &str, scale: f32, zp: i8) -> M {
        self.init(T::from_f32(&format!("{name}_s"), &[], &[scale]))
            .init(T::from_i8(&format!("{name}_z"), &[], &[zp]))
    }

    /// `QuantizeLinear(x, q_s, q_z) -> y`.
    fn q(self, x: &str, q: &str, y: &str) -> M {
        let (s, z) = (format!("{q}_s"), format!("{q}_z"));
        self.node("QuantizeLinear", &[x, &s, &z], &[y], vec![])
    }

    /// `DequantizeLinear(x, q_s, q_z) -> y`.
    fn dq(self, x: &str, q: &str, y: &str) -> M {
        let (s, z) = (format!("{q}_s"), format!("{q}_z"));
        self.node("DequantizeLinear", &[x, &s, &z], &[y], vec![])
    }

    fn bytes(&self) -> Vec<u8> {
        let graph = GraphProto {
            node: self.nodes.clone(),
            name: "t".into(),
            initializer: self.inits.clone(),
            input: self.inputs.clone(),
            output: self.outputs.clone(),
            ..Default::default()
        };
        ModelProto::new(self.opset, graph).encode_to_vec()
    }

    fn import(&self) -> Result<Graph> {
        from_bytes(&self.bytes(), Format::Onnx, "t")
    }

    fn ok(&self) -> Graph {
        self.import()
            .unwrap_or_else(|e| panic!("import failed: {e}"))
    }
}

fn kinds(g: &Graph) -> Vec<&'static str> {
    g.ops.iter().map(|op| op.kind.name()).collect()
}

/// Per-channel int8 weights `w` with `scales`, dequantized into `{w}_dq`.
fn weights(m: M, w: &str, dims: &[i64], values: &[i8], scales: &[f32]) -> M {
    let n = scales.len() as i64;
    m.init(T::from_i8(w, dims, values))
        .init(T::from_f32(&format!("{w}q_s"), &[n], scales))
        .init(T::from_i8(&format!("{w}q_z"), &[n], &vec![0; scales.len()]))
        .node(
            "DequantizeLinear",
            &[w, &format!("{w}q_s"), &format!("{w}q_z")],
            &[&format!("{w}_dq")],
            vec![A::int("axis", 0)],
        )
}

/// Float NCHW in -> Q -> DQ -> op(attrs) -> Q -> DQ -> float NCHW out.
fn nchw_float_model(op: &str, attrs: Vec<A>, in_dims: &[i64], out_dims: &[i64]) -> M {
    M::new()
        .input("x", dt::FLOAT, in_dims)
        .output("y", dt::FLOAT, out_dims)
        .qparams("q", 0.5, 3)
        .q("x", "q", "xq")
        .dq("xq", "q", "xd")
        .node(op, &["xd"], &["p"], attrs)
        .q("p", "q", "pq")
        .dq("pq", "q", "y")
}

#[test]
fn nchw_float_model_gets_one_transpose_each_way() {
    let m = nchw_float_model(
        "MaxPool",
        vec![
            A::ints("kernel_shape", &[2, 2]),
            A::ints("strides", &[2, 2]),
        ],
        &[1, 2, 4, 4],
        &[1, 2, 2, 2],
    );
    let g = m.ok();
    assert_eq!(
        kinds(&g),
        [
            "Quantize",
            "Transpose",
            "MaxPool",
            "Transpose",
            "Dequantize"
        ]
    );
    assert_eq!(g.tensors[g.inputs[0]].shape, [1, 2, 4, 4]);
    assert_eq!(g.tensors[g.outputs[0]].shape, [1, 2, 2, 2]);
    assert_eq!(g.tensors[g.ops[2].inputs[0]].shape, [1, 4, 4, 2]);
    // Values chosen off the rounding ties: q = round(x / 0.5) + 3.
    let x: Vec<f32> = (0..32).map(|i| ((i * 7) % 19) as f32 * 0.5 - 4.1).collect();
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 2, 4, 4], Data::F32(x.clone())).unwrap()],
    )
    .expect("run");
    let q = |v: f32| ((v / 0.5).round() + 3.0).clamp(-128.0, 127.0);
    let mut want = Vec::new();
    for c in 0..2 {
        for oy in 0..2 {
            for ox in 0..2 {
                let mut m = f32::MIN;
                for dy in 0..2 {
                    for dx in 0..2 {
                        m = m.max(q(x[c * 16 + (oy * 2 + dy) * 4 + ox * 2 + dx]));
                    }
                }
                want.push((m - 3.0) * 0.5);
            }
        }
    }
    assert_eq!(out[0].data, Data::F32(want));
}

#[test]
fn transpose_pairs_cancel_and_shape_arithmetic_folds() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 4, 4, 8])
        .output("r", dt::INT8, &[1, 128])
        .init(T::from_i64("zero", &[], &[0]))
        .init(T::from_i64("axes0", &[1], &[0]))
        .init(T::from_i64("minus1", &[1], &[-1]))
        .node(
            "Transpose",
            &["x"],
            &["a"],
            vec![A::ints("perm", &[0, 3, 1, 2])],
        )
        .node(
            "Transpose",
            &["a"],
            &["b"],
            vec![A::ints("perm", &[0, 2, 3, 1])],
        )
        .node("Shape", &["b"], &["sh"], vec![])
        .node("Gather", &["sh", "zero"], &["n0"], vec![])
        .node("Unsqueeze", &["n0", "axes0"], &["n1"], vec![])
        .node(
            "Concat",
            &["n1", "minus1"],
            &["spec"],
            vec![A::int("axis", 0)],
        )
        .node("Reshape", &["b", "spec"], &["r"], vec![]);
    let g = m.ok();
    assert_eq!(kinds(&g), ["Reshape"]);
    let x: Vec<i8> = (0..128).map(|i| (i as i8).wrapping_mul(3)).collect();
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 4, 4, 8], Data::I8(x.clone())).unwrap()],
    )
    .expect("run");
    assert_eq!(out[0].shape, [1, 128]);
    assert_eq!(out[0].data, Data::I8(x));
}

/// Int8 NCHW-declared graph input through a Conv: one transpose in, one out.
fn conv_model(
    attrs: Vec<A>,
    in_hw: i64,
    out_hw: i64,
    c_in: i64,
    c_out: i64,
    k: i64,
    group: i64,
) -> M {
    let per_group = c_in / group;
    let nw = (c_out * per_group * k * k) as usize;
    let w: Vec<i8> = (0..nw).map(|i| ((i * 37) % 255) as i8).collect();
    let scales: Vec<f32> = (0..c_out).map(|c| 0.01 + c as f32 * 0.001).collect();
    let mut attrs = attrs;
    attrs.push(A::int("group", group));
    weights(M::new(), "w", &[c_out, per_group, k, k], &w, &scales)
        .input("x", dt::INT8, &[1, c_in, in_hw, in_hw])
        .output("y", dt::INT8, &[1, c_out, out_hw, out_hw])
        .qparams("qi", 0.05, -1)
        .qparams("qo", 0.2, 5)
        .dq("x", "qi", "xd")
        .node("Conv", &["xd", "w_dq"], &["c"], attrs)
        .q("c", "qo", "y")
}

#[test]
fn same_upper_is_explicit_padding() {
    let auto = conv_model(
        vec![
            A::string("auto_pad", "SAME_UPPER"),
            A::ints("strides", &[2, 2]),
        ],
        17,
        9,
        3,
        4,
        3,
        1,
    )
    .ok();
    let explicit = conv_model(
        vec![A::ints("pads", &[1, 1, 1, 1]), A::ints("strides", &[2, 2])],
        17,
        9,
        3,
        4,
        3,
        1,
    )
    .ok();
    assert_eq!(kinds(&auto), ["Transpose", "Conv2D", "Transpose"]);
    assert_eq!(auto.ops[1].kind, explicit.ops[1].kind);
    let OpKind::Conv2d(a) = &auto.ops[1].kind else {
        unreachable!()
    };
    assert_eq!(
        a.padding,
        Padding {
            top: 1,
            left: 1,
            bottom: 1,
            right: 1
        }
    );
    // SAME_LOWER puts the odd padding first: 16 -> 8 with k=3, s=2 needs 1 in total.
    let lower = conv_model(
        vec![
            A::string("auto_pad", "SAME_LOWER"),
            A::ints("strides", &[2, 2]),
        ],
        16,
        8,
        3,
        4,
        3,
        1,
    )
    .ok();
    let OpKind::Conv2d(l) = &lower.ops[1].kind else {
        unreachable!()
    };
    assert_eq!((l.padding.top, l.padding.bottom), (1, 0));
}

#[test]
fn conv_weights_become_ohwi() {
    let g = conv_model(vec![], 5, 3, 2, 3, 3, 1).ok();
    let w = &g.tensors[g.ops[1].inputs[1]];
    assert_eq!(w.shape, [3, 3, 3, 2]);
    // OIHW element (o, i, h, w) = ((o*2 + i)*3 + h)*3 + w lands at OHWI ((o*3 + h)*3 + w)*2 + i.
    let src: Vec<i8> = (0..54).map(|i| ((i * 37) % 255) as i8).collect();
    let got = w.data_i8().unwrap();
    for o in 0..3 {
        for i in 0..2 {
            for h in 0..3 {
                for x in 0..3 {
                    assert_eq!(
                        got[((o * 3 + h) * 3 + x) * 2 + i],
                        src[((o * 2 + i) * 3 + h) * 3 + x]
                    );
                }
            }
        }
    }
    let q = w.quant.as_ref().unwrap();
    assert_eq!((q.scale.len(), q.axis), (3, Some(0)));
}

#[test]
fn depthwise_with_multiplier() {
    let g = conv_model(vec![A::ints("pads", &[1, 1, 1, 1])], 6, 6, 4, 8, 3, 4).ok();
    assert_eq!(kinds(&g), ["Transpose", "DepthwiseConv2D", "Transpose"]);
    let OpKind::DepthwiseConv2d {
        depth_multiplier, ..
    } = &g.ops[1].kind
    else {
        unreachable!()
    };
    assert_eq!(*depth_multiplier, 2);
    let w = &g.tensors[g.ops[1].inputs[1]];
    assert_eq!(w.shape, [1, 3, 3, 8]);
    assert_eq!(w.quant.as_ref().unwrap().axis, Some(3));
    // Grouped (not depthwise) convolution is refused by name.
    let e = conv_model(vec![], 6, 4, 4, 4, 3, 2).import().unwrap_err();
    assert!(e.to_string().contains("grouped convolution"), "{e}");
}

/// x[1,4] -> Gemm(transB=1) with weights [3,4] and the given bias input.
fn gemm_model(bias: M) -> M {
    let w: Vec<i8> = (0..12).map(|i| i as i8 - 6).collect();
    weights(bias, "w", &[3, 4], &w, &[0.1, 0.2, 0.3])
        .input("x", dt::INT8, &[1, 4])
        .output("y", dt::INT8, &[1, 3])
        .qparams("qi", 0.5, 0)
        .qparams("qo", 1.0, 0)
        .dq("x", "qi", "xd")
        .node(
            "Gemm",
            &["xd", "w_dq", "b"],
            &["g"],
            vec![A::int("transB", 1)],
        )
        .q("g", "qo", "y")
}

#[test]
fn gemm_bias_forms() {
    // DequantizeLinear of int32 at input_scale * weight_scale: kept as is.
    let m = gemm_model(
        M::new()
            .init(T::from_i32("bq", &[3], &[10, -20, 30]))
            .init(T::from_f32("bq_s", &[3], &[0.05, 0.1, 0.15]))
            .init(T::from_i32("bq_z", &[3], &[0, 0, 0]))
            .node(
                "DequantizeLinear",
                &["bq", "bq_s", "bq_z"],
                &["b"],
                vec![A::int("axis", 0)],
            ),
    );
    let g = m.ok();
    assert_eq!(kinds(&g), ["FullyConnected"]);
    let b = &g.tensors[g.ops[0].inputs[2]];
    assert_eq!(b.data_i32().unwrap(), [10, -20, 30]);
    assert_eq!(b.quant.as_ref().unwrap().scale, [0.05, 0.1, 0.15]);
    // At another scale: rescaled to input_scale * weight_scale.
    let m = gemm_model(
        M::new()
            .init(T::from_i32("bq", &[3], &[10, -20, 30]))
            .init(T::from_f32("bq_s", &[], &[0.1]))
            .node("DequantizeLinear", &["bq", "bq_s"], &["b"], vec![]),
    );
    let g = m.ok();
    let b = &g.tensors[g.ops[0].inputs[2]];
    assert_eq!(b.data_i32().unwrap(), [20, -20, 20]);
    // A float bias is quantized.
    let m = gemm_model(M::new().init(T::from_f32("b", &[3], &[1.0, -0.5, 0.75])));
    let g = m.ok();
    let b = &g.tensors[g.ops[0].inputs[2]];
    assert_eq!(b.data_i32().unwrap(), [20, -5, 5]);
    // Weights transposed for transB=0 ([K, N] -> [N, K]).
    let w = &g.tensors[g.ops[0].inputs[1]];
    assert_eq!(w.shape, [3, 4]);
}

#[test]
fn matmul_weights_are_transposed() {
    let w: Vec<i8> = (0..12).map(|i| i as i8).collect();
    let m = M::new()
        .init(T::from_i8("w", &[4, 3], &w))
        .init(T::from_f32("wq_s", &[3], &[0.1, 0.2, 0.3]))
        .init(T::from_i8("wq_z", &[3], &[0, 0, 0]))
        .node(
            "DequantizeLinear",
            &["w", "wq_s", "wq_z"],
            &["w_dq"],
            vec![A::int("axis", 1)],
        )
        .input("x", dt::INT8, &[1, 4])
        .output("y", dt::INT8, &[1, 3])
        .qparams("qi", 0.5, 0)
        .qparams("qo", 1.0, 0)
        .dq("x", "qi", "xd")
        .node("MatMul", &["xd", "w_dq"], &["mm"], vec![])
        .q("mm", "qo", "y");
    let g = m.ok();
    let wt = &g.tensors[g.ops[0].inputs[1]];
    assert_eq!(wt.shape, [3, 4]);
    assert_eq!(
        wt.data_i8().unwrap(),
        [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]
    );
    assert_eq!(wt.quant.as_ref().unwrap().axis, Some(0));
}

/// int8 x -> DQ -> Conv 1x1 -> Q(qc) -> DQ -> `act` -> Q(qa) -> y.
fn activation_after_q(act: &str, act_inputs: &[&str], qa_scale: f32, qa_zp: i8) -> M {
    let mut inputs = vec!["cd"];
    inputs.extend_from_slice(act_inputs);
    weights(M::new(), "w", &[2, 2, 1, 1], &[1, 2, 3, 4], &[0.1, 0.1])
        .input("x", dt::INT8, &[1, 2, 3, 3])
        .output("y", dt::INT8, &[1, 2, 3, 3])
        .init(T::from_f32("zero", &[], &[0.0]))
        .init(T::from_f32("six", &[], &[6.0]))
        .qparams("qi", 0.1, 0)
        .qparams("qc", 0.05, -10)
        .qparams("qa", qa_scale, qa_zp)
        .dq("x", "qi", "xd")
        .node("Conv", &["xd", "w_dq"], &["c"], vec![])
        .q("c", "qc", "cq")
        .dq("cq", "qc", "cd")
        .node(act, &inputs, &["a"], vec![])
        .q("a", "qa", "y")
}

#[test]
fn activations_fuse_only_when_quantization_is_kept() {
    let g = activation_after_q("Relu", &[], 0.05, -10).ok();
    assert_eq!(kinds(&g), ["Transpose", "Conv2D", "Transpose"]);
    let OpKind::Conv2d(a) = &g.ops[1].kind else {
        unreachable!()
    };
    assert_eq!(a.activation, Activation::Relu);
    let g = activation_after_q("Clip", &["zero", "six"], 0.05, -10).ok();
    let OpKind::Conv2d(a) = &g.ops[1].kind else {
        unreachable!()
    };
    assert_eq!(a.activation, Activation::Relu6);
    // A different output quantization keeps a stand-alone activation (it requantizes).
    let g = activation_after_q("Max", &["zero"], 0.1, -128).ok();
    assert_eq!(
        kinds(&g),
        ["Transpose", "Conv2D", "Activation", "Transpose"]
    );
    assert_eq!(g.ops[2].kind, OpKind::Activation(Activation::Relu));
    // Min with a constant is an upper clamp.
    let g = activation_after_q("Min", &["six"], 0.05, -10).ok();
    let OpKind::Conv2d(a) = &g.ops[1].kind else {
        unreachable!()
    };
    assert_eq!(
        a.activation,
        Activation::Clip {
            min: f32::NEG_INFINITY,
            max: 6.0
        }
    );
}

#[test]
fn clip_between_conv_and_quantize_fuses() {
    // tf2onnx's form: Conv -> Relu -> Clip(0, 6) -> QuantizeLinear, nothing quantized in between.
    let m = weights(M::new(), "w", &[2, 2, 1, 1], &[1, 2, 3, 4], &[0.1, 0.1])
        .input("x", dt::INT8, &[1, 2, 3, 3])
        .output("y", dt::INT8, &[1, 2, 3, 3])
        .init(T::from_f32("lo", &[], &[-1.0]))
        .init(T::from_f32("six", &[], &[6.0]))
        .qparams("qi", 0.1, 0)
        .qparams("qo", 0.05, -128)
        .dq("x", "qi", "xd")
        .node("Conv", &["xd", "w_dq"], &["c"], vec![])
        .node("Relu", &["c"], &["r"], vec![])
        .node("Clip", &["r", "lo", "six"], &["cl"], vec![])
        .q("cl", "qo", "y");
    let g = m.ok();
    let OpKind::Conv2d(a) = &g.ops[1].kind else {
        unreachable!()
    };
    assert_eq!(a.activation, Activation::Relu6);
}

fn resize_model(mode: &str, coord: &str, nearest: &str, in_hw: i64, scale: f32) -> M {
    M::new()
        .input("x", dt::INT8, &[1, 2, in_hw, in_hw])
        .output("y", dt::INT8, &[1, 2, -1, -1])
        .init(T::from_f32("scales", &[4], &[1.0, 1.0, scale, scale]))
        .qparams("q", 0.1, 0)
        .dq("x", "q", "xd")
        .node(
            "Resize",
            &["xd", "", "scales"],
            &["r"],
            vec![
                A::string("mode", mode),
                A::string("coordinate_transformation_mode", coord),
                A::string("nearest_mode", nearest),
            ],
        )
        .q("r", "q", "y")
}

fn resize_kind(g: &Graph) -> OpKind {
    g.ops
        .iter()
        .find(|op| op.kind.name() == "Resize")
        .expect("a Resize")
        .kind
        .clone()
}

#[test]
fn resize_modes_map_to_tflite_flags() {
    let r = |align_corners, half_pixel_centers, mode| OpKind::Resize {
        mode,
        align_corners,
        half_pixel_centers,
    };
    let g = resize_model("nearest", "asymmetric", "floor", 3, 2.0).ok();
    assert_eq!(resize_kind(&g), r(false, false, ResizeMode::Nearest));
    let g = resize_model("nearest", "tf_half_pixel_for_nn", "floor", 4, 2.0).ok();
    assert_eq!(resize_kind(&g), r(false, true, ResizeMode::Nearest));
    let g = resize_model("nearest", "align_corners", "round_prefer_ceil", 3, 3.0).ok();
    assert_eq!(resize_kind(&g), r(true, false, ResizeMode::Nearest));
    let g = resize_model("linear", "half_pixel", "floor", 4, 2.0).ok();
    assert_eq!(resize_kind(&g), r(false, true, ResizeMode::Bilinear));
    let g = resize_model("linear", "align_corners", "floor", 4, 2.0).ok();
    assert_eq!(resize_kind(&g), r(true, false, ResizeMode::Bilinear));
    assert_eq!(g.tensors[g.outputs[0]].shape, [1, 2, 8, 8]);
    // asymmetric rounding to nearest (x / 3 for a 3x upscale) is none of TFLite's settings.
    let e = resize_model("nearest", "asymmetric", "round_prefer_floor", 3, 3.0)
        .import()
        .unwrap_err();
    assert!(e.to_string().contains("matches no TFLite"), "{e}");
    let e = resize_model("cubic", "half_pixel", "floor", 4, 2.0)
        .import()
        .unwrap_err();
    assert!(e.to_string().contains("cubic"), "{e}");
}

#[test]
fn average_pool_padding_must_be_excluded() {
    let attrs = |include| {
        vec![
            A::ints("kernel_shape", &[3, 3]),
            A::ints("pads", &[1, 1, 1, 1]),
            A::int("count_include_pad", include),
        ]
    };
    let g = nchw_float_model("AveragePool", attrs(0), &[1, 2, 4, 4], &[1, 2, 4, 4]).ok();
    assert!(kinds(&g).contains(&"AveragePool"));
    let e = nchw_float_model("AveragePool", attrs(1), &[1, 2, 4, 4], &[1, 2, 4, 4])
        .import()
        .unwrap_err();
    assert!(e.to_string().contains("count_include_pad"), "{e}");
}

#[test]
fn float_softmax_ends_the_graph() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 5])
        .output("y", dt::FLOAT, &[1, 5])
        .qparams("q", 0.25, 0)
        .dq("x", "q", "xd")
        .node("Softmax", &["xd"], &["y"], vec![]);
    let g = m.ok();
    assert_eq!(kinds(&g), ["Dequantize", "Softmax"]);
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 5], Data::I8(vec![0, 4, 8, -4, 2])).unwrap()],
    )
    .expect("run");
    let x = [0.0f64, 1.0, 2.0, -1.0, 0.5];
    let sum: f64 = x.iter().map(|v| v.exp()).sum();
    let Data::F32(got) = &out[0].data else {
        panic!("float output expected")
    };
    for (g, v) in got.iter().zip(x) {
        assert!((f64::from(*g) - v.exp() / sum).abs() < 1e-6, "{got:?}");
    }
}

#[test]
fn reduce_mean_and_concat_axes_follow_the_layout() {
    // NCHW conv output (NHWC in the IR): mean over H, W without keepdims, then concat on C.
    let m = weights(M::new(), "w", &[2, 2, 1, 1], &[1, 2, 3, 4], &[0.1, 0.1])
        .input("x", dt::INT8, &[1, 2, 3, 3])
        .output("y", dt::INT8, &[1, 2, 3, 6])
        .output("m", dt::INT8, &[1, 2])
        .qparams("qi", 0.1, 0)
        .dq("x", "qi", "xd")
        .node("Conv", &["xd", "w_dq"], &["c"], vec![])
        .q("c", "qi", "cq")
        .dq("cq", "qi", "cd")
        .node("Concat", &["cd", "xd"], &["cat"], vec![A::int("axis", 3)])
        .q("cat", "qi", "y")
        .node(
            "ReduceMean",
            &["cd"],
            &["mean"],
            vec![A::ints("axes", &[2, 3]), A::int("keepdims", 0)],
        )
        .q("mean", "qi", "m");
    let m = M { opset: 13, ..m };
    let g = m.ok();
    let concat = g.ops.iter().find(|op| op.kind.name() == "Concat").unwrap();
    // ONNX axis 3 (W) of NCHW is IR axis 2 of NHWC.
    assert_eq!(
        concat.kind,
        OpKind::Concat {
            axis: 2,
            activation: Activation::None
        }
    );
    let mean = g.ops.iter().find(|op| op.kind.name() == "Mean").unwrap();
    assert_eq!(
        mean.kind,
        OpKind::Mean {
            axes: vec![1, 2],
            keep_dims: false
        }
    );
    assert_eq!(g.tensors[g.outputs[1]].shape, [1, 2]);
}

#[test]
fn pad_fills_with_zero() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 1, 2, 2])
        .output("y", dt::INT8, &[1, 1, 4, 3])
        .init(T::from_i64("pads", &[8], &[0, 0, 1, 0, 0, 0, 1, 1]))
        .qparams("q", 0.5, 7)
        .dq("x", "q", "xd")
        .node("Pad", &["xd", "pads"], &["p"], vec![])
        .q("p", "q", "y");
    let g = m.ok();
    let pad = g.ops.iter().find(|op| op.kind.name() == "Pad").unwrap();
    // Padded with the zero point (real 0), in the input's own (NCHW) layout: no transposes.
    assert_eq!(kinds(&g), ["Pad"]);
    assert_eq!(
        pad.kind,
        OpKind::Pad {
            pads: vec![(0, 0), (0, 0), (1, 1), (0, 1)],
            value: None
        }
    );
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 1, 2, 2], Data::I8(vec![1, 2, 3, 4])).unwrap()],
    )
    .expect("run");
    assert_eq!(
        out[0].data,
        Data::I8(vec![7, 7, 7, 1, 2, 7, 3, 4, 7, 7, 7, 7])
    );
}

#[test]
fn uint8_quantization() {
    let m = M::new()
        .input("x", dt::UINT8, &[1, 4])
        .output("y", dt::UINT8, &[1, 4])
        .init(T::from_f32("q_s", &[], &[0.1]))
        .init(T::from_u8("q_z", &[], &[128]))
        .dq("x", "q", "xd")
        .node("Relu", &["xd"], &["r"], vec![])
        .q("r", "q", "y");
    let g = m.ok();
    assert_eq!(g.tensors[g.inputs[0]].dtype, DType::U8);
    assert_eq!(
        g.tensors[g.inputs[0]].quant.as_ref().unwrap().zero_point,
        [128]
    );
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 4], Data::U8(vec![0, 127, 128, 200])).unwrap()],
    )
    .expect("run");
    assert_eq!(out[0].data, Data::U8(vec![128, 128, 128, 200]));
    // Asymmetric uint8 weights (onnxruntime's U8U8): zero point 130 subtracted from each weight.
    let m = M::new()
        .init(T::from_u8("w", &[2, 2], &[1, 2, 3, 4]))
        .init(T::from_f32("wq_s", &[], &[0.1]))
        .init(T::from_u8("wq_z", &[], &[130]))
        .node(
            "DequantizeLinear",
            &["w", "wq_s", "wq_z"],
            &["w_dq"],
            vec![],
        )
        .input("x", dt::INT8, &[1, 2])
        .output("y", dt::INT8, &[1, 2])
        .qparams("qi", 0.5, 0)
        .dq("x", "qi", "xd")
        .node("MatMul", &["xd", "w_dq"], &["mm"], vec![])
        .q("mm", "qi", "y");
    let g = m.import().expect("asymmetric weights import");
    // x = [1, -2] (raw [2, -4]); w - 130 = [[-129, -128], [-127, -126]] at 0.1: y = [12.5, 12.4].
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 2], Data::I8(vec![2, -4])).unwrap()],
    )
    .expect("run");
    assert_eq!(out[0].data, Data::I8(vec![25, 25]));
}

#[test]
fn old_opsets_are_refused() {
    let m = M {
        opset: 9,
        ..M::new()
            .input("x", dt::INT8, &[1])
            .output("x", dt::INT8, &[1])
    };
    let e = m.import().unwrap_err();
    assert!(
        matches!(e, Error::Malformed { .. }) && e.to_string().contains("opset 9"),
        "{e}"
    );
}

#[test]
fn symbolic_batch_runs_as_one() {
    let m = M::new()
        .input("x", dt::INT8, &[-1, 3])
        .output("y", dt::INT8, &[-1, 3])
        .node("Identity", &["x"], &["y"], vec![]);
    let g = m.ok();
    assert_eq!(g.tensors[g.inputs[0]].shape, [1, 3]);
    assert_eq!(g.tensors[g.outputs[0]].name, "y");
    assert_ne!(g.inputs[0], g.outputs[0]);
}

#[test]
fn slice_and_gather_fold() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 2, 3, 4])
        .output("z", dt::INT8, &[1, 3, 8])
        // An output too, so the Reshape chain stays two Reshapes and both folded shapes show.
        .output("y", dt::INT8, &[1, 4, 3, 2])
        .init(T::from_i64("first", &[1], &[-4]))
        .init(T::from_i64("s3", &[1], &[3]))
        .init(T::from_i64("s0", &[1], &[0]))
        .init(T::from_i64("m1", &[1], &[-1]))
        .init(T::from_i64("big", &[1], &[i64::MAX]))
        .init(T::from_i64("two", &[1], &[2]))
        .node("Shape", &["x"], &["sh"], vec![])
        .node("Gather", &["sh", "first"], &["n"], vec![])
        .node("Slice", &["sh", "s3", "s0", "s0", "m1"], &["rev"], vec![])
        .node("Concat", &["n", "rev"], &["spec"], vec![A::int("axis", 0)])
        .node("Reshape", &["x", "spec"], &["y"], vec![])
        .node("Slice", &["sh", "s0", "big", "s0", "two"], &["odd"], vec![])
        .node(
            "Concat",
            &["odd", "m1"],
            &["spec2"],
            vec![A::int("axis", 0)],
        )
        .node("Reshape", &["y", "spec2"], &["z"], vec![]);
    let g = m.ok();
    // [1, 2, 3, 4] -> [1] ++ [4, 3, 2] -> [1, 3] ++ [-1]
    let shapes: Vec<&[usize]> = g
        .ops
        .iter()
        .map(|op| g.tensors[op.outputs[0]].shape.as_slice())
        .collect();
    assert_eq!(shapes, [&[1, 4, 3, 2][..], &[1, 3, 8][..]]);
}

#[test]
fn gemm_trans_a_is_a_transposed_view() {
    let w: Vec<i8> = (0..12).map(|i| i as i8 * 5 - 30).collect();
    let model = |trans_a: i64, in_dims: &[i64]| {
        weights(M::new(), "w", &[3, 4], &w, &[0.1, 0.2, 0.3])
            .input("x", dt::INT8, in_dims)
            .output("y", dt::INT8, &[2, 3])
            .qparams("qi", 0.5, 0)
            .qparams("qo", 1.0, 0)
            .dq("x", "qi", "xd")
            .node(
                "Gemm",
                &["xd", "w_dq"],
                &["g"],
                vec![A::int("transB", 1), A::int("transA", trans_a)],
            )
            .q("g", "qo", "y")
            .ok()
    };
    let plain = model(0, &[2, 4]);
    let trans = model(1, &[4, 2]);
    assert_eq!(kinds(&trans), ["Transpose", "FullyConnected"]);
    let x: Vec<i8> = vec![3, -7, 12, 5, -1, 9, 4, -11];
    let xt: Vec<i8> = (0..8).map(|i| x[(i % 2) * 4 + i / 2]).collect();
    let a = crate::reference::run(&plain, &[Value::new(vec![2, 4], Data::I8(x)).unwrap()]).unwrap();
    let b =
        crate::reference::run(&trans, &[Value::new(vec![4, 2], Data::I8(xt)).unwrap()]).unwrap();
    assert_eq!(a, b);
}

// matmul: ConvTranspose geometry (ONNX operator specification) and MatMul of activations.

/// x[1, 2, in, in] -> ConvTranspose(attrs) with weights [2, 3, k, k] (per-channel along axis 1)
/// -> y[1, 3, out, out].
fn conv_transpose_model(attrs: Vec<A>, in_hw: i64, out_hw: i64, k: i64) -> M {
    let nw = (2 * 3 * k * k) as usize;
    let w: Vec<i8> = (0..nw)
        .map(|i| (((i * 29) % 200) as i32 - 100) as i8)
        .collect();
    M::new()
        .init(T::from_i8("w", &[2, 3, k, k], &w))
        .init(T::from_f32("wq_s", &[3], &[0.01, 0.02, 0.03]))
        .init(T::from_i8("wq_z", &[3], &[0, 0, 0]))
        .node(
            "DequantizeLinear",
            &["w", "wq_s", "wq_z"],
            &["w_dq"],
            vec![A::int("axis", 1)],
        )
        .input("x", dt::INT8, &[1, 2, in_hw, in_hw])
        .output("y", dt::INT8, &[1, 3, out_hw, out_hw])
        .qparams("qi", 0.05, -1)
        .qparams("qo", 0.2, 5)
        .dq("x", "qi", "xd")
        .node("ConvTranspose", &["xd", "w_dq"], &["c"], attrs)
        .q("c", "qo", "y")
}

/// The model's TransposeConv2D (between the NCHW <-> NHWC transposes of its input and output).
fn conv_transpose_op(g: &Graph) -> &crate::ir::Op {
    g.ops
        .iter()
        .find(|op| matches!(op.kind, OpKind::TransposeConv2d(_)))
        .unwrap_or_else(|| panic!("no transposed convolution in {:?}", kinds(g)))
}

fn conv_transpose_geometry(g: &Graph) -> ((usize, usize), usize, usize, Vec<usize>) {
    let op = conv_transpose_op(g);
    let OpKind::TransposeConv2d(a) = &op.kind else {
        panic!("not a transposed convolution: {:?}", op.kind);
    };
    (
        a.stride,
        a.pad_top,
        a.pad_left,
        g.tensors[op.outputs[0]].shape.clone(),
    )
}

#[test]
fn conv_transpose_pads_output_padding_and_output_shape() {
    // Full extent s * (in - 1) + output_padding + k = 2 * 3 + 1 + 3 = 10, minus pads 1 + 1.
    let m = conv_transpose_model(
        vec![
            A::ints("strides", &[2, 2]),
            A::ints("pads", &[1, 1, 1, 1]),
            A::ints("output_padding", &[1, 1]),
        ],
        4,
        8,
        3,
    );
    let g = m.ok();
    assert_eq!(kinds(&g), ["Transpose", "TransposeConv2D", "Transpose"]);
    assert_eq!(
        conv_transpose_geometry(&g),
        ((2, 2), 1, 1, vec![1, 8, 8, 3])
    );
    // Weights [C_in, C_out, KH, KW] -> [C_out, KH, KW, C_in], scales along axis 0.
    let w = &g.tensors[conv_transpose_op(&g).inputs[1]];
    assert_eq!(w.shape, [3, 3, 3, 2]);
    assert_eq!(w.quant.as_ref().unwrap().axis, Some(0));
    // output_shape 7 of a full 9: total padding 2, the start gets total - total / 2 = 1.
    let m = conv_transpose_model(
        vec![
            A::ints("strides", &[2, 2]),
            A::ints("output_shape", &[7, 7]),
        ],
        4,
        7,
        3,
    );
    assert_eq!(
        conv_transpose_geometry(&m.ok()),
        ((2, 2), 1, 1, vec![1, 7, 7, 3])
    );
    // SAME_UPPER: output in * s = 8 of a full 9: the odd pixel of padding at the end.
    let same = |mode: &str| {
        conv_transpose_model(
            vec![A::ints("strides", &[2, 2]), A::string("auto_pad", mode)],
            4,
            8,
            3,
        )
        .ok()
    };
    assert_eq!(
        conv_transpose_geometry(&same("SAME_UPPER")),
        ((2, 2), 0, 0, vec![1, 8, 8, 3])
    );
    assert_eq!(
        conv_transpose_geometry(&same("SAME_LOWER")),
        ((2, 2), 1, 1, vec![1, 8, 8, 3])
    );
    // Negative end pads (tf2onnx): one output past the full extent of 4 * 2 + 3 = 11.
    let m = conv_transpose_model(
        vec![
            A::ints("strides", &[4, 4]),
            A::ints("pads", &[0, 0, -1, -1]),
        ],
        3,
        12,
        3,
    );
    assert_eq!(
        conv_transpose_geometry(&m.ok()),
        ((4, 4), 0, 0, vec![1, 12, 12, 3])
    );
    // Dilations and groups are refused by name.
    let e = conv_transpose_model(vec![A::ints("dilations", &[2, 2])], 4, 8, 3)
        .import()
        .unwrap_err();
    assert!(e.to_string().contains("dilations"), "{e}");
    let e = conv_transpose_model(vec![A::int("group", 2)], 4, 6, 3)
        .import()
        .unwrap_err();
    assert!(e.to_string().contains("group"), "{e}");
}

#[test]
fn matmul_of_two_activations_is_batch_matmul() {
    let m = M::new()
        .input("a", dt::INT8, &[2, 3, 4])
        .input("b", dt::INT8, &[4, 5])
        .output("y", dt::INT8, &[2, 3, 5])
        .qparams("qa", 0.05, -1)
        .qparams("qb", 0.04, 2)
        .qparams("qo", 0.3, 0)
        .dq("a", "qa", "ad")
        .dq("b", "qb", "bd")
        .node("MatMul", &["ad", "bd"], &["p"], vec![])
        .q("p", "qo", "y");
    let g = m.ok();
    assert_eq!(kinds(&g), ["BatchMatMul"]);
    assert_eq!(
        g.ops[0].kind,
        OpKind::BatchMatMul {
            adj_a: false,
            adj_b: false
        }
    );
    assert_eq!(g.tensors[g.ops[0].outputs[0]].shape, [2, 3, 5]);
}

// reduce

#[test]
fn arg_max_keepdims_and_arg_min_cast_to_int32() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 2, 3])
        .output("amax", dt::INT64, &[1, 1, 3])
        .output("amin", dt::INT32, &[1, 2])
        .qparams("q", 0.5, 0)
        .dq("x", "q", "xd")
        .node("ArgMax", &["xd"], &["amax"], vec![A::int("axis", 1)])
        .node(
            "ArgMin",
            &["xd"],
            &["i64"],
            vec![A::int("axis", -1), A::int("keepdims", 0)],
        )
        .node("Cast", &["i64"], &["amin"], vec![A::int("to", 6)]);
    let g = m.ok();
    let x = Value::new(vec![1, 2, 3], Data::I8(vec![1, 5, -3, 7, -8, 5])).unwrap();
    let out = crate::reference::run(&g, &[x]).expect("run");
    // Column maxima along axis 1: 7 (row 1), 5 (row 0), 5 (row 1); row minima: -3 at 2, -8 at 1.
    assert_eq!(out[0].shape, [1, 1, 3]);
    assert_eq!(out[0].data, Data::I64(vec![1, 0, 1]));
    assert_eq!(out[1].shape, [1, 2]);
    assert_eq!(out[1].data, Data::I32(vec![2, 1]));
}

#[test]
fn reduce_sum_axes_input_and_reduce_max_axes_attribute() {
    let m = M::new()
        .input("x", dt::INT8, &[1, 2, 3])
        .output("s", dt::INT8, &[1, 1, 3])
        .output("mx", dt::INT8, &[1, 2])
        .init(T::from_i64("axes", &[1], &[1]))
        .qparams("q", 0.5, 0)
        .dq("x", "q", "xd")
        .node("ReduceSum", &["xd", "axes"], &["sf"], vec![])
        .q("sf", "q", "s")
        .node(
            "ReduceMax",
            &["xd"],
            &["mf"],
            vec![A::ints("axes", &[2]), A::int("keepdims", 0)],
        )
        .q("mf", "q", "mx");
    let m = M { opset: 13, ..m };
    let g = m.ok();
    let x = Value::new(vec![1, 2, 3], Data::I8(vec![1, 5, -3, 7, -8, 5])).unwrap();
    let out = crate::reference::run(&g, &[x]).expect("run");
    // Same scale in and out: column sums 8, -3, 2; row maxima 5, 7.
    assert_eq!(out[0].data, Data::I8(vec![8, -3, 2]));
    assert_eq!(out[1].data, Data::I8(vec![5, 7]));
}

// onnx: formats and opsets as exported and quantized in the wild

/// int8 `x` of `dims` -> DequantizeLinear -> `op` -> QuantizeLinear (`out` parameters) -> int8.
fn unary_qdq(op: &str, attrs: Vec<A>, dims: &[i64], out_scale: f32, out_zp: i8) -> M {
    M::new()
        .input("x", dt::INT8, dims)
        .output("y", dt::INT8, dims)
        .qparams("qi", 0.05, -3)
        .qparams("qo", out_scale, out_zp)
        .dq("x", "qi", "xd")
        .node(op, &["xd"], &["p"], attrs)
        .q("p", "qo", "y")
}

#[test]
fn sigmoid_between_qdq_is_tflites_integer_logistic() {
    // A float function of one quantized tensor that TFLite has an integer kernel for is one
    // ActFn (its 256-entry table, on the NPU), not a float island: within one output step of
    // the float function onnxruntime evaluates.
    let g = unary_qdq("Sigmoid", vec![], &[1, 8], 1.0 / 256.0, -128).ok();
    assert_eq!(kinds(&g), ["Logistic"]);
    let x: Vec<i8> = vec![-128, -60, -17, -3, 0, 9, 40, 127];
    let out = crate::reference::run(&g, &[Value::new(vec![1, 8], Data::I8(x.clone())).unwrap()])
        .expect("run");
    let Data::I8(got) = &out[0].data else {
        panic!("int8 output expected, got {:?}", out[0].data.dtype())
    };
    for (&q, &y) in x.iter().zip(got) {
        let r = 0.05 * (f64::from(q) + 3.0);
        let s = 1.0 / (1.0 + (-r).exp());
        let float = (s * 256.0).round_ties_even() - 128.0;
        assert!((f64::from(y) - float).abs() <= 1.0, "x {q}: {y} vs {float}");
    }
}

#[test]
fn function_without_integer_form_is_a_float_island() {
    // A lone HardSigmoid has no TFLite integer kernel: it is an f32 island between the
    // conversions, which the import tabulates (the island run on all 256 inputs) into one
    // table operator.
    let g = unary_qdq("HardSigmoid", vec![], &[1, 8], 1.0 / 256.0, -128).ok();
    assert_eq!(kinds(&g), ["Table"]);
    let x: Vec<i8> = vec![-128, -60, -17, -3, 0, 9, 40, 127];
    let out = crate::reference::run(&g, &[Value::new(vec![1, 8], Data::I8(x.clone())).unwrap()])
        .expect("run");
    // ONNX: max(0, min(1, 0.2 x + 0.5)) of the dequantized values, quantized (round half to
    // even) and saturated.
    let want: Vec<i8> = x
        .iter()
        .map(|&q| {
            let r = 0.05 * (f64::from(q) + 3.0);
            let s = (0.2 * r + 0.5).clamp(0.0, 1.0);
            ((s * 256.0).round_ties_even() - 128.0).clamp(-128.0, 127.0) as i8
        })
        .collect();
    assert_eq!(out[0].data, Data::I8(want));
}

#[test]
fn leaky_relu_alpha_reaches_the_float_function() {
    let g = unary_qdq(
        "LeakyRelu",
        vec![A::float("alpha", 0.25)],
        &[1, 4],
        0.05,
        -3,
    )
    .ok();
    // TFLite has an integer LEAKY_RELU: the function becomes one ActFn with the model's alpha.
    assert_eq!(
        g.ops[0].kind,
        OpKind::ActFn(crate::ir::ActFn::LeakyRelu { alpha: 0.25 })
    );
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 4], Data::I8(vec![-83, -7, 5, 100])).unwrap()],
    )
    .expect("run");
    // Same scale in and out: (q + 3) * 0.25 - 3 for negatives (values chosen off ties), q else.
    assert_eq!(out[0].data, Data::I8(vec![-23, -4, 5, 100]));
}

#[test]
fn softmax_quantized_like_onnxruntime_runs_in_float() {
    let m = unary_qdq(
        "Softmax",
        vec![A::int("axis", -1)],
        &[1, 10],
        1.0 / 255.0,
        -128,
    );
    assert_eq!(kinds(&m.ok()), ["Dequantize", "Softmax", "Quantize"]);
    let m = unary_qdq(
        "Softmax",
        vec![A::int("axis", -1)],
        &[1, 10],
        1.0 / 256.0,
        -128,
    );
    assert_eq!(kinds(&m.ok()), ["Softmax"]);
}

#[test]
fn opset_11_forms_are_upgraded() {
    // Softmax before opset 13: default axis 1, over the flattened trailing dimensions.
    let m = M {
        opset: 11,
        ..unary_qdq("Softmax", vec![], &[1, 10], 1.0 / 256.0, -128)
    };
    assert_eq!(kinds(&m.ok()), ["Softmax"]);
    // Unsqueeze with its axes attribute.
    let m = M {
        opset: 11,
        ..M::new()
            .input("x", dt::INT8, &[1, 4])
            .output("y", dt::INT8, &[1, 1, 4])
            .qparams("q", 0.5, 0)
            .dq("x", "q", "xd")
            .node("Unsqueeze", &["xd"], &["u"], vec![A::ints("axes", &[1])])
            .q("u", "q", "y")
    };
    let g = m.ok();
    assert_eq!(g.tensors[g.outputs[0]].shape, [1, 1, 4]);
    // Clip with min/max attributes (opset 10) becomes a clamp.
    let m = M {
        opset: 10,
        ..unary_qdq(
            "Clip",
            vec![A::float("min", 0.0), A::float("max", 1.0)],
            &[1, 4],
            0.05,
            -3,
        )
    };
    let g = m.ok();
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 4], Data::I8(vec![-50, 0, 10, 100])).unwrap()],
    )
    .expect("run");
    // Reals 0.05 * (q + 3) clamped to [0, 1]: q in [-3, 17].
    assert_eq!(out[0].data, Data::I8(vec![-3, 0, 10, 17]));
}

#[test]
fn softmax_over_several_flattened_axes_is_refused_before_opset_13() {
    let m = M {
        opset: 12,
        ..unary_qdq(
            "Softmax",
            vec![A::int("axis", 1)],
            &[1, 3, 4],
            1.0 / 256.0,
            -128,
        )
    };
    let e = m.import().unwrap_err().to_string();
    assert!(e.contains("spans several axes"), "{e}");
}

#[test]
fn dynamic_quantization_is_refused_with_the_reason() {
    let m = M::new()
        .input("x", dt::FLOAT, &[1, 4])
        .output("y", dt::UINT8, &[1, 4])
        .node("DynamicQuantizeLinear", &["x"], &["y", "ys", "yz"], vec![]);
    let e = m.import().unwrap_err().to_string();
    assert!(
        e.contains("DynamicQuantizeLinear") && e.contains("run time"),
        "{e}"
    );
}

#[test]
fn qlinear_add_of_uint8_in_the_microsoft_domain() {
    let mut m = M::new()
        .input("a", dt::UINT8, &[1, 4])
        .input("b", dt::UINT8, &[1, 4])
        .output("y", dt::UINT8, &[1, 4])
        .init(T::from_f32("as", &[], &[0.5]))
        .init(T::from_u8("az", &[], &[10]))
        .init(T::from_f32("bs", &[], &[0.25]))
        .init(T::from_u8("bz", &[], &[20]))
        .init(T::from_f32("ys", &[], &[1.0]))
        .init(T::from_u8("yz", &[], &[5]))
        .node(
            "QLinearAdd",
            &["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
            &["y"],
            vec![],
        );
    m.nodes[0].domain = "com.microsoft".into();
    let g = m.ok();
    assert_eq!(kinds(&g), ["Add"]);
    let a: Vec<u8> = vec![0, 13, 30, 255];
    let b: Vec<u8> = vec![21, 25, 17, 29];
    let out = crate::reference::run(
        &g,
        &[
            Value::new(vec![1, 4], Data::U8(a.clone())).unwrap(),
            Value::new(vec![1, 4], Data::U8(b.clone())).unwrap(),
        ],
    )
    .expect("run");
    // Reals 0.5 (a - 10) + 0.25 (b - 20): fractions .25 / .75, off the rounding ties.
    let want: Vec<u8> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| {
            let r = 0.5 * (f64::from(a) - 10.0) + 0.25 * (f64::from(b) - 20.0);
            (r.round() + 5.0).clamp(0.0, 255.0) as u8
        })
        .collect();
    assert_eq!(out[0].data, Data::U8(want));
}

#[test]
fn matmul_then_float_bias_add_becomes_one_fully_connected() {
    // tf2onnx's dense layer: QDQ MatMul, an Add of a dequantized int32 bias, QuantizeLinear.
    let m = weights(
        M::new()
            .input("x", dt::INT8, &[1, 3])
            .output("y", dt::INT8, &[1, 2])
            .qparams("qi", 0.5, 1)
            .qparams("qo", 0.25, -2),
        "w",
        &[3, 2],
        &[1, -2, 3, 4, -5, 6],
        &[0.5],
    )
    .init(T::raw(
        "b",
        dt::INT32,
        &[2],
        [3i32, -7].iter().flat_map(|v| v.to_le_bytes()).collect(),
    ))
    .init(T::from_f32("b_s", &[], &[0.25]))
    .node("DequantizeLinear", &["b", "b_s"], &["b_dq"], vec![])
    .dq("x", "qi", "xd")
    .node("MatMul", &["xd", "w_dq"], &["mm"], vec![])
    .node("Add", &["mm", "b_dq"], &["sum"], vec![])
    .q("sum", "qo", "y");
    let g = m.ok();
    assert_eq!(kinds(&g), ["FullyConnected"]);
    assert_eq!(g.ops[0].inputs.len(), 3, "the bias is the FullyConnected's");
    let x: Vec<i8> = vec![5, -3, 8];
    let out = crate::reference::run(&g, &[Value::new(vec![1, 3], Data::I8(x.clone())).unwrap()])
        .expect("run");
    // Reals: sum_k 0.5 (x_k - 1) * 0.5 w[k][o] + 0.25 b[o], quantized at 0.25 with zero point -2.
    let w = [[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0]];
    let want: Vec<i8> = (0..2)
        .map(|o| {
            let mut r = 0.25 * [3.0, -7.0][o];
            for k in 0..3 {
                r += 0.5 * (f64::from(x[k]) - 1.0) * 0.5 * w[k][o];
            }
            ((r / 0.25).round() - 2.0).clamp(-128.0, 127.0) as i8
        })
        .collect();
    assert_eq!(out[0].data, Data::I8(want));
}

// movea: Slice and Split on activations.

/// NCHW float `[1, 4, 6, 6]` -> Q/DQ -> MaxPool 1x1 (NHWC in the IR) -> `tail` -> outputs.
fn nchw_movement_model(tail: impl FnOnce(M) -> M) -> M {
    let m = M::new()
        .input("x", dt::FLOAT, &[1, 4, 6, 6])
        .qparams("q", 0.5, 3)
        .q("x", "q", "xq")
        .dq("xq", "q", "xd")
        .node(
            "MaxPool",
            &["xd"],
            &["p"],
            vec![A::ints("kernel_shape", &[1, 1])],
        )
        .q("p", "q", "pq")
        .dq("pq", "q", "pd");
    tail(m)
}

/// The NCHW test input: multiples of 0.5 within the int8 range, so Q/DQ keep them exactly.
fn nchw_movement_input() -> (Vec<f32>, Value) {
    let x: Vec<f32> = (0..144)
        .map(|i| ((i * 37) % 97) as f32 * 0.5 - 20.0)
        .collect();
    let v = Value::new(vec![1, 4, 6, 6], Data::F32(x.clone())).unwrap();
    (x, v)
}

#[test]
fn slice_axes_and_steps_follow_the_nchw_layout() {
    // C 1..4 step 2 -> {1, 3}; W from 5 down by 2 -> {5, 3, 1}.
    let m = nchw_movement_model(|m| {
        m.output("y", dt::FLOAT, &[1, 2, 6, 3])
            .init(T::from_i64("st", &[2], &[1, 5]))
            .init(T::from_i64("en", &[2], &[4, -100]))
            .init(T::from_i64("ax", &[2], &[1, 3]))
            .init(T::from_i64("sp", &[2], &[2, -2]))
            .node("Slice", &["pd", "st", "en", "ax", "sp"], &["s"], vec![])
            .q("s", "q", "sq")
            .dq("sq", "q", "y")
    });
    let g = m.ok();
    let slice = g.ops.iter().find(|op| op.kind.name() == "Slice").unwrap();
    assert_eq!(
        slice.kind,
        OpKind::Slice {
            begin: vec![0, 0, 5, 1],
            step: vec![1, 1, -2, 2],
            size: vec![1, 6, 3, 2],
        }
    );
    let (x, v) = nchw_movement_input();
    let out = crate::reference::run(&g, &[v]).expect("run");
    let mut want = Vec::new();
    for c in [1, 3] {
        for h in 0..6 {
            for w in [5, 3, 1] {
                want.push(x[c * 36 + h * 6 + w]);
            }
        }
    }
    assert_eq!(out[0].data, Data::F32(want));
}

#[test]
fn split_forms_follow_the_nchw_layout() {
    // Opset 13: `split` as an input, along H (IR axis 1).
    let m = nchw_movement_model(|m| {
        m.output("a", dt::FLOAT, &[1, 4, 2, 6])
            .output("b", dt::FLOAT, &[1, 4, 4, 6])
            .init(T::from_i64("sp", &[2], &[2, 4]))
            .node(
                "Split",
                &["pd", "sp"],
                &["s0", "s1"],
                vec![A::int("axis", 2)],
            )
            .q("s0", "q", "s0q")
            .dq("s0q", "q", "a")
            .q("s1", "q", "s1q")
            .dq("s1q", "q", "b")
    });
    let g = m.ok();
    let slices: Vec<&OpKind> = g
        .ops
        .iter()
        .filter(|op| op.kind.name() == "Slice")
        .map(|op| &op.kind)
        .collect();
    assert_eq!(
        slices,
        [
            &OpKind::Slice {
                begin: vec![0, 0, 0, 0],
                step: vec![1; 4],
                size: vec![1, 2, 6, 4],
            },
            &OpKind::Slice {
                begin: vec![0, 2, 0, 0],
                step: vec![1; 4],
                size: vec![1, 4, 6, 4],
            },
        ]
    );
    let (x, v) = nchw_movement_input();
    let out = crate::reference::run(&g, &[v]).expect("run");
    for (k, (h0, n)) in [(0usize, 2usize), (2, 4)].into_iter().enumerate() {
        let mut want = Vec::new();
        for c in 0..4 {
            for h in h0..h0 + n {
                for w in 0..6 {
                    want.push(x[c * 36 + h * 6 + w]);
                }
            }
        }
        assert_eq!(out[k].data, Data::F32(want), "output {k}");
    }
    // Opset 18: `num_outputs` (6 = 3 + 3 along W, IR axis 2).
    let m = nchw_movement_model(|m| {
        m.output("a", dt::FLOAT, &[1, 4, 6, 3])
            .output("b", dt::FLOAT, &[1, 4, 6, 3])
            .node(
                "Split",
                &["pd"],
                &["s0", "s1"],
                vec![A::int("axis", 3), A::int("num_outputs", 2)],
            )
            .q("s0", "q", "s0q")
            .dq("s0q", "q", "a")
            .q("s1", "q", "s1q")
            .dq("s1q", "q", "b")
    });
    let g = M { opset: 18, ..m }.ok();
    let sizes: Vec<Vec<usize>> = g
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Slice { size, .. } => Some(size.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(sizes, [vec![1, 6, 3, 4], vec![1, 6, 3, 4]]);
    // A split that does not add up is an error naming the node (the importer takes opset 13+,
    // where `split` is an input).
    let m = nchw_movement_model(|m| {
        m.output("a", dt::FLOAT, &[1, 1, 6, 6])
            .output("b", dt::FLOAT, &[1, 3, 6, 6])
            .init(T::from_i64("sp", &[2], &[1, 2]))
            .node(
                "Split",
                &["pd", "sp"],
                &["s0", "s1"],
                vec![A::int("axis", 1)],
            )
            .q("s0", "q", "s0q")
            .dq("s0q", "q", "a")
            .q("s1", "q", "s1q")
            .dq("s1q", "q", "b")
    });
    let e = m.import().expect_err("split of 3 for 4");
    assert!(e.to_string().contains("Split_"), "{e}");
}

#[test]
fn reshape_chains_collapse_and_identity_reshapes_vanish() {
    // tf2onnx's NHWC -> NCHW -> NHWC bracket around a one-channel input, as Reshapes.
    let m = M::new()
        .input("x", dt::INT8, &[1, 8, 8, 1])
        .output("z", dt::INT8, &[1, 64])
        .init(T::from_i64("nchw", &[4], &[1, 1, 8, 8]))
        .init(T::from_i64("nhwc", &[4], &[1, 8, 8, 1]))
        .init(T::from_i64("flat", &[2], &[1, 64]))
        .node("Reshape", &["x", "nchw"], &["a"], vec![])
        .node("Reshape", &["a", "nhwc"], &["b"], vec![])
        .qparams("qa", 0.5, 0)
        .dq("b", "qa", "bd")
        .node("Relu", &["bd"], &["cd"], vec![])
        .q("cd", "qa", "c")
        .node("Reshape", &["c", "flat"], &["z"], vec![]);
    let g = m.ok();
    let kinds: Vec<&str> = g.ops.iter().map(|op| op.kind.name()).collect();
    // The bracket is gone: Relu reads the graph input; the last Reshape (to a new shape, and a
    // graph output) stays.
    assert_eq!(kinds.last(), Some(&"Reshape"));
    assert!(!kinds[..kinds.len() - 1].contains(&"Reshape"), "{kinds:?}");
    assert_eq!(g.ops[0].inputs[0], g.inputs[0]);
}

/// `DequantizeLinear -> LayerNormalization(scale, bias) -> QuantizeLinear` on a [2, 4] tensor.
fn layer_norm_qdq(scale: T, bias: Option<T>) -> M {
    let mut inputs = vec!["xd", "ln_scale"];
    let mut m = M::new()
        .input("x", dt::INT8, &[2, 4])
        .output("y", dt::INT8, &[2, 4])
        .qparams("qi", 0.1, 0)
        .qparams("qo", 1.0 / 64.0, 0)
        .init(scale);
    if let Some(b) = bias {
        m = m.init(b);
        inputs.push("ln_bias");
    }
    m.dq("x", "qi", "xd")
        .node(
            "LayerNormalization",
            &inputs,
            &["n"],
            vec![A::float("epsilon", 0.0)],
        )
        .q("n", "qo", "y")
}

#[test]
fn layer_normalization_is_a_float_island() {
    // onnxruntime keeps LayerNormalization's QDQ node in float: dequantize, f32, quantize.
    let m = layer_norm_qdq(
        T::from_f32("ln_scale", &[4], &[1.0, 1.0, 2.0, 1.0]),
        Some(T::from_f32("ln_bias", &[4], &[0.0, 0.5, 0.0, 0.0])),
    );
    let g = m.ok();
    assert_eq!(kinds(&g), ["Dequantize", "LayerNormalization", "Quantize"]);
    // Rows (1, 2, 3, 4) and (-1, 1, -1, 1) in reals (x 0.1 per step).
    let x = vec![10i8, 20, 30, 40, -10, 10, -10, 10];
    let out =
        crate::reference::run(&g, &[Value::new(vec![2, 4], Data::I8(x)).unwrap()]).expect("run");
    let Data::I8(got) = &out[0].data else {
        panic!("int8 output expected")
    };
    // Row 1: mean 2.5, deviation sqrt(1.25): (-1.342, -0.447, 0.447, 1.342), scaled/shifted:
    // (-1.342, 0.053, 0.894, 1.342) x 64 -> (-86, 3, 57, 86). Row 2: (-1, 1, -1, 1) -> (-1,
    // 1.5, -2, 1) x 64.
    assert_eq!(got, &[-86, 3, 57, 86, -64, 96, -128, 64]);
    // The bias may be left out (zeros), the scale broadcast from [1, 4].
    let m = layer_norm_qdq(T::from_f32("ln_scale", &[1, 4], &[1.0; 4]), None);
    assert_eq!(
        kinds(&m.ok()),
        ["Dequantize", "LayerNormalization", "Quantize"]
    );
}

#[test]
fn layer_normalization_needs_constant_parameters() {
    // A scale computed from the input is refused, naming the node.
    let m = M::new()
        .input("x", dt::INT8, &[2, 4])
        .output("y", dt::INT8, &[2, 4])
        .qparams("qi", 0.1, 0)
        .qparams("qo", 1.0 / 64.0, 0)
        .dq("x", "qi", "xd")
        .node("LayerNormalization", &["xd", "xd"], &["n"], vec![])
        .q("n", "qo", "y");
    let e = m.import().unwrap_err().to_string();
    assert!(
        e.contains("LayerNormalization") && e.contains("must be a constant"),
        "{e}"
    );
    // A scale that does not broadcast to the normalised axes.
    let m = layer_norm_qdq(T::from_f32("ln_scale", &[3], &[1.0; 3]), None);
    let e = m.import().unwrap_err().to_string();
    assert!(e.contains("does not broadcast"), "{e}");
}

#[test]
fn float_values_flow_through_several_operators() {
    // x -> LayerNormalization (float) -> Mul by itself -> Div by 2 -> ReduceMean -> Softmax ->
    // QuantizeLinear: every operator after the first reads a float tensor.
    let m = M::new()
        .input("x", dt::INT8, &[1, 2, 4])
        .output("y", dt::INT8, &[1, 2])
        .qparams("qi", 0.1, 0)
        .qparams("qo", 1.0 / 256.0, -128)
        .init(T::from_f32("ln_scale", &[4], &[1.0; 4]))
        .init(T::from_f32("two", &[], &[2.0]))
        .dq("x", "qi", "xd")
        .node("LayerNormalization", &["xd", "ln_scale"], &["n"], vec![])
        .node("Mul", &["n", "n"], &["sq"], vec![])
        .node("Div", &["sq", "two"], &["h"], vec![])
        .node(
            "ReduceMean",
            &["h"],
            &["m"],
            vec![A::ints("axes", &[2]), A::int("keepdims", 0)],
        )
        .node("Softmax", &["m"], &["s"], vec![])
        .q("s", "qo", "y");
    let g = m.ok();
    assert_eq!(
        kinds(&g),
        [
            "Dequantize",
            "LayerNormalization",
            "FloatBinary",
            "FloatBinary",
            "FloatReduceMean",
            "Softmax",
            "Quantize"
        ]
    );
    // Each row's normalised squares average to ~1 (variance 1, epsilon aside): halved, 0.5
    // for both rows, so the softmax is (0.5, 0.5) -> 128 - 128 = 0.
    let x = vec![1i8, 2, 3, 4, -50, 0, 50, 0];
    let out =
        crate::reference::run(&g, &[Value::new(vec![1, 2, 4], Data::I8(x)).unwrap()]).expect("run");
    assert_eq!(out[0].data, Data::I8(vec![0, 0]));
}

#[test]
fn float_pow_takes_listed_exponents_only() {
    let pow = |e: f32| {
        M::new()
            .input("x", dt::INT8, &[1, 4])
            .output("y", dt::INT8, &[1, 4])
            .qparams("qi", 0.1, 0)
            .qparams("qo", 0.1, 0)
            .init(T::from_f32("e", &[], &[e]))
            .init(T::from_f32("ln_scale", &[4], &[1.0; 4]))
            .dq("x", "qi", "xd")
            .node("LayerNormalization", &["xd", "ln_scale"], &["n"], vec![])
            .node("Pow", &["n", "e"], &["p"], vec![])
            .q("p", "qo", "y")
    };
    assert_eq!(
        kinds(&pow(2.0).ok()),
        ["Dequantize", "LayerNormalization", "FloatUnary", "Quantize"]
    );
    let e = pow(1.7).import().unwrap_err().to_string();
    assert!(e.contains("Pow") && e.contains("exponent 1.7"), "{e}");
}

#[test]
fn onnxruntime_quantized_models_round_once() {
    // onnxruntime's quantizer names itself as the producer: its models requantize with one
    // rounding, as onnxruntime computes them; other producers (tf2onnx of a TFLite model, say)
    // keep TFLite's two.
    let m = layer_norm_qdq(T::from_f32("ln_scale", &[4], &[1.0; 4]), None);
    let bytes = |producer: &str| {
        let mut p = ModelProto::decode(m.bytes().as_slice()).expect("decodes");
        p.producer_name = producer.into();
        p.encode_to_vec()
    };
    let requant = |producer: &str| {
        from_bytes(&bytes(producer), Format::Onnx, "t")
            .expect("imports")
            .requant
    };
    assert_eq!(requant("onnx.quantize"), crate::ir::Requant::Single);
    assert_eq!(requant("tf2onnx"), crate::ir::Requant::Tflite);
    assert_eq!(requant(""), crate::ir::Requant::Tflite);
}

#[test]
fn int16_sigmoid_outside_tflites_output_scale_is_a_float_island() {
    // int16 QDQ Sigmoid: with output scale 1/32768 it is TFLite's int16 LOGISTIC; with another
    // (1/65536 here) TFLite has no kernel, so it runs as a float island.
    let model = |out_scale: f32| {
        M::new()
            .input("x", dt::INT16, &[1, 4])
            .output("y", dt::INT16, &[1, 4])
            .init(T::from_f32("qi_s", &[], &[1.0 / 4096.0]))
            .init(T::from_i16("qi_z", &[], &[0]))
            .init(T::from_f32("qo_s", &[], &[out_scale]))
            .init(T::from_i16("qo_z", &[], &[0]))
            .dq("x", "qi", "xd")
            .node("Sigmoid", &["xd"], &["p"], vec![])
            .q("p", "qo", "y")
    };
    assert_eq!(kinds(&model(1.0 / 32768.0).ok()), ["Logistic"]);
    let g = model(1.0 / 65536.0).ok();
    assert_eq!(kinds(&g), ["Dequantize", "FloatUnary", "Quantize"]);
    let out = crate::reference::run(
        &g,
        &[Value::new(vec![1, 4], Data::I16(vec![0, 4096, -4096, 32767])).unwrap()],
    )
    .expect("run");
    // sigmoid(0, 1, -1, 8) * 65536, saturated at 32767.
    assert_eq!(out[0].data, Data::I16(vec![32767, 32767, 17625, 32767]));
}
