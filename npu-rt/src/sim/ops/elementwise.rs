//! `NPU_OP_ELEMENTWISE`: MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL.
//!
//! Per element: subtract the zero points; for ADD/SUB apply the input scaling selected by
//! `IFM_PRECISION.scale_mode`; combine; for ADD/SUB/MUL/ABS/LRELU in GLOBAL scale mode apply
//! `OFM_SCALE`; then the output stage (zero point, clip, LUT).
//!
//! Input scaling of ADD/SUB:
//! - OPA_OPB_16: both operands are multiplied by their integer scales (`OPA_SCALE`, `OPB_SCALE`).
//! - OPA_32 / OPB_32: the selected operand is scaled by the 32-bit `OPA_SCALE` and its shift,
//!   the other is shifted left by the hardware's fixed 19 (8-bit inputs) or 14 (16-bit) bits,
//!   i.e. TFLite's factor 1/2 after its `left_shift` of 20/15 (Vela's `SupportedIFMQuant`
//!   requires the larger input scale to be exactly that fixed shift); the rounding is DBL with
//!   the first rounding at bit `31 - 20` (8-bit inputs) or `31 - 15` (16-bit), as TFLite's
//!   `left_shift` of 20/15 puts it. (Checked on Vela 5.2.0 streams of int8 Adds with input
//!   scale ratios 0.1 and 0.3: bit-exact with TFLite; a unit scale at the OPA shift is not.)

use crate::sim::within_limits;
use std::vec::Vec;

use crate::ethos_u::regs::{
    ActivationPrecision, ElementwiseMode, Ifm2Broadcast, Ifm2OperandOrder, IfmPrecision,
    IfmScaleMode, OfmScaleMode, RoundMode,
};

use super::super::error::{Access, SimErrorKind};
use super::super::fmap::{FeatureMap, FmKind};
use super::super::memory::Regions;
use super::super::state::RegisterState;
use super::super::stats::OpStats;
use super::ofm_dims;
use super::output::OutputStage;
use crate::ethos_u::numerics::{scale, shift_right};

