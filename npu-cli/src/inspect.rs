//! `npu inspect MODEL`: a model's operators in order, with their tensors (shape, dtype,
//! quantization), attributes and multiply-accumulate counts, then totals.

use std::fmt::Write as _;
use std::path::PathBuf;

use npu_build::error::{Error, Result};
use npu_build::ethos_u::partition::OpAssignment;
use npu_build::ir::{ActFn, Activation, Graph, Op, OpKind, Padding, Tensor, TensorId};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (.tflite or .onnx); under `cargo npu`, default `[package.metadata.npu] model`.
    pub path: Option<PathBuf>,
    /// One line per operator instead of the detailed listing.
    #[arg(long)]
    pub brief: bool,
    /// Mark each operator NPU or CPU (with the reason) as compiled for this accelerator
    /// configuration.
    #[arg(short, long, default_value = "ethos-u55-128")]
    pub target: String,
}

pub fn run(args: Args) -> Result<()> {
    let path = crate::model_path(args.path.as_deref())?;
    let graph = match npu_build::import::load(&path) {
        Ok(g) => g,
        Err(e @ (Error::UnsupportedOp { .. } | Error::UnsupportedOps { .. })) => {
            // Still list the whole model, marking what the importer does not know.
            if let Ok(list) = npu_build::import::operator_list(&path) {
                print!("{}", unsupported_listing(&list));
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let target = npu_build::target::Target::for_accelerator(&args.target)?;
    let engines = npu_build::ethos_u::compile(&graph, target.accelerator)
        .map(|c| c.assignment)
        .map_err(|e| {
            eprintln!(
                "note: not compiled for {} ({e}); engines not shown",
                args.target
            )
        })
        .ok();
    print!("{}", report(&graph, args.brief, engines.as_deref()));
    Ok(())
}

/// The operators of a model that does not import: each marked `unsupported` (the importer does
/// not know it) or `-` (known; the model as a whole was not imported), like Vela's
/// supported-operator report.
pub fn unsupported_listing(list: &[(String, String, bool)]) -> String {
    let mut s = String::new();
    let bad = list.iter().filter(|(_, _, ok)| !ok).count();
    let _ = writeln!(
        s,
        "{} operators, {bad} of them unsupported (the model does not import):",
        list.len()
    );
    let _ = writeln!(s, "{:>4}  {:<12} {:<28} name", "#", "status", "operator");
    for (k, (node, op, ok)) in list.iter().enumerate() {
        let status = if *ok { "-" } else { "unsupported" };
        let _ = writeln!(s, "{k:>4}  {status:<12} {op:<28} {node}");
    }
    s
}

/// Multiply-accumulates of an operator (convolutions and fully-connected layers; 0 for the
/// others, whose work is not multiply-accumulates).
pub fn macs(g: &Graph, op: &Op) -> u64 {
    let shape = |i: usize| -> &[usize] {
        op.inputs
            .get(i)
            .and_then(|&t| g.tensors.get(t.index()))
            .map_or(&[], |t| t.shape.as_slice())
    };
    let out_elems = op
        .outputs
        .first()
        .and_then(|&t| g.tensors.get(t.index()))
        .map_or(0, |t| t.elements() as u64);
    let prod = |s: &[usize]| s.iter().map(|&d| d as u64).product::<u64>();
    match &op.kind {
        // out elements x (KH * KW * C)
        OpKind::Conv2d(_) => out_elems.saturating_mul(prod(shape(1).get(1..).unwrap_or(&[]))),
        // out elements x (KH * KW)
        OpKind::DepthwiseConv2d { .. } => {
            out_elems.saturating_mul(prod(shape(1).get(1..3).unwrap_or(&[])))
        }
        // out elements x I
        OpKind::FullyConnected { .. } => {
            out_elems.saturating_mul(shape(1).get(1).map_or(0, |&d| d as u64))
        }
        // input elements x (KH * KW * O): every input pixel meets the whole kernel
        OpKind::TransposeConv2d(_) => {
            let x = shape(0).iter().map(|&d| d as u64).product::<u64>();
            x.saturating_mul(prod(shape(1).get(..3).unwrap_or(&[])))
        }
        // out elements x K
        OpKind::BatchMatMul { adj_a, .. } => {
            let a = shape(0);
            let k = if *adj_a {
                a.len().checked_sub(2)
            } else {
                a.len().checked_sub(1)
            };
            out_elems.saturating_mul(k.and_then(|i| a.get(i)).map_or(0, |&d| d as u64))
        }
        _ => 0,
    }
}

/// Number of constant elements an operator reads (weights, biases, constant operands).
fn params(g: &Graph, op: &Op) -> u64 {
    op.inputs
        .iter()
        .filter_map(|&t| g.tensors.get(t.index()))
        .filter(|t| t.is_const())
        .map(|t| t.elements() as u64)
        .sum()
}

/// `1,234,567`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn shape_str(s: &[usize]) -> String {
    let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(","))
}

/// `i8 [1,8,8,16] s=0.0078 zp=-1`, per-channel scales summarized by their range.
fn tensor_str(t: &Tensor) -> String {
    let mut s = format!("{} {}", t.dtype, shape_str(&t.shape));
    if let Some(q) = &t.quant {
        if q.scale.len() > 1 {
            let lo = q.scale.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = q.scale.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let zps: std::collections::BTreeSet<i32> = q.zero_point.iter().copied().collect();
            let zp = if zps.len() == 1 {
                format!("{}", q.zero_point[0])
            } else {
                format!(
                    "{}..{}",
                    zps.first().unwrap_or(&0),
                    zps.last().unwrap_or(&0)
                )
            };
            let _ = write!(
                s,
                " per-channel({} along axis {}) s={lo:.3e}..{hi:.3e} zp={zp}",
                q.scale.len(),
                q.axis.map_or_else(|| "?".to_string(), |a| a.to_string())
            );
        } else {
            let _ = write!(s, " s={:.6e} zp={}", q.scale(), q.zero_point());
        }
    }
    if t.is_const() {
        s.push_str(" const");
    }
    s
}

fn act_str(a: Activation) -> String {
    match a {
        Activation::None => "none".into(),
        Activation::Relu => "relu".into(),
        Activation::Relu6 => "relu6".into(),
        Activation::ReluN1To1 => "relu_n1_to_1".into(),
        Activation::Clip { min, max } => format!("clip({min}, {max})"),
    }
}

fn pad_str(p: Padding) -> String {
    format!("pad t{} l{} b{} r{}", p.top, p.left, p.bottom, p.right)
}

/// The attributes of an operator, in words.
fn attrs(kind: &OpKind) -> String {
    match kind {
        OpKind::Conv2d(a) => format!(
            "stride {}x{}, dilation {}x{}, {}, act {}",
            a.stride.0,
            a.stride.1,
            a.dilation.0,
            a.dilation.1,
            pad_str(a.padding),
            act_str(a.activation)
        ),
        OpKind::DepthwiseConv2d {
            attrs: a,
            depth_multiplier,
        } => format!(
            "stride {}x{}, dilation {}x{}, {}, depth multiplier {depth_multiplier}, act {}",
            a.stride.0,
            a.stride.1,
            a.dilation.0,
            a.dilation.1,
            pad_str(a.padding),
            act_str(a.activation)
        ),
        OpKind::FullyConnected { activation }
        | OpKind::Add { activation }
        | OpKind::Sub { activation }
        | OpKind::Mul { activation } => format!("act {}", act_str(*activation)),
        OpKind::Mean { axes, keep_dims } => format!("axes {axes:?}, keep_dims {keep_dims}"),
        OpKind::AvgPool(p) | OpKind::MaxPool(p) => format!(
            "kernel {}x{}, stride {}x{}, {}, act {}",
            p.kernel.0,
            p.kernel.1,
            p.stride.0,
            p.stride.1,
            pad_str(p.padding),
            act_str(p.activation)
        ),
        OpKind::Concat { axis, activation } => {
            format!("axis {axis}, act {}", act_str(*activation))
        }
        OpKind::Reshape | OpKind::Quantize | OpKind::Dequantize => String::new(),
        OpKind::Pad { pads, value } => match value {
            Some(v) => format!("pads {pads:?}, value {v}"),
            None => format!("pads {pads:?}, value = zero point"),
        },
        OpKind::Resize {
            mode,
            align_corners,
            half_pixel_centers,
        } => format!(
            "{mode:?}, align_corners {align_corners}, half_pixel_centers {half_pixel_centers}"
        ),
        OpKind::Softmax { beta } => format!("beta {beta}"),
        OpKind::Transpose { perm } => format!("perm {perm:?}"),
        OpKind::Activation(a) => act_str(*a),
        OpKind::Slice { begin, step, size } => {
            format!("begin {begin:?}, step {step:?}, size {size:?}")
        }
        OpKind::TransposeConv2d(a) => format!(
            "stride {}x{}, crop top {} left {}, act {}",
            a.stride.0,
            a.stride.1,
            a.pad_top,
            a.pad_left,
            act_str(a.activation)
        ),
        OpKind::BatchMatMul { adj_a, adj_b } => format!("adj_a {adj_a}, adj_b {adj_b}"),
        OpKind::Tile { multiples } => format!("multiples {multiples:?}"),
        OpKind::MirrorPad { pads, mode } => format!("pads {pads:?}, mode {}", mode.name()),
        OpKind::Reverse { axes } => format!("axes {axes:?}"),
        OpKind::Gather { axis, indices } => format!("axis {axis}, indices {indices:?}"),
        OpKind::DepthToSpace { block, crd } => {
            format!("block {block}, {}", if *crd { "CRD" } else { "DCR" })
        }
        OpKind::SpaceToDepth { block } => format!("block {block}"),
        OpKind::SpaceToBatch { block, pads } => format!("block {block:?}, pads {pads:?}"),
        OpKind::BatchToSpace { block, crops } => format!("block {block:?}, crops {crops:?}"),
        OpKind::Abs
        | OpKind::Neg
        | OpKind::Maximum
        | OpKind::Minimum
        | OpKind::SquaredDifference
        | OpKind::Prelu => String::new(),
        OpKind::Reduce {
            axes, keep_dims, ..
        } => format!("axes {axes:?}, keep_dims {keep_dims}"),
        OpKind::ArgMinMax { axis, .. } => format!("axis {axis}"),
        OpKind::FloatUnary(f) => format!("{f:?} (f32)"),
        OpKind::FloatBinary(f) => format!("{} (f32)", f.name()),
        OpKind::LayerNorm { axis, epsilon } => format!("axis {axis} epsilon {epsilon} (f32)"),
        OpKind::FloatReduce {
            axes, keep_dims, ..
        } => format!("axes {axes:?} keep_dims {keep_dims} (f32)"),
        OpKind::OrtSoftmax => "onnxruntime's table and rounding".into(),
        OpKind::ActFn(f) => match f {
            ActFn::LeakyRelu { alpha } => format!("alpha {alpha}"),
            ActFn::Elu { alpha } => format!("alpha {alpha}"),
            ActFn::Gelu { approximate } => format!("approximate {approximate}"),
            ActFn::Swish { sigmoid: (s, z) } => format!("sigmoid quantization {s} zp {z}"),
            ActFn::Logistic
            | ActFn::Tanh
            | ActFn::HardSwish
            | ActFn::Exp
            | ActFn::Log
            | ActFn::Rsqrt
            | ActFn::Sqrt => "lookup table".into(),
            ActFn::Real(_) => "ONNX float island, tabulated".into(),
            ActFn::Table(_) => {
                "lookup table of a float island (dequantize, f32 functions, quantize)".into()
            }
        },
        OpKind::Lstm(a) => format!(
            "{}, cell clip {}, hidden quantization {} zp {}; state kept between runs",
            if a.time_major {
                "time major"
            } else {
                "batch major"
            },
            a.cell_clip,
            a.hidden_scale,
            a.hidden_zero_point
        ),
    }
}

/// Role names of an operator's inputs, for the listing.
fn input_roles(kind: &OpKind, n: usize) -> Vec<String> {
    let named: &[&str] = match kind {
        OpKind::Conv2d(_) | OpKind::DepthwiseConv2d { .. } | OpKind::FullyConnected { .. } => {
            &["in", "weights", "bias"]
        }
        OpKind::Add { .. } | OpKind::Sub { .. } | OpKind::Mul { .. } => &["a", "b"],
        OpKind::Concat { .. } => &[],
        OpKind::TransposeConv2d(_) => &["in", "weights", "bias"],
        OpKind::BatchMatMul { .. } => &["a", "b"],
        OpKind::Maximum | OpKind::Minimum | OpKind::SquaredDifference => &["a", "b"],
        OpKind::Prelu => &["in", "alpha"],
        OpKind::Lstm(_) => &[
            "in", "w_xi", "w_xf", "w_xc", "w_xo", "w_hi", "w_hf", "w_hc", "w_ho", "b_i", "b_f",
            "b_c", "b_o", "h", "c",
        ],
        _ => &["in"],
    };
    (0..n)
        .map(|i| {
            named
                .get(i)
                .map_or_else(|| format!("in{i}"), |s| s.to_string())
        })
        .collect()
}

fn tensor_line(g: &Graph, role: &str, id: TensorId) -> String {
    match g.tensors.get(id.index()) {
        Some(t) => format!("    {role:<8} {}  '{}'\n", tensor_str(t), t.name),
        None => format!("    {role:<8} <tensor {id} missing>\n"),
    }
}

/// The whole listing as text.
pub fn report(g: &Graph, brief: bool, engines: Option<&[OpAssignment]>) -> String {
    let engine = |k: usize| -> (String, String) {
        match engines.and_then(|e| e.get(k)) {
            Some(a) => match &a.cpu_reason {
                None => ("NPU".into(), "NPU".into()),
                Some(r) => ("CPU".into(), format!("CPU: {r}")),
            },
            None => ("-".into(), String::new()),
        }
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "model '{}': {} operators, {} tensors",
        g.name,
        g.ops.len(),
        g.tensors.len()
    );
    if g.requant == npu_build::ir::Requant::Single {
        s.push_str(
            "requantization: one rounding, as onnxruntime computes it (an onnxruntime-quantized model)\n",
        );
    }
    for (k, &i) in g.inputs.iter().enumerate() {
        s.push_str(&tensor_line(g, &format!("input {k}"), i));
    }
    for (k, &o) in g.outputs.iter().enumerate() {
        s.push_str(&tensor_line(g, &format!("output {k}"), o));
    }
    s.push('\n');
    let (mut total_macs, mut total_params, mut param_bytes) = (0u64, 0u64, 0u64);
    if brief {
        let _ = writeln!(
            s,
            "{:>4}  {:<16} {:<6} {:<22} {:>14} {:>10}  name",
            "#", "operator", "engine", "output", "MACs", "params"
        );
    }
    for (k, op) in g.ops.iter().enumerate() {
        let m = macs(g, op);
        let p = params(g, op);
        total_macs = total_macs.saturating_add(m);
        total_params = total_params.saturating_add(p);
        param_bytes += op
            .inputs
            .iter()
            .filter_map(|&t| g.tensors.get(t.index()))
            .filter_map(|t| t.data.as_ref())
            .map(|d| d.len() as u64)
            .sum::<u64>();
        if brief {
            let out = op
                .outputs
                .first()
                .and_then(|&o| g.tensors.get(o.index()))
                .map_or_else(String::new, |t| {
                    format!("{} {}", t.dtype, shape_str(&t.shape))
                });
            let _ = writeln!(
                s,
                "{k:>4}  {:<16} {:<6} {:<22} {:>14} {:>10}  {}",
                op.kind.name(),
                engine(k).0,
                out,
                thousands(m),
                thousands(p),
                op.name
            );
            continue;
        }
        let _ = writeln!(s, "#{k} {}  '{}'", op.kind.name(), op.name);
        let (_, long) = engine(k);
        if !long.is_empty() {
            let _ = writeln!(s, "    engine   {long}");
        }
        for (role, &i) in input_roles(&op.kind, op.inputs.len())
            .iter()
            .zip(&op.inputs)
        {
            s.push_str(&tensor_line(g, role, i));
        }
        for &o in &op.outputs {
            s.push_str(&tensor_line(g, "out", o));
        }
        let a = attrs(&op.kind);
        if !a.is_empty() {
            let _ = writeln!(s, "    attrs    {a}");
        }
        let _ = writeln!(s, "    MACs     {}   params {}", thousands(m), thousands(p));
    }
    let _ = writeln!(
        s,
        "\ntotal: {} operators, {} MACs, {} parameters ({} bytes of constants)",
        g.ops.len(),
        thousands(total_macs),
        thousands(total_params),
        thousands(param_bytes)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(300_774_272), "300,774,272");
    }
}
