//! Softmax over the last axis.
//!
//! 8-bit: TFLite's reference kernel (`reference_ops::Softmax` for quantized types, chosen by
//! `activations.cc` when the kernel type is `kReference`): the input differences from the row
//! maximum are scaled to Q5.26 fixed point, exponentiated with gemmlowp's
//! `exp_on_negative_values`, summed in Q12.19, and divided with gemmlowp's
//! `one_over_one_plus_x_for_x_in_0_1` reciprocal. The output scale is fixed at 1/256 with the zero
//! point at the type's minimum, as TFLite requires.
//!
//! Float: the reference float kernel (`exp((x - max) * beta)` in single precision, divided by the
//! single-precision sum), with `npu_rt`'s `exp_f32` (see its docs) in place of libm's `expf`.

use super::util::{QInt, Rescale, bad_data, node_err, per_tensor, with_qint, zeroed};
use super::{Kernel, Prepared};
use crate::error::{Error, Result};
use crate::ir::{DType, Graph, Op};
use crate::value::Data;
use npu_rt::cpu::float::exp_f32;
// gemmlowp's arithmetic lives once, in the runtime (its CPU kernels run the same softmax).
use npu_rt::fixed::{
    exp_on_negative_values, reciprocal, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul as srdhm,
};

pub struct Softmax {
    pub(crate) depth: usize,
    len: usize,
    pub(crate) kind: Kind,
}

/// The arithmetic of a softmax: fixed-point for 8-bit, single precision for f32.
pub(crate) enum Kind {
    Quantized {
        /// Scales input differences to Q5.26.
        rescale: Rescale,
        /// Differences below this contribute nothing.
        diff_min: i32,
        in_dtype: DType,
        out_dtype: DType,
    },
    Float {
        beta: f32,
    },
}

