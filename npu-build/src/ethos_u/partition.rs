//! Graph partitioning: which IR operators run on the NPU and which on the CPU, and the CPU
//! operations ([`npu_rt::cpu::Op`]) of the latter with every parameter decided.
//!
//! The rule: an operator goes to the CPU when the NPU lowering refuses it for a hardware reason
//! ([`Error::HardwareLimit`] or [`Error::UnsupportedOp`]), when it converts from or to float
//! (the NPU has no float), or when the compile options force it there. Everything else stays on
//! the NPU, so NPU segments are as long as the graph allows. Each CPU operator keeps its reason
//! (the lowering's error text) for reports and for the `cpu_fallback = false` error.
//!
//! The CPU parameters follow the reference interpreter's preparation of the same operator
//! (`crate::reference`), so a CPU kernel computes what the reference computes, bit for bit.

use npu_rt::cpu::{BinaryKind, BinaryParams, Buf, Elem, MAX_RANK, Op as CpuOp, PoolParams};

use crate::error::{Error, Result};
use crate::ir::quant::{activation_range, quantize_multiplier};
use crate::ir::{Activation, DType, Graph, Op, OpKind, PoolAttrs, TensorId};

/// Where one IR operator runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpAssignment {
    /// Node name.
    pub node: String,
    /// Operator name (`Conv2D`, `Softmax`, ...).
    pub op: String,
    /// `None`: the NPU. `Some(reason)`: the CPU, and why.
    pub cpu_reason: Option<String>,
}

/// A CPU step of a compiled model.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuStep {
    /// Node name of the IR operator.
    pub node: String,
    /// Operator name of the IR operator.
    pub op: String,
    /// Why it runs on the CPU.
    pub reason: String,
    /// The operation with its operands and parameters.
    pub kernel: CpuOp,
}

impl CpuStep {
    /// The encoded operation, as the generated code passes it to [`npu_rt::cpu::run`].
    pub fn words(&self) -> Vec<u32> {
        let (w, n) = self.kernel.encode();
        w[..n].to_vec()
    }
}

/// Reason of operators that convert between float and integers.
pub const FLOAT_REASON: &str = "float conversion: the NPU has no floating point";
/// Reason of operators the compile options put on the CPU.
pub const FORCED_REASON: &str = "forced to the CPU by the compile options";

/// Whether `op` converts from or to float (always a CPU operator).
pub fn is_float_boundary(g: &Graph, op: &Op) -> bool {
    op.inputs
        .iter()
        .chain(&op.outputs)
        .any(|&t| g.tensors.get(t).is_some_and(|x| x.dtype == DType::F32))
}

/// Whether `pattern` (a node name or an operator name such as `Softmax`) selects `op`.
pub fn matches(op: &Op, pattern: &str) -> bool {
    op.name == pattern || op.kind.name().eq_ignore_ascii_case(pattern)
}

/// Whether the lowering's error `e` means "the NPU cannot", so the CPU may take the operator.
pub fn is_npu_refusal(e: &Error) -> bool {
    matches!(e, Error::HardwareLimit { .. } | Error::UnsupportedOp { .. })
}

/// The error of `cpu_fallback = false` for a graph with CPU operators: each one with its reason.
pub fn fallback_disabled_error(target: &str, cpu: &[OpAssignment]) -> Error {
    let list: Vec<String> = cpu
        .iter()
        .filter_map(|a| {
            a.cpu_reason
                .as_ref()
                .map(|r| format!("  node '{}' ({}): {r}", a.node, a.op))
        })
        .collect();
    Error::Other(format!(
        "CPU fallback is disabled, but {} operator(s) cannot run on the NPU ({target}):\n{}",
        list.len(),
        list.join("\n")
    ))
}

fn node_err(op: &Op, detail: impl Into<String>) -> Error {
    Error::InvalidNode {
        node: op.name.clone(),
        op: op.kind.name().into(),
        detail: detail.into(),
    }
}

fn elem(op: &Op, g: &Graph, t: TensorId) -> Result<Elem> {
    match g.tensors[t].dtype {
        DType::I8 => Ok(Elem::I8),
        DType::U8 => Ok(Elem::U8),
        DType::I16 => Ok(Elem::I16),
        DType::I32 => Ok(Elem::I32),
        DType::F32 => Ok(Elem::F32),
        other => Err(node_err(
            op,
            format!(
                "tensor '{}' is {other}; the CPU kernels take i8, u8, i16, i32 and f32",
                g.tensors[t].name
            ),
        )),
    }
}

