//! Data movement: Concat, Reshape, Pad, Resize, Transpose (any element type).
//!
//! TFLite requires these to keep the input's quantization. When an ONNX model gives the output
//! another scale or zero point, the moved values are requantized afterwards with TFLite's
//! `Requantize` arithmetic (Concat uses TFLite's `ConcatenationWithScaling` formula instead).

use super::util::{Rescale, bad_data, node_err, per_tensor, same_quant, strides, zeroed};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::quant::activation_range;
use crate::ir::{Activation, DType, Graph, Op, ResizeMode, TensorId};
use crate::value::Data;

/// Runs `$body` with `$v` bound to the element vector of `$d` and wraps the resulting vector back
/// into the same `Data` variant.
macro_rules! map_data {
    ($d:expr, $v:ident => $body:expr) => {
        match $d {
            Data::I8($v) => Data::I8($body),
            Data::U8($v) => Data::U8($body),
            Data::I16($v) => Data::I16($body),
            Data::I32($v) => Data::I32($body),
            Data::F32($v) => Data::F32($body),
            Data::I64($v) => Data::I64($body),
        }
    };
}

/// Optional integer requantization of an output (input zp, rescale, output zp, clamp range).
#[derive(Clone, Copy)]
pub struct Requant {
    pub(crate) zi: i32,
    pub(crate) rescale: Rescale,
    pub(crate) zo: i32,
    lo: i32,
    hi: i32,
}

impl Requant {
    /// Requantization from the quantization of `from` to that of `to` (None when equal).
    pub fn between(g: &Graph, op: &Op, from: TensorId, to: TensorId) -> Result<Option<Requant>> {
        let (ft, tt) = (&g.tensors[from], &g.tensors[to]);
        if same_quant(&ft.quant, &tt.quant) || ft.dtype == DType::F32 {
            return Ok(None);
        }
        let (si, zi) = per_tensor(g, op, from)?;
        let (so, zo) = per_tensor(g, op, to)?;
        let (lo, hi) = tt.dtype.int_range().map_or((0, 0), |(a, b)| {
            (
                a.max(i64::from(i32::MIN)) as i32,
                b.min(i64::from(i32::MAX)) as i32,
            )
        });
        Ok(Some(Requant {
            zi,
            rescale: Rescale::new(op, f64::from(si) / f64::from(so), "output")?,
            zo,
            lo,
            hi,
        }))
    }

    /// The requantized value of one stored integer, clamped to the output type.
    pub(crate) fn apply_one(self, v: i32) -> i32 {
        self.rescale
            .apply(v.wrapping_sub(self.zi))
            .wrapping_add(self.zo)
            .clamp(self.lo, self.hi)
    }

    pub(crate) fn apply(self, d: Data) -> Data {
        let f = |v: i32| self.apply_one(v);
        match d {
            Data::I8(v) => Data::I8(v.into_iter().map(|x| f(i32::from(x)) as i8).collect()),
            Data::U8(v) => Data::U8(v.into_iter().map(|x| f(i32::from(x)) as u8).collect()),
            Data::I16(v) => Data::I16(v.into_iter().map(|x| f(i32::from(x)) as i16).collect()),
            Data::I32(v) => Data::I32(v.into_iter().map(f).collect()),
            other => other,
        }
    }
}

fn check_io(g: &Graph, op: &Op, n_in: usize) -> Result<()> {
    if op.inputs.len() != n_in || op.outputs.len() != 1 {
        return Err(node_err(
            op,
            format!("expects {n_in} input(s) and one output"),
        ));
    }
    let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
    if x.dtype != o.dtype {
        return Err(node_err(
            op,
            format!(
                "input ({}) and output ({}) must have one type",
                x.dtype, o.dtype
            ),
        ));
    }
    Ok(())
}

/// Reshape (and any other pure copy): the data is unchanged, only requantized if needed.
pub struct Copy {
    requant: Option<Requant>,
}

impl Copy {
    pub(super) fn prepare(g: &Graph, op: &Op) -> Result<Prepared> {
        check_io(g, op, 1)?;
        let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if x.elements() != o.elements() {
            return Err(node_err(
                op,
                format!(
                    "input {:?} and output {:?} differ in size",
                    x.shape, o.shape
                ),
            ));
        }
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Prepared::new(Copy { requant }, vec![op.inputs[0]]))
    }
}

impl Kernel for Copy {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let d = inputs[0].clone();
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}

