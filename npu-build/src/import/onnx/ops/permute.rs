//! Permutes and gathers: Tile, Pad (reflect / edge), ReverseSequence (whole sequences), Gather
//! (constant indices), DepthToSpace, SpaceToDepth.
//!
//! Each works on the IR tensor in whatever layout it has: ONNX axis `i` is IR axis
//! `perm[i]`, so the IR operator's per-axis attributes are the ONNX ones moved through the
//! layout, and the output keeps the layout. DepthToSpace and SpaceToDepth are NCHW in ONNX and
//! NHWC in the IR: their input is brought to the NCHW-over-NHWC layout first.

use std::rc::Rc;

use super::super::builder::{Act, Builder, Val};
use super::super::layout;
use super::super::model::Node;
use crate::error::Result;
use crate::ir::{OpKind, PadMode};

/// The IR axis of ONNX axis `axis` (negative counts from the end) of a rank-`rank` value.
fn onnx_axis(n: &Node, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(n.err(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

impl Builder {
    /// The activation of input 0 (integer or dequantized).
    fn moved_input(&mut self, n: &Node) -> Result<(Act, bool)> {
        match self.input(n, 0)? {
            Val::Int(a) => Ok((a, true)),
            Val::Deq(a) => Ok((a, false)),
            other => Err(self.not_quantized(n, 0, &other)),
        }
    }

    /// Emits a movement operator on IR tensor `a.id` with output `shape` (IR order) and
    /// layout `perm`; its output keeps the input's quantization unless a QuantizeLinear
    /// follows.
    fn emit_moved(
        &mut self,
        n: &Node,
        a: &Act,
        integer: bool,
        kind: OpKind,
        shape: Vec<usize>,
        perm: Vec<usize>,
    ) -> Result<()> {
        if integer {
            return self.emit_integer(n, kind, vec![a.id], shape, perm, a.id);
        }
        let mut p = self.pending(n, kind, vec![a.id], shape, perm);
        p.keep_quant_of = Some(a.id);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }

    /// `Tile(x, repeats)`.
    pub(crate) fn tile(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let (a, integer) = self.moved_input(n)?;
        let reps = self.ints_input(n, 1)?;
        let rank = a.perm.len();
        if reps.len() != rank {
            return Err(n.err(format!(
                "repeats has {} values for a rank-{rank} input",
                reps.len()
            )));
        }
        let mut multiples = vec![1usize; rank];
        for (i, &r) in reps.iter().enumerate() {
            multiples[a.perm[i]] = super::to_usize(n, "repeats", r)?;
        }
        let mut shape = self.tensor(a.id).shape.clone();
        for (d, &m) in shape.iter_mut().zip(&multiples) {
            *d = d
                .checked_mul(m)
                .ok_or_else(|| n.err("tiled size overflows"))?;
        }
        let perm = a.perm.clone();
        self.emit_moved(n, &a, integer, OpKind::Tile { multiples }, shape, perm)
    }

    /// `Pad` with mode `reflect` or `edge` (IR pads already in IR order).
    pub(crate) fn mirror_pad(
        &mut self,
        n: &Node,
        mode: PadMode,
        pads: Vec<(usize, usize)>,
    ) -> Result<()> {
        let (a, integer) = self.moved_input(n)?;
        let mut shape = self.tensor(a.id).shape.clone();
        for (d, &(b, e)) in shape.iter_mut().zip(&pads) {
            *d = d
                .checked_add(b)
                .and_then(|v| v.checked_add(e))
                .ok_or_else(|| n.err("padded size overflows"))?;
        }
        let perm = a.perm.clone();
        self.emit_moved(
            n,
            &a,
            integer,
            OpKind::MirrorPad { pads, mode },
            shape,
            perm,
        )
    }

    /// `ReverseSequence` whose `sequence_lens` are all the full time length: a reversal of the
    /// time axis.
    pub(crate) fn reverse_sequence(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let (a, integer) = self.moved_input(n)?;
        let onnx_shape = self.act_shape(&a);
        let rank = onnx_shape.len();
        let time = onnx_axis(n, n.attr_i_or("time_axis", 0)?, rank)?;
        let batch = onnx_axis(n, n.attr_i_or("batch_axis", 1)?, rank)?;
        if time == batch || rank < 2 {
            return Err(n.err("time_axis and batch_axis must be two different axes"));
        }
        let lens = self.ints_input(n, 1)?;
        let full = onnx_shape[time] as i64;
        if lens.len() != onnx_shape[batch] || lens.iter().any(|&l| l != full) {
            return Err(n.err(format!(
                "sequence_lens {lens:?}: only whole sequences ({full}) of all {} batches are \
                 supported",
                onnx_shape[batch]
            )));
        }
        let shape = self.tensor(a.id).shape.clone();
        let perm = a.perm.clone();
        let kind = OpKind::Reverse {
            axes: vec![a.perm[time]],
        };
        self.emit_moved(n, &a, integer, kind, shape, perm)
    }

    /// `Gather(data, indices)` with constant indices (negative ones count from the end).
    pub(crate) fn gather(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(2)?;
        let (a, integer) = self.moved_input(n)?;
        let onnx_shape = self.act_shape(&a);
        let rank = onnx_shape.len();
        let axis = onnx_axis(n, n.attr_i_or("axis", 0)?, rank)?;
        let c = self
            .const_input(n, 1)?
            .ok_or_else(|| n.err("indices are missing"))?;
        let raw = c.elems.to_i64().ok_or_else(|| {
            n.err(format!(
                "indices must be integers, but they are {}",
                c.elems.type_name()
            ))
        })?;
        let size = onnx_shape[axis] as i64;
        let indices = raw
            .iter()
            .map(|&i| {
                let j = if i < 0 { i + size } else { i };
                usize::try_from(j).ok().filter(|&j| (j as i64) < size)
            })
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                n.err(format!(
                    "indices {raw:?} out of range for axis {axis} of size {size}"
                ))
            })?;
        if c.dims.len() == 1 {
            // Same rank: the layout survives.
            let mut shape = self.tensor(a.id).shape.clone();
            shape[a.perm[axis]] = indices.len();
            let kind = OpKind::Gather {
                axis: a.perm[axis],
                indices,
            };
            let perm = a.perm.clone();
            return self.emit_moved(n, &a, integer, kind, shape, perm);
        }
        // Other index ranks change the rank: gather in ONNX order.
        let a = self.relayout(&a, &layout::identity(rank))?;
        let mut shape = onnx_shape[..axis].to_vec();
        shape.extend_from_slice(&c.dims);
        shape.extend_from_slice(&onnx_shape[axis + 1..]);
        let perm = layout::identity(shape.len());
        self.emit_moved(
            n,
            &a,
            integer,
            OpKind::Gather { axis, indices },
            shape,
            perm,
        )
    }

    /// `DepthToSpace` (modes DCR and CRD) and `SpaceToDepth`, NCHW in ONNX.
    pub(crate) fn space_depth(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(1)?;
        let (a, integer) = self.moved_input(n)?;
        if a.perm.len() != 4 {
            return Err(n.err(format!("input has rank {}, expected 4", a.perm.len())));
        }
        let raw_block = n
            .attr_i("blocksize")?
            .ok_or_else(|| n.err("blocksize is missing"))?;
        let block = super::to_positive(n, "blocksize", raw_block)?;
        // ONNX NCHW seen over an IR NHWC tensor.
        let nchw = [0, 3, 1, 2];
        let a = self.relayout(&a, &nchw)?;
        let s = self.tensor(a.id).shape.clone();
        let (kind, shape) = if n.op_type == "DepthToSpace" {
            let crd = match n.attr_s("mode")?.as_deref() {
                None | Some("DCR") => false,
                Some("CRD") => true,
                Some(m) => return Err(n.err(format!("unknown mode '{m}'"))),
            };
            let bb = block * block;
            if !s[3].is_multiple_of(bb) {
                return Err(n.err(format!(
                    "{} channels are not a multiple of blocksize^2 = {bb}",
                    s[3]
                )));
            }
            (
                OpKind::DepthToSpace { block, crd },
                vec![s[0], s[1] * block, s[2] * block, s[3] / bb],
            )
        } else {
            if !s[1].is_multiple_of(block) || !s[2].is_multiple_of(block) {
                return Err(n.err(format!(
                    "height {} and width {} are not multiples of blocksize {block}",
                    s[1], s[2]
                )));
            }
            (
                OpKind::SpaceToDepth { block },
                vec![s[0], s[1] / block, s[2] / block, s[3] * block * block],
            )
        };
        self.emit_moved(n, &a, integer, kind, shape, nchw.to_vec())
    }
}
