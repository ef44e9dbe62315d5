//! Abs and Neg (TFLite's `elementwise.cc` ABS and `neg.cc` NEG reference kernels).
//!
//! ABS on quantized int8/int16: `|x - in_zp|`, rescaled by `QuantizeMultiplier(in_scale /
//! out_scale)` (the quotient computed in single precision) when the scales differ, plus the
//! output zero point, clamped to the type. int16 requires both zero points to be 0. Unquantized
//! int16 and int32 take the raw absolute value (wrapping at the type's minimum, as the C++ cast
//! does); f32 the float one.
//!
//! NEG negates the raw stored value whatever the quantization (TFLite's `Negate` on the integer
//! data, so int8 -128 wraps to -128); f32 negates the float.

use super::util::{Rescale, bad_data, node_err, per_tensor, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op};
use crate::value::Data;

/// Which unary function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryFn {
    Abs,
    Neg,
}

/// How integer values are mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntMode {
    /// The function of the raw value, wrapped to the type.
    Raw,
    /// `f(x - zi) + zo`, clamped to the type (Abs with equal input and output scales).
    Offset { zi: i32, zo: i32 },
    /// `MultiplyByQuantizedMultiplier(f(x - zi)) + zo`, clamped to the type.
    Rescaled { zi: i32, zo: i32, rescale: Rescale },
}

/// A prepared Abs or Neg.
pub struct Unary {
    pub func: UnaryFn,
    pub dtype: DType,
    pub mode: IntMode,
}

impl Unary {
    pub(super) fn prepare(g: &Graph, op: &Op, func: UnaryFn) -> Result<Prepared> {
        Ok(Prepared::new(Unary::new(g, op, func)?, op.inputs.clone()))
    }

    /// Checks types and shapes and decides the integer mapping.
    pub fn new(g: &Graph, op: &Op, func: UnaryFn) -> Result<Unary> {
        let (x, y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
            ([x], [y]) => (*x, *y),
            _ => return Err(node_err(op, "expects one input and one output")),
        };
        let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
        if xt.dtype != yt.dtype || xt.shape != yt.shape {
            return Err(node_err(
                op,
                format!(
                    "input '{}' {:?} {} and output '{}' {:?} {} must have one type and shape",
                    xt.name, xt.shape, xt.dtype, yt.name, yt.shape, yt.dtype
                ),
            ));
        }
        let dtype = xt.dtype;
        let mode = match (func, dtype) {
            (_, DType::F32) | (UnaryFn::Neg, DType::I8 | DType::I16 | DType::I32) => IntMode::Raw,
            (UnaryFn::Abs, DType::I32) => IntMode::Raw,
            (UnaryFn::Abs, DType::I16) if xt.quant.is_none() => IntMode::Raw,
            (UnaryFn::Abs, DType::I8 | DType::I16) => {
                let (si, zi) = per_tensor(g, op, x)?;
                let (so, zo) = per_tensor(g, op, y)?;
                if dtype == DType::I16 && (zi != 0 || zo != 0) {
                    return Err(node_err(
                        op,
                        format!(
                            "int16 Abs needs zero points of 0 (input '{}' has {zi}, output '{}' {zo})",
                            xt.name, yt.name
                        ),
                    ));
                }
                if si == so {
                    IntMode::Offset { zi, zo }
                } else {
                    // elementwise.cc: QuantizeMultiplier(input_scale / output_scale) on floats.
                    let rescale = Rescale::new(op, f64::from(si / so), "output")?;
                    IntMode::Rescaled { zi, zo, rescale }
                }
            }
            _ => {
                return Err(node_err(
                    op,
                    format!(
                        "{} of {dtype} tensors is not supported (TFLite's kernel takes {})",
                        op.kind.name(),
                        match func {
                            UnaryFn::Abs => "f32, i8, i16, i32",
                            UnaryFn::Neg => "f32, i8, i16, i32",
                        }
                    ),
                ));
            }
        };
        Ok(Unary { func, dtype, mode })
    }

    /// The integer function of one stored value, for a type of range `lo..=hi` (the result of
    /// a raw function is wrapped to the type by the caller's cast).
    #[inline]
    pub fn apply_int(&self, v: i32, lo: i32, hi: i32) -> i32 {
        let f = |d: i32| match self.func {
            UnaryFn::Abs => d.wrapping_abs(),
            UnaryFn::Neg => d.wrapping_neg(),
        };
        match self.mode {
            IntMode::Raw => f(v),
            IntMode::Offset { zi, zo } => f(v - zi).wrapping_add(zo).clamp(lo, hi),
            IntMode::Rescaled { zi, zo, rescale } => {
                rescale.apply(f(v - zi)).wrapping_add(zo).clamp(lo, hi)
            }
        }
    }
}

