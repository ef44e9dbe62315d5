//! Lowering of Abs, Neg, Maximum, Minimum and PRelu (docs/elem.md).
//!
//! - Maximum/Minimum: one ELEMENTWISE MAX/MIN (Vela's form). TFLite compares the stored values
//!   whatever the quantization, so every zero point is set to 0 and the OFM is not scaled: the
//!   hardware then selects raw values. Broadcasting and scalars as for Add/Sub/Mul.
//! - Abs (int8): one ELEMENTWISE ABS (Vela's form): `|x - zi|` scaled by `OFM_SCALE =
//!   QuantizeMultiplier(s_in / s_out)` (unit when the scales are equal, which is exact), plus
//!   `zo`: TFLite's `AbsEvalQuantized`.
//! - Neg (int8): TFLite negates the stored value and wraps (-128 stays -128), which no
//!   arithmetic mode gives; a 256-entry table does: a 1x1 AVERAGE pool with unit scale and the
//!   table `t[x] = wrap(-x)` in its output stage.
//! - PRelu (int8/uint8): four operations, each exact against `activations.cc`:
//!   1. `m = MIN(x, zx)` (raw values; `m - zx = min(x - zx, 0)`),
//!   2. `n = MUL(m, alpha)` with zero points `zx`, `za`, `zo` and `OFM_SCALE = s_x s_a / s_out`:
//!      the negative branch for `x < zx`, exactly `zo` otherwise,
//!   3. `p` = 1x1 AVERAGE pool of `x` with scale `s_x / s_out`, clamped below at `zo`: the
//!      positive branch for `x >= zx`, exactly `zo` otherwise,
//!   4. `y = n + p - zo`: an ADD whose operands are shifted left by 19 and whose result is
//!      scaled by exactly 2^-19 (no rounding happens), zero points `zo`.
//!
//! - SquaredDifference (int8): TFLite's integer kernel step by step in int32 (Vela's method):
//!   each input `(x - z) << 7` by a 1x1 AVERAGE pool with OFM scale 128 (exact), then its
//!   `MultiplyByQuantizedMultiplierSmallerThanOneExp` as an int32 MUL by the multiplier with
//!   OFM scale `(1, 31 - shift)` and DBL rounding (the larger-scale input's factor is exactly
//!   1/2: one pool with OFM scale 64 does both); SUB; MUL of the difference by itself; MUL by
//!   the output multiplier into the int8 output. Five or six operations (Vela: seven).
//!
//! For PRelu Vela uses MUL, MUL, MAX instead (`max(x, alpha x)`), which equals TFLite only for
//! `alpha <= 1` and up to the rounding of the two multipliers.

use npu_rt::ethos_u::regs::fields::{ElementwiseMode, IfmScaleMode, RoundMode};

use super::Lowering;
use super::elementwise::{binary_operands, broadcast_hwc, operand2, scalar};
use super::fmap::scratch_fm;
use super::op_builders::{clamp, nop, ofm_scale};
use crate::error::Result;
use crate::ethos_u::npu_op::{
    Activation as NpuActivation, ElemType, FeatureMap, InputScaling, NpuOp, NpuOpKind, Operand2,
    Scale,
};
use crate::ir::{Activation, DType, Op, OpKind, TensorId};

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    match op.kind {
        OpKind::Maximum => lower_minmax(cx, op, ElementwiseMode::Max),
        OpKind::Minimum => lower_minmax(cx, op, ElementwiseMode::Min),
        OpKind::Abs => lower_abs(cx, op),
        OpKind::Neg => lower_neg(cx, op),
        OpKind::Prelu => lower_prelu(cx, op),
        OpKind::SquaredDifference => lower_squared_difference(cx, op),
        _ => Err(cx.limit(op, "not lowered to the NPU; runs on the CPU")),
    }
}

fn two_in_one_out(op: &Op) -> Result<(TensorId, TensorId, TensorId)> {
    match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([a, b], [y]) => Ok((*a, *b, *y)),
        _ => Err(Lowering::invalid(op, "expects two inputs and one output")),
    }
}