/// Transpose: `out.shape[i] = in.shape[perm[i]]`.
pub struct Transpose {
    in_shape: Vec<usize>,
    perm: Vec<usize>,
    requant: Option<Requant>,
}

impl Transpose {
    pub(super) fn prepare(g: &Graph, op: &Op, perm: &[usize]) -> Result<Prepared> {
        check_io(g, op, 1)?;
        let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        let rank = x.shape.len();
        let mut seen = vec![false; rank];
        let valid = perm.len() == rank
            && perm
                .iter()
                .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
        if !valid || perm.iter().map(|&p| x.shape[p]).collect::<Vec<_>>() != o.shape {
            return Err(node_err(
                op,
                format!(
                    "perm {perm:?} is not a permutation taking {:?} to {:?}",
                    x.shape, o.shape
                ),
            ));
        }
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Prepared::new(
            Transpose {
                in_shape: x.shape.clone(),
                perm: perm.to_vec(),
                requant,
            },
            vec![op.inputs[0]],
        ))
    }

    /// A transpose of a checked view: `in_shape` and the permutation `perm` of its axes.
    pub(crate) fn with(in_shape: Vec<usize>, perm: Vec<usize>, requant: Option<Requant>) -> Self {
        Transpose {
            in_shape,
            perm,
            requant,
        }
    }

    fn gather<T: std::marker::Copy + Default>(&self, x: &[T]) -> Result<Vec<T>> {
        let rank = self.in_shape.len();
        let out_shape: Vec<usize> = self.perm.iter().map(|&p| self.in_shape[p]).collect();
        let is = strides(&self.in_shape);
        // Input stride of each output dimension.
        let src: Vec<usize> = self.perm.iter().map(|&p| is[p]).collect();
        let n: usize = out_shape.iter().product();
        let mut out = zeroed::<T>(n, "transpose output")?;
        let mut idx = vec![0usize; rank];
        let mut off = 0usize;
        for o in out.iter_mut() {
            *o = x[off];
            let mut d = rank;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                off += src[d];
                if idx[d] < out_shape[d] {
                    break;
                }
                off -= src[d] * out_shape[d];
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}

impl Kernel for Transpose {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let d = match inputs[0] {
            Data::I8(v) => Data::I8(self.gather(v)?),
            Data::U8(v) => Data::U8(self.gather(v)?),
            Data::I16(v) => Data::I16(self.gather(v)?),
            Data::I32(v) => Data::I32(self.gather(v)?),
            Data::F32(v) => Data::F32(self.gather(v)?),
            Data::I64(v) => Data::I64(self.gather(v)?),
        };
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}

/// Concat along `axis`.
pub struct Concat {
    /// Elements of each input per outer index (its extent along the axis times the inner size).
    pub(crate) chunks: Vec<usize>,
    pub(crate) outer: usize,
    /// Per input: `(scale, bias)` of TFLite's ConcatenationWithScaling when its quantization
    /// differs from the output's.
    pub(crate) scaling: Vec<Option<(f32, f32)>>,
    pub(crate) zo: i32,
    /// Clamp of the fused activation (and the type's range).
    pub(crate) range: (i32, i32),
    pub(crate) dtype: DType,
}

impl Concat {
    pub(super) fn prepare(g: &Graph, op: &Op, axis: usize, act: Activation) -> Result<Prepared> {
        Ok(Prepared::new(
            Concat::new(g, op, axis, act)?,
            op.inputs.clone(),
        ))
    }

    /// Checks shapes and types and prepares the per-input scaling.
    pub(crate) fn new(g: &Graph, op: &Op, axis: usize, act: Activation) -> Result<Concat> {
        if op.inputs.is_empty() || op.outputs.len() != 1 {
            return Err(node_err(op, "expects at least one input and one output"));
        }
        let ot = &g.tensors[op.outputs[0]];
        let rank = ot.shape.len();
        if axis >= rank || ot.dtype == DType::I64 {
            return Err(node_err(
                op,
                format!("axis {axis} out of range for rank {rank}"),
            ));
        }
        let mut total = 0usize;
        for &i in &op.inputs {
            let t = &g.tensors[i];
            let same_other =
                t.shape.len() == rank && (0..rank).all(|d| d == axis || t.shape[d] == ot.shape[d]);
            if !same_other || t.dtype != ot.dtype {
                return Err(node_err(
                    op,
                    format!(
                        "input '{}' {:?} ({}) does not fit output {:?} ({}) along axis {axis}",
                        t.name, t.shape, t.dtype, ot.shape, ot.dtype
                    ),
                ));
            }
            total += t.shape[axis];
        }
        if total != ot.shape[axis] {
            return Err(node_err(
                op,
                format!(
                    "inputs add up to {total} along axis {axis}, output has {}",
                    ot.shape[axis]
                ),
            ));
        }
        let inner: usize = ot.shape[axis + 1..].iter().product();
        let outer: usize = ot.shape[..axis].iter().product();
        let chunks = op
            .inputs
            .iter()
            .map(|&i| g.tensors[i].shape[axis] * inner)
            .collect();
        let quantized = ot.dtype != DType::F32 && ot.quant.is_some();
        let (so, zo) = if quantized {
            per_tensor(g, op, op.outputs[0])?
        } else {
            (1.0, 0)
        };
        let mut scaling = Vec::new();
        for &i in &op.inputs {
            if !quantized || same_quant(&g.tensors[i].quant, &ot.quant) {
                scaling.push(None);
            } else {
                let (si, zi) = per_tensor(g, op, i)?;
                let scale = si * (1.0 / so);
                scaling.push(Some((scale, -(zi as f32) * scale)));
            }
        }
        let type_range = ot.dtype.int_range().map_or((i32::MIN, i32::MAX), |(a, b)| {
            (
                a.max(i64::from(i32::MIN)) as i32,
                b.min(i64::from(i32::MAX)) as i32,
            )
        });
        let range = if quantized {
            let (lo, hi) = activation_range(act, so, zo, ot.dtype);
            (lo, hi.max(lo))
        } else {
            type_range
        };
        Ok(Concat {
            chunks,
            outer,
            scaling,
            zo,
            range,
            dtype: ot.dtype,
        })
    }

    fn concat<T: std::marker::Copy + Default>(
        &self,
        xs: &[&[T]],
        convert: impl Fn(T, Option<(f32, f32)>) -> T,
    ) -> Result<Vec<T>> {
        let total: usize = self.chunks.iter().sum::<usize>() * self.outer;
        let mut out = zeroed::<T>(total, "concat output")?;
        let mut p = 0;
        for k in 0..self.outer {
            for (i, x) in xs.iter().enumerate() {
                let c = self.chunks[i];
                let src = &x[k * c..(k + 1) * c];
                let dst = &mut out[p..p + c];
                match self.scaling[i] {
                    None if self.dtype == DType::F32 || self.range_is_full() => {
                        dst.copy_from_slice(src)
                    }
                    s => {
                        for (d, &v) in dst.iter_mut().zip(src) {
                            *d = convert(v, s);
                        }
                    }
                }
                p += c;
            }
        }
        Ok(out)
    }

    /// The clamp is the type's whole range (plain copies suffice).
    pub(crate) fn range_is_full(&self) -> bool {
        self.dtype
            .int_range()
            .is_some_and(|(a, b)| i64::from(self.range.0) <= a && i64::from(self.range.1) >= b)
    }
}

/// Converts one integer element for Concat: rescale if needed, then clamp.
fn concat_int(v: i32, s: Option<(f32, f32)>, zo: i32, range: (i32, i32)) -> i32 {
    let v = match s {
        None => v,
        Some((scale, bias)) => ((v as f32) * scale + bias).round() as i32 + zo,
    };
    v.clamp(range.0, range.1)
}

impl Kernel for Concat {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        macro_rules! go {
            ($variant:ident, $t:ty) => {{
                let xs = inputs
                    .iter()
                    .map(|d| match d {
                        Data::$variant(v) => Ok(v.as_slice()),
                        _ => Err(bad_data()),
                    })
                    .collect::<Result<Vec<&[$t]>>>()?;
                Data::$variant(self.concat(&xs, |v, s| {
                    concat_int(i32::from(v), s, self.zo, self.range) as $t
                })?)
            }};
        }
        Ok(match inputs[0] {
            Data::I8(_) => go!(I8, i8),
            Data::U8(_) => go!(U8, u8),
            Data::I16(_) => go!(I16, i16),
            Data::I32(_) => go!(I32, i32),
            Data::I64(_) => {
                let xs = inputs
                    .iter()
                    .map(|d| match d {
                        Data::I64(v) => Ok(v.as_slice()),
                        _ => Err(bad_data()),
                    })
                    .collect::<Result<Vec<&[i64]>>>()?;
                Data::I64(self.concat(&xs, |v, _| v)?)
            }
            Data::F32(_) => {
                let xs = inputs
                    .iter()
                    .map(|d| match d {
                        Data::F32(v) => Ok(v.as_slice()),
                        _ => Err(bad_data()),
                    })
                    .collect::<Result<Vec<&[f32]>>>()?;
                Data::F32(self.concat(&xs, |v, _| v)?)
            }
        })
    }
}

