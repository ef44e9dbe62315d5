//! Add, Sub and Mul with numpy broadcasting (TFLite's quantized `Add`/`Sub`/`Mul` reference
//! kernels and their `Broadcast*Slow` variants, which apply the same per-element function).

use super::util::{
    QInt, Rescale, bad_data, broadcast_shape, broadcast_strides, for_each_broadcast, is_qint,
    node_err, per_tensor, with_qint, zeroed,
};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::quant::activation_range;
use crate::ir::{Activation, DType, Graph, Op};
use crate::value::Data;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
}

/// The per-element integer function and its parameters.
#[derive(Clone, Copy)]
pub(crate) enum Params {
    /// TFLite's general quantized add/sub: both inputs are scaled to a common fixed-point
    /// representation (`left_shift` 20 for 8-bit), summed, and rescaled to the output.
    AddSub {
        sub: bool,
        left_shift: i32,
        in1: Rescale,
        in2: Rescale,
        out: Rescale,
    },
    /// `out_zp + MultiplyByQuantizedMultiplier((a - za) * (b - zb), m, s)`.
    Mul { out: Rescale },
}

pub struct Binary {
    pub(crate) params: Params,
    pub(crate) za: i32,
    pub(crate) zb: i32,
    pub(crate) zo: i32,
    /// Clamp of the fused activation (not yet intersected with the type).
    pub(crate) act: (i32, i32),
    pub(crate) dtype: DType,
    out_shape: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
    /// Both inputs have the output's shape: no index arithmetic needed.
    same_shape: bool,
}

impl Binary {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        which: BinaryOp,
        act: Activation,
    ) -> Result<Prepared> {
        let b = Binary::new(g, op, which, act)?;
        Ok(Prepared::new(b, op.inputs.clone()))
    }

    /// Checks shapes and types and prepares the rescale factors.
    pub(crate) fn new(g: &Graph, op: &Op, which: BinaryOp, act: Activation) -> Result<Binary> {
        if op.inputs.len() != 2 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects two inputs and one output"));
        }
        let (a, b, o) = (op.inputs[0], op.inputs[1], op.outputs[0]);
        let (ta, tb, to) = (&g.tensors[a], &g.tensors[b], &g.tensors[o]);
        if !is_qint(to.dtype) || ta.dtype != to.dtype || tb.dtype != to.dtype {
            return Err(node_err(
                op,
                format!(
                    "inputs ({}, {}) and output ({}) must share one integer type",
                    ta.dtype, tb.dtype, to.dtype
                ),
            ));
        }
        let out_shape = broadcast_shape(&ta.shape, &tb.shape)
            .filter(|s| *s == to.shape)
            .ok_or_else(|| {
                node_err(
                    op,
                    format!(
                        "shapes {:?} and {:?} do not broadcast to the output shape {:?}",
                        ta.shape, tb.shape, to.shape
                    ),
                )
            })?;
        let (s1, za) = per_tensor(g, op, a)?;
        let (s2, zb) = per_tensor(g, op, b)?;
        let (so, zo) = per_tensor(g, op, o)?;
        let params = match which {
            BinaryOp::Add | BinaryOp::Sub => {
                // As TFLite's add.cc/sub.cc Prepare: 8-bit inputs are shifted left by 20 bits.
                let left_shift = if to.dtype == DType::I16 { 15 } else { 20 };
                let twice_max = f64::from(2.0 * s1.max(s2));
                let real_out = twice_max / f64::from((1i32 << left_shift) as f32 * so);
                Params::AddSub {
                    sub: which == BinaryOp::Sub,
                    left_shift,
                    in1: Rescale::new(op, f64::from(s1) / twice_max, "input 1")?,
                    in2: Rescale::new(op, f64::from(s2) / twice_max, "input 2")?,
                    out: Rescale::new(op, real_out, "output")?,
                }
            }
            BinaryOp::Mul => {
                // mul.cc computes the product of the scales in single precision.
                let real = f64::from(s1 * s2 / so);
                Params::Mul {
                    out: Rescale::new(op, real, "output")?.with_requant(g.requant),
                }
            }
        };
        let act = activation_range(act, so, zo, to.dtype);
        let same_shape = ta.shape == out_shape && tb.shape == out_shape;
        let sa = broadcast_strides(&ta.shape, &out_shape);
        let sb = broadcast_strides(&tb.shape, &out_shape);
        Ok(Binary {
            params,
            za,
            zb,
            zo,
            act,
            dtype: to.dtype,
            out_shape,
            sa,
            sb,
            same_shape,
        })
    }

    #[inline(always)]
    fn apply(&self, x: i32, y: i32, lo: i32, hi: i32) -> i32 {
        let raw = match self.params {
            Params::AddSub {
                sub,
                left_shift,
                in1,
                in2,
                out,
            } => {
                let a = in1.apply((x - self.za).wrapping_mul(1 << left_shift));
                let b = in2.apply((y - self.zb).wrapping_mul(1 << left_shift));
                let sum = if sub {
                    a.wrapping_sub(b)
                } else {
                    a.wrapping_add(b)
                };
                out.apply(sum).wrapping_add(self.zo)
            }
            Params::Mul { out } => out
                .apply((x - self.za).wrapping_mul(y - self.zb))
                .wrapping_add(self.zo),
        };
        raw.clamp(lo, hi.max(lo))
    }

    fn run_typed<T: QInt>(&self, a: &[T], b: &[T]) -> Result<Data> {
        let n: usize = self.out_shape.iter().product();
        let mut out = zeroed::<T>(n, "elementwise output")?;
        let (lo, hi) = (self.act.0.max(T::MIN), self.act.1.min(T::MAX));
        if self.same_shape {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = T::put(self.apply(x.get(), y.get(), lo, hi));
            }
        } else {
            for_each_broadcast(&self.out_shape, &self.sa, &self.sb, |k, ia, ib| {
                out[k] = T::put(self.apply(a[ia].get(), b[ib].get(), lo, hi));
            });
        }
        Ok(T::wrap(out))
    }
}

impl Kernel for Binary {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.dtype, T => {
            let a = T::slice(inputs[0]).ok_or_else(bad_data)?;
            let b = T::slice(inputs[1]).ok_or_else(bad_data)?;
            self.run_typed::<T>(a, b)
        }, else Err(bad_data()))
    }
}
