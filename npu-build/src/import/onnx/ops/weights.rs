//! Constant operands in the IR: quantized weights re-laid out (OIHW -> OHWI and friends) and
//! int32 biases at `input_scale * weight_scale`.

use std::rc::Rc;

use super::super::builder::{Builder, QConst, Val};
use super::super::constant::{Const, Elems};
use super::super::layout;
use super::super::model::Node;
use super::super::qdq;
use super::super::quant_params::QParams;
use crate::error::Result;
use crate::ir::{DType, Quantization, TensorId};

/// Relative difference under which a bias scale counts as `input_scale * weight_scale`.
const BIAS_SCALE_TOLERANCE: f64 = 1e-5;

impl Builder {
    /// Input `i` as quantized constant weights (a `DequantizeLinear` of an int8/uint8 constant).
    pub(crate) fn weights_input(&self, n: &Node, i: usize) -> Result<Rc<QConst>> {
        let name = n.req_input(i)?;
        match self.val(n, name)? {
            Val::DeqConst(qc) if matches!(qc.c.elems, Elems::I8(_) | Elems::U8(_)) => Ok(qc),
            Val::DeqConst(qc) => Err(n.err(format!(
                "weights '{name}' are {}, INT8 or UINT8 expected",
                qc.c.elems.type_name()
            ))),
            Val::Const(_) => Err(n.err(format!(
                "weights '{name}' are float constants; quantized weights (DequantizeLinear of INT8) are needed"
            ))),
            other => Err(n.err(format!(
                "weights '{name}' are {}; only constant weights are supported",
                other.kind_name()
            ))),
        }
    }

    /// An IR constant made of `qc` transposed by `t` (ONNX dims -> IR dims), cached per value
    /// name and layout. A per-channel axis follows the transpose. UINT8 values become INT8 with
    /// the zero point moved by 128 (the same reals).
    pub(crate) fn const_tensor(
        &mut self,
        n: &Node,
        key: &str,
        qc: &QConst,
        t: &[usize],
    ) -> Result<TensorId> {
        self.const_tensor_in(n, key, qc, t, DType::I8)
    }

    /// [`Builder::const_tensor`] with 8-bit values in `dtype` (I8 or U8: an operand of an
    /// elementwise operator shares its activation's type, as onnxruntime's U8S8 models quantize
    /// an Add's constant to int8 beside a uint8 activation).
    pub(crate) fn const_tensor_in(
        &mut self,
        n: &Node,
        key: &str,
        qc: &QConst,
        t: &[usize],
        dtype: DType,
    ) -> Result<TensorId> {
        let key = if dtype == DType::U8 {
            format!("{key}/u8")
        } else {
            key.to_string()
        };
        let cache_key = (key, t.to_vec());
        if let Some(&id) = self.const_cache.get(&cache_key) {
            return Ok(id);
        }
        let (c, q) = if dtype == DType::U8 {
            to_uint8(qc)
        } else {
            to_int8(qc)
        };
        self.charge(n, c.len().saturating_mul(4))?;
        let moved = c.transpose(t).ok_or_else(|| {
            n.err(format!(
                "cannot lay out constant '{}' of shape {:?}",
                qc.name, c.dims
            ))
        })?;
        let dtype = moved
            .elems
            .ir_dtype()
            .ok_or_else(|| n.err(format!("constant '{}' has no IR type", qc.name)))?;
        let axis = q.axis.and_then(|a| t.iter().position(|&x| x == a));
        let id = self.add_tensor(
            &qc.name,
            moved.dims.clone(),
            dtype,
            Some(q.to_ir(axis)),
            Some(moved.elems.to_le_bytes()),
        );
        self.const_cache.insert(cache_key, id);
        Ok(id)
    }

    /// Weights `qc` of node `n` as an IR tensor laid out by `t`, per-channel along ONNX axis
    /// `channel_axis` (or per-tensor). uint8 weights become int8 with the zero point moved by
    /// 128; nonzero zero points (onnxruntime's asymmetric U8U8 weights) are kept: the reference
    /// and CPU kernels subtract them, the NPU encodes `w - zp` as 9-bit weights (refusing a
    /// difference outside -255..=255, which int8/uint8 data cannot produce).
    pub(crate) fn weight_tensor(
        &mut self,
        n: &Node,
        i: usize,
        qc: &QConst,
        t: &[usize],
        channel_axis: usize,
    ) -> Result<(TensorId, QParams)> {
        let (_, q) = to_int8(qc);
        if q.channels() > 1 && q.axis != Some(channel_axis) {
            return Err(n.err(format!(
                "weights '{}' are quantized per channel along axis {:?}, but the output channels are axis {channel_axis}",
                qc.name, q.axis
            )));
        }
        let key = n.req_input(i)?.to_string();
        let id = self.const_tensor(n, &key, qc, t)?;
        Ok((id, q))
    }

