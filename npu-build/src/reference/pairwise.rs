//! Maximum, Minimum, SquaredDifference and PRelu with numpy broadcasting (TFLite's
//! `maximum_minimum.cc`, `squared_difference.cc` and `activations.cc` PRELU reference kernels).
//!
//! - MAXIMUM/MINIMUM compare the raw stored values and store the winner unchanged, whatever the
//!   tensors' quantization (TFLite checks none).
//! - SQUARED_DIFFERENCE on int8: both inputs `(v - z) << 7` are scaled by
//!   `s_i / (2 max(s_1, s_2))` (QuantizeMultiplierSmallerThanOneExp), subtracted, squared, and
//!   scaled by `(2 max)^2 / (2^14 s_out)`, plus the output zero point, clamped. int32 and f32
//!   take `(a - b)^2` directly.
//! - PRELU on int8/uint8: `x - zx >= 0` gives `MBQM(x - zx, s_x / s_out)`, otherwise
//!   `MBQM((x - zx) (alpha - za), s_x s_alpha / s_out)`, both quotients computed in single
//!   precision, plus the output zero point, clamped. `alpha` broadcasts to `x`'s shape.

use super::util::{
    Rescale, bad_data, broadcast_shape, broadcast_strides, for_each_broadcast, node_err,
    per_tensor, zeroed,
};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, FloatBinFn, Graph, Op};
use crate::value::Data;
use npu_rt::cpu::PairwiseKind;

/// Which function of two operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairFn {
    Maximum,
    Minimum,
    SquaredDifference,
    Prelu,
    /// Add, Sub, Mul or Div of f32 tensors (float islands).
    Float(FloatBinFn),
}

impl PairFn {
    /// The CPU kernel's function code.
    pub fn kind(self) -> PairwiseKind {
        match self {
            PairFn::Maximum => PairwiseKind::Maximum,
            PairFn::Minimum => PairwiseKind::Minimum,
            PairFn::SquaredDifference => PairwiseKind::SquaredDifference,
            PairFn::Prelu => PairwiseKind::Prelu,
            PairFn::Float(FloatBinFn::Add) => PairwiseKind::Add,
            PairFn::Float(FloatBinFn::Sub) => PairwiseKind::Sub,
            PairFn::Float(FloatBinFn::Mul) => PairwiseKind::Mul,
            PairFn::Float(FloatBinFn::Div) => PairwiseKind::Div,
        }
    }
}

/// Integer parameters of SquaredDifference (`left_shift` 7) and PRelu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantized {
    /// Maximum/Minimum, and SquaredDifference on int32: the raw values.
    Raw,
    SquaredDifference {
        za: i32,
        zb: i32,
        zo: i32,
        left_shift: i32,
        in1: Rescale,
        in2: Rescale,
        out: Rescale,
    },
    Prelu {
        zx: i32,
        za: i32,
        zo: i32,
        pos: Rescale,
        neg: Rescale,
    },
}

/// A prepared pairwise operator.
pub struct Pairwise {
    pub func: PairFn,
    pub q: Quantized,
    pub out_shape: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
}

impl Pairwise {
    pub(super) fn prepare(g: &Graph, op: &Op, func: PairFn) -> Result<Prepared> {
        Ok(Prepared::new(
            Pairwise::new(g, op, func)?,
            op.inputs.clone(),
        ))
    }

    /// Checks types and shapes and prepares the integer parameters.
    pub fn new(g: &Graph, op: &Op, func: PairFn) -> Result<Pairwise> {
        let (a, b, y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
            ([a, b], [y]) => (*a, *b, *y),
            _ => return Err(node_err(op, "expects two inputs and one output")),
        };
        let (ta, tb, to) = (&g.tensors[a], &g.tensors[b], &g.tensors[y]);
        if ta.dtype != to.dtype || tb.dtype != to.dtype {
            return Err(node_err(
                op,
                format!(
                    "inputs '{}' ({}) and '{}' ({}) and output '{}' ({}) must share one type",
                    ta.name, ta.dtype, tb.name, tb.dtype, to.name, to.dtype
                ),
            ));
        }
        let out_shape = broadcast_shape(&ta.shape, &tb.shape)
            .filter(|s| *s == to.shape)
            .ok_or_else(|| {
                node_err(
                    op,
                    format!(
                        "shapes {:?} ('{}') and {:?} ('{}') do not broadcast to the output shape {:?}",
                        ta.shape, ta.name, tb.shape, tb.name, to.shape
                    ),
                )
            })?;
        let dtype = to.dtype;
        let unsupported = |types: &str| {
            node_err(
                op,
                format!(
                    "{} of {dtype} tensors is not supported (TFLite's kernel takes {types})",
                    op.kind.name()
                ),
            )
        };
        let q = match func {
            PairFn::Float(f) => match dtype {
                DType::F32 => Quantized::Raw,
                _ => {
                    return Err(node_err(
                        op,
                        format!("float {} of {dtype} tensors: f32 expected", f.name()),
                    ));
                }
            },
            PairFn::Maximum | PairFn::Minimum => match dtype {
                DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::F32 => Quantized::Raw,
                _ => return Err(unsupported("f32, u8, i8, i16, i32")),
            },
            PairFn::SquaredDifference => match dtype {
                DType::I32 | DType::F32 => Quantized::Raw,
                DType::I8 => {
                    let (s1, za) = per_tensor(g, op, a)?;
                    let (s2, zb) = per_tensor(g, op, b)?;
                    let (so, zo) = per_tensor(g, op, y)?;
                    let left_shift = 7;
                    // squared_difference.cc Prepare: doubles from the float scales.
                    let twice_max = 2.0 * f64::from(s1.max(s2));
                    let real_out = twice_max * twice_max
                        / (f64::from(1i32 << (2 * left_shift)) * f64::from(so));
                    let smaller_than_one = |real: f64, what: &str| -> Result<Rescale> {
                        let r = Rescale::new(op, real, what)?;
                        if real >= 1.0 || r.shift > 0 {
                            return Err(node_err(
                                op,
                                format!(
                                    "{what} rescale factor {real} is not below 1 (TFLite's \
                                     QuantizeMultiplierSmallerThanOneExp requires it)"
                                ),
                            ));
                        }
                        Ok(r)
                    };
                    Quantized::SquaredDifference {
                        za,
                        zb,
                        zo,
                        left_shift,
                        in1: smaller_than_one(f64::from(s1) / twice_max, "input 1")?,
                        in2: smaller_than_one(f64::from(s2) / twice_max, "input 2")?,
                        out: smaller_than_one(real_out, "output")?,
                    }
                }
                _ => return Err(unsupported("f32, i8, i32")),
            },
            PairFn::Prelu => {
                if out_shape != ta.shape {
                    return Err(node_err(
                        op,
                        format!(
                            "alpha '{}' {:?} must broadcast to the input's shape {:?}",
                            tb.name, tb.shape, ta.shape
                        ),
                    ));
                }
                match dtype {
                    DType::F32 => Quantized::Raw,
                    DType::I8 | DType::U8 => {
                        let (sx, zx) = per_tensor(g, op, a)?;
                        let (sa, za) = per_tensor(g, op, b)?;
                        let (so, zo) = per_tensor(g, op, y)?;
                        // activations.cc PreluPrepare: float quotients and products.
                        Quantized::Prelu {
                            zx,
                            za,
                            zo,
                            pos: Rescale::new(op, f64::from(sx / so), "positive")?,
                            neg: Rescale::new(op, f64::from(sx * sa / so), "negative")?,
                        }
                    }
                    _ => return Err(unsupported("f32, u8, i8")),
                }
            }
        };
        let sa = broadcast_strides(&ta.shape, &out_shape);
        let sb = broadcast_strides(&tb.shape, &out_shape);
        Ok(Pairwise {
            func,
            q,
            out_shape,
            sa,
            sb,
        })
    }