fn per_tensor(op: &Op, g: &Graph, t: TensorId) -> Result<(f32, i32)> {
    let x = &g.tensors[t];
    match &x.quant {
        Some(q) if q.scale.len() == 1 && q.zero_point.len() == 1 => {
            let s = q.scale[0];
            if !(s.is_finite() && s > 0.0) {
                return Err(node_err(
                    op,
                    format!("tensor '{}' has an invalid scale {s}", x.name),
                ));
            }
            Ok((s, q.zero_point[0]))
        }
        _ => Err(node_err(
            op,
            format!("tensor '{}' needs per-tensor quantization", x.name),
        )),
    }
}

/// TFLite's `QuantizeMultiplier` of `real`, refusing what 32-bit requantization cannot hold (the
/// reference interpreter's rule).
fn rescale(op: &Op, real: f64) -> Result<(i32, i32)> {
    if !(real.is_finite() && real >= 0.0) {
        return Err(node_err(op, format!("rescale factor {real} is invalid")));
    }
    let (m, shift) = quantize_multiplier(real);
    if shift > 30 {
        return Err(node_err(
            op,
            format!("rescale factor {real} is too large for 32-bit requantization"),
        ));
    }
    Ok((m, shift))
}

fn count(op: &Op, g: &Graph, t: TensorId) -> Result<u32> {
    u32::try_from(g.tensors[t].elements())
        .map_err(|_| node_err(op, "tensor too large for a CPU kernel"))
}

fn one_in_one_out(op: &Op, g: &Graph) -> Result<(TensorId, TensorId)> {
    match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) if g.tensors[*x].elements() == g.tensors[*y].elements() => Ok((*x, *y)),
        _ => Err(node_err(
            op,
            "expects one input and one output of the same size",
        )),
    }
}

