//! Element-wise functions of one 8-bit tensor ([`ActFn`]): sigmoid, tanh, hard-swish, leaky
//! ReLU, ELU, GELU, exp, log, swish.
//!
//! An 8-bit input has 256 values, so every one of these operators is a 256-entry table. The
//! table is built here, once per operator, by running TFLite's own arithmetic for that operator
//! on each input value (see `docs/act.md` for each kernel and its source):
//! - LOGISTIC, TANH, EXP, ELU, GELU, LOG: TFLite fills a lookup table in single precision
//!   (`PopulateLookupTable` / `LUTPopulate`): dequantize, apply, round half away from zero,
//!   add the output zero point, convert to int32 the way x86 does, clamp;
//! - HARD_SWISH: the 16-bit fixed-point reference kernel (`reference_ops::HardSwish`);
//! - LEAKY_RELU: two rescale factors, identity for `x >= zp` and alpha below
//!   (`reference_ops::QuantizeLeakyRelu`);
//! - swish: LOGISTIC into its own quantization, then TFLite's int8 MUL of `x` by it.
//!
//! The NPU lowering loads the same table as its activation LUT and the CPU kernel looks values
//! up in it, so all three agree by construction; the fixtures prove the table against TFLite.

use super::util::{bad_data, node_err, per_tensor};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{ActFn, DType, Graph, Op};
use crate::value::Data;
use npu_rt::fixed::{
    downscale_int32_to_int16_multiplier as downscale_to_q15,
    inv_sqrt_quantized_multiplier_exp as inv_sqrt_multiplier, multiply_by_quantized_multiplier,
    quantize_multiplier, rounding_divide_by_pot_i16 as rdpot16,
    saturating_doubling_high_mul_i16 as sdhm16, saturating_left_shift_i16 as saturating_shl16,
    saturating_rounding_doubling_high_mul_i16 as srdhm16,
};

/// A 256-entry table of an 8-bit operator, in the NPU's order: entry `i` holds the output
/// byte for input `i - 128` (int8) or `i` (uint8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table8 {
    pub bytes: [u8; 256],
    /// int8 (true) or uint8 data.
    pub signed: bool,
}

impl Table8 {
    /// The table index of raw input byte `b`.
    #[inline]
    pub fn index(&self, b: u8) -> usize {
        if self.signed {
            (b as i8 as i32 + 128) as usize
        } else {
            b as usize
        }
    }
}

/// The prepared kernel: a table lookup.
pub struct ActFnKernel {
    pub(crate) table: Table8,
}

impl ActFnKernel {
    pub(super) fn prepare(g: &Graph, op: &Op, f: ActFn) -> Result<Prepared> {
        if let Some(p) = Act16::of(g, op, f)? {
            return Ok(Prepared::new(p, vec![op.inputs[0]]));
        }
        Ok(Prepared::new(
            ActFnKernel {
                table: table(g, op, f)?,
            },
            vec![op.inputs[0]],
        ))
    }
}

impl Kernel for ActFnKernel {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        let t = &self.table;
        match (inputs[0], t.signed) {
            (Data::I8(x), true) => Ok(Data::I8(
                x.iter().map(|&v| t.bytes[t.index(v as u8)] as i8).collect(),
            )),
            (Data::U8(x), false) => Ok(Data::U8(x.iter().map(|&v| t.bytes[t.index(v)]).collect())),
            _ => Err(bad_data()),
        }
    }
}

/// int16 LOGISTIC or TANH: TFLite's rescale of the input into units of `1/(3 * 4096)`, then
/// its interpolated sigmoid table ([`npu_rt::ethos_u::builtin_act`], which the NPU's built-in
/// SIGMOID/TANH compute; the CPU kernel and the NPU lowering use the same parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Act16 {
    /// `v = (x * multiplier + 2^(shift-1)) >> shift` (no rounding term for shift 0).
    pub multiplier: u32,
    pub shift: u32,
    pub tanh: bool,
}