    /// Bias input `i` of `n` as an int32 IR tensor of `channels` values with scale
    /// `input_scale * weight_scale[c]`. Accepts a `DequantizeLinear` of int32 (kept as is when
    /// its scales are those, rescaled otherwise), a float constant (quantized) or an int32
    /// constant (taken as already at that scale).
    pub(crate) fn bias_tensor(
        &mut self,
        n: &Node,
        i: usize,
        input_scale: f32,
        w: &QParams,
        channels: usize,
    ) -> Result<Option<TensorId>> {
        let Some(name) = n.input(i) else {
            return Ok(None);
        };
        let want: Vec<f32> = (0..channels).map(|c| input_scale * w.scale_at(c)).collect();
        let bias_err = |detail: String| n.err(format!("bias '{name}': {detail}"));
        let (values, scales, src_name): (Vec<i64>, Vec<f32>, String) = match self.val(n, name)? {
            Val::DeqConst(qc) => {
                if qc.c.len() != channels {
                    return Err(bias_err(format!(
                        "{} values for {channels} output channels",
                        qc.c.len()
                    )));
                }
                let ints = qc.c.elems.to_i64().unwrap_or_default();
                let same_scale = matches!(qc.c.elems, Elems::I32(_))
                    && qc.q.zero_point.iter().all(|&z| z == 0)
                    && (0..channels).all(|c| {
                        let (a, b) = (f64::from(qc.q.scale_at(c)), f64::from(want[c]));
                        (a - b).abs() <= BIAS_SCALE_TOLERANCE * b
                    });
                if same_scale {
                    let scales = (0..channels).map(|c| qc.q.scale_at(c)).collect();
                    (ints, scales, qc.name.clone())
                } else {
                    let reals = qdq::dequantize_values(&qc);
                    (
                        quantize_bias(&reals, &want).map_err(bias_err)?,
                        want,
                        qc.name.clone(),
                    )
                }
            }
            Val::Const(c) => {
                if c.len() != channels {
                    return Err(bias_err(format!(
                        "{} values for {channels} output channels",
                        c.len()
                    )));
                }
                match &c.elems {
                    Elems::F32(_) => (
                        quantize_bias(&c.elems.to_f64(), &want).map_err(bias_err)?,
                        want,
                        name.to_string(),
                    ),
                    Elems::I32(v) => (
                        v.iter().map(|&x| i64::from(x)).collect(),
                        want,
                        name.to_string(),
                    ),
                    other => {
                        return Err(bias_err(format!(
                            "type {} is not supported",
                            other.type_name()
                        )));
                    }
                }
            }
            other => {
                return Err(bias_err(format!(
                    "is {}; a constant is expected",
                    other.kind_name()
                )));
            }
        };
        let data: Vec<u8> = values
            .iter()
            .map(|&v| i32::try_from(v).unwrap_or(0))
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let quant = if w.channels() > 1 {
            Quantization {
                scale: scales,
                zero_point: vec![0; channels],
                axis: Some(0),
            }
        } else {
            Quantization::per_tensor(scales.first().copied().unwrap_or(1.0), 0)
        };
        let id = self.add_tensor(
            &src_name,
            vec![channels],
            DType::I32,
            Some(quant),
            Some(data),
        );
        Ok(Some(id))
    }
}

/// `reals / scale`, rounded half away from zero, checked against the int32 range.
fn quantize_bias(reals: &[f64], scales: &[f32]) -> std::result::Result<Vec<i64>, String> {
    reals
        .iter()
        .zip(scales)
        .map(|(&r, &s)| {
            let v = (r / f64::from(s)).round();
            if v.is_finite() && v >= f64::from(i32::MIN) && v <= f64::from(i32::MAX) {
                Ok(v as i64)
            } else {
                Err(format!("value {r} does not fit int32 at scale {s}"))
            }
        })
        .collect()
}

/// UINT8 constants as INT8 with the zero point moved by 128; other constants unchanged.
fn to_int8(qc: &QConst) -> (Rc<Const>, QParams) {
    match &qc.c.elems {
        Elems::U8(v) => {
            let c = Rc::new(Const {
                dims: qc.c.dims.clone(),
                elems: Elems::I8(v.iter().map(|&x| (x ^ 0x80) as i8).collect()),
            });
            let mut q = qc.q.clone();
            q.zero_point.iter_mut().for_each(|z| *z -= 128);
            q.dtype = DType::I8;
            (c, q)
        }
        _ => (Rc::clone(&qc.c), qc.q.clone()),
    }
}

/// `qc` with INT8 values as UINT8 (plus 128, zero point moved by 128: the same reals).
fn to_uint8(qc: &QConst) -> (Rc<Const>, QParams) {
    match &qc.c.elems {
        Elems::I8(v) => {
            let c = Rc::new(Const {
                dims: qc.c.dims.clone(),
                elems: Elems::U8(v.iter().map(|&x| (x as u8) ^ 0x80).collect()),
            });
            let mut q = qc.q.clone();
            q.zero_point.iter_mut().for_each(|z| *z += 128);
            q.dtype = DType::U8;
            (c, q)
        }
        _ => (Rc::clone(&qc.c), qc.q.clone()),
    }
}

/// The transposition taking ONNX dims to IR dims for a constant combined with an activation
/// seen through `perm` (after padding the constant to the activation's rank).
pub(crate) fn const_layout(perm: &[usize]) -> Vec<usize> {
    layout::inverse(perm)
}
