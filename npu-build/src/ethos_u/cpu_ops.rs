//! The CPU operations ([`npu_rt::cpu::Op`]) of IR operators, with every parameter decided.
//!
//! The parameters come from the reference interpreter's own preparation of the same operator
//! (`crate::reference`: shapes checked, rescale factors and widened weights computed once), so a
//! CPU kernel computes what the reference computes, bit for bit.

use npu_rt::cpu::MatMulOp;
use npu_rt::cpu::{
    ArgOp, BatchSpaceOp, BinaryKind, BinaryParams, Buf, ConcatMode, ConcatOp, ConvOp, Elem,
    FloatClampOp, FloatLayerNormOp, FloatReduceOp, FloatSoftmaxOp, FloatUnaryOp, MAX_RANK, MeanOp,
    Op as CpuOp, OrtSoftmaxOp, OutRequant, PadOp, PoolParams, ReduceMode, ReduceOp as CpuReduce,
    RemapOp, ResizeOp,
};

use crate::error::{Error, Result};
use crate::ir::{
    ActFn, Activation, DType, Graph, LstmAttrs, Op, OpKind, PoolAttrs, ResizeMode, TensorId,
};
use crate::reference;
use crate::reference::binary::Params as BinaryPrep;
use crate::reference::conv::{Geometry, Weighted};
use crate::reference::convert::ActKind;
use crate::reference::movement::Requant;
use crate::reference::pairwise::{PairFn, Quantized};
use crate::reference::remap::RemapPlan;
use crate::reference::softmax::Kind as SoftmaxKind;
use crate::reference::unary::{IntMode, UnaryFn};
use crate::reference::util::Rescale;
use npu_rt::cpu::{PairwiseOp, UnaryKind, UnaryMode, UnaryOp};

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

/// Where the operands of CPU operations live.
pub trait Operands {
    /// The operand of tensor `t` (its arena place, or its bytes in the read-only region).
    fn tensor(&mut self, t: TensorId) -> Result<Buf>;
    /// Data made at compile time (weights minus their zero points, rescale factors, index
    /// tables), placed in the read-only region.
    fn constant(&mut self, bytes: &[u8]) -> Result<Buf>;
}

/// [`Operands`] that place nothing: for asking whether an operator has a CPU kernel.
pub struct NoOperands;

impl Operands for NoOperands {
    fn tensor(&mut self, _: TensorId) -> Result<Buf> {
        Ok(Buf::arena(0))
    }
    fn constant(&mut self, _: &[u8]) -> Result<Buf> {
        Ok(Buf::weights(0))
    }
}

