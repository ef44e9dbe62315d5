//! `Resize` over (H, W), mapped onto TFLite's `align_corners` / `half_pixel_centers` semantics.
//!
//! ONNX describes resizing by a coordinate transformation and (for nearest) a rounding mode;
//! TFLite by two flags. For nearest we compute, for every output row and column, the source index
//! ONNX prescribes and the one each TFLite flag combination gives, and take a combination that
//! agrees everywhere; for linear the coordinate transformations map one to one.

use std::rc::Rc;

use super::super::builder::{Act, Builder, Val};
use super::super::constant::Elems;
use super::super::layout::NCHW_OVER_NHWC;
use super::super::model::Node;
use super::super::qdq::normalize_axis;
use crate::error::Result;
use crate::ir::{DType, OpKind, ResizeMode};

/// Largest output height or width we check index by index.
const MAX_RESIZE_DIM: usize = 1 << 16;

/// TFLite flag combinations (align_corners, half_pixel_centers), the one that corresponds to
/// ONNX's `coord` first (several may give the same indices, e.g. for an exact 2x upscale).
fn flag_candidates(coord: &str) -> [(bool, bool); 3] {
    match coord {
        "align_corners" => [(true, false), (false, false), (false, true)],
        "asymmetric" => [(false, false), (false, true), (true, false)],
        _ => [(false, true), (false, false), (true, false)],
    }
}

/// Source index ONNX Resize (nearest) reads for output index `x`.
fn onnx_nearest(
    x: usize,
    input: usize,
    out: usize,
    scale: f64,
    coord: &str,
    rounding: &str,
) -> Option<i64> {
    let xf = x as f64;
    let orig = match coord {
        "half_pixel" => (xf + 0.5) / scale - 0.5,
        "pytorch_half_pixel" if out > 1 => (xf + 0.5) / scale - 0.5,
        "pytorch_half_pixel" => 0.0,
        "align_corners" if out == 1 => 0.0,
        "align_corners" => xf * (input as f64 - 1.0) / (out as f64 - 1.0),
        "asymmetric" => xf / scale,
        "tf_half_pixel_for_nn" => (xf + 0.5) / scale,
        _ => return None,
    };
    let half = orig - orig.floor() == 0.5;
    let idx = match rounding {
        "round_prefer_floor" if half => orig.floor(),
        "round_prefer_ceil" if half => orig.ceil(),
        "round_prefer_floor" | "round_prefer_ceil" => orig.round(),
        "floor" => orig.floor(),
        "ceil" => orig.ceil(),
        _ => return None,
    };
    Some((idx as i64).clamp(0, input as i64 - 1))
}

/// Source index TFLite's nearest-neighbour kernel reads (its float32 arithmetic).
fn tflite_nearest(
    x: usize,
    input: usize,
    out: usize,
    align_corners: bool,
    half_pixel: bool,
) -> i64 {
    let scale = if align_corners && out > 1 {
        (input as f32 - 1.0) / (out as f32 - 1.0)
    } else {
        input as f32 / out as f32
    };
    let offset = if half_pixel { 0.5f32 } else { 0.0 };
    let v = (x as f32 + offset) * scale;
    let mut r = if align_corners {
        v.round() as i64
    } else {
        v.floor() as i64
    };
    r = r.min(input as i64 - 1);
    if half_pixel {
        r = r.max(0);
    }
    r
}

