//! QDQ folding: `QuantizeLinear` / `DequantizeLinear` become quantized tensors, quantized
//! constants and boundary conversions; integer tensors that hold the same integers share one
//! quantization (a union-find of "quantization classes").

use std::rc::Rc;

use super::builder::{Act, Builder, QConst, Val, describe};
use super::constant::{Const, Elems};
use super::model::Node;
use super::quant_params::QParams;
use crate::error::Result;
use crate::ir::{DType, OpKind};

/// Reads the scale / zero point inputs (1 and 2) and the `axis` attribute of a Q or DQ node.
/// `rank` is the rank of the quantized tensor; `default_dtype` the zero point type when absent.
pub(crate) fn params(b: &Builder, n: &Node, rank: usize, default_dtype: DType) -> Result<QParams> {
    if n.attr_i_or("block_size", 0)? != 0 {
        return Err(n.err("blocked quantization (block_size) is not supported"));
    }
    let scale_c = b
        .const_input(n, 1)?
        .ok_or_else(|| n.err("the scale (input 1) is missing"))?;
    let Elems::F32(scale) = &scale_c.elems else {
        return Err(n.err(format!(
            "the scale must be FLOAT, but it is {}",
            scale_c.elems.type_name()
        )));
    };
    if scale.is_empty() || scale_c.dims.len() > 1 {
        return Err(n.err(format!(
            "the scale must be a scalar or a 1-D tensor, but its shape is {:?}",
            scale_c.dims
        )));
    }
    if let Some(s) = scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(n.err(format!("scale {s} is not a positive finite number")));
    }
    let (zero_point, dtype) = match b.const_input(n, 2)? {
        None => (vec![0; scale.len()], default_dtype),
        Some(z) => {
            let dtype = match &z.elems {
                Elems::I8(_) => DType::I8,
                Elems::U8(_) => DType::U8,
                Elems::I16(_) => DType::I16,
                Elems::I32(_) => DType::I32,
                other => {
                    return Err(n.err(format!(
                        "zero point type {} is not supported (INT8, UINT8, INT16, INT32)",
                        other.type_name()
                    )));
                }
            };
            let zp: Vec<i32> = z
                .elems
                .to_i64()
                .unwrap_or_default()
                .into_iter()
                .map(|v| v as i32)
                .collect();
            if zp.len() != scale.len() {
                return Err(n.err(format!(
                    "{} zero points for {} scales",
                    zp.len(),
                    scale.len()
                )));
            }
            (zp, dtype)
        }
    };
    let axis = if scale_c.dims.len() == 1 && scale.len() > 1 {
        let a = n.attr_i_or("axis", 1)?;
        let a = normalize_axis(a, rank)
            .ok_or_else(|| n.err(format!("axis {a} is out of range for a rank-{rank} tensor")))?;
        Some(a)
    } else {
        None
    };
    Ok(QParams {
        scale: scale.clone(),
        zero_point,
        dtype,
        axis,
    })
}

/// `axis` in `-rank..rank` as an index.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis.checked_add(r)? } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Integer range of a quantized type.
fn qrange(dtype: DType) -> (i64, i64) {
    dtype.int_range().unwrap_or((i64::MIN, i64::MAX))
}

/// ONNX QuantizeLinear of float constants: round half to even, saturate.
fn quantize_values(n: &Node, reals: &[f64], dims: &[usize], q: &QParams) -> Result<Elems> {
    let (lo, hi) = qrange(q.dtype);
    let stride = channel_stride(dims, q.axis);
    let mut out = Vec::with_capacity(reals.len());
    for (i, &x) in reals.iter().enumerate() {
        let c = if q.channels() > 1 {
            (i / stride.0) % stride.1
        } else {
            0
        };
        let v = (x / f64::from(q.scale_at(c))).round_ties_even() + f64::from(q.zero_point_at(c));
        if v.is_nan() {
            return Err(n.err("quantizing a constant gives NaN"));
        }
        out.push(v.clamp(lo as f64, hi as f64) as i64);
    }
    Ok(match q.dtype {
        DType::I8 => Elems::I8(out.into_iter().map(|v| v as i8).collect()),
        DType::U8 => Elems::U8(out.into_iter().map(|v| v as u8).collect()),
        DType::I16 => Elems::I16(out.into_iter().map(|v| v as i16).collect()),
        _ => Elems::I32(out.into_iter().map(|v| v as i32).collect()),
    })
}

/// (elements per step of `axis`, size of `axis`) for per-channel indexing.
pub(crate) fn channel_stride(dims: &[usize], axis: Option<usize>) -> (usize, usize) {
    match axis {
        Some(a) if a < dims.len() => {
            let inner: usize = dims[a + 1..].iter().product();
            (inner.max(1), dims[a].max(1))
        }
        _ => (1, 1),
    }
}

/// The real values of a quantized constant.
pub(crate) fn dequantize_values(qc: &QConst) -> Vec<f64> {
    let stride = channel_stride(&qc.c.dims, qc.q.axis);
    qc.c.elems
        .to_f64()
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = if qc.q.channels() > 1 {
                (i / stride.0) % stride.1
            } else {
                0
            };
            f64::from(qc.q.scale_at(c)) * (v - f64::from(qc.q.zero_point_at(c)))
        })
        .collect()
}

