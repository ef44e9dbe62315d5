//! SUM, REDUCE_MAX, REDUCE_MIN (over any set of axes) and ARG_MAX / ARG_MIN (along one axis).
//!
//! The arithmetic is that of TFLite's default kernels (`reduce.cc`, `arg_min_max.cc`), which
//! is what the `tflite` Python interpreter runs; `docs/reduce.md` lists the facts and sources:
//! - MAX / MIN compare the stored integers (TFLite requires the output to keep the input's
//!   quantization; an ONNX model that gives the output another one is requantized afterwards
//!   with TFLite's `Requantize` arithmetic).
//! - SUM of 8-bit integers: `round(sum * (si / so) + (-zi * (si / so) * count)) + zo` in single
//!   precision (TFLite's `QuantizedMeanOrSum` with `compute_sum`), rounded half away from zero,
//!   saturated to the output type. TFLite's default runtime delegates int8 SUM to XNNPACK, which
//!   saturates where the builtin kernel would truncate; the shared `op_sum` fixture and the
//!   checks listed in `docs/reduce.md` agree with this formula on every element.
//! - A 16-bit SUM (TFLite requires the same quantization in and out) adds the stored integers in
//!   the element type, wrapping, as the kernel's `T + T` does.
//! - ARG_MAX / ARG_MIN keep the first index on ties.

use super::movement::Requant;
use super::util::{
    QInt, bad_data, node_err, per_tensor, reduced_shape, same_quant, strides, with_qint, zeroed,
};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, Op, ReduceOp};
use crate::value::Data;

/// How a reduction turns the reduced elements into an output element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ReduceMode {
    /// Wrapping sum in the element type.
    SumRaw,
    /// The single-precision rescaled 8-bit sum, saturated: `scale` is `si / so`, `bias` is
    /// `-zi * scale * count`, both as TFLite computes them in `f32`.
    SumScaled {
        scale: f32,
        bias: f32,
        zo: i32,
    },
    Max,
    Min,
}

/// A prepared SUM / REDUCE_MAX / REDUCE_MIN: the CPU kernel is built from the same fields.
pub struct Reduce {
    pub(crate) mode: ReduceMode,
    pub(crate) dtype: DType,
    /// Input shape, and whether each dimension is reduced.
    pub(crate) shape: Vec<usize>,
    pub(crate) reduced: Vec<bool>,
    /// Requantization after MAX / MIN (ONNX outputs quantized unlike their input).
    pub(crate) requant: Option<Requant>,
    out_len: usize,
}

/// Checks that `op` reduces its single input over `axes` into an output of the right size and
/// returns which dimensions are reduced.
pub(crate) fn reduced_dims(
    g: &Graph,
    op: &Op,
    axes: &[usize],
    keep_dims: bool,
) -> Result<Vec<bool>> {
    if op.inputs.len() != 1 || op.outputs.len() != 1 {
        return Err(node_err(op, "expects one input and one output"));
    }
    let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
    let rank = xt.shape.len();
    let mut reduced = vec![false; rank];
    for &a in axes {
        match reduced.get_mut(a) {
            Some(r) => *r = true,
            None => {
                return Err(node_err(
                    op,
                    format!(
                        "axis {a} is out of range for input '{}' of rank {rank}",
                        xt.name
                    ),
                ));
            }
        }
    }
    let expect = reduced_shape(&xt.shape, &reduced, keep_dims);
    if expect.iter().product::<usize>() != ot.elements() {
        return Err(node_err(
            op,
            format!(
                "output '{}' {:?} does not match input '{}' {:?} reduced over {axes:?}",
                ot.name, ot.shape, xt.name, xt.shape
            ),
        ));
    }
    Ok(reduced)
}

