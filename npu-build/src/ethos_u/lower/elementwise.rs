//! Lowering of Add, Sub and Mul (docs/numerics.md, "Elementwise operands, broadcast and
//! scalars", "Add and Sub", "Mul").
//!
//! Operands: the NPU reads IFM with the OFM's shape and broadcasts IFM2 along H, W or C where
//! IFM2 has size 1; a single-element constant of at most 16 bits becomes the IFM2_SCALAR
//! register. When the first input is the broadcast (or scalar) one, the operands are swapped
//! and the op is marked `reversed` (IFM2 is operand A), so Sub still computes `a - b`. Operand A
//! is always the IR's first input.
//!
//! Add/Sub replicate TFLite's `add.cc`/`sub.cc` integer path (8-bit): both inputs are shifted
//! left by 20 and scaled by `s_i / (2 max(s_a, s_b))`, summed, then scaled by
//! `2 max(s_a, s_b) / (2^20 s_out)`. The larger-scale input's factor is exactly 1/2, i.e. the
//! hardware's fixed left shift of 19 for the unscaled operand; the other operand gets the
//! 32-bit OPA_SCALE (mode OPA_32 if it is operand A, OPB_32 if operand B) whose shift is
//! `31 - 20 - exponent`, so the DBL rounding happens where TFLite rounds. Equal input scales
//! use the same path (scaling operand A by exactly 1/2), which is exact, rather than Vela's
//! 16-bit OPA_OPB_16 shortcut.
//!
//! Mul: `OFM_SCALE = QuantizeMultiplier(s_a * s_b / s_out)` computed in **float32**, as TFLite's
//! `mul.cc` Prepare does (`input1->params.scale * input2->params.scale / output->params.scale`
//! on floats; Vela does the same; TFLite Micro's double formula is not what the fixtures' TFLite
//! ran).

use npu_rt::ethos_u::regs::fields::{ElementwiseMode, IfmScaleMode, RoundMode};

use super::Lowering;
use super::op_builders::{clamp, ofm_scale};
use crate::error::{Error, Result};
use crate::ethos_u::npu_op::{FeatureMap, InputScaling, Layout, NpuOp, NpuOpKind, Operand2, Scale};
use crate::ir::{DType, Op, OpKind, Requant, TensorId};
use npu_rt::fixed::quantize_multiplier;

/// TFLite's left shift of 8-bit Add/Sub inputs.
const LEFT_SHIFT_8BIT: i32 = 20;

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (mode, activation) = match &op.kind {
        OpKind::Add { activation } => (ElementwiseMode::Add, *activation),
        OpKind::Sub { activation } => (ElementwiseMode::Sub, *activation),
        OpKind::Mul { activation } => (ElementwiseMode::Mul, *activation),
        _ => {
            return Err(Lowering::invalid(
                op,
                "internal: not an elementwise operator",
            ));
        }
    };
    let (a, b, y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([a, b], [y]) => (*a, *b, *y),
        _ => return Err(Lowering::invalid(op, "expects two inputs and one output")),
    };
    let g = cx.graph;
    let (at, bt, yt) = (&g.tensors[a], &g.tensors[b], &g.tensors[y]);
    if at.dtype != bt.dtype || at.dtype != yt.dtype {
        return Err(cx.limit(
            op,
            format!(
                "inputs {} and {} with output {}: the NPU needs one type",
                at.dtype, bt.dtype, yt.dtype
            ),
        ));
    }
    let allowed = match mode {
        ElementwiseMode::Mul => matches!(yt.dtype, DType::I8 | DType::U8 | DType::I16),
        _ => matches!(yt.dtype, DType::I8 | DType::U8),
    };
    if !allowed {
        return Err(cx.limit(
            op,
            format!(
                "{} of {} tensors is not lowered to the NPU (Add/Sub: i8, u8; Mul: i8, u8, i16)",
                op.kind.name(),
                yt.dtype
            ),
        ));
    }
    for t in [at, bt, yt] {
        if t.quant.as_ref().is_none_or(|q| q.is_per_channel()) {
            return Err(cx.limit(
                op,
                format!("tensor '{}' is not quantized per tensor", t.name),
            ));
        }
    }
    // The tensors as [H, W, C] feature maps; models of higher rank or batch fold their
    // dimensions (see `folded`).
    let (ofm, ifm, ifm2, reversed) = binary_operands(cx, op, a, b, y)?;
    let (sa, _) = cx.quant(a);
    let (sb, _) = cx.quant(b);
    let (so, _) = cx.quant(y);
    let (ofm_scale, input_scaling) = match mode {
        ElementwiseMode::Mul => (mul_scale(cx, op, sa, sb, so)?, None),
        _ => {
            let (ofm_scale, scaling) = add_sub_scales(cx, op, sa, sb, so)?;
            (ofm_scale, Some(scaling))
        }
    };
    let activation = clamp(cx, op, activation, y, ofm.dtype)?;
    // onnxruntime-quantized models round the product once (`Requant::Single`).
    let round = if mode == ElementwiseMode::Mul && cx.graph.requant == Requant::Single {
        RoundMode::Natural
    } else {
        RoundMode::Dbl
    };
    cx.program.ops.push(
        NpuOp::new(
            op.name.clone(),
            NpuOpKind::Elementwise {
                mode,
                ifm2: Some(ifm2),
                reversed,
                input_scaling,
            },
            ifm,
            ofm,
        )
        .with_scale(ofm_scale)
        .with_ofm_round(round)
        .with_activation(activation),
    );
    Ok(())
}