/// Executes one elementwise operation.
pub(crate) fn run(
    s: &RegisterState,
    mode: ElementwiseMode,
    mem: &mut Regions,
    shram: &[u8],
    lut_base: usize,
    max_elements: u64,
    st: &mut OpStats,
) -> Result<(), SimErrorKind> {
    let (h, w, d) = ofm_dims(s);
    let n = h * w * d;
    within_limits(&[("OFM elements of one operation", n, max_elements)])?;
    let ifm = FeatureMap::new(&s.ifm, FmKind::Ifm)?;
    let ofm = FeatureMap::new(&s.ofm, FmKind::Ofm)?;
    let out = OutputStage::new(s, &ofm, shram, lut_base)?;
    let ifm_prec = IfmPrecision(s.ifm.precision);

    let (a_vals, read) = ifm.gather(mem, h, w, d, Access::IfmRead)?;
    st.read(ifm.region, read);

    // IFM2: a feature map (possibly broadcast), a scalar, or nothing for unary operations.
    let bc = Ifm2Broadcast(s.ifm2_broadcast);
    let mut ifm2_zp = 0i64;
    let mut b_vals: Vec<i32> = Vec::new();
    let (bh, bw, bd) = (
        if bc.broadcast_h() { 1 } else { h },
        if bc.broadcast_w() { 1 } else { w },
        if bc.broadcast_c() { 1 } else { d },
    );
    let mut scalar: Option<i64> = None;
    if !mode.is_unary() {
        let ifm2 = FeatureMap::new(&s.ifm2, FmKind::Ifm2)?;
        ifm2_zp = ifm2.zero_point;
        if bc.broadcast_constant() {
            let raw = s.ifm2_scalar;
            scalar = Some(if ifm2.signed {
                raw as i16 as i64
            } else {
                raw as i64
            });
        } else {
            let (v, read) = ifm2.gather(mem, bh, bw, bd, Access::Ifm2Read)?;
            st.read(ifm2.region, read);
            b_vals = v;
        }
    }
    let reversed = bc.operand_order() == Ifm2OperandOrder::OrderA;

    // Input scaling parameters (ADD/SUB).
    let scale_mode = ifm_prec.scale_mode().ok_or(SimErrorKind::InvalidRegister {
        register: "IFM_PRECISION",
        value: s.ifm.precision as u64,
        reason: "undefined scale_mode",
    })?;
    let in_round = ifm_prec.round_mode().unwrap_or(RoundMode::Dbl);
    let dbl_bits = match ifm_prec.precision() {
        ActivationPrecision::B8 => 20,
        ActivationPrecision::B16 => 15,
        _ => 0,
    };
    let (opa_shift, opa) = (s.opa_scale.0 as u32, s.opa_scale.1);
    let opb = s.opb_scale as u32;
    // The operand OPA_SCALE does not scale: a fixed left shift (2^(left_shift - 1)).
    let unscaled = |v: i64| -> i64 {
        if dbl_bits > 0 {
            v << (dbl_bits - 1)
        } else {
            scale(v, 1 << 31, opa_shift, in_round, dbl_bits)
        }
    };
    let scale_inputs = |a: i64, b: i64| -> (i64, i64) {
        match scale_mode {
            IfmScaleMode::OpaOpb16 => (
                scale(a, opa, opa_shift, in_round, dbl_bits),
                scale(b, opb, opa_shift, in_round, dbl_bits),
            ),
            IfmScaleMode::Opa32 => (scale(a, opa, opa_shift, in_round, dbl_bits), unscaled(b)),
            IfmScaleMode::Opb32 => (unscaled(a), scale(b, opa, opa_shift, in_round, dbl_bits)),
        }
    };

    let wide_product = ifm_prec.precision() == ActivationPrecision::B32;
    let mut result = Vec::with_capacity(n as usize);
    let a_zp = ifm.zero_point;
    let mut idx = 0usize;
    for y in 0..h {
        for x in 0..w {
            for c in 0..d {
                let a_raw = a_vals.get(idx).copied().unwrap_or(0) as i64;
                idx += 1;
                let b_raw = match scalar {
                    Some(v) => v,
                    None if mode.is_unary() => 0,
                    None => {
                        let by = if bc.broadcast_h() { 0 } else { y };
                        let bx = if bc.broadcast_w() { 0 } else { x };
                        let bz = if bc.broadcast_c() { 0 } else { c };
                        let bi = ((by * bw + bx) * bd + bz) as usize;
                        b_vals.get(bi).copied().unwrap_or(0) as i64
                    }
                };
                let (mut a, mut b) = (a_raw - a_zp, b_raw - ifm2_zp);
                if reversed {
                    core::mem::swap(&mut a, &mut b);
                }
                let r = match mode {
                    ElementwiseMode::Add | ElementwiseMode::Sub => {
                        let (sa, sb) = scale_inputs(a, b);
                        let r = if mode == ElementwiseMode::Add {
                            sa.saturating_add(sb)
                        } else {
                            sa.saturating_sub(sb)
                        };
                        out.scale_global(r)
                    }
                    ElementwiseMode::Mul if wide_product => {
                        // A 32x32-bit product does not go through the 32-bit scale multiplier:
                        // only the shift applies (TOSA's int32 MUL; Vela's softmax relies on it).
                        match out.scale_mode {
                            OfmScaleMode::Global => {
                                scale(a.saturating_mul(b), 1, out.global.1, out.round, 0)
                            }
                            OfmScaleMode::PerChannel => a.saturating_mul(b),
                        }
                    }
                    ElementwiseMode::Mul => out.scale_global(a.saturating_mul(b)),
                    ElementwiseMode::Min => out.scale_global(a.min(b)),
                    ElementwiseMode::Max => out.scale_global(a.max(b)),
                    ElementwiseMode::Abs => out.scale_global(a.saturating_abs()),
                    ElementwiseMode::Lrelu => {
                        if a < 0 {
                            scale(a, out.global.0, out.global.1, out.round, 0)
                        } else {
                            a
                        }
                    }
                    ElementwiseMode::Clz => (a as i32 as u32).leading_zeros() as i64,
                    ElementwiseMode::Shl => {
                        let sh = b.clamp(0, 63) as u32;
                        (a as i32 as i64)
                            .checked_shl(sh)
                            .unwrap_or(0)
                            .saturating_mul(1)
                    }
                    ElementwiseMode::Shr => {
                        let sh = b.clamp(0, 63) as u32;
                        shift_right(a, sh, out.round)
                    }
                };
                result.push(out.finish(r));
            }
        }
    }
    let written = ofm.scatter(mem, h, w, d, &result, Access::OfmWrite)?;
    st.write(ofm.region, written);
    st.ofm_elements = n;
    Ok(())
}