/// Pad with a constant.
pub struct Pad {
    pub(crate) in_shape: Vec<usize>,
    pub(crate) pads: Vec<(usize, usize)>,
    /// The fill value in the input's type.
    pub(crate) value: i32,
    pub(crate) requant: Option<Requant>,
}

impl Pad {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        pads: &[(usize, usize)],
        value: Option<i32>,
    ) -> Result<Prepared> {
        Ok(Prepared::new(
            Pad::new(g, op, pads, value)?,
            vec![op.inputs[0]],
        ))
    }

    /// Checks shapes and types and decides the fill value.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        pads: &[(usize, usize)],
        value: Option<i32>,
    ) -> Result<Pad> {
        check_io(g, op, 1)?;
        let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        let expect: Option<Vec<usize>> = (pads.len() == x.shape.len())
            .then(|| {
                x.shape
                    .iter()
                    .zip(pads)
                    .map(|(&d, &(a, b))| d.checked_add(a)?.checked_add(b))
                    .collect()
            })
            .flatten();
        if expect.as_ref() != Some(&o.shape) {
            return Err(node_err(
                op,
                format!(
                    "pads {pads:?} take {:?} to {expect:?}, but the output is {:?}",
                    x.shape, o.shape
                ),
            ));
        }
        // Padding is the real value 0 (the input zero point) unless the model gives a constant.
        let value = match value {
            Some(v) => v,
            None if x.dtype != DType::F32 && x.quant.is_some() => {
                per_tensor(g, op, op.inputs[0])?.1
            }
            None => 0,
        };
        if let Some((lo, hi)) = x.dtype.int_range()
            && (i64::from(value) < lo || i64::from(value) > hi)
        {
            return Err(node_err(
                op,
                format!("pad value {value} does not fit {}", x.dtype),
            ));
        }
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Pad {
            in_shape: x.shape.clone(),
            pads: pads.to_vec(),
            value,
            requant,
        })
    }

    fn pad<T: std::marker::Copy + Default>(&self, x: &[T], value: T) -> Result<Vec<T>> {
        let rank = self.in_shape.len();
        let out_shape: Vec<usize> = self
            .in_shape
            .iter()
            .zip(&self.pads)
            .map(|(&d, &(a, b))| d + a + b)
            .collect();
        let n: usize = out_shape.iter().product();
        let mut out = zeroed::<T>(n, "pad output")?;
        out.fill(value);
        if rank == 0 {
            out.copy_from_slice(x);
            return Ok(out);
        }
        let os = strides(&out_shape);
        let inner = self.in_shape[rank - 1];
        let rows = x.len().checked_div(inner).unwrap_or(0);
        // Copy each innermost row of the input to its place in the output.
        let mut idx = vec![0usize; rank.saturating_sub(1)];
        for r in 0..rows {
            let mut off = self.pads[rank - 1].0;
            for d in 0..rank - 1 {
                off += (idx[d] + self.pads[d].0) * os[d];
            }
            out[off..off + inner].copy_from_slice(&x[r * inner..(r + 1) * inner]);
            let mut d = rank - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.in_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}

impl Kernel for Pad {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let v = self.value;
        let d = match inputs[0] {
            Data::I8(x) => Data::I8(self.pad(x, v as i8)?),
            Data::U8(x) => Data::U8(self.pad(x, v as u8)?),
            Data::I16(x) => Data::I16(self.pad(x, v as i16)?),
            Data::I32(x) => Data::I32(self.pad(x, v)?),
            Data::F32(x) => Data::F32(self.pad(x, v as f32)?),
            Data::I64(x) => Data::I64(self.pad(x, i64::from(v))?),
        };
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}

/// Resize (nearest or bilinear) of NHWC data.
pub struct Resize {
    pub(crate) n: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) c: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) mode: ResizeMode,
    align_corners: bool,
    half_pixel_centers: bool,
    pub(crate) requant: Option<Requant>,
}