/// OFM, IFM, IFM2 and the operand swap (`true`: IFM2 is the first input) of a binary operation
/// with numpy broadcasting, at any rank: [`direct`], else [`folded`].
pub(super) fn binary_operands(
    cx: &mut Lowering<'_>,
    op: &Op,
    a: TensorId,
    b: TensorId,
    y: TensorId,
) -> Result<(FeatureMap, FeatureMap, Operand2, bool)> {
    match direct(cx, op, a, b, y) {
        Ok(v) => Ok(v),
        Err(e @ Error::HardwareLimit { .. }) => folded(cx, op, a, b, y).map_err(|f| match f {
            Error::HardwareLimit { .. } => e,
            other => other,
        }),
        Err(e) => Err(e),
    }
}

/// OFM, IFM, IFM2 and the operand swap of tensors that map onto `[H, W, C]` directly
/// ([`Lowering::hwc`]: batch 1, rank <= 4).
fn direct(
    cx: &mut Lowering<'_>,
    op: &Op,
    a: TensorId,
    b: TensorId,
    y: TensorId,
) -> Result<(FeatureMap, FeatureMap, Operand2, bool)> {
    let g = cx.graph;
    let (at, bt, yt) = (&g.tensors[a], &g.tensors[b], &g.tensors[y]);
    let ofm = cx.fm(op, y)?;
    let a_shape = broadcast_hwc(cx, op, a, y)?;
    let b_shape = broadcast_hwc(cx, op, b, y)?;
    for (t, s) in [(at, a_shape), (bt, b_shape)] {
        if (0..3).any(|i| s[i] != ofm.shape[i] && s[i] != 1) {
            return Err(Lowering::invalid(
                op,
                format!(
                    "input '{}' {:?} does not broadcast to the output {:?}",
                    t.name, t.shape, yt.shape
                ),
            ));
        }
    }
    // IFM takes the OFM's shape; the other operand is IFM2 (broadcast or scalar).
    let a_scalar = scalar(cx, a);
    let b_scalar = scalar(cx, b);
    let (ifm_t, ifm2, reversed) = if b_scalar.is_some() && a_shape == ofm.shape {
        (a, operand2(cx, op, b, b_shape, b_scalar)?, false)
    } else if a_scalar.is_some() && b_shape == ofm.shape {
        (b, operand2(cx, op, a, a_shape, a_scalar)?, true)
    } else if a_shape == ofm.shape {
        (a, operand2(cx, op, b, b_shape, None)?, false)
    } else if b_shape == ofm.shape {
        (b, operand2(cx, op, a, a_shape, None)?, true)
    } else if let Some((k, other, other_shape, reversed)) =
        [(b, a, a_shape, true), (a, b, b_shape, false)]
            .into_iter()
            .find(|&(k, ..)| g.tensors[k].data.is_some())
            .filter(|_| ofm.elements() <= MAX_EXPANDED_CONSTANT)
    {
        // Both operands broadcast, one is a constant (LayerNormalization's `rsqrt(var) * gamma`):
        // the constant, expanded to the output's shape at compile time, is the IFM.
        let k_shape = if k == a { a_shape } else { b_shape };
        let ifm = expanded_constant(cx, op, k, k_shape, ofm.shape)?;
        let ifm2 = operand2(cx, op, other, other_shape, None)?;
        return Ok((ofm, ifm, ifm2, reversed));
    } else {
        return Err(cx.limit(
            op,
            format!(
                "both inputs are broadcast ({:?} and {:?} to {:?}); the NPU broadcasts only the second operand",
                at.shape, bt.shape, yt.shape
            ),
        ));
    };
    let ifm = cx.fm(op, ifm_t)?;
    Ok((ofm, ifm, ifm2, reversed))
}