impl Reduce {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        kind: ReduceOp,
        axes: &[usize],
        keep_dims: bool,
    ) -> Result<Prepared> {
        Ok(Prepared::new(
            Reduce::new(g, op, kind, axes, keep_dims)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes, types and quantization and decides the arithmetic.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        kind: ReduceOp,
        axes: &[usize],
        keep_dims: bool,
    ) -> Result<Reduce> {
        let reduced = reduced_dims(g, op, axes, keep_dims)?;
        let (x, y) = (op.inputs[0], op.outputs[0]);
        let (xt, ot) = (&g.tensors[x], &g.tensors[y]);
        if !matches!(xt.dtype, DType::I8 | DType::U8 | DType::I16) || xt.dtype != ot.dtype {
            return Err(node_err(
                op,
                format!(
                    "input '{}' ({}) and output '{}' ({}) must be one of i8, u8, i16",
                    xt.name, xt.dtype, ot.name, ot.dtype
                ),
            ));
        }
        let (si, zi) = per_tensor(g, op, x)?;
        let (so, zo) = per_tensor(g, op, y)?;
        if xt.dtype == DType::I16 && (zi != 0 || zo != 0) {
            return Err(node_err(
                op,
                format!(
                    "16-bit input '{}' and output '{}' must have zero point 0",
                    xt.name, ot.name
                ),
            ));
        }
        let same = same_quant(&xt.quant, &ot.quant);
        let count: usize = xt
            .shape
            .iter()
            .zip(&reduced)
            .filter(|(_, r)| **r)
            .map(|(d, _)| *d)
            .product();
        let (mode, requant) = match kind {
            ReduceOp::Max | ReduceOp::Min => {
                let mode = if kind == ReduceOp::Max {
                    ReduceMode::Max
                } else {
                    ReduceMode::Min
                };
                (mode, Requant::between(g, op, x, y)?)
            }
            ReduceOp::Sum if xt.dtype == DType::I16 && same => (ReduceMode::SumRaw, None),
            ReduceOp::Sum if xt.dtype == DType::I16 => {
                return Err(node_err(
                    op,
                    format!(
                        "a 16-bit SUM needs output '{}' quantized like input '{}' \
                         (TFLite's kernel rescales only 8-bit sums)",
                        ot.name, xt.name
                    ),
                ));
            }
            ReduceOp::Sum => {
                // PrepareMeanOrSum / QuantizedMeanOrSum: single-precision factors.
                let scale = si / so;
                let bias = -(zi as f32) * scale * (count as f32);
                (ReduceMode::SumScaled { scale, bias, zo }, None)
            }
        };
        Ok(Reduce {
            mode,
            dtype: xt.dtype,
            shape: xt.shape.clone(),
            reduced,
            requant,
            out_len: ot.elements(),
        })
    }

    fn run_typed<T: QInt>(&self, x: &[T]) -> Result<Data> {
        let rank = self.shape.len();
        let in_len: usize = self.shape.iter().product();
        if x.len() < in_len {
            return Err(bad_data());
        }
        let kept: Vec<usize> = (0..rank)
            .map(|d| if self.reduced[d] { 1 } else { self.shape[d] })
            .collect();
        let ks = strides(&kept);
        let out_strides: Vec<usize> = (0..rank)
            .map(|d| if self.reduced[d] { 0 } else { ks[d] })
            .collect();
        let init = match self.mode {
            ReduceMode::SumRaw | ReduceMode::SumScaled { .. } => 0,
            ReduceMode::Max => T::MIN,
            ReduceMode::Min => T::MAX,
        };
        let mut acc = zeroed::<i32>(self.out_len, "reduce accumulators")?;
        acc.iter_mut().for_each(|a| *a = init);
        let mut idx = vec![0usize; rank];
        let mut o = 0usize;
        for v in &x[..in_len] {
            let v = v.get();
            let a = &mut acc[o];
            *a = match self.mode {
                // The element-type sum wraps at every step; the 8-bit rescaled sum is int32.
                ReduceMode::SumRaw => wrap::<T>(a.wrapping_add(v)),
                ReduceMode::SumScaled { .. } => a.wrapping_add(v),
                ReduceMode::Max => (*a).max(v),
                ReduceMode::Min => (*a).min(v),
            };
            let mut d = rank;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                o += out_strides[d];
                if idx[d] < self.shape[d] {
                    break;
                }
                o -= out_strides[d] * self.shape[d];
                idx[d] = 0;
            }
        }
        let mut out = zeroed::<T>(self.out_len, "reduce output")?;
        let count_zero = in_len == 0;
        for (q, &a) in out.iter_mut().zip(&acc) {
            let v = match self.mode {
                ReduceMode::SumScaled { scale, bias, zo } if !count_zero => {
                    scaled_sum(a, scale, bias)
                        .saturating_add(zo)
                        .clamp(T::MIN, T::MAX)
                }
                ReduceMode::SumScaled { .. } => 0,
                _ => a,
            };
            *q = T::put(v);
        }
        if let Some(r) = self.requant {
            for q in out.iter_mut() {
                *q = T::put(r.apply_one(q.get()).clamp(T::MIN, T::MAX));
            }
        }
        Ok(T::wrap(out))
    }
}

/// `round(sum * scale + bias)` in single precision, rounding half away from zero, saturated to
/// int32 (the caller saturates further to the output type).
pub(crate) fn scaled_sum(sum: i32, scale: f32, bias: f32) -> i32 {
    (sum as f32 * scale + bias).round() as i32
}

/// The low bits of `v` as the element type, sign- or zero-extended back (a C++ narrowing cast).
fn wrap<T: QInt>(v: i32) -> i32 {
    match T::MAX - T::MIN {
        255 if T::MIN < 0 => i32::from(v as i8),
        255 => i32::from(v as u8),
        65535 => i32::from(v as i16),
        _ => v,
    }
}