impl Softmax {
    pub(super) fn prepare(g: &Graph, op: &Op, beta: f32) -> Result<Prepared> {
        Ok(Prepared::new(
            Softmax::new(g, op, beta)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types and prepares the fixed-point parameters.
    pub(crate) fn new(g: &Graph, op: &Op, beta: f32) -> Result<Softmax> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if xt.shape != ot.shape || xt.shape.is_empty() {
            return Err(node_err(
                op,
                format!(
                    "input {:?} and output {:?} must have one non-scalar shape",
                    xt.shape, ot.shape
                ),
            ));
        }
        let depth = *xt.shape.last().unwrap_or(&1);
        let len = xt.elements();
        let kind = match (xt.dtype, ot.dtype) {
            (DType::F32, DType::F32) => Kind::Float { beta },
            (DType::I8 | DType::U8, DType::I8 | DType::U8) => {
                let (si, _) = per_tensor(g, op, op.inputs[0])?;
                let (so, zo) = per_tensor(g, op, op.outputs[0])?;
                let zmin = ot.dtype.int_range().map_or(0, |r| r.0) as i32;
                if zo != zmin || (so - 1.0 / 256.0).abs() > 0.001 / 256.0 {
                    return Err(node_err(
                        op,
                        format!(
                            "8-bit softmax needs output scale 1/256 and zero point {zmin} \
                             (got {so}, {zo})"
                        ),
                    ));
                }
                // PreprocessSoftmaxScaling with 5 integer bits (Q5.26 input differences).
                const SCALED_DIFF_INTEGER_BITS: i32 = 5;
                let real = (f64::from(beta)
                    * f64::from(si)
                    * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
                .min(f64::from(i32::MAX));
                let rescale = Rescale::new(op, real, "input")?;
                if rescale.shift < 0 {
                    return Err(node_err(
                        op,
                        format!("input scale {si} with beta {beta} is too small"),
                    ));
                }
                // CalculateInputRadius(5, left_shift, 31): inputs further below the row maximum
                // than this contribute nothing.
                let radius = (f64::from((1i32 << SCALED_DIFF_INTEGER_BITS) - 1)
                    * (1i64 << (31 - SCALED_DIFF_INTEGER_BITS)) as f64
                    / (1i64 << rescale.shift) as f64)
                    .floor();
                Kind::Quantized {
                    rescale,
                    diff_min: -(radius as i32),
                    in_dtype: xt.dtype,
                    out_dtype: ot.dtype,
                }
            }
            (a, b) => {
                return Err(node_err(
                    op,
                    format!(
                        "softmax from {a} to {b} is not supported (f32 -> f32, 8-bit -> 8-bit)"
                    ),
                ));
            }
        };
        Ok(Softmax { depth, len, kind })
    }

    fn run_quantized<I: QInt, O: QInt>(
        &self,
        x: &[I],
        rescale: Rescale,
        diff_min: i32,
    ) -> Result<Data> {
        let mut out = zeroed::<O>(self.len, "softmax output")?;
        let d = self.depth;
        if d == 0 {
            return Ok(O::wrap(out));
        }
        let out_bits = if O::MAX > 255 { 16 } else { 8 };
        for (row, orow) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let max = row.iter().map(|v| v.get()).max().unwrap_or(0);
            let scaled = |v: i32| {
                // MultiplyByQuantizedMultiplierGreaterThanOne.
                srdhm(v.wrapping_mul(1 << rescale.shift), rescale.multiplier)
            };
            let mut sum: i32 = 0; // Q12.19
            for v in row {
                let diff = v.get() - max;
                if diff >= diff_min {
                    let e = exp_on_negative_values(scaled(diff));
                    sum = sum.wrapping_add(rounding_divide_by_pot(e, 12));
                }
            }
            let (shifted_scale, bits_over_unit) = reciprocal(sum, 12);
            let exponent = bits_over_unit + 31 - out_bits;
            if !(0..=31).contains(&exponent) {
                return Err(Error::Data(format!(
                    "softmax: reciprocal exponent {exponent} out of range (row too long?)"
                )));
            }
            for (o, v) in orow.iter_mut().zip(row) {
                let diff = v.get() - max;
                *o = if diff >= diff_min {
                    let e = exp_on_negative_values(scaled(diff));
                    let unsat = rounding_divide_by_pot(srdhm(shifted_scale, e), exponent);
                    O::put(unsat.wrapping_add(O::MIN).clamp(O::MIN, O::MAX))
                } else {
                    O::put(O::MIN)
                };
            }
        }
        Ok(O::wrap(out))
    }

    fn run_float(&self, x: &[f32], beta: f32) -> Data {
        let mut out = vec![0f32; x.len()];
        let d = self.depth.max(1);
        for (row, orow) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for (o, &v) in orow.iter_mut().zip(row) {
                // The CPU kernel's exp (correctly rounded but for ~1e-16-wide boundary
                // cases), so both agree bit for bit; libm's expf may differ by one ulp.
                *o = exp_f32((v - max) * beta);
                sum += *o;
            }
            for o in orow.iter_mut() {
                *o /= sum;
            }
        }
        Data::F32(out)
    }
}

impl Kernel for Softmax {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match &self.kind {
            Kind::Float { beta } => match inputs[0] {
                Data::F32(x) => Ok(self.run_float(x, *beta)),
                _ => Err(bad_data()),
            },
            Kind::Quantized {
                rescale,
                diff_min,
                in_dtype,
                out_dtype,
            } => with_qint!(*out_dtype, O => {
                with_qint!(*in_dtype, I => {
                    let x = I::slice(inputs[0]).ok_or_else(bad_data)?;
                    self.run_quantized::<I, O>(x, *rescale, *diff_min)
                }, else Err(bad_data()))
            }, else Err(bad_data())),
        }
    }
}

/// onnxruntime's QLinearSoftmax over the last axis of an 8-bit tensor ([`OpKind::OrtSoftmax`]):
/// its 256-entry table of `exp` values and its output multiplier, with the row arithmetic of
/// `npu_rt::cpu::float::ort_softmax_row` (shared with the CPU kernel).
///
/// [`OpKind::OrtSoftmax`]: crate::ir::OpKind::OrtSoftmax
pub struct OrtSoftmax {
    pub(crate) table: [f32; 256],
    pub(crate) depth: usize,
    pub(crate) rows: usize,
    /// `floor(1 / output_scale)` in f32, as onnxruntime computes it.
    pub(crate) y_scale: f32,
    pub(crate) zp: i32,
    pub(crate) signed: bool,
}