impl Act16 {
    /// The parameters of `op` computing `f` when its input is int16 (`None` for other input
    /// types); an error for a malformed int16 operator or one TFLite refuses.
    pub(crate) fn of(g: &Graph, op: &Op, f: ActFn) -> Result<Option<Act16>> {
        let Some(&x) = op.inputs.first() else {
            return Ok(None);
        };
        if g.tensors.get(x.index()).map(|t| t.dtype) != Some(DType::I16) {
            return Ok(None);
        }
        let tanh = match f {
            ActFn::Logistic => false,
            ActFn::Tanh => true,
            _ => {
                return Err(node_err(
                    op,
                    format!(
                        "{} of int16 data is not supported (int16 LOGISTIC and TANH are)",
                        f.name()
                    ),
                ));
            }
        };
        let (&x, &y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
            ([x], [y]) => (x, y),
            _ => return Err(node_err(op, "expects one input and one output")),
        };
        let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
        if xt.shape != yt.shape || yt.dtype != DType::I16 {
            return Err(node_err(
                op,
                format!(
                    "int16 {} needs an int16 output of the input's shape: '{}' {} {:?} -> '{}' {} \
                     {:?}",
                    f.name(),
                    xt.name,
                    xt.dtype,
                    xt.shape,
                    yt.name,
                    yt.dtype,
                    yt.shape
                ),
            ));
        }
        let (scale, zi) = per_tensor(g, op, x)?;
        let (out_scale, zo) = per_tensor(g, op, y)?;
        // TFLite's int16 kernels are symmetric and write Q0.15.
        if zi != 0 || zo != 0 || (f64::from(out_scale) * 32768.0 - 1.0).abs() > 1e-6 {
            return Err(node_err(
                op,
                format!(
                    "int16 {} takes zero points 0 and writes scale 1/32768 (TFLite's Q0.15); \
                     '{}' has scale {scale} zero point {zi}, '{}' scale {out_scale} zero point {zo}",
                    f.name(),
                    xt.name,
                    yt.name
                ),
            ));
        }
        // A power-of-two input scale (within TFLite's CheckedLog2 tolerance) whose exponent
        // puts it at 1/4096 (both) or 1/2048 (tanh) multiplies by 3 << shift exactly.
        let log2 = f64::from(scale).log2();
        let rounded = log2.round();
        let pot_shift = rounded + 12.0;
        if (log2 - rounded).abs() < 1e-3 && (pot_shift == 0.0 || (tanh && pot_shift == 1.0)) {
            return Ok(Some(Act16 {
                multiplier: 3 << pot_shift as u32,
                shift: 0,
                tanh,
            }));
        }
        // Otherwise the multiplier is doubled into (2^14, 2^15] (or the shift reaches 31) and
        // truncated (LogisticPrepare / TanhPrepare).
        let mut m = f64::from(scale) * 4096.0 * 3.0;
        let mut shift = 0u32;
        while m <= 32767.0 / 2.0 && shift <= 30 {
            shift += 1;
            m *= 2.0;
        }
        if !(1.0..2_147_483_648.0).contains(&m) {
            return Err(node_err(
                op,
                format!(
                    "int16 {}: input scale {scale} of '{}' is out of TFLite's range",
                    f.name(),
                    xt.name
                ),
            ));
        }
        Ok(Some(Act16 {
            multiplier: m as u32,
            shift,
            tanh,
        }))
    }

    /// The function of one raw int16 input.
    #[inline]
    pub fn apply(&self, x: i16) -> i16 {
        npu_rt::ethos_u::builtin_act::int16_kernel(x, self.multiplier, self.shift, self.tanh)
    }
}

impl Kernel for Act16 {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        match inputs[0] {
            Data::I16(x) => Ok(Data::I16(x.iter().map(|&v| self.apply(v)).collect())),
            _ => Err(bad_data()),
        }
    }
}