/// The CPU operations of IR operator `op`, run in order (one, except for Concat: one per
/// input). Fails for operators without a CPU kernel.
pub fn cpu_kernels(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<Vec<CpuOp>> {
    match &op.kind {
        OpKind::Concat { axis, activation } => concat(g, op, *axis, *activation, at),
        _ => Ok(vec![cpu_kernel(g, op, at)?]),
    }
}

/// The CPU operation of a single-operation IR operator.
fn cpu_kernel(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    match &op.kind {
        OpKind::Reshape => {
            let (x, y) = one_in_one_out(op, g)?;
            let bytes = u32::try_from(g.tensors[y].byte_size())
                .map_err(|_| node_err(op, "tensor too large for a CPU kernel"))?;
            Ok(CpuOp::Copy {
                x: at.tensor(x)?,
                y: at.tensor(y)?,
                bytes,
            })
        }
        OpKind::Quantize => quantize(g, op, at),
        OpKind::Activation(act) => activation(g, op, *act, at),
        OpKind::FloatUnary(f) => {
            let k = reference::float::FloatUnary::new(g, op, *f)?;
            let (x, y) = one_in_one_out(op, g)?;
            Ok(CpuOp::FloatUnary(FloatUnaryOp {
                x: at.tensor(x)?,
                y: at.tensor(y)?,
                len: count(op, g, y)?,
                func: k.func,
                alpha: k.alpha,
                beta: k.beta,
            }))
        }
        OpKind::Dequantize => dequantize(g, op, at),
        OpKind::Transpose { perm } => transpose(g, op, perm, at),
        OpKind::Softmax { beta } => softmax(g, op, *beta, at),
        OpKind::Lstm(a) => {
            let plan = reference::lstm::LstmPlan::new(g, op, a)?;
            let consts = at.constant(&plan.constants())?;
            Ok(plan.cpu_op(
                at.tensor(op.inputs[0])?,
                at.tensor(op.outputs[0])?,
                at.tensor(op.inputs[LstmAttrs::H])?,
                at.tensor(op.inputs[LstmAttrs::C])?,
                consts,
            ))
        }
        OpKind::Add { activation } => binary(g, op, BinaryKind::Add, *activation, at),
        OpKind::Sub { activation } => binary(g, op, BinaryKind::Sub, *activation, at),
        OpKind::Mul { activation } => binary(g, op, BinaryKind::Mul, *activation, at),
        OpKind::MaxPool(attrs) => pool(g, op, attrs, true, at),
        OpKind::AvgPool(attrs) => pool(g, op, attrs, false, at),
        OpKind::Conv2d(attrs) => {
            let c = reference::conv::Conv::new(g, op, attrs)?;
            let fixed = fixed_scales(&c.rescale);
            let mode = ScaleMode::of(&c.rescale);
            weighted_op(op, at, &c.wt, Geo::from(&c.geo), c.o, 0, fixed, mode)
        }
        OpKind::DepthwiseConv2d {
            attrs,
            depth_multiplier,
        } => {
            let d = reference::conv::Depthwise::new(g, op, attrs, *depth_multiplier)?;
            let fixed = fixed_scales(&d.rescale);
            let oc = d.geo.c * d.m;
            let mode = ScaleMode::of(&d.rescale);
            weighted_op(op, at, &d.wt, Geo::from(&d.geo), oc, d.m, fixed, mode)
        }
        OpKind::FullyConnected { activation } => {
            let f = reference::conv::FullyConnected::new(g, op, *activation)?;
            let scales: Vec<u8> = f.scale.iter().flat_map(|v| v.to_le_bytes()).collect();
            let geo = Geo {
                n: f.batches,
                h: 1,
                w: 1,
                c: f.depth,
                oh: 1,
                ow: 1,
                k: [1; 6],
                top: 0,
                left: 0,
            };
            weighted_op(op, at, &f.wt, geo, f.o, 0, scales, ScaleMode::Float)
        }
        OpKind::Mean { axes, keep_dims } => mean(g, op, axes, *keep_dims, at),
        OpKind::Pad { pads, value } => pad(g, op, pads, *value, at),
        OpKind::Resize {
            mode,
            align_corners,
            half_pixel_centers,
        } => resize(g, op, *mode, *align_corners, *half_pixel_centers, at),
        OpKind::Concat { .. } => Err(node_err(op, "internal: Concat takes one op per input")),
        OpKind::Slice { begin, step, size } => slice(g, op, begin, step, size, at),
        OpKind::TransposeConv2d(attrs) => transpose_conv(g, op, attrs, at),
        OpKind::BatchMatMul { adj_a, adj_b } => batch_matmul(g, op, *adj_a, *adj_b, at),
        OpKind::Tile { .. }
        | OpKind::MirrorPad { .. }
        | OpKind::Reverse { .. }
        | OpKind::Gather { .. } => remap(g, op, at),
        OpKind::DepthToSpace { .. } | OpKind::SpaceToDepth { .. } => space_depth(g, op, at),
        OpKind::SpaceToBatch { .. } | OpKind::BatchToSpace { .. } => batch_space(g, op, at),
        OpKind::Abs => unary(g, op, UnaryFn::Abs, at),
        OpKind::Neg => unary(g, op, UnaryFn::Neg, at),
        OpKind::Maximum => pairwise(g, op, PairFn::Maximum, at),
        OpKind::Minimum => pairwise(g, op, PairFn::Minimum, at),
        OpKind::SquaredDifference => pairwise(g, op, PairFn::SquaredDifference, at),
        OpKind::Prelu => pairwise(g, op, PairFn::Prelu, at),
        OpKind::FloatBinary(f) => pairwise(g, op, PairFn::Float(*f), at),
        OpKind::FloatReduce {
            axes,
            keep_dims,
            mean,
        } => {
            let k = reference::float::FloatReduce::new(g, op, axes, *keep_dims, *mean)?;
            let mut shape = [1u32; MAX_RANK];
            for (d, &v) in shape.iter_mut().zip(&k.shape) {
                *d = u32_of(op, v)?;
            }
            Ok(CpuOp::FloatReduce(FloatReduceOp {
                x: at.tensor(op.inputs[0])?,
                y: at.tensor(op.outputs[0])?,
                rank: u32_of(op, k.shape.len())?,
                shape,
                reduced: k.reduced,
                mean: k.mean,
            }))
        }
        OpKind::OrtSoftmax => {
            let k = reference::softmax::OrtSoftmax::new(g, op)?;
            let table: Vec<u8> = k.table.iter().flat_map(|v| v.to_le_bytes()).collect();
            Ok(CpuOp::OrtSoftmax(OrtSoftmaxOp {
                x: at.tensor(op.inputs[0])?,
                y: at.tensor(op.outputs[0])?,
                table: at.constant(&table)?,
                rows: u32_of(op, k.rows)?,
                depth: u32_of(op, k.depth)?,
                y_scale: k.y_scale,
                zp: k.zp,
                signed: k.signed,
            }))
        }
        OpKind::LayerNorm { axis, epsilon } => {
            let k = reference::float::LayerNorm::new(g, op, *axis, *epsilon)?;
            let y = op.outputs[0];
            Ok(CpuOp::FloatLayerNorm(FloatLayerNormOp {
                x: at.tensor(op.inputs[0])?,
                scale: at.tensor(op.inputs[1])?,
                bias: at.tensor(op.inputs[2])?,
                y: at.tensor(y)?,
                rows: u32_of(op, k.rows)?,
                cols: u32_of(op, k.cols)?,
                epsilon: k.epsilon,
            }))
        }
        OpKind::Reduce {
            op: kind,
            axes,
            keep_dims,
        } => reduce(g, op, *kind, axes, *keep_dims, at),
        OpKind::ArgMinMax { axis, max } => arg_min_max(g, op, *axis, *max, at),
        OpKind::ActFn(f) => act_fn(g, op, *f, at),
    }
}

/// Quantize (f32 to integers) and Requantize (integers to integers).
fn quantize(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    let q = reference::convert::Quantize::new(g, op)?;
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let (from, to) = (elem(op, g, x)?, elem(op, g, y)?);
    let Some((lo, hi)) = to.int_range().filter(|_| to != Elem::I32) else {
        return Err(node_err(op, "quantizing to a type other than i8, u8, i16"));
    };
    let len = count(op, g, y)?;
    match q.rescale {
        None => Ok(CpuOp::Quantize {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            len,
            to,
            scale: q.out_scale,
            zero_point: q.zo,
        }),
        Some(_) if from == Elem::I32 => Err(node_err(op, "requantizing i32 has no CPU kernel")),
        Some(r) => Ok(CpuOp::Requantize {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            len,
            from,
            to,
            in_zp: q.zi,
            out_zp: q.zo,
            multiplier: r.multiplier,
            shift: r.shift,
            lo,
            hi,
        }),
    }
}

/// Dequantize: 8/16-bit integers to f32.
fn dequantize(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    let (x, y) = one_in_one_out(op, g)?;
    let from = elem(op, g, x)?;
    if matches!(from, Elem::F32 | Elem::I32) || g.tensors[y].dtype != DType::F32 {
        return Err(node_err(op, "dequantizes 8/16-bit integers to f32 only"));
    }
    let (s, zp) = per_tensor(op, g, x)?;
    Ok(CpuOp::Dequantize {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        len: count(op, g, x)?,
        from,
        scale: f64::from(s),
        zero_point: zp,
    })
}

/// Transpose of up to six axes.
fn transpose(g: &Graph, op: &Op, perm: &[usize], at: &mut dyn Operands) -> Result<CpuOp> {
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
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        elem_bytes: g.tensors[x].dtype.size() as u32,
        rank: xs.len() as u32,
        shape,
        perm: p,
    })
}