impl Kernel for Unary {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let x = inputs.first().ok_or_else(bad_data)?;
        Ok(match (self.dtype, x) {
            (DType::F32, Data::F32(v)) => Data::F32(
                v.iter()
                    .map(|&f| match self.func {
                        UnaryFn::Abs => f.abs(),
                        UnaryFn::Neg => -f,
                    })
                    .collect(),
            ),
            (DType::I8, Data::I8(v)) => {
                let mut out = zeroed::<i8>(v.len(), "unary output")?;
                for (o, &a) in out.iter_mut().zip(v) {
                    *o = self.apply_int(i32::from(a), -128, 127) as i8;
                }
                Data::I8(out)
            }
            (DType::I16, Data::I16(v)) => {
                let mut out = zeroed::<i16>(v.len(), "unary output")?;
                for (o, &a) in out.iter_mut().zip(v) {
                    *o = self.apply_int(i32::from(a), -32768, 32767) as i16;
                }
                Data::I16(out)
            }
            (DType::I32, Data::I32(v)) => {
                Data::I32(v.iter().map(|&a| self.apply_int(a, 0, 0)).collect())
            }
            _ => return Err(bad_data()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TensorId;
    use crate::ir::{OpKind, Quantization, Tensor};

    fn graph(dtype: DType, qi: Option<(f32, i32)>, qo: Option<(f32, i32)>, kind: OpKind) -> Graph {
        let t = |name: &str, q: Option<(f32, i32)>| Tensor {
            name: name.into(),
            shape: vec![4],
            dtype,
            quant: q.map(|(s, z)| Quantization::per_tensor(s, z)),
            data: None,
        };
        Graph {
            name: "t".into(),
            tensors: vec![t("x", qi), t("y", qo)],
            ops: vec![Op {
                name: "u".into(),
                kind,
                inputs: vec![TensorId(0)],
                outputs: vec![TensorId(1)],
            }],
            inputs: vec![TensorId(0)],
            outputs: vec![TensorId(1)],
            variables: Vec::new(),
            requant: Default::default(),
        }
    }

    #[test]
    fn neg_wraps_raw_values_like_tflite() {
        let g = graph(DType::I8, Some((0.5, 3)), Some((0.25, -7)), OpKind::Neg);
        let u = Unary::new(&g, &g.ops[0], UnaryFn::Neg).unwrap();
        let out = u.run(&[&Data::I8(vec![-128, -1, 0, 127])]).expect("runs");
        assert_eq!(out, Data::I8(vec![-128, 1, 0, -127]));
    }

    #[test]
    fn abs_offsets_and_rescales() {
        // Same scale: |x - 2| - 100, clamped.
        let g = graph(DType::I8, Some((0.5, 2)), Some((0.5, -100)), OpKind::Abs);
        let u = Unary::new(&g, &g.ops[0], UnaryFn::Abs).unwrap();
        let out = u.run(&[&Data::I8(vec![-128, 2, 3, 127])]).unwrap();
        assert_eq!(out, Data::I8(vec![30, -100, -99, 25]));
        // Half the scale: |x| * 2 (exact), clamped at 127.
        let g = graph(DType::I8, Some((0.5, 0)), Some((0.25, 0)), OpKind::Abs);
        let u = Unary::new(&g, &g.ops[0], UnaryFn::Abs).unwrap();
        let out = u.run(&[&Data::I8(vec![-128, -3, 5, 60])]).unwrap();
        assert_eq!(out, Data::I8(vec![127, 6, 10, 120]));
        // int16 with a zero point is rejected, naming the tensors.
        let g = graph(DType::I16, Some((0.5, 1)), Some((0.25, 0)), OpKind::Abs);
        let e = Unary::new(&g, &g.ops[0], UnaryFn::Abs).err().unwrap();
        assert!(e.to_string().contains("zero points"), "{e}");
        // Unquantized int16 wraps at -32768.
        let g = graph(DType::I16, None, None, OpKind::Abs);
        let u = Unary::new(&g, &g.ops[0], UnaryFn::Abs).unwrap();
        let out = u.run(&[&Data::I16(vec![-32768, -5, 5, 0])]).unwrap();
        assert_eq!(out, Data::I16(vec![-32768, 5, 5, 0]));
    }
}
