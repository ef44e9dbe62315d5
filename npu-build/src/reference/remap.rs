//! Permutes and gathers: Tile, MirrorPad, Reverse, Gather (constant indices), DepthToSpace,
//! SpaceToDepth.
//!
//! Tile, MirrorPad, Reverse and Gather are *separable*: each output coordinate along dimension
//! `d` reads one input coordinate along `d`, whatever the other coordinates are. They share one
//! plan, [`RemapPlan`]: per dimension, the input coordinate of every output coordinate. The
//! NPU lowering (runs of consecutive coordinates become strided copies) and the CPU kernel
//! (tables of byte offsets) are both built from this plan, so the index arithmetic lives here
//! only. DepthToSpace and SpaceToDepth are rank-6 transposes of a reshaped view
//! ([`space_depth_transpose`]).
//!
//! TFLite's kernels (`tile.cc`, `mirror_pad.cc`, `reverse.cc`, `gather.cc`,
//! `depth_to_space.cc`, `space_to_depth.cc`) only move bytes: input and output share one
//! quantization. ONNX models may give them different ones; the moved values are then requantized
//! like the other movement operators (see [`super::movement`]).

use super::movement::{Requant, Transpose};
use super::util::{bad_data, node_err, strides, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op, OpKind, PadMode};
use crate::value::Data;

/// A separable index map: `out[o_0, .., o_r] = in[maps[0][o_0], .., maps[r][o_r]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemapPlan {
    /// Shape of the input.
    pub in_shape: Vec<usize>,
    /// Shape of the output as seen by the map (same rank as the input; a Gather's index
    /// dimensions are flattened into one).
    pub out_shape: Vec<usize>,
    /// Per dimension, the input coordinate read by each output coordinate.
    pub maps: Vec<Vec<usize>>,
}

/// Input coordinate for output coordinate `o` of a dimension of size `n` padded by `before`.
/// `None` when the pad is too large for the mode.
fn mirror(o: usize, n: usize, before: usize, mode: PadMode) -> Option<usize> {
    let i = o as i64 - before as i64;
    let n = n as i64;
    if n == 0 {
        return None;
    }
    let v = if i < 0 {
        match mode {
            PadMode::Reflect => -i,
            PadMode::Symmetric => -i - 1,
            PadMode::Edge => 0,
        }
    } else if i >= n {
        match mode {
            PadMode::Reflect => 2 * n - 2 - i,
            PadMode::Symmetric => 2 * n - 1 - i,
            PadMode::Edge => n - 1,
        }
    } else {
        i
    };
    (0..n).contains(&v).then_some(v as usize)
}