/// Transposed convolution: the convolution record with its own geometry.
fn transpose_conv(
    g: &Graph,
    op: &Op,
    attrs: &crate::ir::TransposeConvAttrs,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let t = reference::transpose_conv::TransposeConv::new(g, op, attrs)?;
    let fixed = fixed_scales(&t.rescale);
    let geo = &t.geo;
    let base = Geo {
        n: geo.n,
        h: geo.h,
        w: geo.w,
        c: geo.c,
        oh: geo.oh,
        ow: geo.ow,
        k: [geo.kh, geo.kw, geo.sh, geo.sw, 1, 1],
        top: geo.pt,
        left: geo.pl,
    };
    let mode = ScaleMode::of(&t.rescale);
    match weighted_op(op, at, &t.wt, base, geo.o, 0, fixed, mode)? {
        CpuOp::Conv(c) => Ok(CpuOp::TransposeConv(c)),
        _ => Err(node_err(op, "internal: expected a convolution record")),
    }
}

/// A Slice: the box the reference interpreter checked, as u32/i32 words.
fn slice(
    g: &Graph,
    op: &Op,
    begin: &[usize],
    step: &[i64],
    size: &[usize],
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let s = reference::slice::Slice::new(g, op, begin, step, size)?;
    let rank = s.in_shape.len();
    if rank > MAX_RANK {
        return Err(node_err(
            op,
            format!("slice of rank {rank} (the CPU kernel takes up to {MAX_RANK})"),
        ));
    }
    let word = |v: usize| u32::try_from(v).map_err(|_| node_err(op, "dimension too large"));
    // Rank 0 is a one-element copy, done as rank 1.
    let mut p = npu_rt::cpu::SliceOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        elem_bytes: g.tensors[op.inputs[0]].dtype.size() as u32,
        rank: rank.max(1) as u32,
        shape: [1; MAX_RANK],
        begin: [0; MAX_RANK],
        step: [1; MAX_RANK],
        size: [1; MAX_RANK],
    };
    for d in 0..rank {
        p.shape[d] = word(s.in_shape[d])?;
        p.begin[d] = word(s.begin[d])?;
        p.size[d] = word(s.size[d])?;
        p.step[d] = i32::try_from(s.step[d]).map_err(|_| node_err(op, "step too large"))?;
    }
    Ok(CpuOp::Slice(p))
}

/// BatchMatMul with the reference interpreter's preparation (`reference::matmul`).
fn batch_matmul(
    g: &Graph,
    op: &Op,
    adj_a: bool,
    adj_b: bool,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let mm = reference::matmul::BatchMatMul::new(g, op, adj_a, adj_b)?;
    let r = mm.batch.len();
    if r > MAX_RANK - 2 {
        return Err(node_err(
            op,
            format!(
                "{r} batch axes (the CPU kernel takes up to {})",
                MAX_RANK - 2
            ),
        ));
    }
    // Each input's batch axes, right-aligned to the output's (1 where missing or broadcast).
    let aligned = |t: TensorId| -> Result<[u32; MAX_RANK]> {
        let s = &g.tensors[t].shape;
        let own = &s[..s.len() - 2];
        let mut v = [1u32; MAX_RANK];
        for (d, &x) in v[r - own.len()..r].iter_mut().zip(own) {
            *d = u32_of(op, x)?;
        }
        Ok(v)
    };
    let mut batch = [1u32; MAX_RANK];
    for (d, &x) in batch.iter_mut().zip(&mm.batch) {
        *d = u32_of(op, x)?;
    }
    let (a, b, y) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    count(op, g, a)?;
    count(op, g, b)?;
    count(op, g, y)?;
    Ok(CpuOp::BatchMatMul(MatMulOp {
        a: at.tensor(a)?,
        y: at.tensor(y)?,
        b: at.tensor(b)?,
        batch_rank: r as u32,
        batch,
        a_batch: aligned(a)?,
        b_batch: aligned(b)?,
        m: u32_of(op, mm.m)?,
        k: u32_of(op, mm.k)?,
        n: u32_of(op, mm.n)?,
        adj_a,
        adj_b,
        za: mm.za,
        zb: mm.zb,
        zo: mm.zo,
        multiplier: mm.rescale.multiplier,
        shift: mm.rescale.shift,
        round_once: mm.rescale.single,
        float: mm.float,
    }))
}

