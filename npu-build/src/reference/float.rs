//! Elementwise f32 functions of ONNX float islands ([`OpKind::FloatUnary`]): the operators a
//! quantizer left in float run in single precision, value by value, with the very function the
//! CPU kernel uses (`npu_rt::cpu::float::unary_f32`), so both agree bit for bit.
//!
//! [`OpKind::FloatUnary`]: crate::ir::OpKind::FloatUnary

use npu_rt::cpu::float as f;

use super::util::{bad_data, node_err};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, FloatFn, Graph, Op};
use crate::value::Data;

/// A prepared [`FloatFn`]: its kernel code and parameters.
pub struct FloatUnary {
    pub(crate) func: u32,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
}

/// Kernel code and parameters `(func, alpha, beta)` of `func`.
fn code(func: FloatFn) -> (u32, f32, f32) {
    match func {
        FloatFn::Sigmoid => (f::FN_SIGMOID, 0.0, 0.0),
        FloatFn::Tanh => (f::FN_TANH, 0.0, 0.0),
        FloatFn::LeakyRelu { alpha } => (f::FN_LEAKY_RELU, alpha, 0.0),
        FloatFn::HardSigmoid { alpha, beta } => (f::FN_HARD_SIGMOID, alpha, beta),
        FloatFn::Elu { alpha } => (f::FN_ELU, alpha, 0.0),
        FloatFn::Exp => (f::FN_EXP, 0.0, 0.0),
        FloatFn::Neg => (f::FN_NEG, 0.0, 0.0),
        FloatFn::Abs => (f::FN_ABS, 0.0, 0.0),
        FloatFn::Sqrt => (f::FN_SQRT, 0.0, 0.0),
        FloatFn::Reciprocal => (f::FN_RECIPROCAL, 0.0, 0.0),
        FloatFn::Erf => (f::FN_ERF, 0.0, 0.0),
        FloatFn::Gelu { approximate } => (f::FN_GELU, if approximate { 1.0 } else { 0.0 }, 0.0),
        FloatFn::Relu => (f::FN_RELU, 0.0, 0.0),
        FloatFn::Pow { exponent } => (f::FN_POW, exponent, 0.0),
    }
}

impl FloatUnary {
    pub(super) fn prepare(g: &Graph, op: &Op, func: FloatFn) -> Result<Prepared> {
        Ok(Prepared::new(
            FloatUnary::new(g, op, func)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks the operands (one f32 input, one f32 output of the same shape).
    pub(crate) fn new(g: &Graph, op: &Op, func: FloatFn) -> Result<FloatUnary> {
        let ([x], [y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(op, "expects one input and one output"));
        };
        let (xt, yt) = (&g.tensors[*x], &g.tensors[*y]);
        if xt.dtype != DType::F32 || yt.dtype != DType::F32 {
            return Err(node_err(
                op,
                format!(
                    "{} of {} to {}: float functions take and give f32",
                    func.name(),
                    xt.dtype,
                    yt.dtype
                ),
            ));
        }
        if xt.shape != yt.shape {
            return Err(node_err(
                op,
                format!(
                    "input shape {:?} differs from output shape {:?}",
                    xt.shape, yt.shape
                ),
            ));
        }
        if let FloatFn::Pow { exponent } = func
            && !f::pow_supported(exponent)
        {
            return Err(node_err(
                op,
                format!(
                    "Pow with exponent {exponent}: only -1, -0.5, 0.5, 1, 2 and 3 are supported in float"
                ),
            ));
        }
        let (func, alpha, beta) = code(func);
        Ok(FloatUnary { func, alpha, beta })
    }
}

impl Kernel for FloatUnary {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let Data::F32(x) = inputs[0] else {
            return Err(bad_data());
        };
        x.iter()
            .map(|&v| f::unary_f32(self.func, self.alpha, self.beta, v).ok_or_else(bad_data))
            .collect::<Result<Vec<f32>>>()
            .map(Data::F32)
    }
}

/// A prepared [`OpKind::LayerNorm`]: `rows` rows of `cols` values.
///
/// [`OpKind::LayerNorm`]: crate::ir::OpKind::LayerNorm
pub struct LayerNorm {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) epsilon: f32,
}

impl LayerNorm {
    pub(super) fn prepare(g: &Graph, op: &Op, axis: usize, epsilon: f32) -> Result<Prepared> {
        Ok(Prepared::new(
            LayerNorm::new(g, op, axis, epsilon)?,
            op.inputs.clone(),
        ))
    }