impl RemapPlan {
    /// The plan of `op` (Tile, MirrorPad, Reverse or Gather), checked against its tensors.
    pub fn of(g: &Graph, op: &Op) -> Result<RemapPlan> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let (x, y) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        let ins = x.shape.clone();
        let rank = ins.len();
        let rank_err = |what: &str, n: usize| {
            node_err(
                op,
                format!(
                    "{what} has {n} entries for the rank-{rank} input '{}'",
                    x.name
                ),
            )
        };
        let plan = match &op.kind {
            OpKind::Tile { multiples } => {
                if multiples.len() != rank {
                    return Err(rank_err("multiples", multiples.len()));
                }
                let mut out_shape = Vec::with_capacity(rank);
                let mut maps = Vec::with_capacity(rank);
                for (&n, &m) in ins.iter().zip(multiples) {
                    let o = n.checked_mul(m).ok_or_else(|| {
                        node_err(op, format!("multiples {multiples:?} overflow {ins:?}"))
                    })?;
                    out_shape.push(o);
                    maps.push((0..o).map(|k| k % n.max(1)).collect());
                }
                RemapPlan {
                    in_shape: ins,
                    out_shape,
                    maps,
                }
            }
            OpKind::MirrorPad { pads, mode } => {
                if pads.len() != rank {
                    return Err(rank_err("paddings", pads.len()));
                }
                let mut out_shape = Vec::with_capacity(rank);
                let mut maps = Vec::with_capacity(rank);
                for (d, (&n, &(b, a))) in ins.iter().zip(pads).enumerate() {
                    let o = n.saturating_add(b).saturating_add(a);
                    let map: Option<Vec<usize>> = (0..o).map(|k| mirror(k, n, b, *mode)).collect();
                    let map = map.ok_or_else(|| {
                        node_err(
                            op,
                            format!(
                                "{} padding ({b}, {a}) of dimension {d} (size {n}) of '{}' reaches \
                                 past the mirrored data",
                                mode.name(),
                                x.name
                            ),
                        )
                    })?;
                    out_shape.push(o);
                    maps.push(map);
                }
                RemapPlan {
                    in_shape: ins,
                    out_shape,
                    maps,
                }
            }
            OpKind::Reverse { axes } => {
                if let Some(&a) = axes.iter().find(|&&a| a >= rank) {
                    return Err(node_err(
                        op,
                        format!("axis {a} is out of range for rank {rank}"),
                    ));
                }
                let maps = ins
                    .iter()
                    .enumerate()
                    .map(|(d, &n)| {
                        if axes.contains(&d) {
                            (0..n).rev().collect()
                        } else {
                            (0..n).collect()
                        }
                    })
                    .collect();
                RemapPlan {
                    out_shape: ins.clone(),
                    in_shape: ins,
                    maps,
                }
            }
            OpKind::Gather { axis, indices } => {
                let axis = *axis;
                if axis >= rank {
                    return Err(node_err(
                        op,
                        format!("axis {axis} is out of range for rank {rank}"),
                    ));
                }
                if let Some(&i) = indices.iter().find(|&&i| i >= ins[axis]) {
                    return Err(node_err(
                        op,
                        format!(
                            "index {i} is out of range for dimension {axis} (size {}) of '{}'",
                            ins[axis], x.name
                        ),
                    ));
                }
                let mut out_shape = ins.clone();
                out_shape[axis] = indices.len();
                let maps = ins
                    .iter()
                    .enumerate()
                    .map(|(d, &n)| {
                        if d == axis {
                            indices.clone()
                        } else {
                            (0..n).collect()
                        }
                    })
                    .collect();
                RemapPlan {
                    in_shape: ins,
                    out_shape,
                    maps,
                }
            }
            other => {
                return Err(node_err(
                    op,
                    format!("internal: {} is not a separable remap", other.name()),
                ));
            }
        };
        let n_out = plan
            .out_shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d));
        let shape_ok = if matches!(op.kind, OpKind::Gather { .. }) {
            n_out == Some(y.elements())
        } else {
            plan.out_shape == y.shape
        };
        if !shape_ok {
            return Err(node_err(
                op,
                format!(
                    "output '{}' has shape {:?}; the input {:?} gives {:?}",
                    y.name, y.shape, plan.in_shape, plan.out_shape
                ),
            ));
        }
        Ok(plan)
    }

    /// Number of output elements.
    pub fn out_elements(&self) -> usize {
        self.out_shape.iter().product()
    }

    fn apply<T: std::marker::Copy + Default>(&self, x: &[T]) -> Result<Vec<T>> {
        if x.len() != self.in_shape.iter().product::<usize>() {
            return Err(bad_data());
        }
        let is = strides(&self.in_shape);
        // Per dimension, the input element offset of each output coordinate.
        let offs: Vec<Vec<usize>> = self
            .maps
            .iter()
            .zip(&is)
            .map(|(m, &s)| m.iter().map(|&i| i * s).collect())
            .collect();
        let n = self.out_elements();
        let mut out = zeroed::<T>(n, "remap output")?;
        if n == 0 {
            return Ok(out);
        }
        let rank = self.out_shape.len();
        let mut idx = vec![0usize; rank];
        for o in out.iter_mut() {
            let off: usize = (0..rank).map(|d| offs[d][idx[d]]).sum();
            *o = x[off];
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.out_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}

/// Checks the element types of a movement op: one type in and out, not i64.
fn check_types(g: &Graph, op: &Op) -> Result<()> {
    let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
    if x.dtype != o.dtype || x.dtype == DType::I64 {
        return Err(node_err(
            op,
            format!(
                "input ({}) and output ({}) must have one type (not i64)",
                x.dtype, o.dtype
            ),
        ));
    }
    Ok(())
}

/// Tile, MirrorPad, Reverse, Gather.
pub struct Remap {
    plan: RemapPlan,
    requant: Option<Requant>,
}

impl Remap {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        let plan = RemapPlan::of(g, op)?;
        check_types(g, op)?;
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Prepared::new(Remap { plan, requant }, vec![op.inputs[0]]))
    }
}

impl Kernel for Remap {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let d = match inputs[0] {
            Data::I8(v) => Data::I8(self.plan.apply(v)?),
            Data::U8(v) => Data::U8(self.plan.apply(v)?),
            Data::I16(v) => Data::I16(self.plan.apply(v)?),
            Data::I32(v) => Data::I32(self.plan.apply(v)?),
            Data::F32(v) => Data::F32(self.plan.apply(v)?),
            Data::I64(v) => Data::I64(self.plan.apply(v)?),
        };
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}