/// SpaceToBatch and BatchToSpace: the reference's geometry.
fn batch_space(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    let b = reference::remap::BatchSpace::of(g, op)?;
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let requant = Requant::between(g, op, x, y)?;
    let elem = elem(op, g, x)?;
    count(op, g, y)?;
    count(op, g, x)?;
    let u = |v: usize| u32_of(op, v);
    Ok(CpuOp::BatchSpace(BatchSpaceOp {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        elem,
        to_batch: b.to_batch,
        n: u(b.n)?,
        h: u(b.h)?,
        w: u(b.w)?,
        c: u(b.c)?,
        on: u(b.on)?,
        oh: u(b.oh)?,
        ow: u(b.ow)?,
        bh: u(b.bh)?,
        bw: u(b.bw)?,
        top: u(b.top)?,
        left: u(b.left)?,
        pad: b.pad as u32,
        requant: out_requant(requant),
    }))
}

/// Tile, MirrorPad, Reverse, Gather: the reference's [`RemapPlan`] as tables of input element
/// offsets.
fn remap(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    // RemapPlan::of checks one input and one output.
    let plan = RemapPlan::of(g, op)?;
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let requant = Requant::between(g, op, x, y)?;
    let elem = elem(op, g, x)?;
    let (rank, in_shape) = shape6(op, &plan.in_shape)?;
    let (_, out_shape) = shape6(op, &plan.out_shape)?;
    let in_strides = reference::util::strides(&plan.in_shape);
    let mut table = Vec::new();
    for (map, &s) in plan.maps.iter().zip(&in_strides) {
        for &i in map {
            let off = i
                .checked_mul(s)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| node_err(op, "tensor too large for a CPU kernel"))?;
            table.extend_from_slice(&off.to_le_bytes());
        }
    }
    count(op, g, y)?;
    Ok(CpuOp::Remap(RemapOp {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        table: at.constant(&table)?,
        elem,
        rank,
        in_shape,
        out_shape,
        requant: out_requant(requant),
    }))
}

/// DepthToSpace and SpaceToDepth: the reference's rank-6 transpose.
fn space_depth(g: &Graph, op: &Op, at: &mut dyn Operands) -> Result<CpuOp> {
    let (view, perm) = reference::remap::space_depth_transpose(g, op)?;
    let (x, y) = one_in_one_out(op, g)?;
    if Requant::between(g, op, x, y)?.is_some() {
        return Err(node_err(
            op,
            "input and output are quantized differently; the CPU transpose only moves bytes",
        ));
    }
    let (rank, shape) = shape6(op, &view)?;
    let mut p = [0u32; MAX_RANK];
    for (d, &q) in p.iter_mut().zip(&perm) {
        *d = u32_of(op, q)?;
    }
    Ok(CpuOp::Transpose {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        elem_bytes: g.tensors[x].dtype.size() as u32,
        rank,
        shape,
        perm: p,
    })
}

/// Abs/Neg with the reference interpreter's preparation (`reference::unary`).
fn unary(g: &Graph, op: &Op, func: UnaryFn, at: &mut dyn Operands) -> Result<CpuOp> {
    let u = reference::unary::Unary::new(g, op, func)?;
    let (x, y) = one_in_one_out(op, g)?;
    let elem = elem(op, g, y)?;
    let kind = match func {
        UnaryFn::Abs => UnaryKind::Abs,
        UnaryFn::Neg => UnaryKind::Neg,
    };
    let (mode, zi, zo, multiplier, shift) = match u.mode {
        IntMode::Raw => (UnaryMode::Raw, 0, 0, 0, 0),
        IntMode::Offset { zi, zo } => (UnaryMode::Offset, zi, zo, 0, 0),
        IntMode::Rescaled { zi, zo, rescale } => (
            UnaryMode::Rescaled,
            zi,
            zo,
            rescale.multiplier,
            rescale.shift,
        ),
    };
    Ok(CpuOp::Unary(UnaryOp {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        len: count(op, g, y)?,
        elem,
        kind,
        mode,
        zi,
        zo,
        multiplier,
        shift,
    }))
}

/// An operand's shape right-aligned to the output's rank `out` (leading 1s), as the kernels'
/// six-axis broadcast takes it.
fn right_aligned(op: &Op, s: &[usize], out: &[usize]) -> Result<[u32; MAX_RANK]> {
    let mut r = [1u32; MAX_RANK];
    let skip = out.len() - s.len().min(out.len());
    for (d, &v) in r[skip..out.len()].iter_mut().zip(s) {
        *d = u32_of(op, v)?;
    }
    Ok(r)
}