/// Checks operator `op` computing `f` and builds its table.
pub(crate) fn table(g: &Graph, op: &Op, f: ActFn) -> Result<Table8> {
    let (&x, &y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => (x, y),
        _ => return Err(node_err(op, "expects one input and one output")),
    };
    let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
    if xt.shape != yt.shape {
        return Err(node_err(
            op,
            format!(
                "input '{}' {:?} and output '{}' {:?} must have one shape",
                xt.name, xt.shape, yt.name, yt.shape
            ),
        ));
    }
    let signed = match (xt.dtype, yt.dtype) {
        (DType::I8, DType::I8) => true,
        (DType::U8, DType::U8) => false,
        (a, b) => {
            return Err(node_err(
                op,
                format!(
                    "{} from '{}' ({a}) to '{}' ({b}) is not supported (int8 -> int8 and \
                     uint8 -> uint8 are)",
                    f.name(),
                    xt.name,
                    yt.name
                ),
            ));
        }
    };
    let input = per_tensor(g, op, x)?;
    let output = per_tensor(g, op, y)?;
    let q = Quant {
        input,
        output,
        signed,
    };
    let bytes = match f {
        ActFn::Logistic => q.float_table(logistic),
        ActFn::Tanh => q.float_table(f32::tanh),
        ActFn::Exp => q.float_table(f32::exp),
        ActFn::Elu { alpha } => q.float_table(|v| if v < 0.0 { alpha * v.exp_m1() } else { v }),
        ActFn::Gelu { approximate } => q.float_table(|v| gelu(v, approximate)),
        ActFn::Log => {
            // TFLite's LogLUTPrepare maps non-positive inputs to the lowest representable output.
            let lowest = (q.range().0 - output.1) as f32 * output.0;
            q.float_table(|v| if v <= 0.0 { lowest } else { v.ln() })
        }
        ActFn::HardSwish => hard_swish_table(op, &q)?,
        ActFn::LeakyRelu { alpha } => leaky_relu_table(op, &q, alpha)?,
        ActFn::Swish { sigmoid } => swish_table(op, &q, sigmoid)?,
        ActFn::Rsqrt => rsqrt_table(op, &q)?,
        ActFn::Sqrt => sqrt_table(&q),
        ActFn::Table(t) => t,
        ActFn::Real(v) => {
            // QuantizeLinear in single precision: x / scale, round half to even, + zero point,
            // saturate.
            let (lo, hi) = q.range();
            let mut t = [0u8; 256];
            for (b, &y) in t.iter_mut().zip(v.iter()) {
                let r = (y / output.0).round_ties_even();
                let z = if r.is_nan() {
                    output.1
                } else {
                    (r as i64 + i64::from(output.1)).clamp(lo.into(), hi.into()) as i32
                };
                *b = z as u8;
            }
            t
        }
    };
    Ok(Table8 { bytes, signed })
}

/// The 256-entry table of a graph `mini` computing a function of one 8-bit input of shape
/// `[256]`: the reference interpreter's output for every input value (entry `i` is input
/// `i - 128` signed, `i` unsigned), as [`ActFn::Table`] and table lowerings index it. `None`
/// when the graph does not run or its output is not 256 bytes.
pub(crate) fn tabulate(mini: &Graph) -> Option<[u8; 256]> {
    use crate::value::Value;
    let x = *mini.inputs.first()?;
    let data = match mini.tensors.get(x.index())?.dtype {
        DType::I8 => Data::I8((-128..=127).collect()),
        DType::U8 => Data::U8((0..=255).collect()),
        _ => return None,
    };
    let out = super::run(mini, &[Value::new(vec![256], data).ok()?]).ok()?;
    out.first()?.data.to_le_bytes().try_into().ok()
}