/// DepthToSpace / SpaceToDepth as a transpose of a rank-6 view: `(view shape, perm)` with
/// `out6.shape[i] = view[perm[i]]`, whose row-major result is the output.
pub fn space_depth_transpose(g: &Graph, op: &Op) -> Result<(Vec<usize>, Vec<usize>)> {
    if op.inputs.len() != 1 || op.outputs.len() != 1 {
        return Err(node_err(op, "expects one input and one output"));
    }
    let (x, y) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
    if x.shape.len() != 4 {
        return Err(node_err(
            op,
            format!("input '{}' {:?} is not 4-D NHWC", x.name, x.shape),
        ));
    }
    let [n, h, w, c] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let (view, perm, out) = match op.kind {
        OpKind::DepthToSpace { block: b, crd } => {
            let bb = b
                .checked_mul(b)
                .filter(|&bb| bb > 0 && c.is_multiple_of(bb));
            let Some(bb) = bb else {
                return Err(node_err(
                    op,
                    format!(
                        "block size {b}: the depth {c} of '{}' is not a multiple of its square",
                        x.name
                    ),
                ));
            };
            let oc = c / bb;
            let out = vec![n, h * b, w * b, oc];
            if crd {
                // channel = c' * b * b + i * b + j
                (vec![n, h, w, oc, b, b], vec![0, 1, 4, 2, 5, 3], out)
            } else {
                // channel = (i * b + j) * C' + c'
                (vec![n, h, w, b, b, oc], vec![0, 1, 3, 2, 4, 5], out)
            }
        }
        OpKind::SpaceToDepth { block: b } => {
            if b == 0 || !h.is_multiple_of(b) || !w.is_multiple_of(b) {
                return Err(node_err(
                    op,
                    format!(
                        "block size {b} does not divide the height and width of '{}' {:?}",
                        x.name, x.shape
                    ),
                ));
            }
            let out = vec![n, h / b, w / b, c * b * b];
            (vec![n, h / b, b, w / b, b, c], vec![0, 1, 3, 2, 4, 5], out)
        }
        ref other => {
            return Err(node_err(
                op,
                format!(
                    "internal: {} is not DepthToSpace/SpaceToDepth",
                    other.name()
                ),
            ));
        }
    };
    if y.shape != out {
        return Err(node_err(
            op,
            format!(
                "output '{}' has shape {:?}; the input {:?} gives {out:?}",
                y.name, y.shape, x.shape
            ),
        ));
    }
    check_types(g, op)?;
    Ok((view, perm))
}

/// DepthToSpace and SpaceToDepth through [`Transpose`].
pub(super) fn prepare_space_depth(g: &Graph, op: &Op) -> Result<Prepared> {
    let (view, perm) = space_depth_transpose(g, op)?;
    let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
    Ok(Prepared::new(
        Transpose::with(view, perm, requant),
        vec![op.inputs[0]],
    ))
}

/// SpaceToBatch / BatchToSpace geometry: `[N, H, W, C]` in, `[ON, OH, OW, C]` out, block
/// `(bh, bw)`, and `(top, left)`: the padding (SpaceToBatch) or crop (BatchToSpace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSpace {
    pub to_batch: bool,
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub on: usize,
    pub oh: usize,
    pub ow: usize,
    pub bh: usize,
    pub bw: usize,
    pub top: usize,
    pub left: usize,
    /// The padding value (SpaceToBatch): the output zero point, as TFLite's kernel pads.
    pub pad: i32,
}