/// [`direct`] for any rank and batch: output dimensions of size 1 are dropped and neighbouring
/// dimensions in which both operands are either full or broadcast are merged; at most three
/// groups must remain (`[H, W, C]`), the full operand is the IFM and the other the broadcast
/// IFM2. All three tensors must be dense NHWC (they are: such tensors never get bricks).
fn folded(
    cx: &mut Lowering<'_>,
    op: &Op,
    a: TensorId,
    b: TensorId,
    y: TensorId,
) -> Result<(FeatureMap, FeatureMap, Operand2, bool)> {
    let g = cx.graph;
    let os = g.tensors[y].shape.clone();
    let padded = |t: TensorId| -> Result<Vec<usize>> {
        let s = &g.tensors[t].shape;
        if s.len() > os.len() {
            return Err(Lowering::invalid(
                op,
                format!(
                    "input '{}' {s:?} has a higher rank than the output {os:?}",
                    g.tensors[t].name
                ),
            ));
        }
        let mut v = vec![1; os.len() - s.len()];
        v.extend_from_slice(s);
        Ok(v)
    };
    let (ap, bp) = (padded(a)?, padded(b)?);
    // (size, a is full, b is full) per group of merged output dimensions.
    let mut groups: Vec<(usize, bool, bool)> = Vec::new();
    for i in 0..os.len() {
        if os[i] == 1 {
            continue;
        }
        let (af, bf) = (ap[i] == os[i], bp[i] == os[i]);
        if (!af && ap[i] != 1) || (!bf && bp[i] != 1) {
            return Err(Lowering::invalid(
                op,
                format!("inputs {ap:?} and {bp:?} do not broadcast to the output {os:?}"),
            ));
        }
        match groups.last_mut() {
            Some(last) if last.1 == af && last.2 == bf => last.0 = last.0.saturating_mul(os[i]),
            _ => groups.push((os[i], af, bf)),
        }
    }
    if groups.len() > 3 {
        return Err(cx.limit(
            op,
            format!(
                "inputs {ap:?} and {bp:?} broadcast to {os:?} in {} alternating groups of \
                 dimensions; a feature map has three",
                groups.len()
            ),
        ));
    }
    let (mut o3, mut a3, mut b3) = ([1usize; 3], [1usize; 3], [1usize; 3]);
    for (k, &(n, af, bf)) in groups.iter().rev().enumerate() {
        o3[2 - k] = n;
        a3[2 - k] = if af { n } else { 1 };
        b3[2 - k] = if bf { n } else { 1 };
    }
    if o3.iter().any(|&d| d > 65536) {
        return Err(cx.limit(
            op,
            format!("folded output {o3:?} has a dimension above 65536"),
        ));
    }
    let (ifm_t, ifm2_t, ifm2_shape, reversed) = if a3 == o3 {
        (a, b, b3, false)
    } else if b3 == o3 {
        (b, a, a3, true)
    } else {
        return Err(cx.limit(
            op,
            "both inputs are broadcast; the NPU broadcasts only the second operand",
        ));
    };
    let ofm = dense_fm(cx, op, y, o3)?;
    let ifm = dense_fm(cx, op, ifm_t, o3)?;
    let ifm2 = match scalar(cx, ifm2_t) {
        Some(value) => Operand2::Scalar {
            value,
            zero_point: cx.quant(ifm2_t).1,
        },
        None => Operand2::Tensor(dense_fm(cx, op, ifm2_t, ifm2_shape)?),
    };
    Ok((ofm, ifm, ifm2, reversed))
}

