//! Quantize, Dequantize and stand-alone activations.

use super::util::{QInt, Rescale, bad_data, is_qint, node_err, per_tensor, with_qint, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::quant::activation_range;
use crate::ir::{Activation, DType, Graph, Op, TensorId};
use crate::value::Data;

fn io(g: &Graph, op: &Op) -> Result<(TensorId, TensorId)> {
    if op.inputs.len() != 1 || op.outputs.len() != 1 {
        return Err(node_err(op, "expects one input and one output"));
    }
    let (x, o) = (op.inputs[0], op.outputs[0]);
    if g.tensors[x].shape.iter().product::<usize>() != g.tensors[o].elements() {
        return Err(node_err(
            op,
            format!(
                "input {:?} and output {:?} differ in size",
                g.tensors[x].shape, g.tensors[o].shape
            ),
        ));
    }
    Ok((x, o))
}

/// Quantize: float -> integer, or integer -> integer requantization.
///
/// Float inputs are quantized as ONNX `QuantizeLinear` does: `x / scale` in single precision,
/// rounded half to even, plus the zero point, saturated. (TFLite's `AffineQuantize` rounds half
/// away from zero; the two differ only on exact ties. Float-boundary models come from ONNX, so the
/// ONNX rule is the one used here.)
///
/// Integer inputs are requantized as TFLite's `Requantize`:
/// `MultiplyByQuantizedMultiplier(x - zp_in, in_scale / out_scale) + zp_out`, saturated.
pub struct Quantize {
    from: DType,
    to: DType,
    pub(crate) out_scale: f32,
    pub(crate) zo: i32,
    pub(crate) zi: i32,
    /// `in_scale / out_scale` for integer inputs.
    pub(crate) rescale: Option<Rescale>,
}

impl Quantize {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        Ok(Prepared::new(Quantize::new(g, op)?, vec![op.inputs[0]]))
    }

    /// Checks shapes and types and prepares the rescale factor.
    pub(crate) fn new(g: &Graph, op: &Op) -> Result<Quantize> {
        let (x, o) = io(g, op)?;
        let (from, to) = (g.tensors[x].dtype, g.tensors[o].dtype);
        if !is_qint(to) || !(from == DType::F32 || is_qint(from)) {
            return Err(node_err(
                op,
                format!("quantizing {from} to {to} is not supported (f32 or 8/16-bit -> 8/16-bit)"),
            ));
        }
        let (out_scale, zo) = per_tensor(g, op, o)?;
        let (zi, rescale) = if from == DType::F32 {
            (0, None)
        } else {
            let (si, zi) = per_tensor(g, op, x)?;
            let r = Rescale::new(op, f64::from(si) / f64::from(out_scale), "output")?;
            (zi, Some(r))
        };
        Ok(Quantize {
            from,
            to,
            out_scale,
            zo,
            zi,
            rescale,
        })
    }

    fn quantize_float<O: QInt>(&self, x: &[f32]) -> Result<Data> {
        let mut out = zeroed::<O>(x.len(), "quantize output")?;
        for (o, &v) in out.iter_mut().zip(x) {
            let q = (v / self.out_scale).round_ties_even();
            // Saturate in float first: `as` would also saturate, but NaN must map somewhere defined.
            let q = if q.is_nan() { 0.0 } else { q };
            let q = (q as f64 + f64::from(self.zo)).clamp(f64::from(O::MIN), f64::from(O::MAX));
            *o = O::put(q as i32);
        }
        Ok(O::wrap(out))
    }

    fn requantize<I: QInt, O: QInt>(&self, x: &[I], r: Rescale) -> Result<Data> {
        let mut out = zeroed::<O>(x.len(), "quantize output")?;
        for (o, &v) in out.iter_mut().zip(x) {
            let q = r.apply(v.get() - self.zi).wrapping_add(self.zo);
            *o = O::put(q.clamp(O::MIN, O::MAX));
        }
        Ok(O::wrap(out))
    }
}

impl Kernel for Quantize {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.to, O => {
            match (inputs[0], self.rescale) {
                (Data::F32(x), None) => self.quantize_float::<O>(x),
                (d, Some(r)) => with_qint!(self.from, I => {
                    let x = I::slice(d).ok_or_else(bad_data)?;
                    self.requantize::<I, O>(x, r)
                }, else Err(bad_data())),
                _ => Err(bad_data()),
            }
        }, else Err(bad_data()))
    }
}