impl Resize {
    pub(super) fn prepare(
        g: &Graph,
        op: &Op,
        mode: ResizeMode,
        align_corners: bool,
        half_pixel_centers: bool,
    ) -> Result<Prepared> {
        let r = Resize::new(g, op, mode, align_corners, half_pixel_centers)?;
        Ok(Prepared::new(r, vec![op.inputs[0]]))
    }

    /// Checks shapes and types.
    pub(crate) fn new(
        g: &Graph,
        op: &Op,
        mode: ResizeMode,
        align_corners: bool,
        half_pixel_centers: bool,
    ) -> Result<Resize> {
        check_io(g, op, 1)?;
        let (x, o) = (&g.tensors[op.inputs[0]], &g.tensors[op.outputs[0]]);
        if x.shape.len() != 4
            || o.shape.len() != 4
            || x.shape[0] != o.shape[0]
            || x.shape[3] != o.shape[3]
        {
            return Err(node_err(
                op,
                format!(
                    "input {:?} and output {:?} must be NHWC with equal N and C",
                    x.shape, o.shape
                ),
            ));
        }
        if x.shape[1] == 0 || x.shape[2] == 0 || o.shape[1] > 1 << 20 || o.shape[2] > 1 << 20 {
            return Err(node_err(
                op,
                format!("cannot resize {:?} to {:?}", x.shape, o.shape),
            ));
        }
        let requant = Requant::between(g, op, op.inputs[0], op.outputs[0])?;
        Ok(Resize {
            n: x.shape[0],
            h: x.shape[1],
            w: x.shape[2],
            c: x.shape[3],
            oh: o.shape[1],
            ow: o.shape[2],
            mode,
            align_corners,
            half_pixel_centers,
            requant,
        })
    }