impl Builder {
    /// `Resize` (nearest or linear) of an NCHW input over H and W.
    pub(crate) fn resize(&mut self, n: &Node) -> Result<()> {
        n.max_inputs(4)?;
        let mode = n.attr_s("mode")?.unwrap_or_else(|| "nearest".into());
        let coord = n
            .attr_s("coordinate_transformation_mode")?
            .unwrap_or_else(|| "half_pixel".into());
        let rounding = n
            .attr_s("nearest_mode")?
            .unwrap_or_else(|| "round_prefer_floor".into());
        if n.attr_i_or("antialias", 0)? != 0 {
            return Err(n.err("antialias=1 is not supported"));
        }
        if let Some(p) = n.attr_s("keep_aspect_ratio_policy")?
            && p != "stretch"
        {
            return Err(n.err(format!("keep_aspect_ratio_policy '{p}' is not supported")));
        }
        let (x, integer, float) = match self.input(n, 0)? {
            Val::Deq(a) => (a, false, false),
            Val::Int(a) if mode == "nearest" => (a, true, false),
            // A float island's value (or an operator computed in float for it): TFLite's float
            // resize on the CPU.
            Val::Float(_) | Val::Pending(_) => (self.float_act(n, 0)?, false, true),
            other => return Err(self.not_quantized(n, 0, &other)),
        };
        let xs = self.act_shape(&x);
        if xs.len() != 4 {
            return Err(n.err(format!(
                "input shape {xs:?} is not supported (only 4-D NCHW)"
            )));
        }
        let axes: Vec<usize> = match n.attr_ints("axes")? {
            None => (0..4).collect(),
            Some(a) => a
                .iter()
                .map(|&v| {
                    normalize_axis(v, 4).ok_or_else(|| n.err(format!("axis {v} is out of range")))
                })
                .collect::<Result<_>>()?,
        };
        let sizes = match n.input(3) {
            Some(_) => Some(self.ints_input(n, 3)?).filter(|s| !s.is_empty()),
            None => None,
        };
        let scales = match self.const_input(n, 2)? {
            Some(c) if c.len() > 0 => match &c.elems {
                Elems::F32(v) => Some(v.clone()),
                other => {
                    return Err(n.err(format!("scales are {}, FLOAT expected", other.type_name())));
                }
            },
            _ => None,
        };
        // Per ONNX axis: output size and scale (out / in).
        let mut out = xs.clone();
        let mut scale = [1.0f64; 4];
        match (sizes, scales) {
            (Some(s), None) => {
                if s.len() != axes.len() {
                    return Err(n.err(format!("{} sizes for {} axes", s.len(), axes.len())));
                }
                for (&a, &v) in axes.iter().zip(&s) {
                    out[a] =
                        usize::try_from(v).map_err(|_| n.err(format!("size {v} is negative")))?;
                    scale[a] = out[a] as f64 / xs[a] as f64;
                }
            }
            (None, Some(s)) => {
                if s.len() != axes.len() {
                    return Err(n.err(format!("{} scales for {} axes", s.len(), axes.len())));
                }
                for (&a, &v) in axes.iter().zip(&s) {
                    if !(v.is_finite() && v > 0.0) {
                        return Err(n.err(format!("scale {v} is not a positive number")));
                    }
                    scale[a] = f64::from(v);
                    let o = (xs[a] as f64 * f64::from(v)).floor();
                    if o > MAX_RESIZE_DIM as f64 {
                        return Err(n.err(format!("output size {o} is too large")));
                    }
                    out[a] = o as usize;
                }
            }
            (Some(_), Some(_)) => return Err(n.err("both scales and sizes are given")),
            (None, None) => return Err(n.err("neither scales nor sizes are given")),
        }
        if out[0] != xs[0] || out[1] != xs[1] {
            return Err(n.err("resizing the batch or channel dimension is not supported"));
        }
        for a in 2..4 {
            if xs[a] == 0 || out[a] == 0 || out[a] > MAX_RESIZE_DIM {
                return Err(n.err(format!("resizing {} to {} is not supported", xs[a], out[a])));
            }
        }
        let (mode, flags) = match mode.as_str() {
            "nearest" => {
                let agrees = |&(ac, hp): &(bool, bool)| {
                    (2..4).all(|a| {
                        (0..out[a]).all(|i| {
                            onnx_nearest(i, xs[a], out[a], scale[a], &coord, &rounding)
                                == Some(tflite_nearest(i, xs[a], out[a], ac, hp))
                        })
                    })
                };
                let flags = flag_candidates(&coord).iter().find(|f| agrees(f)).copied().ok_or_else(|| {
                    n.err(format!(
                        "nearest resize with coordinate_transformation_mode '{coord}' and nearest_mode '{rounding}' from {:?} to {:?} matches no TFLite (align_corners, half_pixel_centers) setting",
                        &xs[2..],
                        &out[2..]
                    ))
                })?;
                (ResizeMode::Nearest, flags)
            }
            "linear" => {
                let exact = (2..4).all(|a| {
                    let ratio = out[a] as f64 / xs[a] as f64;
                    (scale[a] - ratio).abs() <= 1e-6 * ratio
                });
                let flags = match coord.as_str() {
                    _ if !exact => None,
                    "asymmetric" => Some((false, false)),
                    "align_corners" => Some((true, false)),
                    "half_pixel" => Some((false, true)),
                    "pytorch_half_pixel" if out[2] > 1 && out[3] > 1 => Some((false, true)),
                    _ => None,
                };
                let flags = flags.ok_or_else(|| {
                    n.err(format!(
                        "linear resize with coordinate_transformation_mode '{coord}' and scales {:?} has no TFLite equivalent",
                        &scale[2..]
                    ))
                })?;
                (ResizeMode::Bilinear, flags)
            }
            other => {
                return Err(n.err(format!("mode '{other}' is not supported (nearest, linear)")));
            }
        };
        let kind = OpKind::Resize {
            mode,
            align_corners: flags.0,
            half_pixel_centers: flags.1,
        };
        let x = self.relayout(&x, &NCHW_OVER_NHWC)?;
        let shape = vec![xs[0], out[2], out[3], xs[1]];
        if integer {
            return self.emit_integer(n, kind, vec![x.id], shape, x.perm, x.id);
        }
        if float {
            let out = self.add_tensor(n.output()?, shape, DType::F32, None, None);
            self.push_op(&n.name, kind, vec![x.id], vec![out]);
            return self.bind_output(
                n,
                Val::Float(Act {
                    id: out,
                    perm: x.perm,
                }),
            );
        }
        let mut p = self.pending(n, kind, vec![x.id], shape, x.perm);
        p.keep_quant_of = Some(x.id);
        self.bind_output(n, Val::Pending(Rc::new(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf2onnx_nearest_is_half_pixel_centers() {
        // tf2onnx's encoding of TFLite RESIZE_NEAREST_NEIGHBOR(half_pixel_centers=true), 8 -> 16.
        for x in 0..16 {
            assert_eq!(
                onnx_nearest(x, 8, 16, 2.0, "tf_half_pixel_for_nn", "floor"),
                Some(tflite_nearest(x, 8, 16, false, true))
            );
        }
        // asymmetric + floor is TFLite's default (no flags).
        for x in 0..7 {
            assert_eq!(
                onnx_nearest(x, 3, 7, 7.0 / 3.0, "asymmetric", "floor"),
                Some(tflite_nearest(x, 3, 7, false, false))
            );
        }
    }

    #[test]
    fn half_pixel_round_prefer_floor_differs_on_downscale() {
        // (x + 0.5) * 2 - 0.5 hits .5 exactly; prefer-floor picks the lower pixel, TFLite the upper.
        assert_eq!(
            onnx_nearest(0, 8, 4, 0.5, "half_pixel", "round_prefer_floor"),
            Some(0)
        );
        assert_eq!(tflite_nearest(0, 8, 4, false, true), 1);
    }
}