    /// Checks the operands: f32 `x`, `scale` and `bias` shaped like `x`'s axes from `axis`
    /// on, an f32 output shaped like `x`.
    pub(crate) fn new(g: &Graph, op: &Op, axis: usize, epsilon: f32) -> Result<LayerNorm> {
        let ([x, scale, bias], [y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(
                op,
                "expects inputs x, scale and bias and one output",
            ));
        };
        let (xt, yt) = (&g.tensors[*x], &g.tensors[*y]);
        if axis >= xt.shape.len() {
            return Err(node_err(
                op,
                format!("axis {axis} is out of range for rank {}", xt.shape.len()),
            ));
        }
        let inner = &xt.shape[axis..];
        for t in [*x, *scale, *bias, *y].map(|t| &g.tensors[t]) {
            if t.dtype != DType::F32 {
                return Err(node_err(
                    op,
                    format!(
                        "'{}' is {}: layer normalisation takes and gives f32",
                        t.name, t.dtype
                    ),
                ));
            }
        }
        for t in [*scale, *bias].map(|t| &g.tensors[t]) {
            if t.shape != inner {
                return Err(node_err(
                    op,
                    format!(
                        "'{}' has shape {:?}; the normalised axes are {inner:?}",
                        t.name, t.shape
                    ),
                ));
            }
        }
        if yt.shape != xt.shape {
            return Err(node_err(
                op,
                format!(
                    "output shape {:?} differs from input shape {:?}",
                    yt.shape, xt.shape
                ),
            ));
        }
        let cols: usize = inner.iter().product();
        Ok(LayerNorm {
            rows: xt.elements() / cols.max(1),
            cols,
            epsilon,
        })
    }
}

impl Kernel for LayerNorm {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let [Data::F32(x), Data::F32(scale), Data::F32(bias)] = inputs else {
            return Err(bad_data());
        };
        let n = self.cols;
        if x.len() != self.rows * n || scale.len() != n || bias.len() != n {
            return Err(bad_data());
        }
        let mut y = vec![0f32; x.len()];
        for r in 0..self.rows {
            let row = r * n;
            f::layer_norm_row(
                |i| x[row + i],
                n,
                self.epsilon,
                |i, centred, d| {
                    y[row + i] = centred / d * scale[i] + bias[i];
                },
            );
        }
        Ok(Data::F32(y))
    }
}

/// A prepared [`OpKind::FloatReduce`].
///
/// [`OpKind::FloatReduce`]: crate::ir::OpKind::FloatReduce
pub struct FloatReduce {
    pub(crate) shape: Vec<usize>,
    /// Bit `d` set: axis `d` is reduced.
    pub(crate) reduced: u32,
    pub(crate) mean: bool,
    out_len: usize,
}

impl FloatReduce {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        axes: &[usize],
        keep_dims: bool,
        mean: bool,
    ) -> Result<Prepared> {
        Ok(Prepared::new(
            FloatReduce::new(g, op, axes, keep_dims, mean)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks the operands: f32 in and out, the output shaped like the input reduced over
    /// `axes`, rank at most `npu_rt::cpu::MAX_RANK`.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        axes: &[usize],
        keep_dims: bool,
        mean: bool,
    ) -> Result<FloatReduce> {
        let ([x], [y]) = (op.inputs.as_slice(), op.outputs.as_slice()) else {
            return Err(node_err(op, "expects one input and one output"));
        };
        let (xt, yt) = (&g.tensors[*x], &g.tensors[*y]);
        if xt.dtype != DType::F32 || yt.dtype != DType::F32 {
            return Err(node_err(op, "a float reduction takes and gives f32"));
        }
        let rank = xt.shape.len();
        if rank == 0 || rank > npu_rt::cpu::MAX_RANK || axes.iter().any(|&a| a >= rank) {
            return Err(node_err(
                op,
                format!(
                    "axes {axes:?} of a rank-{rank} tensor (rank 1 to {} supported)",
                    npu_rt::cpu::MAX_RANK
                ),
            ));
        }
        let reduced = axes.iter().fold(0u32, |m, &a| m | 1 << a);
        let want: Vec<usize> = (0..rank)
            .filter_map(|d| match (reduced & 1 << d != 0, keep_dims) {
                (true, true) => Some(1),
                (true, false) => None,
                (false, _) => Some(xt.shape[d]),
            })
            .collect();
        if want != yt.shape {
            return Err(node_err(
                op,
                format!(
                    "output shape {:?} is not {:?} reduced over {axes:?}",
                    yt.shape, xt.shape
                ),
            ));
        }
        Ok(FloatReduce {
            shape: xt.shape.clone(),
            reduced,
            mean,
            out_len: yt.elements(),
        })
    }
}

impl Kernel for FloatReduce {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let [Data::F32(x)] = inputs else {
            return Err(bad_data());
        };
        if x.len() != self.shape.iter().product::<usize>() {
            return Err(bad_data());
        }
        let mut y = vec![0f32; self.out_len];
        let mut bad = false;
        f::for_each_reduced(&self.shape, self.reduced, |i, o| match y.get_mut(o) {
            Some(v) => *v += x[i],
            None => bad = true,
        });
        if bad {
            return Err(bad_data());
        }
        if self.mean && self.out_len > 0 {
            let count = (x.len() / self.out_len) as f32;
            y.iter_mut().for_each(|v| *v /= count);
        }
        Ok(Data::F32(y))
    }
}
