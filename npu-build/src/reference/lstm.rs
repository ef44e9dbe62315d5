//! The integer UNIDIRECTIONAL_SEQUENCE_LSTM ([`OpKind::Lstm`](crate::ir::OpKind::Lstm)) as
//! TensorFlow Lite Micro computes it (`lstm_eval.cc`, `lstm_eval_common.cc` of tflite-micro),
//! the runtime of Cortex-M systems with an Ethos-U, whose arithmetic Vela's decomposition
//! reproduces. TFLite's own kernel differs in its sigmoid/tanh (gemmlowp's fixed-point
//! functions instead of the int16 tables): the fixtures' `NOTES.txt` give the measured effect.
//!
//! [`LstmPlan`] decides every integer parameter the way TFLite Micro's `Prepare` does (gate
//! scales `float(input_scale * weight_scale) / 2^-12` in double, the element-wise products'
//! scales in double, zero points folded into the biases). The arithmetic is `npu_rt`'s CPU
//! kernel ([`npu_rt::cpu::LstmOp`]): the interpreter lays the operands out as that kernel's
//! arena and read-only region and runs it, so the reference, the CPU fallback and (through the
//! same plan) the NPU lowering share one set of parameters.

use npu_rt::cpu::{Buf, LSTM_SCALES as SCALES, LstmOp, Op as CpuOp};

use super::util::{node_err, per_tensor};
use super::{Kernel, Prepared};
use crate::error::Result;
use crate::ir::{DType, Graph, LstmAttrs, Op, TensorId};
use crate::value::Data;
use npu_rt::fixed::quantize_multiplier;

/// Every parameter of one LSTM operator.
#[derive(Clone, Debug, PartialEq)]
pub struct LstmPlan {
    pub batch: usize,
    pub time: usize,
    pub input: usize,
    pub cell: usize,
    pub time_major: bool,
    /// Gate weights, input, forget, cell, output: four `[cell][input]` input matrices, then
    /// four `[cell][cell]` recurrent ones.
    pub weights: Vec<i8>,
    /// Eight `[cell]` biases with the zero points folded in (input paths first).
    pub biases: Vec<i32>,
    /// (multiplier, shift) of the eight paths into Q3.12, of the hidden state, of the forget
    /// gate times the cell state and of the input gate times the cell gate.
    pub scales: [(i32, i32); SCALES],
    /// The cell state's scale is `2^cell_shift`.
    pub cell_shift: i32,
    /// Quantized cell clip (0: none).
    pub cell_clip: i32,
    /// The hidden state's zero point (the input's and the hidden state's are folded into
    /// `biases`, so the NPU lowering reads both with zero point 0).
    pub hidden_zp: i32,
}

fn quantized_weights(
    g: &Graph,
    op: &Op,
    t: TensorId,
    rows: usize,
    cols: usize,
) -> Result<(Vec<i8>, f32)> {
    let w = &g.tensors[t];
    let data = w
        .data_i8()
        .ok_or_else(|| node_err(op, format!("weights '{}' must be constant int8", w.name)))?;
    if w.shape != [rows, cols] {
        return Err(node_err(
            op,
            format!(
                "weights '{}' have shape {:?}, expected [{rows}, {cols}]",
                w.name, w.shape
            ),
        ));
    }
    let (scale, zp) = per_tensor(g, op, t)?;
    if zp != 0 {
        return Err(node_err(
            op,
            format!(
                "weights '{}' have zero point {zp}; TFLite's LSTM takes symmetric weights",
                w.name
            ),
        ));
    }
    Ok((data, scale))
}