/// Maximum/Minimum/SquaredDifference/PRelu with the reference interpreter's preparation
/// (`reference::pairwise`).
fn pairwise(g: &Graph, op: &Op, func: PairFn, at: &mut dyn Operands) -> Result<CpuOp> {
    let pw = reference::pairwise::Pairwise::new(g, op, func)?;
    let (a, b, o) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    let elem = elem(op, g, o)?;
    let osh = &g.tensors[o].shape;
    let (rank, _) = shape6(op, osh)?;
    let (a_shape, b_shape) = (
        right_aligned(op, &g.tensors[a].shape, osh)?,
        right_aligned(op, &g.tensors[b].shape, osh)?,
    );
    let (lo, hi) = elem.int_range().unwrap_or((0, 0));
    let mut p = BinaryParams {
        lo,
        hi,
        ..Default::default()
    };
    match pw.q {
        Quantized::Raw => {}
        Quantized::SquaredDifference {
            za,
            zb,
            zo,
            left_shift,
            in1,
            in2,
            out,
        } => {
            (p.za, p.zb, p.zo, p.left_shift) = (za, zb, zo, left_shift);
            (p.m1, p.s1) = (in1.multiplier, in1.shift);
            (p.m2, p.s2) = (in2.multiplier, in2.shift);
            (p.mo, p.so) = (out.multiplier, out.shift);
        }
        Quantized::Prelu {
            zx,
            za,
            zo,
            pos,
            neg,
        } => {
            (p.za, p.zb, p.zo) = (zx, za, zo);
            (p.m1, p.s1) = (pos.multiplier, pos.shift);
            (p.m2, p.s2) = (neg.multiplier, neg.shift);
        }
    }
    let kind = func.kind();
    Ok(CpuOp::Pairwise(PairwiseOp {
        a: at.tensor(a)?,
        b: at.tensor(b)?,
        y: at.tensor(o)?,
        kind,
        elem,
        rank,
        a_shape,
        b_shape,
        p,
    }))
}

fn reduce(
    g: &Graph,
    op: &Op,
    kind: crate::ir::ReduceOp,
    axes: &[usize],
    keep_dims: bool,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    use crate::reference::reduce::ReduceMode as Mode;
    let r = reference::reduce::Reduce::new(g, op, kind, axes, keep_dims)?;
    let elem = elem(op, g, op.inputs[0])?;
    let (rank, shape) = shape6(op, &r.shape)?;
    let reduced = r
        .reduced
        .iter()
        .enumerate()
        .fold(0u32, |bits, (d, &x)| bits | (u32::from(x) << d));
    let (mode, scale, bias, zo) = match r.mode {
        Mode::SumRaw => (ReduceMode::SumRaw, 0.0, 0.0, 0),
        Mode::SumScaled { scale, bias, zo } => (ReduceMode::SumScaled, scale, bias, zo),
        Mode::Max => (ReduceMode::Max, 0.0, 0.0, 0),
        Mode::Min => (ReduceMode::Min, 0.0, 0.0, 0),
    };
    count(op, g, op.inputs[0])?;
    Ok(CpuOp::Reduce(CpuReduce {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        elem,
        rank,
        shape,
        reduced,
        mode,
        scale,
        bias,
        zo,
        requant: out_requant(r.requant),
    }))
}

fn arg_min_max(g: &Graph, op: &Op, axis: usize, max: bool, at: &mut dyn Operands) -> Result<CpuOp> {
    let a = reference::reduce::ArgMinMax::new(g, op, axis, max)?;
    let elem = elem(op, g, op.inputs[0])?;
    count(op, g, op.inputs[0])?;
    Ok(CpuOp::Arg(ArgOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        elem,
        outer: u32_of(op, a.outer)?,
        len: u32_of(op, a.len)?,
        inner: u32_of(op, a.inner)?,
        max: a.max,
        wide: a.index == DType::I64,
    }))
}

/// An element-wise function as the reference interpreter's own 256-entry table.
fn act_fn(g: &Graph, op: &Op, f: ActFn, at: &mut dyn Operands) -> Result<CpuOp> {
    let (x, y) = one_in_one_out(op, g)?;
    if let Some(p) = reference::act_fn::Act16::of(g, op, f)? {
        return Ok(CpuOp::Act16 {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            len: count(op, g, y)?,
            multiplier: p.multiplier,
            shift: p.shift,
            tanh: p.tanh,
        });
    }
    let table = reference::act_fn::table(g, op, f)?;
    Ok(CpuOp::Lut8 {
        x: at.tensor(x)?,
        y: at.tensor(y)?,
        len: count(op, g, y)?,
        elem: if table.signed { Elem::I8 } else { Elem::U8 },
        table: at.constant(&table.bytes)?,
    })
}

fn activation(g: &Graph, op: &Op, act: Activation, at: &mut dyn Operands) -> Result<CpuOp> {
    let a = reference::convert::Act::new(g, op, act)?;
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let len = count(op, g, y)?;
    Ok(match a.kind {
        ActKind::Float { lo, hi } => CpuOp::ClampF32(FloatClampOp {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            len,
            lo,
            hi,
        }),
        ActKind::Int {
            zi,
            zo,
            rescale,
            lo,
            hi,
        } => {
            let (from, to) = (elem(op, g, x)?, elem(op, g, y)?);
            if matches!(from, Elem::I32) {
                return Err(node_err(op, "the CPU activation takes 8/16-bit integers"));
            }
            CpuOp::Requantize {
                x: at.tensor(x)?,
                y: at.tensor(y)?,
                len,
                from,
                to,
                in_zp: zi,
                out_zp: zo,
                multiplier: rescale.multiplier,
                shift: rescale.shift,
                lo,
                hi,
            }
        }
    })
}