impl Kernel for Reduce {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.dtype, T => {
            let x = T::slice(inputs[0]).ok_or_else(bad_data)?;
            self.run_typed::<T>(x)
        }, else Err(bad_data()))
    }
}

/// A prepared ARG_MAX / ARG_MIN over `[outer, len, inner]`.
pub struct ArgMinMax {
    pub(crate) max: bool,
    pub(crate) dtype: DType,
    pub(crate) index: DType,
    pub(crate) outer: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
}

impl ArgMinMax {
    pub(super) fn prepare(g: &Graph, op: &Op, axis: usize, max: bool) -> Result<Prepared> {
        Ok(Prepared::new(
            ArgMinMax::new(g, op, axis, max)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types.
    pub(crate) fn new(g: &Graph, op: &Op, axis: usize, max: bool) -> Result<ArgMinMax> {
        if op.inputs.len() != 1 || op.outputs.len() != 1 {
            return Err(node_err(op, "expects one input and one output"));
        }
        let (xt, ot) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if !matches!(xt.dtype, DType::I8 | DType::U8 | DType::I16) {
            return Err(node_err(
                op,
                format!(
                    "input '{}' is {}; i8, u8 or i16 is supported",
                    xt.name, xt.dtype
                ),
            ));
        }
        if !matches!(ot.dtype, DType::I32 | DType::I64) {
            return Err(node_err(
                op,
                format!(
                    "output '{}' is {}; the index type must be i32 or i64",
                    ot.name, ot.dtype
                ),
            ));
        }
        let rank = xt.shape.len();
        if axis >= rank {
            return Err(node_err(
                op,
                format!(
                    "axis {axis} is out of range for input '{}' of rank {rank}",
                    xt.name
                ),
            ));
        }
        let len = xt.shape[axis];
        let outer: usize = xt.shape[..axis].iter().product();
        let inner: usize = xt.shape[axis + 1..].iter().product();
        if outer.saturating_mul(inner) != ot.elements() {
            return Err(node_err(
                op,
                format!(
                    "output '{}' {:?} does not match input '{}' {:?} without axis {axis}",
                    ot.name, ot.shape, xt.name, xt.shape
                ),
            ));
        }
        if len == 0 {
            return Err(node_err(
                op,
                format!(
                    "axis {axis} of input '{}' is empty: no index to return",
                    xt.name
                ),
            ));
        }
        Ok(ArgMinMax {
            max,
            dtype: xt.dtype,
            index: ot.dtype,
            outer,
            len,
            inner,
        })
    }

    fn run_typed<T: QInt>(&self, x: &[T]) -> Result<Data> {
        let n = self.outer * self.inner;
        if x.len() < n * self.len {
            return Err(bad_data());
        }
        let mut out = zeroed::<i32>(n, "arg output")?;
        for o in 0..self.outer {
            for i in 0..self.inner {
                let base = o * self.len * self.inner + i;
                let (mut best, mut at) = (x[base].get(), 0usize);
                for k in 1..self.len {
                    let v = x[base + k * self.inner].get();
                    if (self.max && v > best) || (!self.max && v < best) {
                        best = v;
                        at = k;
                    }
                }
                out[o * self.inner + i] = i32::try_from(at).unwrap_or(i32::MAX);
            }
        }
        match self.index {
            DType::I32 => Ok(Data::I32(out)),
            _ => Ok(Data::I64(out.into_iter().map(i64::from).collect())),
        }
    }
}

impl Kernel for ArgMinMax {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        with_qint!(self.dtype, T => {
            let x = T::slice(inputs[0]).ok_or_else(bad_data)?;
            self.run_typed::<T>(x)
        }, else Err(bad_data()))
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::TensorId;
    use crate::ir::{DType, Graph, Op, OpKind, Quantization, ReduceOp, Tensor};
    use crate::value::{Data, Value};

    /// `kind` from `x` (`shape`, `dtype`, quantization `qi`) to an output of `out_shape`,
    /// `out_dtype`, quantization `qo`, run on `data`.
    fn run(
        kind: OpKind,
        shape: &[usize],
        x: Data,
        qi: Option<(f32, i32)>,
        out_shape: &[usize],
        out_dtype: DType,
        qo: Option<(f32, i32)>,
    ) -> crate::error::Result<Data> {
        let t = |name: &str, shape: &[usize], dtype, q: Option<(f32, i32)>| Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            quant: q.map(|(s, z)| Quantization::per_tensor(s, z)),
            data: None,
        };
        let g = Graph {
            name: "t".into(),
            tensors: vec![
                t("x", shape, x.dtype(), qi),
                t("y", out_shape, out_dtype, qo),
            ],
            ops: vec![Op {
                name: "op".into(),
                kind,
                inputs: vec![TensorId(0)],
                outputs: vec![TensorId(1)],
            }],
            inputs: vec![TensorId(0)],
            outputs: vec![TensorId(1)],
            variables: Vec::new(),
            requant: Default::default(),
        };
        let v = Value::new(shape.to_vec(), x)?;
        Ok(crate::reference::run(&g, &[v])?.remove(0).data)
    }

    fn reduce(op: ReduceOp, axes: &[usize]) -> OpKind {
        OpKind::Reduce {
            op,
            axes: axes.to_vec(),
            keep_dims: false,
        }
    }

    #[test]
    fn max_and_min_compare_stored_integers() {
        let x = || Data::I8(vec![1, 5, -3, 7, -8, 7]);
        let q = Some((0.5, 0));
        let got = run(
            reduce(ReduceOp::Max, &[1]),
            &[2, 3],
            x(),
            q,
            &[2],
            DType::I8,
            q,
        )
        .unwrap();
        assert_eq!(got, Data::I8(vec![5, 7]));
        let got = run(
            reduce(ReduceOp::Min, &[1]),
            &[2, 3],
            x(),
            q,
            &[2],
            DType::I8,
            q,
        )
        .unwrap();
        assert_eq!(got, Data::I8(vec![-3, -8]));
        let got = run(
            reduce(ReduceOp::Max, &[0]),
            &[2, 3],
            x(),
            q,
            &[3],
            DType::I8,
            q,
        )
        .unwrap();
        assert_eq!(got, Data::I8(vec![7, 5, 7]));
    }

    #[test]
    fn sum_rescales_rounds_half_away_and_saturates() {
        let x = || Data::I8(vec![100, 100, -50, 3]);
        // 153 * (1 / 2) = 76.5 -> 77, + 1.
        let got = run(
            reduce(ReduceOp::Sum, &[1]),
            &[1, 4],
            x(),
            Some((1.0, 0)),
            &[1],
            DType::I8,
            Some((2.0, 1)),
        )
        .unwrap();
        assert_eq!(got, Data::I8(vec![78]));
        // Input zero point 2: (153 - 4 * 2) * 1 = 145 saturates at 127.
        let got = run(
            reduce(ReduceOp::Sum, &[1]),
            &[1, 4],
            x(),
            Some((1.0, 2)),
            &[1],
            DType::I8,
            Some((1.0, 0)),
        )
        .unwrap();
        assert_eq!(got, Data::I8(vec![127]));
        // int16: the stored integers added in int16 (30000 + 30000 wraps to -5536).
        let q = Some((0.25, 0));
        let got = run(
            reduce(ReduceOp::Sum, &[0]),
            &[2],
            Data::I16(vec![30000, 30000]),
            q,
            &[],
            DType::I16,
            q,
        )
        .unwrap();
        assert_eq!(got, Data::I16(vec![-5536]));
    }

    #[test]
    fn arg_keeps_the_first_index_on_ties() {
        let q = Some((0.1, 0));
        let argmax = OpKind::ArgMinMax { axis: 1, max: true };
        let argmin = OpKind::ArgMinMax {
            axis: 1,
            max: false,
        };
        let x = || Data::I8(vec![3, 7, 7, -1, 3, -1, 7, -1]);
        let got = run(argmax, &[2, 4], x(), q, &[2], DType::I32, None).unwrap();
        assert_eq!(got, Data::I32(vec![1, 2]));
        let got = run(argmin, &[2, 4], x(), q, &[2], DType::I64, None).unwrap();
        assert_eq!(got, Data::I64(vec![3, 1]));
    }

    #[test]
    fn bad_operands_are_errors_naming_the_tensor() {
        let q = Some((0.1, 0));
        // Output size does not match the reduction.
        let e = run(
            reduce(ReduceOp::Max, &[1]),
            &[2, 3],
            Data::I8(vec![0; 6]),
            q,
            &[3],
            DType::I8,
            q,
        )
        .unwrap_err();
        assert!(e.to_string().contains("'y'"), "{e}");
        // Axis out of range.
        let e = run(
            OpKind::ArgMinMax { axis: 2, max: true },
            &[2, 3],
            Data::I8(vec![0; 6]),
            q,
            &[2],
            DType::I32,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("'x'"), "{e}");
        // A 16-bit SUM that would rescale.
        let e = run(
            reduce(ReduceOp::Sum, &[0]),
            &[2],
            Data::I16(vec![1, 2]),
            q,
            &[],
            DType::I16,
            Some((0.2, 0)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("16-bit"), "{e}");
    }
}