impl LstmPlan {
    pub fn new(g: &Graph, op: &Op, a: &LstmAttrs) -> Result<LstmPlan> {
        if op.inputs.len() != 15 || op.outputs.len() != 1 {
            return Err(node_err(
                op,
                "expects 15 inputs (x, 8 weights, 4 biases, 2 states) and one output",
            ));
        }
        let (x, y) = (op.inputs[0], op.outputs[0]);
        let (h, c) = (op.inputs[LstmAttrs::H], op.inputs[LstmAttrs::C]);
        let xt = &g.tensors[x];
        for (t, want) in [
            (x, DType::I8),
            (y, DType::I8),
            (h, DType::I8),
            (c, DType::I16),
        ] {
            if g.tensors[t].dtype != want {
                return Err(node_err(
                    op,
                    format!(
                        "tensor '{}' is {}; the integer LSTM needs {want}",
                        g.tensors[t].name, g.tensors[t].dtype
                    ),
                ));
            }
        }
        let &[d0, d1, input] = xt.shape.as_slice() else {
            return Err(node_err(
                op,
                format!("input '{}' must be 3-D, is {:?}", xt.name, xt.shape),
            ));
        };
        let (batch, time) = if a.time_major { (d1, d0) } else { (d0, d1) };
        let cell = g.tensors[op.inputs[1]].shape.first().copied().unwrap_or(0);
        if cell == 0 || input == 0 || batch == 0 || time == 0 {
            return Err(node_err(op, "empty input or zero cells"));
        }
        let (sx, x_zp) = per_tensor(g, op, x)?;
        let (sh, h_zp) = per_tensor(g, op, h)?;
        let (sc, _) = per_tensor(g, op, c)?;
        let cell_shift = {
            let l = f64::from(sc).log2();
            if l.fract() != 0.0 || !(-40.0..=-9.0).contains(&l) {
                return Err(node_err(
                    op,
                    format!(
                        "cell state scale {sc} is not a power of two at most 2^-9 (TFLite's condition)"
                    ),
                ));
            }
            l as i32
        };
        for (t, n) in [
            (h, batch * cell),
            (c, batch * cell),
            (y, batch * time * cell),
        ] {
            if g.tensors[t].elements() != n {
                return Err(node_err(
                    op,
                    format!(
                        "tensor '{}' has {} elements, expected {n}",
                        g.tensors[t].name,
                        g.tensors[t].elements()
                    ),
                ));
            }
        }
        let mut weights = Vec::with_capacity(4 * cell * (input + cell));
        let mut biases = Vec::with_capacity(8 * cell);
        let mut effective = [0f64; SCALES];
        let gate = 2f64.powi(-12);
        let mut recurrent = Vec::with_capacity(4 * cell * cell);
        let mut rec_bias = Vec::with_capacity(4 * cell);
        for k in 0..4 {
            let (wx, swx) = quantized_weights(g, op, op.inputs[1 + k], cell, input)?;
            let (wh, swh) = quantized_weights(g, op, op.inputs[5 + k], cell, cell)?;
            let b = &g.tensors[op.inputs[9 + k]];
            let bias = b.data_i32().filter(|v| v.len() == cell).ok_or_else(|| {
                node_err(
                    op,
                    format!("bias '{}' must be {cell} constant int32 values", b.name),
                )
            })?;
            // The product in single precision, the division in double (TFLite Micro's
            // CreateFCParams).
            effective[k] = f64::from(swx * sx) / gate;
            effective[4 + k] = f64::from(swh * sh) / gate;
            for j in 0..cell {
                let row_x: i32 = wx[j * input..(j + 1) * input]
                    .iter()
                    .map(|&v| i32::from(v))
                    .sum();
                let row_h: i32 = wh[j * cell..(j + 1) * cell]
                    .iter()
                    .map(|&v| i32::from(v))
                    .sum();
                biases.push(bias[j].wrapping_add((-x_zp).wrapping_mul(row_x)));
                rec_bias.push((-h_zp).wrapping_mul(row_h));
            }
            weights.extend_from_slice(&wx);
            recurrent.extend_from_slice(&wh);
        }
        weights.extend_from_slice(&recurrent);
        biases.extend_from_slice(&rec_bias);
        // CreateInterGateMulParams: products of Q0.15 gates into the hidden state (its own
        // quantization, the output state tensor's) and into the cell state, in double.
        let q15 = 2f64.powi(-15);
        effective[8] = q15 * q15 / f64::from(sh);
        effective[9] = q15 * f64::from(sc) / f64::from(sc);
        effective[10] = q15 * q15 / f64::from(sc);
        let mut scales = [(0, 0); SCALES];
        for (s, &e) in scales.iter_mut().zip(&effective) {
            if !(e.is_finite() && e > 0.0) {
                return Err(node_err(op, format!("invalid effective scale {e}")));
            }
            *s = quantize_multiplier(e);
        }
        let cell_clip = if a.cell_clip > 0.0 {
            (f64::from(a.cell_clip) / f64::from(sc)).clamp(-32768.0, 32767.0) as i32
        } else {
            0
        };
        Ok(LstmPlan {
            batch,
            time,
            input,
            cell,
            time_major: a.time_major,
            weights,
            biases,
            scales,
            cell_shift,
            cell_clip,
            hidden_zp: h_zp,
        })
    }