/// Tensor `t` viewed as the `[H, W, C]` box `shape` (same element count), if it is stored as a
/// dense NHWC block.
fn dense_fm(cx: &mut Lowering<'_>, op: &Op, t: TensorId, shape: [usize; 3]) -> Result<FeatureMap> {
    let dtype = cx.elem_type(op, t)?;
    let (_, zero_point) = cx.quant(t);
    let p = cx.place(t);
    let tensor = &cx.graph.tensors[t];
    let e = tensor.dtype.size();
    let s = &tensor.shape;
    let c = s.last().copied().unwrap_or(1);
    let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
    let dense = p.layout == Layout::Nhwc && p.strides == [w * c * e, c * e, e];
    if !dense || shape.iter().product::<usize>() != tensor.elements() {
        return Err(cx.limit(
            op,
            format!("tensor '{}' {:?} is not a dense NHWC block", tensor.name, s),
        ));
    }
    Ok(FeatureMap {
        offset: p.offset,
        ..FeatureMap::nhwc(p.buffer, shape, dtype, zero_point)
    })
}

/// Largest output (elements) for which a broadcast constant operand is expanded at compile time.
const MAX_EXPANDED_CONSTANT: usize = 64 * 1024;

/// Constant `t` (viewed as `shape`, dimensions of size 1 broadcast) expanded to `to` as a new
/// read-only feature map with `t`'s zero point.
fn expanded_constant(
    cx: &mut Lowering<'_>,
    op: &Op,
    t: TensorId,
    shape: [usize; 3],
    to: [usize; 3],
) -> Result<FeatureMap> {
    let tensor = &cx.graph.tensors[t];
    let e = tensor.dtype.size();
    let data = tensor
        .data
        .as_ref()
        .filter(|d| d.len() == shape.iter().product::<usize>() * e)
        .ok_or_else(|| {
            Lowering::invalid(
                op,
                format!("constant '{}' has no data of its shape", tensor.name),
            )
        })?;
    let dtype = cx.elem_type(op, t)?;
    let (_, zero_point) = cx.quant(t);
    let at = |d: usize, i: usize| if shape[d] == 1 { 0 } else { i };
    let mut bytes = Vec::with_capacity(to.iter().product::<usize>() * e);
    for y in 0..to[0] {
        for x in 0..to[1] {
            for c in 0..to[2] {
                let i = (at(0, y) * shape[1] + at(1, x)) * shape[2] + at(2, c);
                bytes.extend_from_slice(&data[i * e..(i + 1) * e]);
            }
        }
    }
    let name = format!("{}/{} expanded", op.name, tensor.name);
    let buffer = cx.const_buffer(name, bytes);
    Ok(FeatureMap::nhwc(buffer, to, dtype, zero_point))
}

/// `[H, W, C]` of input `t` broadcast against output `y`: `t`'s shape aligned to the right of
/// `y`'s rank (numpy rules), then mapped like [`Lowering::hwc`] maps `y`.
pub(super) fn broadcast_hwc(
    cx: &Lowering<'_>,
    op: &Op,
    t: TensorId,
    y: TensorId,
) -> Result<[usize; 3]> {
    let g = cx.graph;
    let (ts, ys) = (&g.tensors[t].shape, &g.tensors[y].shape);
    if ts.len() > ys.len() {
        return Err(Lowering::invalid(
            op,
            format!(
                "input '{}' {:?} has a higher rank than the output {:?}",
                g.tensors[t].name, ts, ys
            ),
        ));
    }
    let mut padded = vec![1usize; ys.len() - ts.len()];
    padded.extend_from_slice(ts);
    let r = padded.len();
    let hwc = match r {
        0 => [1, 1, 1],
        1 => [1, 1, padded[0]],
        2 => [1, padded[0], padded[1]],
        _ => {
            // Leading dimensions beyond H, W, C must be 1 (the output's are, see `hwc`).
            if padded[..r - 3].iter().any(|&d| d != 1) {
                return Err(cx.limit(
                    op,
                    format!(
                        "input '{}' {:?} has a batch dimension",
                        g.tensors[t].name, ts
                    ),
                ));
            }
            [padded[r - 3], padded[r - 2], padded[r - 1]]
        }
    };
    Ok(hwc)
}

