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
    // Asymmetric uint8 weights are refused by name.
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
    let e = m.import().unwrap_err();
    assert!(e.to_string().contains("zero point 2"), "{e}");
}

#[test]
fn old_opsets_are_refused() {
    let m = M {
        opset: 12,
        ..M::new()
            .input("x", dt::INT8, &[1])
            .output("x", dt::INT8, &[1])
    };
    let e = m.import().unwrap_err();
    assert!(
        matches!(e, Error::Malformed { .. }) && e.to_string().contains("opset 12"),
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