impl OrtSoftmax {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        Ok(Prepared::new(OrtSoftmax::new(g, op)?, vec![op.inputs[0]]))
    }

    /// Checks the operands (one 8-bit type in and out, per-tensor) and builds the table.
    pub(crate) fn new(g: &Graph, op: &Op) -> Result<OrtSoftmax> {
        let ([x], [y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(op, "expects one input and one output"));
        };
        let (xt, yt) = (&g.tensors[*x], &g.tensors[*y]);
        let signed = match (xt.dtype, yt.dtype) {
            (DType::I8, DType::I8) => true,
            (DType::U8, DType::U8) => false,
            (a, b) => {
                return Err(node_err(
                    op,
                    format!(
                        "onnxruntime's QLinearSoftmax takes int8 or uint8 in and out, not {a} -> {b}"
                    ),
                ));
            }
        };
        if xt.shape != yt.shape || xt.shape.is_empty() {
            return Err(node_err(
                op,
                "input and output must have one non-scalar shape",
            ));
        }
        let depth = *xt.shape.last().unwrap_or(&1);
        let (sx, _) = per_tensor(g, op, *x)?;
        let (sy, zp) = per_tensor(g, op, *y)?;
        if depth == 0 || !(sx > 0.0 && sy > 0.0) {
            return Err(node_err(
                op,
                "needs positive scales and a non-empty last axis",
            ));
        }
        Ok(OrtSoftmax {
            table: ort_softmax_table(sx, depth, signed),
            depth,
            rows: xt.elements() / depth,
            y_scale: (1.0f32 / sy).floor(),
            zp,
            signed,
        })
    }
}

/// onnxruntime's `QlinearBuildLookupTableUint32` (with its float table): `exp((i - 255 +
/// shift) * x_scale)` in double for `i` in `0..256`, stored as f32, where `shift = max(0,
/// ln(FLT_MAX / depth) - 5) / x_scale` keeps the sum of a row below FLT_MAX; int8 tables are
/// stored at index `uint8(i - 128)`.
pub(crate) fn ort_softmax_table(x_scale: f32, depth: usize, signed: bool) -> [f32; 256] {
    let shift = ((f64::from(f32::MAX) / depth as f64).ln() - 5.0).max(0.0) / f64::from(x_scale);
    let mut t = [0f32; 256];
    for i in 0..256i32 {
        let v = ((f64::from(i) - 255.0 + shift) * f64::from(x_scale)).exp();
        let k = if signed { (i - 128) as u8 } else { i as u8 };
        t[usize::from(k)] = v as f32;
    }
    t
}

impl OrtSoftmax {
    fn run_typed<T: QInt>(&self, x: &[T]) -> Result<Data> {
        let n = self.depth;
        if x.len() != self.rows * n {
            return Err(bad_data());
        }
        let mut y = zeroed::<T>(x.len(), "softmax output")?;
        for r in 0..self.rows {
            let row = r * n;
            npu_rt::cpu::float::ort_softmax_row(
                &self.table,
                |i| x[row + i].get(),
                n,
                self.y_scale,
                self.zp,
                self.signed,
                |i, v| y[row + i] = T::put(v),
            );
        }
        Ok(T::wrap(y))
    }
}

impl Kernel for OrtSoftmax {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match inputs[0] {
            Data::I8(x) if self.signed => self.run_typed(x),
            Data::U8(x) if !self.signed => self.run_typed(x),
            _ => Err(bad_data()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_of_zero_is_one() {
        assert_eq!(exp_on_negative_values(0), i32::MAX);
    }

    #[test]
    fn exp_is_close_to_float() {
        for &v in &[-0.1f64, -0.5, -1.0, -2.5, -7.0, -20.0] {
            let raw = (v * f64::from(1 << 26)) as i32;
            let got = f64::from(exp_on_negative_values(raw)) / 2f64.powi(31);
            assert!((got - v.exp()).abs() < 1e-6, "{v}: {got} vs {}", v.exp());
        }
    }

    #[test]
    fn reciprocal_is_close_to_float() {
        for &x in &[1.0f64, 1.5, 3.0, 10.0, 100.0] {
            let raw = (x * f64::from(1 << 19)) as i32;
            let (r, bits) = reciprocal(raw, 12);
            let got = f64::from(r) / 2f64.powi(31) / 2f64.powi(bits);
            assert!((got - 1.0 / x).abs() < 1e-6 / x, "{x}: {got}");
        }
    }
}