    /// The integer function of one pair of stored values, clamped to `lo..=hi` where TFLite
    /// clamps (raw int32 results wrap instead).
    #[inline]
    pub fn apply_int(&self, x: i32, v: i32, lo: i32, hi: i32) -> i32 {
        match (self.func, self.q) {
            (PairFn::Maximum, _) => x.max(v),
            (PairFn::Minimum, _) => x.min(v),
            (
                _,
                Quantized::SquaredDifference {
                    za,
                    zb,
                    zo,
                    left_shift,
                    in1,
                    in2,
                    out,
                },
            ) => {
                let a = in1.apply((x - za).wrapping_mul(1 << left_shift));
                let b = in2.apply((v - zb).wrapping_mul(1 << left_shift));
                let d = a.wrapping_sub(b);
                out.apply(d.wrapping_mul(d)).wrapping_add(zo).clamp(lo, hi)
            }
            (
                _,
                Quantized::Prelu {
                    zx,
                    za,
                    zo,
                    pos,
                    neg,
                },
            ) => {
                let d = x - zx;
                let r = if d >= 0 {
                    pos.apply(d)
                } else {
                    neg.apply(d.wrapping_mul(v - za))
                };
                r.wrapping_add(zo).clamp(lo, hi)
            }
            (PairFn::SquaredDifference, Quantized::Raw) => {
                let d = x.wrapping_sub(v);
                d.wrapping_mul(d)
            }
            // Prelu is always quantized on integers, Float never integer (checked in `new`).
            (PairFn::Prelu | PairFn::Float(_), Quantized::Raw) => x,
        }
    }

    /// The f32 function (the CPU kernel's own).
    #[inline]
    pub fn apply_f32(&self, x: f32, v: f32) -> f32 {
        self.func.kind().apply_f32(x, v)
    }

    fn map<T: Copy, U: Default + Clone>(
        &self,
        a: &[T],
        b: &[T],
        f: impl Fn(T, T) -> U,
    ) -> Result<Vec<U>> {
        let n: usize = self.out_shape.iter().product();
        let mut out = zeroed::<U>(n, "pairwise output")?;
        let mut bad = false;
        for_each_broadcast(&self.out_shape, &self.sa, &self.sb, |k, ia, ib| {
            match (a.get(ia), b.get(ib)) {
                (Some(&x), Some(&v)) => out[k] = f(x, v),
                _ => bad = true,
            }
        });
        if bad {
            return Err(bad_data());
        }
        Ok(out)
    }
}

impl Kernel for Pairwise {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let (a, b) = match inputs {
            [a, b] => (*a, *b),
            _ => return Err(bad_data()),
        };
        Ok(match (a, b) {
            (Data::F32(a), Data::F32(b)) => Data::F32(self.map(a, b, |x, v| self.apply_f32(x, v))?),
            (Data::I8(a), Data::I8(b)) => Data::I8(self.map(a, b, |x, v| {
                self.apply_int(i32::from(x), i32::from(v), -128, 127) as i8
            })?),
            (Data::U8(a), Data::U8(b)) => Data::U8(self.map(a, b, |x, v| {
                self.apply_int(i32::from(x), i32::from(v), 0, 255) as u8
            })?),
            (Data::I16(a), Data::I16(b)) => Data::I16(self.map(a, b, |x, v| {
                self.apply_int(i32::from(x), i32::from(v), -32768, 32767) as i16
            })?),
            (Data::I32(a), Data::I32(b)) => {
                Data::I32(self.map(a, b, |x, v| self.apply_int(x, v, i32::MIN, i32::MAX))?)
            }
            _ => return Err(bad_data()),
        })
    }
}