/// The CPU operation of IR operator `op`; `at(t)` gives the operand of tensor `t` (arena or
/// read-only region). Fails for operators without a CPU kernel.
pub fn cpu_kernel(
    g: &Graph,
    op: &Op,
    at: &mut dyn FnMut(TensorId) -> Result<Buf>,
) -> Result<CpuOp> {
    match &op.kind {
        OpKind::Reshape => {
            let (x, y) = one_in_one_out(op, g)?;
            let bytes = u32::try_from(g.tensors[y].byte_size())
                .map_err(|_| node_err(op, "tensor too large for a CPU kernel"))?;
            Ok(CpuOp::Copy {
                x: at(x)?,
                y: at(y)?,
                bytes,
            })
        }
        OpKind::Quantize => {
            let (x, y) = one_in_one_out(op, g)?;
            let (from, to) = (elem(op, g, x)?, elem(op, g, y)?);
            let Some((lo, hi)) = to.int_range().filter(|_| to != Elem::I32) else {
                return Err(node_err(op, "quantizing to a type other than i8, u8, i16"));
            };
            let (so, zo) = per_tensor(op, g, y)?;
            let len = count(op, g, y)?;
            if from == Elem::F32 {
                return Ok(CpuOp::Quantize {
                    x: at(x)?,
                    y: at(y)?,
                    len,
                    to,
                    scale: so,
                    zero_point: zo,
                });
            }
            if from == Elem::I32 {
                return Err(node_err(op, "requantizing i32 has no CPU kernel"));
            }
            let (si, zi) = per_tensor(op, g, x)?;
            let (multiplier, shift) = rescale(op, f64::from(si) / f64::from(so))?;
            Ok(CpuOp::Requantize {
                x: at(x)?,
                y: at(y)?,
                len,
                from,
                to,
                in_zp: zi,
                out_zp: zo,
                multiplier,
                shift,
                lo,
                hi,
            })
        }
        OpKind::Activation(act) => activation(g, op, *act, at),
        OpKind::Dequantize => {
            let (x, y) = one_in_one_out(op, g)?;
            let from = elem(op, g, x)?;
            if matches!(from, Elem::F32 | Elem::I32) || g.tensors[y].dtype != DType::F32 {
                return Err(node_err(op, "dequantizes 8/16-bit integers to f32 only"));
            }
            let (s, zp) = per_tensor(op, g, x)?;
            Ok(CpuOp::Dequantize {
                x: at(x)?,
                y: at(y)?,
                len: count(op, g, x)?,
                from,
                scale: f64::from(s),
                zero_point: zp,
            })
        }
        OpKind::Transpose { perm } => {
            let (x, y) = one_in_one_out(op, g)?;
            let xs = &g.tensors[x].shape;
            if xs.len() > MAX_RANK || perm.len() != xs.len() || xs.is_empty() {
                return Err(node_err(
                    op,
                    format!(
                        "transpose of rank {} (the CPU kernel takes 1 to {MAX_RANK})",
                        xs.len()
                    ),
                ));
            }
            let mut shape = [1u32; MAX_RANK];
            let mut p = [0u32; MAX_RANK];
            for (i, (&d, &q)) in xs.iter().zip(perm).enumerate() {
                shape[i] = u32::try_from(d).map_err(|_| node_err(op, "dimension too large"))?;
                p[i] = u32::try_from(q).map_err(|_| node_err(op, "bad permutation"))?;
            }
            let want: Vec<usize> = perm
                .iter()
                .map(|&q| xs.get(q).copied().unwrap_or(0))
                .collect();
            if want != g.tensors[y].shape {
                return Err(node_err(op, "output shape is not the permuted input shape"));
            }
            Ok(CpuOp::Transpose {
                x: at(x)?,
                y: at(y)?,
                elem_bytes: g.tensors[x].dtype.size() as u32,
                rank: xs.len() as u32,
                shape,
                perm: p,
            })
        }
        OpKind::Softmax { beta } => softmax(g, op, *beta, at),
        OpKind::Add { activation } => binary(g, op, BinaryKind::Add, *activation, at),
        OpKind::Sub { activation } => binary(g, op, BinaryKind::Sub, *activation, at),
        OpKind::Mul { activation } => binary(g, op, BinaryKind::Mul, *activation, at),
        OpKind::MaxPool(attrs) => pool(g, op, attrs, true, at),
        OpKind::AvgPool(attrs) => pool(g, op, attrs, false, at),
        other => Err(node_err(
            op,
            format!("{} has no CPU kernel yet", other.name()),
        )),
    }
}

fn activation(
    g: &Graph,
    op: &Op,
    act: Activation,
    at: &mut dyn FnMut(TensorId) -> Result<Buf>,
) -> Result<CpuOp> {
    let (x, y) = one_in_one_out(op, g)?;
    let (from, to) = (elem(op, g, x)?, elem(op, g, y)?);
    if from != to || matches!(from, Elem::F32 | Elem::I32) {
        return Err(node_err(op, "the CPU activation takes 8/16-bit integers"));
    }
    let (si, zi) = per_tensor(op, g, x)?;
    let (so, zo) = per_tensor(op, g, y)?;
    let (lo, hi) = activation_range(act, so, zo, g.tensors[y].dtype);
    let (multiplier, shift) = rescale(op, f64::from(si) / f64::from(so))?;
    Ok(CpuOp::Requantize {
        x: at(x)?,
        y: at(y)?,
        len: count(op, g, y)?,
        from,
        to,
        in_zp: zi,
        out_zp: zo,
        multiplier,
        shift,
        lo,
        hi: hi.max(lo),
    })
}