/// The common type of `ts`, if it is one of `allowed`; a limit error otherwise.
fn one_type(cx: &Lowering<'_>, op: &Op, ts: &[TensorId], allowed: &[DType]) -> Result<DType> {
    let g = cx.graph;
    let d = g.tensors[ts[0]].dtype;
    if ts.iter().any(|&t| g.tensors[t].dtype != d) || !allowed.contains(&d) {
        let names: Vec<String> = ts
            .iter()
            .map(|&t| format!("'{}' {}", g.tensors[t].name, g.tensors[t].dtype))
            .collect();
        return Err(cx.limit(
            op,
            format!(
                "{} of {} is not lowered to the NPU (one type of {:?} needed)",
                op.kind.name(),
                names.join(", "),
                allowed
            ),
        ));
    }
    Ok(d)
}

/// A per-tensor quantization of `t`, or a limit error naming it.
fn per_tensor(cx: &Lowering<'_>, op: &Op, t: TensorId) -> Result<(f32, i32)> {
    let tensor = &cx.graph.tensors[t];
    match &tensor.quant {
        Some(q) if !q.is_per_channel() && q.scale().is_finite() && q.scale() > 0.0 => {
            Ok((q.scale(), q.zero_point()))
        }
        _ => Err(cx.limit(
            op,
            format!("tensor '{}' is not quantized per tensor", tensor.name),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn elementwise(
    name: &str,
    mode: ElementwiseMode,
    ifm: FeatureMap,
    ifm2: Option<Operand2>,
    reversed: bool,
    ofm: FeatureMap,
    scale: Option<Scale>,
    activation: NpuActivation,
) -> NpuOp {
    NpuOp::new(
        name,
        NpuOpKind::Elementwise {
            mode,
            ifm2,
            reversed,
            input_scaling: None,
        },
        ifm,
        ofm,
    )
    .with_ofm_scale(scale)
    .with_activation(activation)
}

fn lower_minmax(cx: &mut Lowering<'_>, op: &Op, mode: ElementwiseMode) -> Result<()> {
    let (a, b, y) = two_in_one_out(op)?;
    one_type(cx, op, &[a, b, y], &[DType::I8, DType::U8, DType::I16])?;
    let (mut ofm, mut ifm, mut ifm2, reversed) = binary_operands(cx, op, a, b, y)?;
    // Raw values: no zero points anywhere (see the module documentation).
    ifm.zero_point = 0;
    ofm.zero_point = 0;
    match &mut ifm2 {
        Operand2::Tensor(f) => f.zero_point = 0,
        Operand2::Scalar { zero_point, .. } => *zero_point = 0,
    }
    let act = NpuActivation::none(ofm.dtype);
    cx.program.ops.push(elementwise(
        &op.name,
        mode,
        ifm,
        Some(ifm2),
        reversed,
        ofm,
        None,
        act,
    ));
    Ok(())
}

fn single(op: &Op) -> Result<(TensorId, TensorId)> {
    match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => Ok((*x, *y)),
        _ => Err(Lowering::invalid(op, "expects one input and one output")),
    }
}

fn same_shape(cx: &mut Lowering<'_>, op: &Op, x: TensorId, y: TensorId) -> Result<()> {
    if cx.graph.tensors[x].shape != cx.graph.tensors[y].shape {
        return Err(Lowering::invalid(op, "input and output shapes differ"));
    }
    Ok(())
}

fn lower_abs(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (x, y) = single(op)?;
    one_type(cx, op, &[x, y], &[DType::I8])?;
    same_shape(cx, op, x, y)?;
    let (si, _) = per_tensor(cx, op, x)?;
    let (so, _) = per_tensor(cx, op, y)?;
    // elementwise.cc: no rescale for equal scales (the unit scale is exact), else
    // QuantizeMultiplier of the single-precision quotient.
    let real = if si == so { 1.0 } else { f64::from(si / so) };
    let scale = ofm_scale(real)
        .filter(|s| s.scale != 0)
        .ok_or_else(|| cx.limit(op, format!("output rescale {real} is outside OFM_SCALE")))?;
    let ifm = cx.fm(op, x)?;
    let ofm = cx.fm(op, y)?;
    let act = NpuActivation::none(ofm.dtype);
    cx.program.ops.push(elementwise(
        &op.name,
        ElementwiseMode::Abs,
        ifm,
        None,
        false,
        ofm,
        Some(scale),
        act,
    ));
    Ok(())
}

/// The int8 table of TFLite's NEG: entry `i` (input `i - 128`) holds `-(i - 128)` wrapped.
pub(super) fn neg_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    for (i, e) in t.iter_mut().enumerate() {
        *e = (i as i32 - 128).wrapping_neg() as i8 as u8;
    }
    t
}

fn lower_neg(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (x, y) = single(op)?;
    one_type(cx, op, &[x, y], &[DType::I8])?;
    same_shape(cx, op, x, y)?;
    let mut ifm = cx.fm(op, x)?;
    let mut ofm = cx.fm(op, y)?;
    // Raw values in, the table's raw values out.
    ifm.zero_point = 0;
    ofm.zero_point = 0;
    let lut = cx.const_buffer(format!("{}_neg_table", op.name), neg_table().to_vec());
    let mut act = NpuActivation::none(ofm.dtype);
    act.lut = Some(lut);
    let unit = ofm_scale(1.0).ok_or_else(|| Lowering::invalid(op, "internal: unit scale"))?;
    cx.program
        .ops
        .push(nop(&op.name, ifm, ofm, unit, RoundMode::Dbl, act));
    Ok(())
}

/// The 256-entry table of a PRelu whose alpha is one constant value (every stored alpha
/// equal): the reference interpreter's PRelu of every input value with that alpha (entry `i`
/// is input `i - 128` for int8, `i` for uint8). `None` when alpha varies or is not constant.
fn uniform_alpha_table(
    cx: &Lowering<'_>,
    op: &Op,
    x: TensorId,
    alpha: TensorId,
    y: TensorId,
) -> Option<[u8; 256]> {
    let a = cx.graph.tensors[alpha].data.as_ref()?;
    let first = *a.first()?;
    if a.iter().any(|&b| b != first) {
        return None;
    }
    alpha_table(cx, op, x, alpha, y, first)
}

/// The reference interpreter's PRelu of every input value with the stored alpha byte `value`
/// (the order of [`uniform_alpha_table`]).
fn alpha_table(
    cx: &Lowering<'_>,
    op: &Op,
    x: TensorId,
    alpha: TensorId,
    y: TensorId,
    value: u8,
) -> Option<[u8; 256]> {
    use crate::ir::{Graph, Tensor};
    let g = cx.graph;
    let mut mini = Graph {
        name: "prelu".into(),
        ..Graph::default()
    };
    let t = |src: &Tensor, shape: Vec<usize>, data: Option<Vec<u8>>| Tensor {
        name: src.name.clone(),
        shape,
        dtype: src.dtype,
        quant: src.quant.clone(),
        data,
    };
    let tx = mini.add_tensor(t(&g.tensors[x], vec![256], None));
    let ta = mini.add_tensor(t(&g.tensors[alpha], vec![1], Some(vec![value])));
    let ty = mini.add_tensor(t(&g.tensors[y], vec![256], None));
    mini.inputs.push(tx);
    mini.outputs.push(ty);
    mini.ops.push(Op {
        name: op.name.clone(),
        kind: OpKind::Prelu,
        inputs: vec![tx, ta],
        outputs: vec![ty],
    });
    crate::reference::act_fn::tabulate(&mini)
}

fn lower_prelu(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let (x, alpha, y) = two_in_one_out(op)?;
    one_type(cx, op, &[x, alpha, y], &[DType::I8, DType::U8])?;
    same_shape(cx, op, x, y)?;
    if let Some(table) = uniform_alpha_table(cx, op, x, alpha, y) {
        // One alpha for every element (PyTorch's default `nn.PReLU()`): a function of the
        // 8-bit input alone, so one table lookup, the reference's outputs for all 256 inputs.
        let ifm = cx.fm(op, x)?;
        let ofm = cx.fm(op, y)?;
        let lut = cx.const_buffer(format!("{}/lut", op.name), table.to_vec());
        cx.program
            .ops
            .push(super::op_builders::lookup(&op.name, ifm, ofm, lut));
        return Ok(());
    }
    let (sx, zx) = per_tensor(cx, op, x)?;
    let (sa, _) = per_tensor(cx, op, alpha)?;
    let (so, zo) = per_tensor(cx, op, y)?;
    let bad = |cx: &Lowering<'_>, what: &str, v: f32| {
        cx.limit(op, format!("{what} rescale {v} is outside OFM_SCALE"))
    };
    // activations.cc: both factors in single precision.
    let pos = ofm_scale(f64::from(sx / so)).ok_or_else(|| bad(cx, "positive", sx / so))?;
    let neg_real = sx * sa / so;
    let neg = ofm_scale(f64::from(neg_real)).ok_or_else(|| bad(cx, "negative", neg_real))?;
    let xfm = cx.fm(op, x)?;
    let ofm = cx.fm(op, y)?;
    let shape = ofm.shape;
    let et: ElemType = ofm.dtype;
    let full = NpuActivation::none(et);
    let a_shape = broadcast_hwc(cx, op, alpha, y)?;
    if (0..3).any(|i| a_shape[i] != shape[i] && a_shape[i] != 1) {
        return Err(Lowering::invalid(
            op,
            format!(
                "alpha {:?} does not broadcast to the input {:?}",
                cx.graph.tensors[alpha].shape, cx.graph.tensors[x].shape
            ),
        ));
    }
    if max_form_is_exact(cx, op, (x, alpha, y), (zx, zo), (pos, neg)) {
        return lower_prelu_max(cx, op, (xfm, alpha, a_shape, ofm), (pos, neg));
    }
    // 1. m = MIN(x, zx) on raw values (kept in x's quantization).
    let mut m = scratch_fm(cx, format!("{}_min", op.name), shape, et);
    m.zero_point = zx;
    let mut raw_x = xfm.clone();
    raw_x.zero_point = 0;
    let mut raw_m = m.clone();
    raw_m.zero_point = 0;
    cx.program.ops.push(elementwise(
        &format!("{}_min", op.name),
        ElementwiseMode::Min,
        raw_x,
        Some(Operand2::Scalar {
            value: zx,
            zero_point: 0,
        }),
        false,
        raw_m,
        None,
        full.clone(),
    ));
    // 2. n = MUL(m, alpha) into the output quantization.
    let n = prelu_negative(cx, op, m, (alpha, a_shape), zo, neg)?;
    // 3. p = x rescaled to the output, clamped below at zo.
    let mut p = scratch_fm(cx, format!("{}_pos", op.name), shape, et);
    p.zero_point = zo;
    let relu = clamp(cx, op, Activation::Relu, y, et)?;
    cx.program.ops.push(nop(
        &format!("{}_pos", op.name),
        xfm,
        p.clone(),
        pos,
        RoundMode::Dbl,
        relu,
    ));
    // 4. y = n + p - zo, exactly: both operands << 19 (OPA scaled by exactly 1/2 at the
    // 20-bit point), the sum scaled by 2^-19.
    let exact = ofm_scale(2f64.powi(-19)).ok_or_else(|| Lowering::invalid(op, "internal"))?;
    cx.program.ops.push(
        NpuOp::new(
            op.name.clone(),
            NpuOpKind::Elementwise {
                mode: ElementwiseMode::Add,
                ifm2: Some(Operand2::Tensor(p)),
                reversed: false,
                input_scaling: Some(InputScaling {
                    mode: IfmScaleMode::Opa32,
                    opa: Scale {
                        scale: 1 << 30,
                        shift: 11,
                    },
                    opb: 0,
                }),
            },
            n,
            ofm,
        )
        .with_scale(exact)
        .with_activation(full),
    );
    Ok(())
}

/// Whether Vela's three-operation PRelu, `MAX(MUL(x, alpha), MUL(x, 1))` with each product
/// scaled into the output (the negative and the positive branch's rescale), gives TFLite's
/// result for every input value and every stored alpha value: checked here against the
/// reference interpreter, 256 inputs per distinct alpha, with the NPU's arithmetic (product,
/// DBL-rounded OFM scale, zero point, clamp; MAX of the raw results). It holds for the usual
/// alphas in `[0, 1]` unless the two branches round across each other; alpha above 1 or
/// below 0 breaks it, and then the exact four-operation form is used. Needs a constant alpha.
fn max_form_is_exact(
    cx: &Lowering<'_>,
    op: &Op,
    (x, alpha, y): (TensorId, TensorId, TensorId),
    (zx, zo): (i32, i32),
    (pos, neg): (Scale, Scale),
) -> bool {
    use npu_rt::ethos_u::numerics::scale;
    let g = cx.graph;
    let Some(stored) = g.tensors[alpha].data.as_ref() else {
        return false;
    };
    let Some(q) = g.tensors[alpha].quant.as_ref() else {
        return false;
    };
    if q.zero_point.len() != 1 {
        return false;
    }
    let za = i64::from(q.zero_point[0]);
    let signed = g.tensors[x].dtype == DType::I8;
    let (lo, hi) = if signed { (-128i64, 127) } else { (0, 255) };
    let raw = |b: u8| {
        if signed {
            i64::from(b as i8)
        } else {
            i64::from(b)
        }
    };
    let branch = |v: i64, s: Scale| {
        (scale(v, s.scale, u32::from(s.shift), RoundMode::Dbl, 0) + i64::from(zo)).clamp(lo, hi)
    };
    let mut seen = [false; 256];
    for &b in stored {
        if std::mem::replace(&mut seen[usize::from(b)], true) {
            continue;
        }
        let Some(want) = alpha_table(cx, op, x, alpha, y, b) else {
            return false;
        };
        let a = raw(b) - za;
        for (i, &w) in want.iter().enumerate() {
            let v = if signed { i as i64 - 128 } else { i as i64 } - i64::from(zx);
            let got = branch(v * a, neg).max(branch(v, pos));
            if got != raw(w) {
                return false;
            }
        }
    }
    true
}

/// PRelu's negative branch, `MUL(ifm, alpha)` scaled by `neg` into a new feature map of the
/// output's shape and type with zero point `zo` (both forms: `ifm` is `MIN(x, zx)` in the exact
/// one, `x` itself in the max form).
fn prelu_negative(
    cx: &mut Lowering<'_>,
    op: &Op,
    ifm: FeatureMap,
    (alpha, a_shape): (TensorId, [usize; 3]),
    zo: i32,
    neg: Scale,
) -> Result<FeatureMap> {
    let (shape, et) = (ifm.shape, ifm.dtype);
    let a_scalar = scalar(cx, alpha);
    let alpha2 = operand2(cx, op, alpha, a_shape, a_scalar)?;
    let mut n = scratch_fm(cx, format!("{}_neg", op.name), shape, et);
    n.zero_point = zo;
    cx.program.ops.push(elementwise(
        &format!("{}_neg", op.name),
        ElementwiseMode::Mul,
        ifm,
        Some(alpha2),
        false,
        n.clone(),
        Some(neg),
        NpuActivation::none(et),
    ));
    Ok(n)
}

/// Vela's PRelu (see [`max_form_is_exact`]): `n = MUL(x, alpha)`, `p = MUL(x, 1)`, both into
/// the output quantization, then `y = MAX(n, p)` on raw values.
fn lower_prelu_max(
    cx: &mut Lowering<'_>,
    op: &Op,
    (xfm, alpha, a_shape, ofm): (FeatureMap, TensorId, [usize; 3], FeatureMap),
    (pos, neg): (Scale, Scale),
) -> Result<()> {
    let (shape, et) = (ofm.shape, ofm.dtype);
    let full = NpuActivation::none(et);
    let n = prelu_negative(cx, op, xfm.clone(), (alpha, a_shape), ofm.zero_point, neg)?;
    let mut p = scratch_fm(cx, format!("{}_pos", op.name), shape, et);
    p.zero_point = ofm.zero_point;
    cx.program.ops.push(elementwise(
        &format!("{}_pos", op.name),
        ElementwiseMode::Mul,
        xfm,
        Some(Operand2::Scalar {
            value: 1,
            zero_point: 0,
        }),
        false,
        p.clone(),
        Some(pos),
        full.clone(),
    ));
    let raw = |mut f: FeatureMap| {
        f.zero_point = 0;
        f
    };
    cx.program.ops.push(elementwise(
        &op.name,
        ElementwiseMode::Max,
        raw(n),
        Some(Operand2::Tensor(raw(p))),
        false,
        raw(ofm),
        None,
        full,
    ));
    Ok(())
}

/// `(x - z) << 7` rescaled by `r` (TFLite's `MultiplyByQuantizedMultiplierSmallerThanOneExp`)
/// into a new int32 tensor of `x`'s shape: one or two operations.
fn shifted_scaled(
    cx: &mut Lowering<'_>,
    op: &Op,
    x: FeatureMap,
    r: crate::reference::util::Rescale,
    tag: &str,
) -> Result<FeatureMap> {
    use super::fmap::const_i32;
    use super::op_builders::elementwise as elementwise_op;
    let name = op.name.as_str();
    let shape = x.shape;
    let exact_half = r.multiplier == 1 << 30 && r.shift == 0;
    let shifted = scratch_fm(cx, format!("{name}/{tag}"), shape, ElemType::I32);
    let unit_act = NpuActivation::none(ElemType::I32);
    let factor = if exact_half { 64 } else { 128 };
    cx.program.ops.push(nop(
        name,
        x,
        shifted.clone(),
        Scale {
            scale: factor,
            shift: 0,
        },
        RoundMode::Natural,
        unit_act,
    ));
    if exact_half {
        return Ok(shifted);
    }
    let shift = u8::try_from(31 - r.shift)
        .ok()
        .filter(|&s| s <= 63)
        .ok_or_else(|| cx.limit(op, format!("input rescale shift {} out of range", r.shift)))?;
    let m = const_i32(cx, format!("{name}/{tag}_multiplier"), r.multiplier);
    let scaled = scratch_fm(cx, format!("{name}/{tag}_scaled"), shape, ElemType::I32);
    cx.program.ops.push(elementwise_op(
        name,
        ElementwiseMode::Mul,
        shifted,
        Some(m),
        scaled.clone(),
        Scale { scale: 1, shift },
    ));
    Ok(scaled)
}

fn lower_squared_difference(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    use super::fmap::const_i32;
    use super::op_builders::elementwise as elementwise_op;
    use crate::reference::pairwise::{PairFn, Pairwise, Quantized};
    let (a, b, y) = two_in_one_out(op)?;
    one_type(cx, op, &[a, b, y], &[DType::I8])?;
    let p = Pairwise::new(cx.graph, op, PairFn::SquaredDifference)?;
    let Quantized::SquaredDifference {
        za,
        zb,
        left_shift: 7,
        in1,
        in2,
        out,
        ..
    } = p.q
    else {
        return Err(cx.limit(op, "unexpected SquaredDifference parameters"));
    };
    let (ofm, ifm, ifm2, reversed) = binary_operands(cx, op, a, b, y)?;
    // The square is symmetric: which input is the IFM only picks the rescale.
    let (r_ifm, (r_ifm2, z_ifm2)) = if reversed {
        (in2, (in1, za))
    } else {
        (in1, (in2, zb))
    };
    let name = op.name.clone();
    let lhs = shifted_scaled(cx, op, ifm, r_ifm, "lhs")?;
    let rhs = match ifm2 {
        Operand2::Tensor(f) => shifted_scaled(cx, op, f, r_ifm2, "rhs")?,
        Operand2::Scalar { value, .. } => {
            // A constant: TFLite's arithmetic done here, broadcast as an int32 tensor.
            let v = r_ifm2.apply((value - z_ifm2) << 7);
            const_i32(cx, format!("{name}/rhs"), v)
        }
    };
    let diff = scratch_fm(cx, format!("{name}/diff"), ofm.shape, ElemType::I32);
    cx.program.ops.push(elementwise_op(
        &name,
        ElementwiseMode::Sub,
        lhs,
        Some(rhs),
        diff.clone(),
        Scale::UNIT,
    ));
    let square = scratch_fm(cx, format!("{name}/square"), ofm.shape, ElemType::I32);
    cx.program.ops.push(elementwise_op(
        &name,
        ElementwiseMode::Mul,
        diff.clone(),
        Some(diff),
        square.clone(),
        Scale::UNIT,
    ));
    let shift = u8::try_from(31 - out.shift)
        .ok()
        .filter(|&s| s <= 63)
        .ok_or_else(|| {
            cx.limit(
                op,
                format!("output rescale shift {} out of range", out.shift),
            )
        })?;
    let m = const_i32(cx, format!("{name}/out_multiplier"), out.multiplier);
    let mut last = elementwise_op(
        &name,
        ElementwiseMode::Mul,
        square,
        Some(m),
        ofm,
        Scale { scale: 1, shift },
    );
    last.activation = clamp(cx, op, Activation::None, y, last.ofm.dtype)?;
    cx.program.ops.push(last);
    Ok(())
}
