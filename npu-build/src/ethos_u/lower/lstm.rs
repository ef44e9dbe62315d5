//! UNIDIRECTIONAL_SEQUENCE_LSTM on the NPU: Vela's decomposition (`lstm.py`), step by step,
//! with the parameters of [`LstmPlan`] (TFLite Micro's arithmetic, which Vela's operations
//! reproduce register for register):
//!
//! - each gate: two fully-connected operations into int16 (input and hidden state, per-channel
//!   `MultiplyByQuantizedMultiplier` scales, DBL rounding, saturated), their ADD scaled by 3
//!   (`OPA/OPB_SCALE` 16384, `OFM_SCALE` 3 * 2^29 >> 43) into the output stage's built-in
//!   SIGMOID or TANH; the sigmoid gates then clamped to 11..=32757, the range of TFLite's table
//!   (the hardware's function reaches further on sums beyond int16, which the reference
//!   saturates first; both saturate the function, so the clamp makes them equal);
//! - the cell state, in place: MUL forget x cell, MUL input x cell gate, their ADD (unit
//!   scale, the cell clip as the output clamp);
//! - the hidden state: a 1x1 AVERAGE pool with the built-in TANH of the cell state, and its
//!   MUL by the output gate into int8, written straight into the output's row for this step
//!   (the next step reads it from there); after the last step a copy into the state tensor.
//!
//! Where Vela writes each new hidden state into the state tensor and copies it to the output
//! (one copy per step), this writes the output and copies once; the cell clip is folded into
//! the cell ADD.

use npu_rt::ethos_u::regs::fields::{ElementwiseMode, IfmScaleMode, RoundMode};

use super::Lowering;
use super::op_builders::{copy_op, nop};
use crate::error::Result;
use crate::ethos_u::npu_op::{
    Activation, Builtin, ChannelScale, ElemType, FeatureMap, InputScaling, Layout, NpuOp,
    NpuOpKind, Operand2, Scale,
};
use crate::ir::{LstmAttrs, Op};
use crate::reference::lstm::LstmPlan;

/// `(multiplier, shift)` of `MultiplyByQuantizedMultiplier` as the output stage's scale: a
/// right shift of `31 - shift`. Scales of 1 and more (a left shift) are left to the CPU: DBL
/// rounds their single rounding half up where TFLite rounds half away from zero.
fn q31(cx: &Lowering<'_>, op: &Op, (m, s): (i32, i32)) -> Result<Scale> {
    if !(-32..=0).contains(&s) || m < 0 {
        return Err(cx.limit(
            op,
            format!("LSTM rescale {m} * 2^{s} is outside the output stage's DBL range"),
        ));
    }
    Ok(Scale {
        scale: m as u32,
        shift: (31 - s) as u8,
    })
}

/// `ofm = a (mode) b`, operands `(a, b, ofm)`.
fn elementwise(
    name: String,
    mode: ElementwiseMode,
    (a, b, ofm): (FeatureMap, FeatureMap, FeatureMap),
    input_scaling: Option<InputScaling>,
    ofm_scale: Scale,
    activation: Activation,
) -> NpuOp {
    NpuOp::new(
        name,
        NpuOpKind::Elementwise {
            mode,
            ifm2: Some(Operand2::Tensor(b)),
            reversed: false,
            input_scaling,
        },
        a,
        ofm,
    )
    .with_scale(ofm_scale)
    .with_activation(activation)
}

/// `Activation::none(I16)` with a clamp to `lo..=hi`.
fn clamp16(lo: i32, hi: i32) -> Activation {
    Activation {
        min: lo,
        max: hi,
        ..Activation::none(ElemType::I16)
    }
}