    /// The read-only bytes of the CPU kernel: weights, then biases (at [`LstmPlan::bias_at`]),
    /// then scales (at [`LstmPlan::scale_at`]).
    pub fn constants(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.weights.iter().map(|&v| v as u8).collect();
        out.resize(self.bias_at(), 0);
        for b in &self.biases {
            out.extend_from_slice(&b.to_le_bytes());
        }
        for (m, s) in self.scales {
            out.extend_from_slice(&m.to_le_bytes());
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Offset of the biases in [`LstmPlan::constants`] (4-aligned).
    pub fn bias_at(&self) -> usize {
        self.weights.len().div_ceil(4) * 4
    }

    /// Offset of the scales in [`LstmPlan::constants`].
    pub fn scale_at(&self) -> usize {
        self.bias_at() + self.biases.len() * 4
    }

    /// The CPU operation, its constants at `consts` (as laid out by [`LstmPlan::constants`]).
    #[allow(clippy::too_many_arguments)]
    pub fn cpu_op(&self, x: Buf, y: Buf, h: Buf, c: Buf, consts: Buf) -> CpuOp {
        let at = |o: usize| Buf {
            region: consts.region,
            offset: consts.offset + o as u32,
        };
        CpuOp::Lstm(LstmOp {
            x,
            y,
            h,
            c,
            w: consts,
            bias: at(self.bias_at()),
            scale: at(self.scale_at()),
            batch: self.batch as u32,
            time: self.time as u32,
            input: self.input as u32,
            cell: self.cell as u32,
            time_major: self.time_major,
            cell_shift: self.cell_shift,
            cell_clip: self.cell_clip,
            hidden_zp: self.hidden_zp,
        })
    }
}

/// The interpreter's kernel: inputs `[x, h, c]`, output `y`, new states `[h, c]`.
pub struct Lstm {
    plan: LstmPlan,
    consts: Vec<u8>,
}

impl Lstm {
    pub(super) fn prepare(g: &Graph, op: &Op, a: &LstmAttrs) -> Result<Prepared> {
        let plan = LstmPlan::new(g, op, a)?;
        let consts = plan.constants();
        Ok(Prepared::new(
            Lstm { plan, consts },
            vec![
                op.inputs[0],
                op.inputs[LstmAttrs::H],
                op.inputs[LstmAttrs::C],
            ],
        ))
    }

    fn step(&self, inputs: &[&Data]) -> Result<(Data, Data, Data)> {
        let p = &self.plan;
        let (Data::I8(x), Data::I8(h), Data::I16(c)) = (inputs[0], inputs[1], inputs[2]) else {
            return Err(crate::error::Error::Internal("LSTM: operand types".into()));
        };
        let (nx, ny, nh) = (x.len(), p.batch * p.time * p.cell, h.len());
        // Arena: x | y | h | c.
        let mut arena: Vec<u8> = x.iter().map(|&v| v as u8).collect();
        arena.resize(nx + ny, 0);
        arena.extend(h.iter().map(|&v| v as u8));
        for v in c {
            arena.extend_from_slice(&v.to_le_bytes());
        }
        let op = p.cpu_op(
            Buf::arena(0),
            Buf::arena(nx as u32),
            Buf::arena((nx + ny) as u32),
            Buf::arena((nx + ny + nh) as u32),
            Buf::weights(0),
        );
        op.execute(&self.consts, &mut arena).ok_or_else(|| {
            crate::error::Error::Internal("LSTM: operands outside the arena".into())
        })?;
        let y = arena[nx..nx + ny].iter().map(|&v| v as i8).collect();
        let h = arena[nx + ny..nx + ny + nh]
            .iter()
            .map(|&v| v as i8)
            .collect();
        let c = arena[nx + ny + nh..]
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        Ok((Data::I8(y), Data::I8(h), Data::I16(c)))
    }
}

impl Kernel for Lstm {
    fn run(&self, inputs: &[&Data]) -> Result<Data> {
        Ok(self.step(inputs)?.0)
    }

    fn run_with_state(&self, inputs: &[&Data]) -> Result<(Data, Vec<Data>)> {
        let (y, h, c) = self.step(inputs)?;
        Ok((y, vec![h, c]))
    }
}