impl BatchSpace {
    /// The geometry of `op`, checked against its tensors.
    pub fn of(g: &Graph, op: &Op) -> Result<BatchSpace> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        check_types(g, op)?;
        let (x, y) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        let dims = |s: &[usize]| match *s {
            [n, h, w, c] => Some([n, h, w, c]),
            [n, h, c] => Some([n, h, 1, c]),
            _ => None,
        };
        let (Some([n, h, w, c]), Some(out)) = (dims(&x.shape), dims(&y.shape)) else {
            return Err(node_err(
                op,
                format!(
                    "input {:?} and output {:?} must be 3-D or 4-D",
                    x.shape, y.shape
                ),
            ));
        };
        let (to_batch, (bh, bw), [(t, b), (l, r)]) = match op.kind {
            OpKind::SpaceToBatch { block, pads } => (true, block, pads),
            OpKind::BatchToSpace { block, crops } => (false, block, crops),
            ref other => {
                return Err(node_err(
                    op,
                    format!(
                        "internal: {} is not SpaceToBatch/BatchToSpace",
                        other.name()
                    ),
                ));
            }
        };
        if x.shape.len() == 3 && (bw != 1 || l != 0 || r != 0) {
            return Err(node_err(op, "a 3-D input takes one block dimension"));
        }
        let bad = || {
            node_err(
                op,
                format!(
                    "block ({bh}, {bw}) with pads/crops {:?} does not fit input {:?} and output {:?}",
                    [(t, b), (l, r)],
                    x.shape,
                    y.shape
                ),
            )
        };
        let bb = bh.checked_mul(bw).filter(|&v| v > 0).ok_or_else(bad)?;
        let want = if to_batch {
            let ph = h.checked_add(t + b).ok_or_else(bad)?;
            let pw = w.checked_add(l + r).ok_or_else(bad)?;
            if !ph.is_multiple_of(bh) || !pw.is_multiple_of(bw) {
                return Err(bad());
            }
            [n.checked_mul(bb).ok_or_else(bad)?, ph / bh, pw / bw, c]
        } else {
            if !n.is_multiple_of(bb) {
                return Err(bad());
            }
            let fh = h.checked_mul(bh).ok_or_else(bad)?;
            let fw = w.checked_mul(bw).ok_or_else(bad)?;
            let oh = fh.checked_sub(t + b).ok_or_else(bad)?;
            let ow = fw.checked_sub(l + r).ok_or_else(bad)?;
            [n / bb, oh, ow, c]
        };
        if want != out {
            return Err(bad());
        }
        let pad = match &y.quant {
            Some(q) if to_batch && y.dtype != DType::F32 => q.zero_point(),
            _ => 0,
        };
        Ok(BatchSpace {
            to_batch,
            n,
            h,
            w,
            c,
            on: out[0],
            oh: out[1],
            ow: out[2],
            bh,
            bw,
            top: t,
            left: l,
            pad,
        })
    }

    /// The input element of each output element (`None`: padding).
    fn sources(&self) -> Vec<Option<usize>> {
        let s = *self;
        let mut out = Vec::with_capacity(s.on * s.oh * s.ow * s.c);
        for ob in 0..s.on {
            for oy in 0..s.oh {
                for ox in 0..s.ow {
                    let src = if s.to_batch {
                        let (n, k) = (ob % s.n, ob / s.n);
                        let (i, j) = (k / s.bw, k % s.bw);
                        let y = (oy * s.bh + i).checked_sub(s.top).filter(|&y| y < s.h);
                        let x = (ox * s.bw + j).checked_sub(s.left).filter(|&x| x < s.w);
                        y.zip(x).map(|(y, x)| ((n * s.h + y) * s.w + x) * s.c)
                    } else {
                        let (y, x) = (oy + s.top, ox + s.left);
                        let k = (y % s.bh) * s.bw + x % s.bw;
                        let b = k * s.on + ob;
                        Some(((b * s.h + y / s.bh) * s.w + x / s.bw) * s.c)
                    };
                    for c in 0..s.c {
                        out.push(src.map(|v| v + c));
                    }
                }
            }
        }
        out
    }
}

/// SpaceToBatch and BatchToSpace.
pub struct BatchSpaceKernel {
    src: Vec<Option<usize>>,
    pad: i32,
    requant: Option<Requant>,
}

impl BatchSpaceKernel {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        let geo = BatchSpace::of(g, op)?;
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Prepared::new(
            BatchSpaceKernel {
                src: geo.sources(),
                pad: geo.pad,
                requant,
            },
            vec![op.inputs[0]],
        ))
    }

    fn apply<T: std::marker::Copy>(&self, x: &[T], pad: T) -> Result<Vec<T>> {
        self.src
            .iter()
            .map(|s| match s {
                Some(i) => x.get(*i).copied().ok_or_else(bad_data),
                None => Ok(pad),
            })
            .collect()
    }
}

impl Kernel for BatchSpaceKernel {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let p = self.pad;
        let d = match inputs[0] {
            Data::I8(v) => Data::I8(self.apply(v, p as i8)?),
            Data::U8(v) => Data::U8(self.apply(v, p as u8)?),
            Data::I16(v) => Data::I16(self.apply(v, p as i16)?),
            Data::I32(v) => Data::I32(self.apply(v, p)?),
            Data::F32(v) => Data::F32(self.apply(v, 0.0)?),
            Data::I64(v) => Data::I64(self.apply(v, i64::from(p))?),
        };
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_modes_match_tflite_and_onnx() {
        // abc padded by 2 on both sides.
        let m = |mode| -> Vec<Option<usize>> { (0..7).map(|o| mirror(o, 3, 2, mode)).collect() };
        let s = |v: &[usize]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        assert_eq!(m(PadMode::Reflect), s(&[2, 1, 0, 1, 2, 1, 0]));
        assert_eq!(m(PadMode::Symmetric), s(&[1, 0, 0, 1, 2, 2, 1]));
        assert_eq!(m(PadMode::Edge), s(&[0, 0, 0, 1, 2, 2, 2]));
        // Reflect cannot pad by the whole size; symmetric can, not more.
        assert_eq!(mirror(0, 3, 3, PadMode::Reflect), None);
        assert_eq!(mirror(0, 3, 3, PadMode::Symmetric), Some(2));
        assert_eq!(mirror(0, 3, 4, PadMode::Symmetric), None);
        assert_eq!(mirror(0, 0, 1, PadMode::Edge), None);
    }
}