pub(super) fn lower(cx: &mut Lowering<'_>, op: &Op, a: &LstmAttrs) -> Result<()> {
    let p = LstmPlan::new(cx.graph, op, a)?;
    let (nb, nt, ni, nc) = (p.batch, p.time, p.input, p.cell);
    if nb > 65536 || ni > 65536 || nc > 65536 {
        return Err(cx.limit(op, "LSTM dimensions above 65536"));
    }
    let (x, y) = (op.inputs[0], op.outputs[0]);
    let (h, c) = (op.inputs[LstmAttrs::H], op.inputs[LstmAttrs::C]);
    let xfm = cx.fm(op, x)?;
    let yfm = cx.fm(op, y)?;
    let hfm = cx.fm(op, h)?;
    let cfm = cx.fm(op, c)?;
    for (fm, t) in [(&xfm, x), (&yfm, y), (&hfm, h), (&cfm, c)] {
        if fm.layout != Layout::Nhwc {
            return Err(Lowering::invalid(
                op,
                format!("internal: '{}' is not NHWC", cx.graph.tensors[t].name),
            ));
        }
    }
    // Row `b` of step `t` of a `[B, T, n]` (or `[T, B, n]`) tensor as a `[1, B, n]` map.
    let step = |fm: &FeatureMap, t: usize, n: usize, dtype: ElemType, zp: i32| {
        let e = dtype.bytes();
        let (offset, row) = if p.time_major {
            (t * nb * n * e, n * e)
        } else {
            (t * n * e, nt * n * e)
        };
        FeatureMap {
            buffer: fm.buffer,
            offset: fm.offset + offset,
            shape: [1, nb, n],
            strides: [nb * row, row, e],
            layout: Layout::Nhwc,
            dtype,
            zero_point: zp,
            reverse: [false; 2],
            wrap: None,
        }
    };
    let state = |fm: &FeatureMap, dtype: ElemType, zp: i32| FeatureMap {
        buffer: fm.buffer,
        offset: fm.offset,
        shape: [1, nb, nc],
        strides: [nb * nc * dtype.bytes(), nc * dtype.bytes(), dtype.bytes()],
        layout: Layout::Nhwc,
        dtype,
        zero_point: zp,
        reverse: [false; 2],
        wrap: None,
    };
    // Read by the fully-connected halves and written by a raw copy: zero point 0 (the plan
    // folds the zero points into the biases).
    let h_state = state(&hfm, ElemType::I8, 0);
    let c_state = state(&cfm, ElemType::I16, 0);
    let bytes16 = nb * nc * 2;
    let scratch = |cx: &mut Lowering<'_>, what: &str| {
        let b = cx.scratch_buffer(format!("{}/{what}", op.name), bytes16);
        FeatureMap::nhwc(b, [1, nb, nc], ElemType::I16, 0)
    };
    // The fully-connected halves alternate between two pairs of buffers: a gate's ADD has
    // finished reading one pair three operations before the gate after next writes it
    // (the block dependency only orders an operation after its immediate predecessor).
    let gx: Vec<FeatureMap> = (0..2).map(|k| scratch(cx, &format!("x{k}"))).collect();
    let gh: Vec<FeatureMap> = (0..2).map(|k| scratch(cx, &format!("h{k}"))).collect();
    let gates: Vec<FeatureMap> = ["i", "f", "g", "o"]
        .iter()
        .map(|g| scratch(cx, &format!("gate_{g}")))
        .collect();
    // The cell update's products and the tanh of the cell reuse buffers whose last reader is
    // at least three operations back: the products the gate halves of pair 0 (last read by
    // the cell gate's ADD; rewritten by the next step's first gate, after the cell ADD read
    // them), the tanh the forget gate (last read by the forget MUL).
    let (fc, ig, th) = (gh[0].clone(), gx[0].clone(), gates[1].clone());

    // The gates' weights: one set per path, reused by every step.
    let mut weights = Vec::with_capacity(8);
    for path in 0..8 {
        let (k, recurrent) = (path % 4, path >= 4);
        let (cols, base) = if recurrent {
            (nc, 4 * nc * ni + k * nc * nc)
        } else {
            (ni, k * nc * ni)
        };
        let values: Vec<i32> = p.weights[base..base + nc * cols]
            .iter()
            .map(|&v| i32::from(v))
            .collect();
        let s = q31(cx, op, p.scales[path])?;
        let scales = (0..nc)
            .map(|j| ChannelScale {
                bias: i64::from(p.biases[path * nc + j]),
                scale: s.scale,
                shift: s.shift,
            })
            .collect();
        weights.push(super::conv::finish_weights(
            cx,
            op,
            [nc, 1, 1, cols],
            values,
            scales,
        )?);
    }
    let fc_op = |name: String, ifm: FeatureMap, ofm: FeatureMap, w| {
        NpuOp::new(name, NpuOpKind::Conv(w), ifm, ofm)
            .with_activation(Activation::none(ElemType::I16))
    };
    // ADD of the two int16 halves times 3: the built-in functions take units of 1/(3 * 4096).
    let gate_add = InputScaling {
        mode: IfmScaleMode::OpaOpb16,
        opa: Scale {
            scale: 1 << 14,
            shift: 0,
        },
        opb: 1 << 14,
    };
    let times3 = Scale {
        scale: 3 << 29,
        shift: 43,
    };
    let unit_add = Scale {
        scale: 1 << 30,
        shift: 44,
    };
    let (f_c, i_g, hidden) = (
        q31(cx, op, p.scales[9])?,
        q31(cx, op, p.scales[10])?,
        q31(cx, op, p.scales[8])?,
    );
    // tanh(c): the cell state's Q(15 + cell_shift) into Q3.12 units of 1/3.
    let left = 15 + p.cell_shift - 3;
    let tanh_scale = if left < 0 {
        Scale {
            scale: 3,
            shift: (-left) as u8,
        }
    } else {
        Scale {
            scale: 3 << left,
            shift: 0,
        }
    };
    let cell_clamp = if p.cell_clip > 0 {
        clamp16(-p.cell_clip, p.cell_clip)
    } else {
        Activation::none(ElemType::I16)
    };
    let name = |t: usize, what: &str| format!("{}#{t}/{what}", op.name);
    let mut ops = Vec::new();
    for t in 0..nt {
        // The zero points are folded into the biases.
        let x_t = step(&xfm, t, ni, ElemType::I8, 0);
        let h_prev = if t == 0 {
            h_state.clone()
        } else {
            step(&yfm, t - 1, nc, ElemType::I8, 0)
        };
        for k in 0..4 {
            let (xi, hi) = (x_t.clone(), h_prev.clone());
            let (gxk, ghk) = (gx[k % 2].clone(), gh[k % 2].clone());
            ops.push(fc_op(name(t, "fc_x"), xi, gxk.clone(), weights[k].clone()));
            ops.push(fc_op(
                name(t, "fc_h"),
                hi,
                ghk.clone(),
                weights[4 + k].clone(),
            ));
            let builtin = if k == 2 {
                Builtin::Tanh
            } else {
                Builtin::Sigmoid
            };
            ops.push(elementwise(
                name(t, "gate"),
                ElementwiseMode::Add,
                (gxk, ghk, gates[k].clone()),
                Some(gate_add),
                times3,
                Activation {
                    builtin: Some(builtin),
                    ..Activation::none(ElemType::I16)
                },
            ));
            if k != 2 {
                ops.push(nop(
                    &name(t, "gate_clamp"),
                    gates[k].clone(),
                    gates[k].clone(),
                    Scale::UNIT,
                    RoundMode::Dbl,
                    clamp16(11, 32757),
                ));
            }
        }
        let [gi, gf, gg, go] = [0, 1, 2, 3].map(|k| gates[k].clone());
        ops.push(elementwise(
            name(t, "forget"),
            ElementwiseMode::Mul,
            (c_state.clone(), gf, fc.clone()),
            None,
            f_c,
            Activation::none(ElemType::I16),
        ));
        ops.push(elementwise(
            name(t, "input"),
            ElementwiseMode::Mul,
            (gg, gi, ig.clone()),
            None,
            i_g,
            Activation::none(ElemType::I16),
        ));
        ops.push(elementwise(
            name(t, "cell"),
            ElementwiseMode::Add,
            (fc.clone(), ig.clone(), c_state.clone()),
            Some(gate_add),
            unit_add,
            cell_clamp.clone(),
        ));
        ops.push(nop(
            &name(t, "tanh_c"),
            c_state.clone(),
            th.clone(),
            tanh_scale,
            RoundMode::Dbl,
            Activation {
                builtin: Some(Builtin::Tanh),
                ..Activation::none(ElemType::I16)
            },
        ));
        ops.push(elementwise(
            name(t, "hidden"),
            ElementwiseMode::Mul,
            (th.clone(), go, step(&yfm, t, nc, ElemType::I8, p.hidden_zp)),
            None,
            hidden,
            Activation::none(ElemType::I8),
        ));
    }
    let last = step(&yfm, nt - 1, nc, ElemType::I8, 0);
    ops.push(copy_op(&name(nt - 1, "state"), last, h_state)?);
    cx.program.ops.extend(ops);
    Ok(())
}