fn softmax(g: &Graph, op: &Op, beta: f32, at: &mut dyn Operands) -> Result<CpuOp> {
    let sm = reference::softmax::Softmax::new(g, op, beta)?;
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let len = count(op, g, x)?;
    let depth = u32_of(op, sm.depth)?;
    let rows = len.checked_div(depth).unwrap_or(0);
    Ok(match sm.kind {
        SoftmaxKind::Float { beta } => CpuOp::SoftmaxF32(FloatSoftmaxOp {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            rows,
            depth,
            beta,
        }),
        SoftmaxKind::Quantized {
            rescale, diff_min, ..
        } => CpuOp::Softmax {
            x: at.tensor(x)?,
            y: at.tensor(y)?,
            rows,
            depth,
            from: elem(op, g, x)?,
            to: elem(op, g, y)?,
            multiplier: rescale.multiplier,
            shift: rescale.shift,
            diff_min,
        },
    })
}

/// The activation clamp intersected with the integer type's range.
fn clamp_to(elem: Elem, (lo, hi): (i32, i32)) -> (i32, i32) {
    let (tmin, tmax) = elem.int_range().unwrap_or((lo, hi));
    let lo = lo.max(tmin);
    (lo, hi.min(tmax).max(lo))
}

/// Add/Sub/Mul with the reference interpreter's preparation (`reference::binary`, after TFLite's
/// add.cc, sub.cc, mul.cc Prepare).
fn binary(
    g: &Graph,
    op: &Op,
    kind: BinaryKind,
    act: Activation,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let which = match kind {
        BinaryKind::Add => reference::binary::BinaryOp::Add,
        BinaryKind::Sub => reference::binary::BinaryOp::Sub,
        BinaryKind::Mul | BinaryKind::MulRoundOnce => reference::binary::BinaryOp::Mul,
    };
    let bin = reference::binary::Binary::new(g, op, which, act)?;
    let (a, b, o) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    let elem = elem(op, g, o)?;
    if !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16) {
        return Err(node_err(op, "the CPU Add/Sub/Mul takes 8/16-bit integers"));
    }
    let osh = &g.tensors[o].shape;
    let (rank, _) = shape6(op, osh)?;
    let (a_shape, b_shape) = (
        right_aligned(op, &g.tensors[a].shape, osh)?,
        right_aligned(op, &g.tensors[b].shape, osh)?,
    );
    let (lo, hi) = clamp_to(elem, bin.act);
    let mut p = BinaryParams {
        za: bin.za,
        zb: bin.zb,
        zo: bin.zo,
        lo,
        hi,
        ..Default::default()
    };
    match bin.params {
        BinaryPrep::AddSub {
            left_shift,
            in1,
            in2,
            out,
            ..
        } => {
            p.left_shift = left_shift;
            (p.m1, p.s1) = (in1.multiplier, in1.shift);
            (p.m2, p.s2) = (in2.multiplier, in2.shift);
            (p.mo, p.so) = (out.multiplier, out.shift);
        }
        BinaryPrep::Mul { out } => (p.mo, p.so) = (out.multiplier, out.shift),
    }
    let kind = match bin.params {
        BinaryPrep::Mul { out } if out.single => BinaryKind::MulRoundOnce,
        _ => kind,
    };
    Ok(CpuOp::Binary {
        a: at.tensor(a)?,
        y: at.tensor(o)?,
        b: at.tensor(b)?,
        kind,
        elem,
        rank,
        a_shape,
        b_shape,
        p,
    })
}

/// MaxPool/AveragePool with the reference interpreter's preparation (`reference::pool`).
fn pool(g: &Graph, op: &Op, attrs: &PoolAttrs, max: bool, at: &mut dyn Operands) -> Result<CpuOp> {
    let pl = reference::pool::Pool::new(g, op, attrs, max)?;
    let (x, o) = (op.inputs[0], op.outputs[0]);
    let elem = elem(op, g, o)?;
    if !matches!(elem, Elem::I8 | Elem::U8 | Elem::I16) {
        return Err(node_err(op, "the CPU pooling takes 8/16-bit integers"));
    }
    count(op, g, x)?;
    count(op, g, o)?;
    let w = &pl.win;
    let u = |v: usize| u32_of(op, v);
    let (lo, hi) = clamp_to(elem, pl.act);
    let mut p = PoolParams {
        max,
        n: u(w.n)?,
        h: u(w.h)?,
        w: u(w.w)?,
        c: u(w.c)?,
        oh: u(w.oh)?,
        ow: u(w.ow)?,
        kh: u(w.attrs.kernel.0)?,
        kw: u(w.attrs.kernel.1)?,
        sh: u(w.attrs.stride.0)?,
        sw: u(w.attrs.stride.1)?,
        top: u(w.attrs.padding.top)?,
        left: u(w.attrs.padding.left)?,
        lo,
        hi,
        ..Default::default()
    };
    if let Some((zi, r, zo)) = pl.requant {
        p.requant = true;
        p.zi = zi;
        p.zo = zo;
        (p.m, p.s) = (r.multiplier, r.shift);
    }
    Ok(CpuOp::Pool {
        x: at.tensor(x)?,
        y: at.tensor(o)?,
        elem,
        p,
    })
}

