//! Helpers shared by the kernels: integer element types, quantization parameters, rescale factors,
//! broadcasting and error construction.

use crate::error::{Error, Result};
use crate::ir::{DType, Graph, Op, Quantization, TensorId};
use crate::value::Data;
use npu_rt::fixed::{FastMultiplier, quantize_multiplier};

/// An integer element type of quantized activations.
pub trait QInt: Copy + Default + Send + Sync + 'static {
    const MIN: i32;
    const MAX: i32;
    fn get(self) -> i32;
    /// `v` must already be within `MIN..=MAX` (kernels clamp before storing).
    fn put(v: i32) -> Self;
    fn slice(d: &Data) -> Option<&[Self]>;
    fn wrap(v: Vec<Self>) -> Data;
}

macro_rules! qint {
    ($t:ty, $variant:ident) => {
        impl QInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn get(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn put(v: i32) -> Self {
                v as $t
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
        }
    };
}
qint!(i8, I8);
qint!(u8, U8);
qint!(i16, I16);

/// Runs `$body` with `$T` bound to the Rust type of integer dtype `$dt` (I8, U8 or I16).
macro_rules! with_qint {
    ($dt:expr, $T:ident => $body:expr, else $other:expr) => {
        match $dt {
            $crate::ir::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::ir::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::ir::DType::I16 => {
                type $T = i16;
                $body
            }
            _ => $other,
        }
    };
}
pub(crate) use with_qint;

/// Whether `dt` is a quantized activation type the integer kernels handle.
pub fn is_qint(dt: DType) -> bool {
    matches!(dt, DType::I8 | DType::U8 | DType::I16)
}

/// Error about a node.
pub fn node_err(op: &Op, detail: impl Into<String>) -> Error {
    Error::InvalidNode {
        node: op.name.clone(),
        op: op.kind.name().into(),
        detail: detail.into(),
    }
}

/// Per-tensor quantization of a tensor (scale, zero point), required.
pub fn per_tensor(g: &Graph, op: &Op, id: TensorId) -> Result<(f32, i32)> {
    let t = &g.tensors[id];
    match &t.quant {
        Some(q) if q.scale.len() == 1 && q.zero_point.len() == 1 => {
            let s = q.scale[0];
            if !(s.is_finite() && s > 0.0) {
                return Err(node_err(
                    op,
                    format!("tensor '{}' has an invalid scale {s}", t.name),
                ));
            }
            Ok((s, q.zero_point[0]))
        }
        Some(_) => Err(node_err(
            op,
            format!("tensor '{}' must be quantized per tensor", t.name),
        )),
        None => Err(node_err(
            op,
            format!("tensor '{}' has no quantization parameters", t.name),
        )),
    }
}

/// Whether two optional quantizations are the same (bit-equal scales and zero points).
pub fn same_quant(a: &Option<Quantization>, b: &Option<Quantization>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.zero_point == b.zero_point
                && a.scale.len() == b.scale.len()
                && a.scale
                    .iter()
                    .zip(&b.scale)
                    .all(|(x, y)| x.to_bits() == y.to_bits())
        }
        _ => false,
    }
}

/// A rescale factor as TFLite's `QuantizeMultiplier` encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rescale {
    pub multiplier: i32,
    pub shift: i32,
    fast: FastMultiplier,
    /// Round once ([`Requant::Single`](crate::ir::Requant::Single)) instead of TFLite's twice.
    pub single: bool,
}

impl Rescale {
    /// Encodes `real`; rejects factors the integer arithmetic cannot represent (negative,
    /// not finite, or 2^30 and above).
    pub fn new(op: &Op, real: f64, what: &str) -> Result<Rescale> {
        if !(real.is_finite() && real >= 0.0) {
            return Err(node_err(
                op,
                format!("{what} rescale factor {real} is invalid"),
            ));
        }
        let (multiplier, shift) = quantize_multiplier(real);
        if shift > 30 {
            return Err(node_err(
                op,
                format!("{what} rescale factor {real} is too large for 32-bit requantization"),
            ));
        }
        Ok(Rescale::from_parts(multiplier, shift))
    }

    /// A factor given as a Q31 multiplier and a shift (`-31..=30`).
    pub fn from_parts(multiplier: i32, shift: i32) -> Rescale {
        Rescale {
            multiplier,
            shift,
            fast: FastMultiplier::new(multiplier, shift),
            single: false,
        }
    }

    /// This factor with `requant`'s rounding.
    pub fn with_requant(mut self, requant: crate::ir::Requant) -> Rescale {
        self.single = requant == crate::ir::Requant::Single;
        self
    }

    /// `x * multiplier * 2^(shift - 31)` rounded once, half up (the NPU's NATURAL rounding),
    /// saturated to i32.
    #[inline(always)]
    pub fn apply_single(self, x: i32) -> i32 {
        npu_rt::fixed::multiply_round_once(x, self.multiplier, self.shift)
    }

    /// `MultiplyByQuantizedMultiplier(x, multiplier, shift)`.
    #[inline(always)]
    pub fn apply(self, x: i32) -> i32 {
        if self.single {
            return self.apply_single(x);
        }
        self.fast.apply(x)
    }

    /// No left shift and no saturation: [`Rescale::apply_simple`] applies.
    pub fn is_simple(self) -> bool {
        !self.single && self.fast.is_simple()
    }

    /// [`Rescale::apply`] for a factor that [`is_simple`](Rescale::is_simple).
    #[inline(always)]
    pub fn apply_simple(self, x: i32) -> i32 {
        self.fast.apply_simple(x)
    }
}

/// A zeroed vector of `n` elements, failing cleanly when memory is short.
pub fn zeroed<T: Default + Clone>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::InvalidTensor {
        tensor: what.to_string(),
        detail: format!("out of memory allocating {n} elements"),
    })?;
    v.resize(n, T::default());
    Ok(v)
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Numpy broadcast of two shapes (`None` if incompatible).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

/// Strides to read an input of shape `shape` broadcast to `out` (0 along broadcast dimensions).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let n = out.len();
    (0..n)
        .map(|i| {
            if i + shape.len() < n {
                0
            } else {
                let j = i + shape.len() - n;
                if shape[j] == 1 && out[i] != 1 {
                    0
                } else {
                    s[j]
                }
            }
        })
        .collect()
}

/// Calls `f(out_index, a_offset, b_offset)` for every element of `out`, in row-major order.
pub fn for_each_broadcast(
    out: &[usize],
    sa: &[usize],
    sb: &[usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    let total: usize = out.iter().product();
    if total == 0 {
        return;
    }
    let n = out.len();
    let mut idx = vec![0usize; n];
    let (mut oa, mut ob) = (0usize, 0usize);
    for k in 0..total {
        f(k, oa, ob);
        // Odometer increment, keeping the input offsets in step.
        let mut d = n;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < out[d] {
                break;
            }
            oa -= sa[d] * out[d];
            ob -= sb[d] * out[d];
            idx[d] = 0;
        }
    }
}

/// A kernel was handed data of another type than the one it was prepared for (a bug: inputs are
/// checked against the graph before running).
pub fn bad_data() -> Error {
    Error::Internal("internal error: tensor data of an unexpected type".into())
}

/// `shape` reduced over the axes marked in `reduced`: each such axis becomes 1 with `keep_dims`
/// and is dropped without.
pub fn reduced_shape(shape: &[usize], reduced: &[bool], keep_dims: bool) -> Vec<usize> {
    shape
        .iter()
        .zip(reduced)
        .filter_map(|(&d, &r)| match (r, keep_dims) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(d),
        })
        .collect()
}