fn softmax(
    g: &Graph,
    op: &Op,
    beta: f32,
    at: &mut dyn FnMut(TensorId) -> Result<Buf>,
) -> Result<CpuOp> {
    let (x, y) = one_in_one_out(op, g)?;
    let (from, to) = (elem(op, g, x)?, elem(op, g, y)?);
    if !matches!(from, Elem::I8 | Elem::U8) || !matches!(to, Elem::I8 | Elem::U8) {
        return Err(node_err(op, "the CPU softmax takes 8-bit integers"));
    }
    let shape = &g.tensors[x].shape;
    let depth = shape.last().copied().unwrap_or(1);
    let len = g.tensors[x].elements();
    if depth == 0 || shape.is_empty() {
        return Err(node_err(op, "softmax of an empty or scalar tensor"));
    }
    let (si, _) = per_tensor(op, g, x)?;
    let (so, zo) = per_tensor(op, g, y)?;
    let zmin = to.int_range().map_or(0, |r| r.0);
    if zo != zmin || (so - 1.0 / 256.0).abs() > 0.001 / 256.0 {
        return Err(node_err(
            op,
            format!(
                "8-bit softmax needs output scale 1/256 and zero point {zmin} (got {so}, {zo})"
            ),
        ));
    }
    // TFLite's PreprocessSoftmaxScaling with 5 integer bits (Q5.26 differences).
    const BITS: i32 = 5;
    let real =
        (f64::from(beta) * f64::from(si) * f64::from(1i32 << (31 - BITS))).min(f64::from(i32::MAX));
    let (multiplier, shift) = rescale(op, real)?;
    if shift < 0 {
        return Err(node_err(
            op,
            format!("input scale {si} with beta {beta} is too small"),
        ));
    }
    // CalculateInputRadius(5, shift, 31).
    let radius = (f64::from((1i32 << BITS) - 1) * (1i64 << (31 - BITS)) as f64
        / (1i64 << shift) as f64)
        .floor();
    let too_large = || node_err(op, "tensor too large for a CPU kernel");
    Ok(CpuOp::Softmax {
        x: at(x)?,
        y: at(y)?,
        rows: u32::try_from(len / depth).map_err(|_| too_large())?,
        depth: u32::try_from(depth).map_err(|_| too_large())?,
        from,
        to,
        multiplier,
        shift,
        diff_min: -(radius as i32),
    })
}

/// Add/Sub/Mul with the reference interpreter's preparation (`reference::binary`, after TFLite's
/// add.cc, sub.cc, mul.cc Prepare).
fn binary(
    g: &Graph,
    op: &Op,
    kind: BinaryKind,
    act: Activation,
    at: &mut dyn FnMut(TensorId) -> Result<Buf>,
) -> Result<CpuOp> {
    let ([a, b], [o]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
        return Err(node_err(op, "expects two inputs and one output"));
    };
    let (a, b, o) = (*a, *b, *o);
    let elem = elem(op, g, o)?;
    if !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16)
        || g.tensors[a].dtype != g.tensors[o].dtype
        || g.tensors[b].dtype != g.tensors[o].dtype
    {
        return Err(node_err(
            op,
            "the CPU Add/Sub/Mul takes inputs and output of one 8/16-bit integer type",
        ));
    }
    let (ash, bsh, osh) = (
        &g.tensors[a].shape,
        &g.tensors[b].shape,
        &g.tensors[o].shape,
    );
    let rank = osh.len();
    if rank == 0 || rank > MAX_RANK || ash.len() > rank || bsh.len() > rank {
        return Err(node_err(
            op,
            format!("rank {rank} (the CPU kernel takes 1 to {MAX_RANK})"),
        ));
    }
    // Right-aligned shapes; each axis equal to the output's or 1 (numpy broadcasting).
    let aligned = |s: &[usize]| -> Result<[u32; MAX_RANK]> {
        let mut r = [1u32; MAX_RANK];
        for (i, &d) in s.iter().enumerate() {
            let j = rank - s.len() + i;
            if d != osh[j] && d != 1 {
                return Err(node_err(
                    op,
                    format!("shapes {ash:?} and {bsh:?} do not broadcast to {osh:?}"),
                ));
            }
            r[j] = u32::try_from(d).map_err(|_| node_err(op, "dimension too large"))?;
        }
        Ok(r)
    };
    let (a_shape, b_shape) = (aligned(ash)?, aligned(bsh)?);
    for (j, &d) in osh.iter().enumerate() {
        if (a_shape[j] as usize).max(b_shape[j] as usize) != d {
            return Err(node_err(
                op,
                format!("shapes {ash:?} and {bsh:?} do not broadcast to {osh:?}"),
            ));
        }
    }
    count(op, g, o)?;
    let (s1, za) = per_tensor(op, g, a)?;
    let (s2, zb) = per_tensor(op, g, b)?;
    let (so, zo) = per_tensor(op, g, o)?;
    let mut p = BinaryParams {
        za,
        zb,
        zo,
        ..Default::default()
    };
    match kind {
        BinaryKind::Add | BinaryKind::Sub => {
            // As the reference (TFLite add.cc/sub.cc): 8-bit inputs shifted left by 20 bits.
            p.left_shift = if elem == Elem::I16 { 15 } else { 20 };
            let twice_max = f64::from(2.0 * s1.max(s2));
            let real_out = twice_max / f64::from((1i32 << p.left_shift) as f32 * so);
            (p.m1, p.s1) = rescale(op, f64::from(s1) / twice_max)?;
            (p.m2, p.s2) = rescale(op, f64::from(s2) / twice_max)?;
            (p.mo, p.so) = rescale(op, real_out)?;
        }
        BinaryKind::Mul => {
            // mul.cc multiplies the scales in single precision.
            (p.mo, p.so) = rescale(op, f64::from(s1 * s2 / so))?;
        }
    }
    let (lo, hi) = activation_range(act, so, zo, g.tensors[o].dtype);
    let (tmin, tmax) = elem.int_range().unwrap_or((lo, hi));
    p.lo = lo.max(tmin);
    p.hi = hi.min(tmax).max(p.lo);
    Ok(CpuOp::Binary {
        a: at(a)?,
        y: at(o)?,
        b: at(b)?,
        kind,
        elem,
        rank: rank as u32,
        a_shape,
        b_shape,
        p,
    })
}