/// The raw value of `t` if it is a single-element integer constant of at most 16 bits.
pub(super) fn scalar(cx: &Lowering<'_>, t: TensorId) -> Option<i32> {
    let tensor = &cx.graph.tensors[t];
    if tensor.elements() != 1 {
        return None;
    }
    match tensor.dtype {
        DType::I8 => tensor.data_i8()?.first().map(|&v| i32::from(v)),
        DType::U8 => tensor.data_u8()?.first().map(|&v| i32::from(v)),
        DType::I16 => {
            let d = tensor.data.as_ref()?;
            Some(i32::from(i16::from_le_bytes([*d.first()?, *d.get(1)?])))
        }
        _ => None,
    }
}

/// The second operand: a scalar register value, or `t`'s feature map viewed with its broadcast
/// shape (dimensions of size 1 are broadcast by the hardware).
pub(super) fn operand2(
    cx: &mut Lowering<'_>,
    op: &Op,
    t: TensorId,
    shape: [usize; 3],
    scalar: Option<i32>,
) -> Result<Operand2> {
    let (_, zero_point) = cx.quant(t);
    if let Some(value) = scalar {
        return Ok(Operand2::Scalar { value, zero_point });
    }
    let fm = cx.fm(op, t)?;
    if fm.elements() != shape.iter().product::<usize>() {
        return Err(Lowering::invalid(
            op,
            format!("internal: operand {:?} viewed as {shape:?}", fm.shape),
        ));
    }
    // Right-aligned shapes give the same [H, W, C] as the tensor's own; re-view if not.
    if fm.shape == shape {
        return Ok(Operand2::Tensor(fm));
    }
    let view = super::fmap::view(&fm, shape).ok_or_else(|| {
        cx.limit(
            op,
            format!(
                "broadcast operand '{}' is a strided slice",
                cx.graph.tensors[t].name
            ),
        )
    })?;
    Ok(Operand2::Tensor(view))
}

/// OFM_SCALE of Mul: TFLite's float32 product and quotient, then QuantizeMultiplier.
fn mul_scale(cx: &Lowering<'_>, op: &Op, sa: f32, sb: f32, so: f32) -> Result<Scale> {
    let real = f64::from(sa * sb / so);
    ofm_scale(real).ok_or_else(|| {
        cx.limit(
            op,
            format!("output rescale {real} is outside the OFM_SCALE range"),
        )
    })
}

