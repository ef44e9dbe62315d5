//! Table lookup of 8-bit values ([`Op::Lut8`](super::Op::Lut8)): every element-wise function of
//! one int8/uint8 tensor (sigmoid, tanh, hard-swish, leaky ReLU, ELU, GELU, exp, log, swish)
//! is a 256-entry table, built at compile time by the reference interpreter from TFLite's
//! arithmetic for that operator. int16 LOGISTIC and TANH ([`Op::Act16`](super::Op::Act16))
//! compute TFLite's fixed-point functions, which the NPU has built in.

use super::operands::operands;
use super::{Buf, Elem};

/// Entries of a [`Op::Lut8`](super::Op::Lut8) table.
pub const LUT8_ENTRIES: usize = 256;

/// `y[i] = table[x[i] + 128]` for int8, `table[x[i]]` for uint8 (the NPU's table order).
pub(super) fn lut8(
    x: Buf,
    y: Buf,
    len: u32,
    elem: Elem,
    table: Buf,
    weights: &[u8],
    arena: &mut [u8],
) -> Option<()> {
    let offset = match elem {
        Elem::I8 => 128u8,
        Elem::U8 => 0,
        _ => return None,
    };
    let n = len as usize;
    let ([x, t], y) = operands(weights, arena, [(x, n), (table, LUT8_ENTRIES)], (y, n))?;
    for (o, &v) in y.iter_mut().zip(x) {
        // Adding 128 modulo 256 turns the two's complement byte into its table index.
        *o = t[usize::from(v.wrapping_add(offset))];
    }
    Some(())
}

/// `y = f(scale(x))` for `len` int16 values (see [`Op::Act16`](super::Op::Act16)).
pub(super) fn act16(
    x: Buf,
    y: Buf,
    len: u32,
    (multiplier, shift): (u32, u32),
    tanh: bool,
    weights: &[u8],
    arena: &mut [u8],
) -> Option<()> {
    use crate::ethos_u::builtin_act::int16_kernel;
    let n = (len as usize).checked_mul(2)?;
    let ([x], y) = operands(weights, arena, [(x, n)], (y, n))?;
    for (o, v) in y.chunks_exact_mut(2).zip(x.chunks_exact(2)) {
        let r = int16_kernel(i16::from_le_bytes([v[0], v[1]]), multiplier, shift, tanh);
        o.copy_from_slice(&r.to_le_bytes());
    }
    Some(())
}
