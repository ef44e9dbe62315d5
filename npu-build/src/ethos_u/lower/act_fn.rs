//! Element-wise functions of one 8-bit tensor ([`crate::ir::ActFn`]) as one NPU operation with
//! a lookup table, the way Vela lowers LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, EXP, ... for
//! int8/uint8 (`convert_to_lut`: a 1x1 average pool whose output stage looks the value up).
//!
//! The pool leaves the value unchanged (zero points 0, unit scale), so the output stage sees the
//! raw input byte, clamps it to the type, adds the hardware's LUT offset (128 for signed data)
//! and reads the table entry: exactly the table of the reference interpreter
//! ([`crate::reference::act_fn::table`]), which is in that order.
//!
//! int16 LOGISTIC and TANH are the same pool with the output stage's built-in SIGMOID/TANH
//! instead of a table, `OFM_SCALE` set to TFLite's input rescale (as Vela,
//! `generate_ofm_scaling_for_pooling`); see `docs/act.md`.

use super::Lowering;
use super::op_builders::{lookup, nop};
use crate::error::Result;
use crate::ethos_u::npu_op::ElemType;
use crate::ethos_u::npu_op::{Activation, Builtin, Scale};
use crate::ir::TensorId;
use crate::ir::{Op, OpKind};
use crate::reference::act_fn::{self, Act16};
use npu_rt::ethos_u::regs::RoundMode;

/// Lowers an [`OpKind::ActFn`] operator.
pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op) -> Result<()> {
    let OpKind::ActFn(f) = op.kind else {
        return Err(Lowering::invalid(
            op,
            "internal: not an element-wise function",
        ));
    };
    let (&x, &y) = match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => (x, y),
        _ => return Err(Lowering::invalid(op, "expects one input and one output")),
    };
    let g = cx.graph;
    if let Some(p) = Act16::of(g, op, f)? {
        return lower_int16(cx, op, x, y, p);
    }
    let (xt, yt) = (&g.tensors[x], &g.tensors[y]);
    for t in [xt, yt] {
        if !matches!(t.dtype, crate::ir::DType::I8 | crate::ir::DType::U8) {
            return Err(cx.limit(
                op,
                format!(
                    "tensor '{}' is {}; the NPU table lookup of {} takes int8 and uint8",
                    t.name,
                    t.dtype,
                    f.name()
                ),
            ));
        }
    }
    let table = act_fn::table(g, op, f)?;
    let ifm = cx.fm(op, x)?;
    let ofm = cx.fm(op, y)?;
    if ifm.shape != ofm.shape {
        return Err(Lowering::invalid(
            op,
            format!("input {:?} and output {:?} differ", ifm.shape, ofm.shape),
        ));
    }
    // The table is indexed by the raw input value: no zero point on either side.
    let lut = cx.const_buffer(format!("{}/lut", op.name), table.bytes.to_vec());
    debug_assert!(matches!(ofm.dtype, ElemType::I8 | ElemType::U8));
    cx.program.ops.push(lookup(&op.name, ifm, ofm, lut));
    Ok(())
}

/// int16 LOGISTIC/TANH: one 1x1 average pool, `OFM_SCALE` = TFLite's input rescale, the
/// built-in function in the output stage (zero points are 0: [`Act16::of`] checked them).
fn lower_int16(cx: &mut Lowering<'_>, op: &Op, x: TensorId, y: TensorId, p: Act16) -> Result<()> {
    let ifm = cx.fm(op, x)?;
    let ofm = cx.fm(op, y)?;
    if ifm.shape != ofm.shape || ifm.dtype != ElemType::I16 || ofm.dtype != ElemType::I16 {
        return Err(Lowering::invalid(
            op,
            format!(
                "int16 input {:?} {:?} and output {:?} {:?} differ",
                ifm.shape, ifm.dtype, ofm.shape, ofm.dtype
            ),
        ));
    }
    let shift = u8::try_from(p.shift)
        .map_err(|_| Lowering::invalid(op, format!("internal: shift {}", p.shift)))?;
    let activation = Activation {
        builtin: Some(if p.tanh {
            Builtin::Tanh
        } else {
            Builtin::Sigmoid
        }),
        ..Activation::none(ElemType::I16)
    };
    let scale = Scale {
        scale: p.multiplier,
        shift,
    };
    // Shifts stay at or below 31, where DBL rounds as TFLite's `+ 2^(shift-1)` does.
    cx.program
        .ops
        .push(nop(&op.name, ifm, ofm, scale, RoundMode::Dbl, activation));
    Ok(())
}