/// MaxPool/AveragePool with the reference interpreter's preparation (`reference::pool`): NHWC,
/// output shape from the window, a requantization only when the output's quantization differs.
fn pool(
    g: &Graph,
    op: &Op,
    attrs: &PoolAttrs,
    max: bool,
    at: &mut dyn FnMut(TensorId) -> Result<Buf>,
) -> Result<CpuOp> {
    let ([x], [o]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
        return Err(node_err(op, "expects one input and one output"));
    };
    let (x, o) = (*x, *o);
    let elem = elem(op, g, o)?;
    if !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16) || g.tensors[x].dtype != g.tensors[o].dtype
    {
        return Err(node_err(
            op,
            "the CPU pooling takes one 8/16-bit integer type",
        ));
    }
    let (xs, os) = (&g.tensors[x].shape, &g.tensors[o].shape);
    let (kh, kw) = attrs.kernel;
    let (sh, sw) = attrs.stride;
    let pd = attrs.padding;
    let out = |i: usize, k: usize, s: usize, a: usize, b: usize| {
        i.checked_add(a)?
            .checked_add(b)?
            .checked_sub(k)
            .and_then(|v| v.checked_div(s))
            .map(|v| v + 1)
    };
    let ok = xs.len() == 4
        && os.len() == 4
        && kh > 0
        && kw > 0
        && out(xs[1], kh, sh, pd.top, pd.bottom) == Some(os[1])
        && out(xs[2], kw, sw, pd.left, pd.right) == Some(os[2])
        && xs[0] == os[0]
        && xs[3] == os[3];
    if !ok {
        return Err(node_err(
            op,
            format!("input {xs:?}, output {os:?} and window {attrs:?} do not fit a 4-D pooling"),
        ));
    }
    count(op, g, x)?;
    count(op, g, o)?;
    let (si, zi) = per_tensor(op, g, x)?;
    let (so, zo) = per_tensor(op, g, o)?;
    let u = |v: usize| u32::try_from(v).map_err(|_| node_err(op, "dimension too large"));
    let mut p = PoolParams {
        max,
        n: u(xs[0])?,
        h: u(xs[1])?,
        w: u(xs[2])?,
        c: u(xs[3])?,
        oh: u(os[1])?,
        ow: u(os[2])?,
        kh: u(kh)?,
        kw: u(kw)?,
        sh: u(sh)?,
        sw: u(sw)?,
        top: u(pd.top)?,
        left: u(pd.left)?,
        ..Default::default()
    };
    if si.to_bits() != so.to_bits() || zi != zo {
        p.requant = true;
        p.zi = zi;
        p.zo = zo;
        (p.m, p.s) = rescale(op, f64::from(si) / f64::from(so))?;
    }
    let (lo, hi) = activation_range(attrs.activation, so, zo, g.tensors[o].dtype);
    let (tmin, tmax) = elem.int_range().unwrap_or((lo, hi));
    p.lo = lo.max(tmin);
    p.hi = hi.min(tmax).max(p.lo);
    Ok(CpuOp::Pool {
        x: at(x)?,
        y: at(o)?,
        elem,
        p,
    })
}
