//! TFLite Micro's integer LSTM ([`Op::Lstm`](super::Op::Lstm), `lstm_eval.cc` of
//! tflite-micro, 8-bit activations and 16-bit cell): the table-based int16 sigmoid and tanh of
//! `reference_integer_ops` (the functions the NPU has built in,
//! [`crate::ethos_u::builtin_act`]).
//!
//! Per step and row, each of the four gates is the saturating int16 sum of two fully-connected
//! results, `clamp16(MBQM(W_x x + b, m_x, s_x))` and `clamp16(MBQM(W_h h + b_h, m_h, s_h))`,
//! through sigmoid (input, forget, output) or tanh (cell) of the Q3.12 value into Q0.15. The
//! cell state becomes `sat16(sat16(MBQM(f * c)) + sat16(MBQM(i * g)))`, clipped; the hidden
//! state `clamp8(MBQM(o * tanh(c)) + zp)` (MBQM: `MultiplyByQuantizedMultiplier`). The new
//! hidden state of a row is written to `y` first and copied to `h` once the row's cells are
//! done (every cell reads all of `h`).

use super::LstmOp;
use super::{Buf, REGION_ARENA, REGION_WEIGHTS};
use crate::ethos_u::builtin_act::int16_kernel;
use crate::fixed::multiply_by_quantized_multiplier as mbqm;

fn region<'a>(b: Buf, weights: &'a [u8], arena: &'a [u8]) -> Option<&'a [u8]> {
    match b.region {
        REGION_WEIGHTS => weights.get(b.offset as usize..),
        REGION_ARENA => arena.get(b.offset as usize..),
        _ => None,
    }
}

fn i32_at(bytes: &[u8], k: usize) -> Option<i32> {
    let s = bytes.get(k * 4..k * 4 + 4)?;
    Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// (multiplier, shift) pairs of `LstmOp::scale`: the eight paths into the gates, then the
/// hidden state's, the forget gate times cell state's and the input gate times cell gate's.
pub const SCALES: usize = 11;

/// The int16 sigmoid (`tanh` false) or tanh of a Q3.12 gate, Q0.15.
fn gate_fn(v: i32, tanh: bool) -> i32 {
    i32::from(int16_kernel(v as i16, 3, 0, tanh))
}

/// Runs the whole sequence; `None` when an operand lies outside its region.
pub(super) fn lstm(p: &LstmOp, weights: &[u8], arena: &mut [u8]) -> Option<()> {
    let (nb, nt, ni, nc) = (
        p.batch as usize,
        p.time as usize,
        p.input as usize,
        p.cell as usize,
    );
    // Empty gates or inputs would make the loops' work independent of the operands' sizes;
    // no rows or no steps leave nothing to do (fuzzing found 4 billion empty steps).
    if nc == 0 || ni == 0 {
        return None;
    }
    if nb == 0 || nt == 0 {
        return Some(());
    }
    // Check every operand's extent once; the loops below index within them.
    let w_len = nc.checked_mul(ni.checked_add(nc)?)?.checked_mul(4)?;
    let bc = nb.checked_mul(nc)?;
    let arena_len = arena.len();
    let fits = |b: Buf, len: usize| {
        match b.region {
            REGION_WEIGHTS => (b.offset as usize).checked_add(len)? <= weights.len(),
            REGION_ARENA => (b.offset as usize).checked_add(len)? <= arena_len,
            _ => false,
        }
        .then_some(())
    };
    fits(p.w, w_len)?;
    fits(p.bias, nc.checked_mul(32)?)?;
    fits(p.scale, 2 * SCALES * 4)?;
    for (b, len) in [
        (p.x, nb.checked_mul(nt)?.checked_mul(ni)?),
        (p.y, nb.checked_mul(nt)?.checked_mul(nc)?),
        (p.h, bc),
        (p.c, bc.checked_mul(2)?),
    ] {
        if b.region != REGION_ARENA {
            return None;
        }
        fits(b, len)?;
    }
    // The tanh of the cell state: Q(15 + cell_shift) into the functions' Q3.12 units of 1/3.
    let left = p.cell_shift.checked_add(12)?;
    let (tanh_m, tanh_s) = if left < 0 {
        (
            3u32,
            u32::try_from(left.checked_neg()?)
                .ok()
                .filter(|&s| s <= 31)?,
        )
    } else {
        (
            3u32.checked_shl(left as u32).filter(|&m| m >> left == 3)?,
            0,
        )
    };
    let mut scales = [(0i32, 0i32); SCALES];
    {
        let s = region(p.scale, weights, arena)?;
        for (k, v) in scales.iter_mut().enumerate() {
            *v = (i32_at(s, 2 * k)?, i32_at(s, 2 * k + 1)?);
        }
    }
    let (x0, y0, h0, c0) = (
        p.x.offset as usize,
        p.y.offset as usize,
        p.h.offset as usize,
        p.c.offset as usize,
    );
    for t in 0..nt {
        for b in 0..nb {
            let row = if p.time_major { t * nb + b } else { b * nt + t };
            for j in 0..nc {
                let mut gates = [0i32; 4];
                for (k, g) in gates.iter_mut().enumerate() {
                    let wv = region(p.w, weights, arena)?;
                    let bias = region(p.bias, weights, arena)?;
                    let mut acc = i32_at(bias, k * nc + j)?;
                    let wrow = &wv[(k * nc + j) * ni..][..ni];
                    let xrow = &arena[x0 + row * ni..][..ni];
                    for (&w, &x) in wrow.iter().zip(xrow) {
                        acc = acc.wrapping_add(i32::from(w as i8) * i32::from(x as i8));
                    }
                    let (m, s) = scales[k];
                    let v = mbqm(acc, m, s).clamp(-32768, 32767);
                    let mut acc = i32_at(bias, (4 + k) * nc + j)?;
                    let rrow = &wv[4 * nc * ni + (k * nc + j) * nc..][..nc];
                    let hrow = &arena[h0 + b * nc..][..nc];
                    for (&w, &h) in rrow.iter().zip(hrow) {
                        acc = acc.wrapping_add(i32::from(w as i8) * i32::from(h as i8));
                    }
                    let (m, s) = scales[4 + k];
                    let v = (mbqm(acc, m, s).clamp(-32768, 32767) + v).clamp(-32768, 32767);
                    *g = gate_fn(v, k == 2);
                }
                let [i, f, g, o] = gates;
                let at = c0 + (b * nc + j) * 2;
                let c = i32::from(i16::from_le_bytes([arena[at], arena[at + 1]]));
                let sat = |v: i32| v.clamp(-32768, 32767);
                let fc = sat(mbqm(f * c, scales[9].0, scales[9].1));
                let ig = sat(mbqm(i * g, scales[10].0, scales[10].1));
                let mut c = sat(fc + ig);
                if p.cell_clip > 0 {
                    c = c.clamp(-p.cell_clip, p.cell_clip);
                }
                arena[at..at + 2].copy_from_slice(&(c as i16).to_le_bytes());
                let tc = i32::from(int16_kernel(c as i16, tanh_m, tanh_s, true));
                let (m, s) = scales[8];
                let h = mbqm(o * tc, m, s)
                    .saturating_add(p.hidden_zp)
                    .clamp(-128, 127);
                arena[y0 + row * nc + j] = h as i8 as u8;
            }
            arena.copy_within(y0 + row * nc..y0 + (row + 1) * nc, h0 + b * nc);
        }
    }
    Some(())
}