/// `1 / (1 + exp(-x))` in single precision, as TFLite's LOGISTIC table lambda.
fn logistic(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// TFLite's GELU transforms: `0.5 x (1 + erf(x / sqrt 2))`, or with `tanh(sqrt(2/pi) (x +
/// 0.044715 x^3))` for the approximation. The constants are doubles in TFLite's source, so the
/// products involving them are evaluated in double precision and rounded to single at the end.
fn gelu(v: f32, approximate: bool) -> f32 {
    let x = f64::from(v);
    let half_x = f64::from(0.5f32 * v);
    if approximate {
        let sqrt_2_over_pi = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2;
        let cube = f64::from(0.044715f32 * v * v * v);
        (half_x * (1.0 + (sqrt_2_over_pi * (x + cube)).tanh())) as f32
    } else {
        (half_x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
    }
}

/// The error function in double precision (the CPU kernels' own, so float islands and the
/// tables made here agree).
pub(crate) use npu_rt::cpu::float::erf_f64 as erf;

/// The quantization of an operator: input and output `(scale, zero point)`, and the type.
struct Quant {
    input: (f32, i32),
    output: (f32, i32),
    signed: bool,
}

impl Quant {
    /// The type's value range.
    fn range(&self) -> (i32, i32) {
        if self.signed { (-128, 127) } else { (0, 255) }
    }

    /// The table of `f` in TFLite's `LUTPopulate` arithmetic (all single precision):
    /// `clamp(int32(round(f(s_in * (q - z_in)) / s_out) + z_out))`.
    fn float_table(&self, f: impl Fn(f32) -> f32) -> [u8; 256] {
        let (lo, hi) = self.range();
        let (si, zi) = self.input;
        let (so, zo) = self.output;
        let inverse_scale = 1.0f32 / so;
        let mut t = [0u8; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let q = lo + i as i32;
            let real = si * (q - zi) as f32;
            let rescaled = (f(real) * inverse_scale).round();
            let quantized = x86_f32_to_i32(rescaled + zo as f32);
            *e = quantized.clamp(lo, hi) as u8;
        }
        t
    }

    /// The table of an integer function of `q - z_in` (already clamped to the type).
    fn int_table(&self, f: impl Fn(i32) -> i32) -> [u8; 256] {
        let (lo, hi) = self.range();
        let mut t = [0u8; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let q = lo + i as i32;
            *e = f(q - self.input.1).clamp(lo, hi) as u8;
        }
        t
    }
}

/// C's `static_cast<int32_t>(float)` as x86 executes it (`cvttss2si`): truncation, and the
/// "integer indefinite" `i32::MIN` for NaN and values outside the int32 range (where Rust's
/// `as` would saturate). TFLite's fixtures are computed on x86.
fn x86_f32_to_i32(v: f32) -> i32 {
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// TFLite's `QuantizeMultiplier` of `real`, rejected when the shift would be undefined in
/// `MultiplyByQuantizedMultiplier` (left shifts of 31 and more).
fn rescale(op: &Op, real: f64, what: &str) -> Result<(i32, i32)> {
    if !real.is_finite() {
        return Err(node_err(op, format!("{what} factor {real} is not finite")));
    }
    let (m, s) = quantize_multiplier(real);
    if s > 30 {
        return Err(node_err(
            op,
            format!("{what} factor {real} is too large for 32-bit requantization"),
        ));
    }
    Ok((m, s))
}

/// TFLite's int8/uint8 HARD_SWISH (`HardSwishPrepare` and `reference_ops::HardSwish`).
fn hard_swish_table(op: &Op, q: &Quant) -> Result<[u8; 256]> {
    let (si, _) = q.input;
    let (so, zo) = q.output;
    // The prepare step computes these in single precision.
    let hires_input_scale = (1.0f32 / 128.0) * si;
    let reluish_scale = 3.0f32 / 32768.0;
    let (out_m, out_exp) = rescale(op, f64::from(hires_input_scale / so), "output")?;
    if out_exp > 0 {
        return Err(node_err(
            op,
            format!(
                "output scale {so} is too small for the input scale {si} (TFLite requires the \
                 output multiplier to be at most 1)"
            ),
        ));
    }
    let (relu_m, relu_exp) = rescale(op, f64::from(hires_input_scale / reluish_scale), "reluish")?;
    let out_m16 = downscale_to_q15(out_m);
    let relu_m16 = downscale_to_q15(relu_m);
    let (lo, hi) = q.range();
    Ok(q.int_table(|input_value| {
        // input_value is within -255..=255, so * 128 fits 16 bits.
        let hires = (input_value * 128) as i16;
        let preshift_output = srdhm16(hires, out_m16);
        let mut reluish = hires;
        if relu_exp > 0 {
            reluish = saturating_shl16(reluish, relu_exp - 1);
        }
        reluish = srdhm16(reluish, relu_m16);
        if relu_exp > 0 {
            reluish = saturating_shl16(reluish, 1);
        }
        if relu_exp < 0 {
            reluish = rdpot16(reluish, -relu_exp);
        }
        // [-1, 1] in Q15 to [0, 1].
        let reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift = sdhm16(reluish, preshift_output);
        // The zero point is added in 16-bit arithmetic (wrapping, as the C++ int16_t does).
        let out = (i32::from(rdpot16(preshift, -out_exp)) + zo) as i16;
        i32::from(out).clamp(lo, hi)
    }))
}

/// TFLite's int8/uint8 LEAKY_RELU (`LeakyReluPrepare`, `reference_ops::QuantizeLeakyRelu`).
fn leaky_relu_table(op: &Op, q: &Quant, alpha: f32) -> Result<[u8; 256]> {
    let (si, _) = q.input;
    let (so, zo) = q.output;
    // TFLite evaluates both factors in single precision (float operands) before widening them
    // to double: `input_scale * alpha / output_scale` and `input_scale / output_scale`.
    let alpha_real = f64::from(si * alpha / so);
    let identity_real = f64::from(si / so);
    let (am, ashift) = rescale(op, alpha_real, "alpha")?;
    let (im, ishift) = rescale(op, identity_real, "identity")?;
    Ok(q.int_table(|v| {
        let scaled = if v >= 0 {
            multiply_by_quantized_multiplier(v, im, ishift)
        } else {
            multiply_by_quantized_multiplier(v, am, ashift)
        };
        zo.wrapping_add(scaled)
    }))
}

/// Swish as TFLite runs LOGISTIC into `sigmoid` quantization and then its int8/uint8 MUL of the
/// input by that (`reference_integer_ops::Mul`: `(x - zx) * (s - zs)` rescaled by
/// `sx * ss / so`, computed in single precision as TFLite's `mul.cc` does).
fn swish_table(op: &Op, q: &Quant, sigmoid: (f32, i32)) -> Result<[u8; 256]> {
    let sig = Quant {
        input: q.input,
        output: sigmoid,
        signed: q.signed,
    }
    .float_table(logistic);
    let (si, zi) = q.input;
    let (ss, zs) = sigmoid;
    let (so, zo) = q.output;
    let (m, s) = rescale(op, f64::from(si * ss / so), "output")?;
    let (lo, _) = q.range();
    Ok(q.int_table(|v| {
        let raw_s = if q.signed {
            i32::from(sig[(v + zi - lo) as usize] as i8)
        } else {
            i32::from(sig[(v + zi - lo) as usize])
        };
        zo.wrapping_add(multiply_by_quantized_multiplier(v * (raw_s - zs), m, s))
    }))
}

/// TFLite's int8 RSQRT (`RsqrtEvalQuantizedInt8`): `1 / sqrt(x - z_in)` by the integer inverse
/// square root, scaled by `1 / (sqrt(s_in) * s_out)` with 20 guard bits. TFLite stops with an
/// error on inputs below the zero point; the table gives them the type maximum, as it gives the
/// zero point itself.
fn rsqrt_table(op: &Op, q: &Quant) -> Result<[u8; 256]> {
    const GUARD: i32 = 20;
    let (si, _) = q.input;
    let (so, zo) = q.output;
    // `1. / (std::sqrt(input_scale) * output_scale)`: a float square root and product.
    let (m, s) = rescale(op, 1.0 / f64::from(si.sqrt() * so), "output")?;
    if s - GUARD < -31 {
        return Err(node_err(
            op,
            format!("output factor of input scale {si} and output scale {so} is too small"),
        ));
    }
    let (_, hi) = q.range();
    Ok(q.int_table(|v| {
        if v <= 0 {
            return hi;
        }
        let (inv, inv_shift) = inv_sqrt_multiplier(v);
        let data = multiply_by_quantized_multiplier(1, inv, inv_shift + GUARD);
        multiply_by_quantized_multiplier(data, m, s - GUARD).wrapping_add(zo)
    }))
}

/// TFLite's int8 SQRT (`SqrtEvalQuantized`): `(int)(sqrt(s_in * (x - z_in)) / s_out) + z_out`
/// in single precision, truncated (no rounding). TFLite stops with an error on negative
/// inputs; the table gives them the output zero point (the square root of zero).
fn sqrt_table(q: &Quant) -> [u8; 256] {
    let (si, zi) = q.input;
    let (so, zo) = q.output;
    let (lo, hi) = q.range();
    let mut t = [0u8; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let v = lo + i as i32;
        let real = si * (v - zi) as f32;
        let out = if real >= 0.0 {
            x86_f32_to_i32(real.sqrt() / so).wrapping_add(zo)
        } else {
            zo
        };
        *e = out.clamp(lo, hi) as u8;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TFLite 2.21's int8 LOGISTIC and TANH (reference kernels) for input scale
    /// f32::from_bits(0x3cda5d61), zero point -23, at inputs -128..=127 (entry i = input i - 128),
    /// recorded from the interpreter (BUILTIN_REF) on a converted model.
    const TFLITE_SIGMOID: [i8; 256] = [
        -113, -113, -113, -112, -112, -111, -111, -111, -110, -110, -109, -109, -108, -108, -107,
        -107, -106, -106, -105, -105, -104, -103, -103, -102, -102, -101, -100, -100, -99, -98,
        -97, -97, -96, -95, -94, -94, -93, -92, -91, -90, -90, -89, -88, -87, -86, -85, -84, -83,
        -82, -81, -80, -79, -78, -77, -76, -75, -73, -72, -71, -70, -69, -67, -66, -65, -64, -62,
        -61, -60, -58, -57, -56, -54, -53, -52, -50, -49, -47, -46, -44, -43, -41, -40, -38, -36,
        -35, -33, -32, -30, -29, -27, -25, -24, -22, -20, -19, -17, -15, -14, -12, -10, -9, -7, -5,
        -3, -2, 0, 2, 3, 5, 7, 9, 10, 12, 14, 15, 17, 19, 20, 22, 24, 25, 27, 29, 30, 32, 33, 35,
        36, 38, 40, 41, 43, 44, 46, 47, 49, 50, 52, 53, 54, 56, 57, 58, 60, 61, 62, 64, 65, 66, 67,
        69, 70, 71, 72, 73, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 90, 91,
        92, 93, 94, 94, 95, 96, 97, 97, 98, 99, 100, 100, 101, 102, 102, 103, 103, 104, 105, 105,
        106, 106, 107, 107, 108, 108, 109, 109, 110, 110, 111, 111, 111, 112, 112, 113, 113, 113,
        114, 114, 114, 115, 115, 115, 116, 116, 116, 117, 117, 117, 117, 118, 118, 118, 118, 119,
        119, 119, 119, 120, 120, 120, 120, 120, 121, 121, 121, 121, 121, 122, 122, 122, 122, 122,
        122, 122, 123, 123, 123, 123, 123, 123, 123,
    ];
    const TFLITE_TANH: [i8; 256] = [
        -127, -127, -127, -127, -127, -127, -127, -127, -127, -126, -126, -126, -126, -126, -126,
        -126, -126, -126, -126, -125, -125, -125, -125, -125, -125, -124, -124, -124, -124, -124,
        -123, -123, -123, -123, -122, -122, -122, -121, -121, -121, -120, -120, -119, -119, -118,
        -118, -117, -117, -116, -116, -115, -114, -114, -113, -112, -111, -111, -110, -109, -108,
        -107, -106, -105, -103, -102, -101, -100, -98, -97, -95, -94, -92, -90, -89, -87, -85, -83,
        -81, -79, -77, -75, -72, -70, -67, -65, -62, -60, -57, -54, -52, -49, -46, -43, -40, -36,
        -33, -30, -27, -24, -20, -17, -14, -10, -7, -3, 0, 3, 7, 10, 14, 17, 20, 24, 27, 30, 33,
        36, 40, 43, 46, 49, 52, 54, 57, 60, 62, 65, 67, 70, 72, 75, 77, 79, 81, 83, 85, 87, 89, 90,
        92, 94, 95, 97, 98, 100, 101, 102, 103, 105, 106, 107, 108, 109, 110, 111, 111, 112, 113,
        114, 114, 115, 116, 116, 117, 117, 118, 118, 119, 119, 120, 120, 121, 121, 121, 122, 122,
        122, 123, 123, 123, 123, 124, 124, 124, 124, 124, 125, 125, 125, 125, 125, 125, 126, 126,
        126, 126, 126, 126, 126, 126, 126, 126, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127, 127,
        127, 127, 127, 127, 127, 127, 127, 127,
    ];

    #[test]
    fn tables_equal_tflite_reference() {
        let q = |output| Quant {
            input: (f32::from_bits(0x3cda_5d61), -23),
            output,
            signed: true,
        };
        let sig = q((1.0 / 256.0, -128)).float_table(logistic);
        assert_eq!(sig.map(|b| b as i8), TFLITE_SIGMOID);
        let tanh = q((1.0 / 128.0, 0)).float_table(f32::tanh);
        assert_eq!(tanh.map(|b| b as i8), TFLITE_TANH);
    }

    #[test]
    fn erf_matches_known_values() {
        // Values of erf from Abramowitz & Stegun, Table 7.1 (and its odd symmetry).
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.5, -0.966_105_146_475_310_7),
        ] {
            let got = erf(x);
            assert!((got - want).abs() < 2e-15, "erf({x}) = {got}, want {want}");
        }
        assert_eq!(erf(7.0), 1.0);
        assert_eq!(erf(-9.0), -1.0);
    }

    #[test]
    fn x86_conversion_of_out_of_range_values() {
        assert_eq!(x86_f32_to_i32(f32::NAN), i32::MIN);
        assert_eq!(x86_f32_to_i32(f32::INFINITY), i32::MIN);
        assert_eq!(x86_f32_to_i32(f32::NEG_INFINITY), i32::MIN);
        assert_eq!(x86_f32_to_i32(3e9), i32::MIN);
        assert_eq!(x86_f32_to_i32(-2.9), -2);
    }
}