/// OFM_SCALE and input scaling of 8-bit Add/Sub (see the module documentation).
fn add_sub_scales(
    cx: &Lowering<'_>,
    op: &Op,
    sa: f32,
    sb: f32,
    so: f32,
) -> Result<(Scale, InputScaling)> {
    let bad = |what: &str, v: f64| {
        cx.limit(
            op,
            format!("{what} rescale {v} is outside the scale registers' range"),
        )
    };
    let twice_max = 2.0 * f64::from(sa.max(sb));
    let real_a = f64::from(sa) / twice_max;
    let real_b = f64::from(sb) / twice_max;
    let real_out = twice_max / (f64::from(1i32 << LEFT_SHIFT_8BIT) * f64::from(so));
    if !(real_a.is_finite() && real_b.is_finite() && real_a > 0.0 && real_b > 0.0) {
        return Err(bad("input", real_a.min(real_b)));
    }
    // The smaller-scale input is the scaled operand (operand A on ties).
    let (scaled_real, mode) = if sa <= sb {
        (real_a, IfmScaleMode::Opa32)
    } else {
        (real_b, IfmScaleMode::Opb32)
    };
    let (m, e) = quantize_multiplier(scaled_real);
    // Hardware: (x * m) >> shift with DBL rounding at bit 31 - 20, i.e. TFLite's
    // MultiplyByQuantizedMultiplier((x << 20), m, e).
    let shift = 31 - LEFT_SHIFT_8BIT - e;
    if m <= 0 || !(0..=63).contains(&shift) {
        return Err(bad("input", scaled_real));
    }
    let out = ofm_scale(real_out).ok_or_else(|| bad("output", real_out))?;
    Ok((
        out,
        InputScaling {
            mode,
            opa: Scale {
                scale: m as u32,
                shift: shift as u8,
            },
            opb: 0,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::npu_op::NpuOpKind;
    use npu_rt::ethos_u::config::ETHOS_U55_128;
    use npu_rt::ethos_u::regs::fields::RoundMode;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures")
            .join(name)
            .join(format!("{name}.tflite"))
    }

    fn lowered(name: &str) -> crate::ethos_u::npu_op::Program {
        let g = crate::import::load(&fixture(name)).expect("fixture loads");
        super::super::lower(&g, &ETHOS_U55_128).expect("fixture lowers")
    }

    #[test]
    fn op_add_matches_vela_registers() {
        // fixtures/op_add/vela/ethos-u55-128/registers.txt: OPA_SCALE shift 12 scale 2147422445,
        // OFM_SCALE shift 50 scale 1081143008, IFM_PRECISION scale_mode OPA_32, IFM zp -1,
        // IFM2 zp 0, OFM zp -1.
        let p = lowered("op_add");
        assert_eq!(p.ops.len(), 1);
        let o = &p.ops[0];
        let NpuOpKind::Elementwise {
            mode,
            ifm2: Some(Operand2::Tensor(ifm2)),
            reversed,
            input_scaling: Some(s),
        } = &o.kind
        else {
            panic!("not an elementwise add with a tensor operand: {:?}", o.kind);
        };
        assert_eq!(*mode, ElementwiseMode::Add);
        assert!(!reversed);
        assert_eq!(s.mode, IfmScaleMode::Opa32);
        assert_eq!(
            s.opa,
            Scale {
                scale: 2147422445,
                shift: 12
            }
        );
        assert_eq!(
            o.ofm_scale,
            Some(Scale {
                scale: 1081143008,
                shift: 50
            })
        );
        assert_eq!(o.ifm.zero_point, -1);
        assert_eq!(ifm2.zero_point, 0);
        assert_eq!(o.ofm.zero_point, -1);
        assert_eq!(o.ofm_round, RoundMode::Dbl);
        assert_eq!((o.activation.min, o.activation.max), (-128, 127));
    }

    #[test]
    fn op_mul_matches_vela_float_scale() {
        // Vela (float32 like TFLite's mul.cc): OFM_SCALE shift 37 scale 1086796928.
        let p = lowered("op_mul");
        assert_eq!(p.ops.len(), 1);
        let o = &p.ops[0];
        assert!(matches!(
            o.kind,
            NpuOpKind::Elementwise {
                mode: ElementwiseMode::Mul,
                input_scaling: None,
                ..
            }
        ));
        assert_eq!(
            o.ofm_scale,
            Some(Scale {
                scale: 1086796928,
                shift: 37
            })
        );
    }

    #[test]
    fn add_scales_replicate_tflite_for_unequal_and_equal_scales() {
        use crate::ir::Graph;
        let g = Graph::default();
        let accel = &ETHOS_U55_128;
        let cx = Lowering::new(&g, accel);
        let op = Op {
            name: "t".into(),
            kind: OpKind::Add {
                activation: crate::ir::Activation::None,
            },
            inputs: vec![],
            outputs: vec![],
        };
        // Second input scaled: b has the smaller scale -> OPB_32.
        let (out, s) = add_sub_scales(&cx, &op, 0.5, 0.125, 0.25).unwrap();
        assert_eq!(s.mode, IfmScaleMode::Opb32);
        // 0.125 / 1.0 = 0.125 = 0.5 * 2^-2 -> m = 2^30, e = -2, shift = 31 - 20 + 2 = 13.
        assert_eq!(
            s.opa,
            Scale {
                scale: 1 << 30,
                shift: 13
            }
        );
        // out = 1.0 / (2^20 * 0.25) = 2^-18 = 0.5 * 2^-17 -> shift 48.
        assert_eq!(
            out,
            Scale {
                scale: 1 << 30,
                shift: 48
            }
        );
        // Equal scales: operand A scaled by exactly 1/2, i.e. x << 19.
        let (_, s) = add_sub_scales(&cx, &op, 0.1, 0.1, 0.2).unwrap();
        assert_eq!(s.mode, IfmScaleMode::Opa32);
        assert_eq!(
            s.opa,
            Scale {
                scale: 1 << 30,
                shift: 11
            }
        );
    }
}