/// Per-channel Q31 multipliers and shifts as the CPU convolution reads them.
fn fixed_scales(r: &[Rescale]) -> Vec<u8> {
    r.iter()
        .flat_map(|r| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&r.multiplier.to_le_bytes());
            b[4..].copy_from_slice(&r.shift.to_le_bytes());
            b
        })
        .collect()
}

/// Geometry of a CPU convolution: `k` is kernel h, w, stride h, w, dilation h, w.
struct Geo {
    n: usize,
    h: usize,
    w: usize,
    c: usize,
    oh: usize,
    ow: usize,
    k: [usize; 6],
    top: usize,
    left: usize,
}

impl From<&Geometry> for Geo {
    fn from(g: &Geometry) -> Geo {
        Geo {
            n: g.n,
            h: g.h,
            w: g.w,
            c: g.c,
            oh: g.oh,
            ow: g.ow,
            k: [g.kh, g.kw, g.sh, g.sw, g.dh, g.dw],
            top: g.pt,
            left: g.pl,
        }
    }
}

fn u32_of(op: &Op, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| node_err(op, format!("{v} is too large for a CPU kernel")))
}

/// How a convolution's per-channel scales apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ScaleMode {
    /// Q31 multipliers, TFLite's MultiplyByQuantizedMultiplier.
    Fixed,
    /// Q31 multipliers rounded once ([`crate::ir::Requant::Single`]).
    FixedOnce,
    /// f64 factors (TFLite's reference FullyConnected).
    Float,
}

impl ScaleMode {
    /// The mode of the reference's rescale factors.
    fn of(rescale: &[Rescale]) -> ScaleMode {
        if rescale.first().is_some_and(|r| r.single) {
            ScaleMode::FixedOnce
        } else {
            ScaleMode::Fixed
        }
    }
}

/// Conv2D, DepthwiseConv2D (`m > 0`) or FullyConnected from the reference interpreter's
/// preparation: the same widened weights, bias and rescale factors.
#[allow(clippy::too_many_arguments)]
fn weighted_op(
    op: &Op,
    at: &mut dyn Operands,
    wt: &Weighted,
    geo: Geo,
    oc: usize,
    m: usize,
    scales: Vec<u8>,
    mode: ScaleMode,
) -> Result<CpuOp> {
    let to_elem = |d: DType| match d {
        DType::I8 => Some(Elem::I8),
        DType::U8 => Some(Elem::U8),
        DType::I16 => Some(Elem::I16),
        _ => None,
    };
    let (Some(x_elem), Some(y_elem)) = (to_elem(wt.in_dtype), to_elem(wt.out_dtype)) else {
        return Err(node_err(
            op,
            format!(
                "the CPU convolution takes 8/16-bit integers ({} -> {})",
                wt.in_dtype, wt.out_dtype
            ),
        ));
    };
    // Weights minus zero points: one byte each when they all fit (the usual symmetric int8).
    let narrow = wt.weights.iter().all(|&v| i8::try_from(v).is_ok());
    let (w_elem, wbytes): (Elem, Vec<u8>) = if narrow {
        (
            Elem::I8,
            wt.weights.iter().map(|&v| v as i8 as u8).collect(),
        )
    } else {
        (
            Elem::I16,
            wt.weights.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    };
    let bias: Vec<u8> = wt.bias.iter().flat_map(|v| v.to_le_bytes()).collect();
    let u = |v: usize| u32_of(op, v);
    let [kh, kw, sh, sw, dh, dw] = geo.k;
    Ok(CpuOp::Conv(ConvOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        w: at.constant(&wbytes)?,
        bias: at.constant(&bias)?,
        scale: at.constant(&scales)?,
        x_elem,
        y_elem,
        w_elem,
        n: u(geo.n)?,
        h: u(geo.h)?,
        w_in: u(geo.w)?,
        c: u(geo.c)?,
        oh: u(geo.oh)?,
        ow: u(geo.ow)?,
        oc: u(oc)?,
        kh: u(kh)?,
        kw: u(kw)?,
        sh: u(sh)?,
        sw: u(sw)?,
        dh: u(dh)?,
        dw: u(dw)?,
        top: u(geo.top)?,
        left: u(geo.left)?,
        depth_multiplier: u(m)?,
        x_zp: wt.in_zp,
        y_zp: wt.out_zp,
        lo: wt.act.0,
        hi: wt.act.1,
        float_scale: mode == ScaleMode::Float,
        round_once: mode == ScaleMode::FixedOnce,
    }))
}

/// A shape of rank 1 to [`MAX_RANK`] as the CPU kernels take it.
fn shape6(op: &Op, s: &[usize]) -> Result<(u32, [u32; MAX_RANK])> {
    if s.is_empty() || s.len() > MAX_RANK {
        return Err(node_err(
            op,
            format!("rank {} (the CPU kernel takes 1 to {MAX_RANK})", s.len()),
        ));
    }
    let mut r = [1u32; MAX_RANK];
    for (d, &v) in r.iter_mut().zip(s) {
        *d = u32_of(op, v)?;
    }
    Ok((s.len() as u32, r))
}

fn out_requant(r: Option<Requant>) -> OutRequant {
    r.map_or(OutRequant::OFF, |r| OutRequant {
        on: true,
        zi: r.zi,
        m: r.rescale.multiplier,
        s: r.rescale.shift,
        zo: r.zo,
    })
}