    /// TFLite's `GetNearestNeighbor` (single-precision arithmetic).
    pub(crate) fn nearest(&self, v: usize, in_size: usize, out_size: usize) -> usize {
        let scale = if self.align_corners && out_size > 1 {
            (in_size - 1) as f32 / (out_size - 1) as f32
        } else {
            in_size as f32 / out_size as f32
        };
        let offset = if self.half_pixel_centers { 0.5 } else { 0.0 };
        let p = (v as f32 + offset) * scale;
        let i = if self.align_corners {
            p.round()
        } else {
            p.floor()
        } as i64;
        i.clamp(0, in_size as i64 - 1) as usize
    }

    fn run_nearest<T: std::marker::Copy + Default>(&self, x: &[T]) -> Result<Vec<T>> {
        let (c, h, w) = (self.c, self.h, self.w);
        let mut out = zeroed::<T>(self.n * self.oh * self.ow * c, "resize output")?;
        let xs: Vec<usize> = (0..self.ow).map(|x| self.nearest(x, w, self.ow)).collect();
        let mut p = 0;
        for b in 0..self.n {
            for y in 0..self.oh {
                let iy = self.nearest(y, h, self.oh);
                for &ix in &xs {
                    let s = ((b * h + iy) * w + ix) * c;
                    out[p..p + c].copy_from_slice(&x[s..s + c]);
                    p += c;
                }
            }
        }
        Ok(out)
    }

    /// TFLite's `ResizeBilinearInteger`: 10-bit fixed-point coordinates and weights.
    /// TFLite's `ResizeBilinearInteger` source coordinates of every output index along one
    /// axis: `(lower, upper, fraction)`, the fraction in 1/1024 (negative before the first
    /// pixel with half-pixel centers).
    pub(crate) fn bilinear_axis(&self, in_size: usize, out_size: usize) -> Vec<(i64, i64, i64)> {
        let (i, o) = (in_size as i64, out_size as i64);
        let scale = if self.align_corners && o > 1 {
            ((1i64 << 10) * (i - 1) + (o - 1) / 2) / (o - 1)
        } else {
            ((1i64 << 10) * i + o / 2) / o.max(1)
        };
        (0..o)
            .map(|v| {
                let scaled = if self.half_pixel_centers {
                    v * scale + scale / 2 - (1 << 9)
                } else {
                    v * scale
                };
                // C++ integer division truncates toward zero; so does Rust's.
                let lower = (scaled / (1 << 10)).max(0);
                let upper = ((scaled + (1 << 10) - 1) / (1 << 10)).min(i - 1);
                (lower, upper, scaled - (1 << 10) * lower)
            })
            .collect()
    }