/// Dequantize: integer -> float, `(x - zp) * scale` (computed in double and rounded once to
/// single precision, as TFLite's reference; ONNX's single-precision product gives the same value
/// because the exact product fits a double).
pub struct Dequantize {
    from: DType,
    scale: f64,
    zp: i32,
}

impl Dequantize {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        let (x, o) = io(g, op)?;
        let from = g.tensors[x].dtype;
        if !is_qint(from) || g.tensors[o].dtype != DType::F32 {
            return Err(node_err(
                op,
                format!(
                    "dequantizing {from} to {} is not supported",
                    g.tensors[o].dtype
                ),
            ));
        }
        let (s, zp) = per_tensor(g, op, x)?;
        Ok(Prepared::new(
            Dequantize {
                from,
                scale: f64::from(s),
                zp,
            },
            vec![x],
        ))
    }
}

impl Kernel for Dequantize {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.from, I => {
            let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
            Ok(Data::F32(
                x.iter()
                    .map(|v| (self.scale * f64::from(v.get() - self.zp)) as f32)
                    .collect(),
            ))
        }, else Err(bad_data()))
    }
}

/// A stand-alone activation. Integer: TFLite's `QuantizedReluX` (requantize from the input's to the
/// output's quantization, then clamp to the activation's quantized range). Float: a clamp.
pub struct Act {
    dtype: DType,
    pub(crate) kind: ActKind,
}

/// The arithmetic of a stand-alone activation.
pub(crate) enum ActKind {
    Int {
        zi: i32,
        zo: i32,
        rescale: Rescale,
        lo: i32,
        hi: i32,
    },
    Float {
        lo: f32,
        hi: f32,
    },
}

impl Act {
    pub(super) fn prepare(g: &Graph, op: &Op, act: Activation) -> Result<Prepared> {
        Ok(Prepared::new(Act::new(g, op, act)?, vec![op.inputs[0]]))
    }

    /// Checks shapes and types and prepares the rescale factor or the float bounds.
    pub(crate) fn new(g: &Graph, op: &Op, act: Activation) -> Result<Act> {
        let (x, o) = io(g, op)?;
        let (xt, ot) = (&g.tensors[x], &g.tensors[o]);
        if xt.dtype != ot.dtype || !(xt.dtype == DType::F32 || is_qint(xt.dtype)) {
            return Err(node_err(
                op,
                format!(
                    "activation from {} to {} is not supported",
                    xt.dtype, ot.dtype
                ),
            ));
        }
        let kind = if xt.dtype == DType::F32 {
            let (lo, hi) = act.bounds();
            ActKind::Float {
                lo: lo.unwrap_or(f32::NEG_INFINITY),
                hi: hi.unwrap_or(f32::INFINITY),
            }
        } else {
            let (si, zi) = per_tensor(g, op, x)?;
            let (so, zo) = per_tensor(g, op, o)?;
            let (lo, hi) = activation_range(act, so, zo, ot.dtype);
            ActKind::Int {
                zi,
                zo,
                rescale: Rescale::new(op, f64::from(si) / f64::from(so), "output")?,
                lo,
                hi: hi.max(lo),
            }
        };
        Ok(Act {
            dtype: xt.dtype,
            kind,
        })
    }
}

impl Kernel for Act {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match self.kind {
            ActKind::Float { lo, hi } => match inputs[0] {
                Data::F32(x) => Ok(Data::F32(x.iter().map(|&v| v.max(lo).min(hi)).collect())),
                _ => Err(bad_data()),
            },
            ActKind::Int {
                zi,
                zo,
                rescale,
                lo,
                hi,
            } => with_qint!(self.dtype, T => {
                let x = T::slice(inputs[0]).ok_or_else(bad_data)?;
                let out: Vec<T> = x
                    .iter()
                    .map(|v| {
                        let q = rescale.apply(v.get() - zi).wrapping_add(zo);
                        T::put(q.clamp(lo, hi).clamp(<T as QInt>::MIN, <T as QInt>::MAX))
                    })
                    .collect();
                Ok(T::wrap(out))
            }, else Err(bad_data())),
        }
    }
}