fn mean(
    g: &Graph,
    op: &Op,
    axes: &[usize],
    keep_dims: bool,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let m = reference::pool::Mean::new(g, op, axes, keep_dims)?;
    let elem = elem(op, g, op.inputs[0])?;
    let (rank, shape) = shape6(op, &m.shape)?;
    let reduced = m
        .reduced
        .iter()
        .enumerate()
        .fold(0u32, |bits, (d, &r)| bits | (u32::from(r) << d));
    let r = m.rescale();
    count(op, g, op.inputs[0])?;
    Ok(CpuOp::Mean(MeanOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        elem,
        rank,
        shape,
        reduced,
        zi: m.zi,
        zo: m.zo,
        m: r.multiplier,
        s: r.shift,
        round_once: r.single,
    }))
}

fn pad(
    g: &Graph,
    op: &Op,
    pads: &[(usize, usize)],
    value: Option<i32>,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let p = reference::movement::Pad::new(g, op, pads, value)?;
    let elem = elem(op, g, op.inputs[0])?;
    let (rank, shape) = shape6(op, &p.in_shape)?;
    let (mut before, mut after) = ([0u32; MAX_RANK], [0u32; MAX_RANK]);
    for (d, &(a, b)) in p.pads.iter().enumerate() {
        before[d] = u32_of(op, a)?;
        after[d] = u32_of(op, b)?;
    }
    let value = if elem == Elem::F32 {
        (p.value as f32).to_bits()
    } else {
        p.value as u32
    };
    count(op, g, op.outputs[0])?;
    Ok(CpuOp::Pad(PadOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        elem,
        rank,
        shape,
        before,
        after,
        value,
        requant: out_requant(p.requant),
    }))
}

fn resize(
    g: &Graph,
    op: &Op,
    mode: ResizeMode,
    align_corners: bool,
    half_pixel_centers: bool,
    at: &mut dyn Operands,
) -> Result<CpuOp> {
    let r = reference::movement::Resize::new(g, op, mode, align_corners, half_pixel_centers)?;
    let elem = elem(op, g, op.inputs[0])?;
    let bilinear = mode == ResizeMode::Bilinear;
    // Source coordinates of every output row, then of every output column; the fraction in
    // 1/1024 for integers, as f32 bits for floats.
    let mut table: Vec<i64> = Vec::with_capacity(3 * (r.oh + r.ow));
    for (in_size, out_size) in [(r.h, r.oh), (r.w, r.ow)] {
        if bilinear && elem == Elem::F32 {
            for (lo, hi, frac) in r.bilinear_axis_f32(in_size, out_size) {
                table.extend([lo as i64, hi as i64, i64::from(frac.to_bits() as i32)]);
            }
        } else if bilinear {
            for (lo, hi, frac) in r.bilinear_axis(in_size, out_size) {
                table.extend([lo, hi, frac]);
            }
        } else {
            for v in 0..out_size {
                table.extend([r.nearest(v, in_size, out_size) as i64, 0, 0]);
            }
        }
    }
    let mut bytes = Vec::with_capacity(4 * table.len());
    for v in table {
        let v = i32::try_from(v).map_err(|_| node_err(op, "resize coordinate out of range"))?;
        bytes.extend(v.to_le_bytes());
    }
    count(op, g, op.outputs[0])?;
    let u = |v: usize| u32_of(op, v);
    Ok(CpuOp::Resize(ResizeOp {
        x: at.tensor(op.inputs[0])?,
        y: at.tensor(op.outputs[0])?,
        table: at.constant(&bytes)?,
        elem,
        bilinear,
        n: u(r.n)?,
        h: u(r.h)?,
        w: u(r.w)?,
        c: u(r.c)?,
        oh: u(r.oh)?,
        ow: u(r.ow)?,
        requant: out_requant(r.requant),
    }))
}

/// One [`ConcatOp`] per input, each writing its slots of the output.
fn concat(
    g: &Graph,
    op: &Op,
    axis: usize,
    act: Activation,
    at: &mut dyn Operands,
) -> Result<Vec<CpuOp>> {
    let c = reference::movement::Concat::new(g, op, axis, act)?;
    let elem = elem(op, g, op.outputs[0])?;
    let y = at.tensor(op.outputs[0])?;
    let stride: usize = c.chunks.iter().sum();
    count(op, g, op.outputs[0])?;
    let mut first = 0usize; // element of this input's first slot in the output
    let mut ops = Vec::with_capacity(op.inputs.len());
    for (i, &x) in op.inputs.iter().enumerate() {
        let (mode, (scale, bias)) = match c.scaling[i] {
            None if c.dtype == DType::F32 || c.range_is_full() => (ConcatMode::Copy, (1.0, 0.0)),
            None => (ConcatMode::Clamp, (1.0, 0.0)),
            Some(s) => (ConcatMode::Scale, s),
        };
        let offset = u64::from(y.offset) + (first * elem.size()) as u64;
        ops.push(CpuOp::Concat(ConcatOp {
            x: at.tensor(x)?,
            y: Buf {
                region: y.region,
                offset: u32::try_from(offset).map_err(|_| node_err(op, "output beyond 4 GiB"))?,
            },
            elem,
            outer: u32_of(op, c.outer)?,
            chunk: u32_of(op, c.chunks[i])?,
            stride: u32_of(op, stride)?,
            mode,
            scale,
            bias,
            zo: c.zo,
            lo: c.range.0,
            hi: c.range.1,
        }));
        first += c.chunks[i];
    }
    Ok(ops)
}