    fn run_bilinear_int(&self, x: &[i32]) -> Result<Vec<i32>> {
        let (c, h, w) = (self.c, self.h as i64, self.w as i64);
        let rows = self.bilinear_axis(self.h, self.oh);
        let cols = self.bilinear_axis(self.w, self.ow);
        let mut out = zeroed::<i32>(self.n * self.oh * self.ow * c, "resize output")?;
        let mut p = 0;
        for b in 0..self.n as i64 {
            for &(y0, y1, dy) in &rows {
                for &(x0, x1, dx) in &cols {
                    let at = |yy: i64, xx: i64| (((b * h + yy) * w + xx) as usize) * c;
                    let (p00, p10, p01, p11) = (at(y0, x0), at(y1, x0), at(y0, x1), at(y1, x1));
                    for ch in 0..c {
                        let v = i64::from(x[p00 + ch]) * ((1 << 10) - dy) * ((1 << 10) - dx)
                            + i64::from(x[p10 + ch]) * dy * ((1 << 10) - dx)
                            + i64::from(x[p01 + ch]) * ((1 << 10) - dy) * dx
                            + i64::from(x[p11 + ch]) * dy * dx;
                        let round = if v > 0 { 1 << 19 } else { -(1 << 19) };
                        out[p + ch] = ((v + round) / (1 << 20)) as i32;
                    }
                    p += c;
                }
            }
        }
        Ok(out)
    }

    /// TFLite's float `ResizeBilinear` reference.
    /// TFLite's float `ResizeBilinear` source coordinates of every output index along one axis:
    /// `(lower, upper, fraction)` in single precision (the fraction is negative before the first
    /// pixel with half-pixel centers).
    pub(crate) fn bilinear_axis_f32(
        &self,
        in_size: usize,
        out_size: usize,
    ) -> Vec<(usize, usize, f32)> {
        let s = if self.align_corners && out_size > 1 {
            (in_size - 1) as f32 / (out_size - 1) as f32
        } else {
            in_size as f32 / out_size as f32
        };
        (0..out_size)
            .map(|v| {
                let sv = if self.half_pixel_centers {
                    (v as f32 + 0.5) * s - 0.5
                } else {
                    v as f32 * s
                };
                let lower = ((sv.floor() as i64).max(0) as usize).min(in_size - 1);
                let upper = (sv.ceil() as i64).clamp(0, in_size as i64 - 1) as usize;
                (lower, upper, sv - lower as f32)
            })
            .collect()
    }

    fn run_bilinear_f32(&self, x: &[f32]) -> Result<Vec<f32>> {
        let (c, h, w) = (self.c, self.h, self.w);
        let rows = self.bilinear_axis_f32(h, self.oh);
        let cols = self.bilinear_axis_f32(w, self.ow);
        let mut out = zeroed::<f32>(self.n * self.oh * self.ow * c, "resize output")?;
        let mut p = 0;
        for b in 0..self.n {
            for &(y0, y1, fy) in &rows {
                for &(x0, x1, fx) in &cols {
                    let at = |yy: usize, xx: usize| ((b * h + yy) * w + xx) * c;
                    for ch in 0..c {
                        out[p + ch] = x[at(y0, x0) + ch] * (1.0 - fy) * (1.0 - fx)
                            + x[at(y1, x0) + ch] * fy * (1.0 - fx)
                            + x[at(y0, x1) + ch] * (1.0 - fy) * fx
                            + x[at(y1, x1) + ch] * fy * fx;
                    }
                    p += c;
                }
            }
        }
        Ok(out)
    }
}

impl Kernel for Resize {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let d = match self.mode {
            ResizeMode::Nearest => map_data!(inputs[0], x => self.run_nearest(x)?),
            ResizeMode::Bilinear => match inputs[0] {
                Data::F32(x) => Data::F32(self.run_bilinear_f32(x)?),
                Data::I8(x) => {
                    let v = self
                        .run_bilinear_int(&x.iter().map(|&v| i32::from(v)).collect::<Vec<_>>())?;
                    Data::I8(v.into_iter().map(|v| v as i8).collect())
                }
                Data::U8(x) => {
                    let v = self
                        .run_bilinear_int(&x.iter().map(|&v| i32::from(v)).collect::<Vec<_>>())?;
                    Data::U8(v.into_iter().map(|v| v as u8).collect())
                }
                Data::I16(x) => {
                    let v = self
                        .run_bilinear_int(&x.iter().map(|&v| i32::from(v)).collect::<Vec<_>>())?;
                    Data::I16(v.into_iter().map(|v| v as i16).collect())
                }
                Data::I32(x) => Data::I32(self.run_bilinear_int(x)?),
                Data::I64(_) => return Err(bad_data()),
            },
        };
        Ok(match self.requant {
            Some(r) => r.apply(d),
            None => d,
        })
    }
}