impl Builder {
    /// `QuantizeLinear`.
    pub(crate) fn quantize_linear(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        let x = self.input(n, 0)?;
        let rank = self.shape_of(&x).len();
        let q = params(self, n, rank, DType::U8)?;
        if let Some(t) = n.attr_i("output_dtype")?
            && t != 0
            && b_dtype(t) != Some(q.dtype)
        {
            return Err(n.err(format!("output_dtype {t} is not supported")));
        }
        if q.dtype == DType::I32 {
            return Err(n.err("quantizing to INT32 is not supported"));
        }
        let out = n.output()?.to_string();
        let v = match x {
            Val::Const(c) => {
                self.charge(n, c.len())?;
                let reals = match &c.elems {
                    Elems::F32(v) => v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(),
                    other => {
                        return Err(n.err(format!(
                            "quantizes a constant of type {}",
                            other.type_name()
                        )));
                    }
                };
                check_axis_len(n, &q, &c.dims)?;
                Val::Const(Rc::new(Const {
                    dims: c.dims.clone(),
                    elems: quantize_values(n, &reals, &c.dims, &q)?,
                }))
            }
            Val::DeqConst(qc) => {
                self.charge(n, qc.c.len())?;
                check_axis_len(n, &q, &qc.c.dims)?;
                let reals = dequantize_values(&qc);
                Val::Const(Rc::new(Const {
                    dims: qc.c.dims.clone(),
                    elems: quantize_values(n, &reals, &qc.c.dims, &q)?,
                }))
            }
            Val::Pending(p) => {
                let iq = q.per_tensor(n)?;
                let id = self.finalize(&p, &iq, q.dtype, &out)?;
                Val::Int(Act {
                    id,
                    perm: p.perm.clone(),
                })
            }
            Val::Deq(a) => {
                let iq = q.per_tensor(n)?;
                let dtype = q.dtype;
                if self.quant_of(a.id).as_ref() == Some(&iq) && self.tensor(a.id).dtype == dtype {
                    Val::Int(a)
                } else {
                    let shape = self.tensor(a.id).shape.clone();
                    let id = self.add_tensor(&out, shape, dtype, Some(iq), None);
                    self.push_op(&n.name, OpKind::Quantize, vec![a.id], vec![id]);
                    Val::Int(Act { id, perm: a.perm })
                }
            }
            Val::Float(a) => {
                let iq = q.per_tensor(n)?;
                let shape = self.tensor(a.id).shape.clone();
                let id = self.add_tensor(&out, shape, q.dtype, Some(iq), None);
                self.push_op(&n.name, OpKind::Quantize, vec![a.id], vec![id]);
                Val::Int(Act { id, perm: a.perm })
            }
            Val::Int(_) => {
                return Err(
                    n.err("quantizes an integer tensor (QuantizeLinear needs a float input)")
                );
            }
        };
        self.bind_output(n, v)
    }

    /// `DequantizeLinear`.
    pub(crate) fn dequantize_linear(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(3)?;
        let x = self.input(n, 0)?;
        let rank = self.shape_of(&x).len();
        let x_dtype = match &x {
            Val::Const(c) => c.elems.ir_dtype(),
            Val::Int(a) => Some(self.tensor(a.id).dtype),
            _ => None,
        };
        let q = params(self, n, rank, x_dtype.unwrap_or(DType::U8))?;
        if let Some(t) = x_dtype
            && t != q.dtype
            && n.input(2).is_some()
        {
            return Err(n.err(format!(
                "input type {t} differs from zero point type {}",
                q.dtype
            )));
        }
        let v = match x {
            Val::Const(c) => {
                if !matches!(
                    c.elems,
                    Elems::I8(_) | Elems::U8(_) | Elems::I16(_) | Elems::I32(_)
                ) {
                    return Err(n.err(format!(
                        "dequantizes a constant of type {} (INT8, UINT8, INT16 or INT32 expected)",
                        c.elems.type_name()
                    )));
                }
                check_axis_len(n, &q, &c.dims)?;
                let name = n.req_input(0)?.to_string();
                Val::DeqConst(Rc::new(QConst { name, c, q }))
            }
            Val::Int(a) => {
                let iq = q.per_tensor(n)?;
                if let Err(old) = self.classes.set(a.id, &iq) {
                    return Err(n.err(format!(
                        "dequantizes '{}' with {} but it is quantized with {}",
                        self.tensor(a.id).name,
                        describe(&iq),
                        describe(&old)
                    )));
                }
                Val::Deq(a)
            }
            other => {
                return Err(n.err(format!(
                    "dequantizes {} (an integer tensor or constant is expected)",
                    other.kind_name()
                )));
            }
        };
        self.bind_output(n, v)
    }
}

/// IR type of an ONNX `output_dtype` attribute.
fn b_dtype(t: i64) -> Option<DType> {
    match i32::try_from(t).ok()? {
        super::proto::data_type::INT8 => Some(DType::I8),
        super::proto::data_type::UINT8 => Some(DType::U8),
        _ => None,
    }
}

/// Per-channel parameters must have one entry per element of the channel axis.
fn check_axis_len(n: &Node, q: &QParams, dims: &[usize]) -> Result<()> {
    if let Some(a) = q.axis {
        let len = dims.get(a).copied().unwrap_or(0);
        if len != q.channels() {
            return Err(n.err(format!(
                "{} scales for axis {a} of length {len}",
                q.channels()
            )));
        }
    }
    Ok(())
}
