//! Test-only: executes a lowered [`Program`] directly (no blocks, weights encoding or
//! registers) with the hardware arithmetic of docs/numerics.md (and the scale/bias entries of
//! docs/weights.md), so lowering can be checked against TFLite's outputs and the reference
//! interpreter before (and independently of) the emitter and the simulator.
//!
//! Model: kernel ops sum `(ifm - zp) * w` over in-bounds taps (padding contributes 0; MAX
//! ignores it), add the bias, scale by the channel's or the global OFM scale with the op's
//! rounding (DBL: natural rounding plus a ±2^30 nudge when the shift exceeds 31, Vela's model),
//! add the OFM zero point, clamp, look up the LUT, clamp to the type. Add/Sub scale the
//! selected operand by OPA_SCALE (DBL with the first rounding 20 bits lower) and shift the
//! other left by 19.

use npu_rt::ethos_u::builtin_act;
use npu_rt::ethos_u::regs::fields::{ElementwiseMode, IfmScaleMode, PoolingMode, RoundMode};

use crate::ethos_u::npu_op::{
    BufferKind, Builtin, ElemType, FeatureMap, Io, Layout, NpuOp, NpuOpKind, Operand2, Program,
    Scale,
};

/// Buffers of a program being executed.
pub(crate) struct Machine {
    pub bufs: Vec<Vec<u8>>,
}

impl Machine {
    /// Zeroed arena buffers, constants, and `inputs` (bytes of graph input `k`) written.
    pub fn new(p: &Program, inputs: &[Vec<u8>]) -> Machine {
        let bufs = p
            .buffers
            .iter()
            .map(|b| match (&b.kind, b.io) {
                (BufferKind::Const(bytes), _) => bytes.clone(),
                (BufferKind::Arena, Some(Io::Input(k))) => {
                    let mut v = inputs[k].clone();
                    v.resize(b.size, 0);
                    v
                }
                (BufferKind::Arena, _) => vec![0xA5; b.size],
            })
            .collect();
        Machine { bufs }
    }

    /// The bytes of graph output `k`.
    pub fn output(&self, p: &Program, k: usize) -> Vec<u8> {
        let i = p
            .buffers
            .iter()
            .position(|b| b.io == Some(Io::Output(k)))
            .expect("output buffer");
        self.bufs[i][..p.buffers[i].size].to_vec()
    }

    fn addr(fm: &FeatureMap, y: usize, x: usize, c: usize) -> usize {
        assert_eq!(fm.layout, Layout::Nhwc);
        // A reversed axis visits the box's rows (columns) last to first.
        let y = if fm.reverse[0] {
            fm.shape[0] - 1 - y
        } else {
            y
        };
        let x = if fm.reverse[1] {
            fm.shape[1] - 1 - x
        } else {
            x
        };
        fm.offset + y * fm.strides[0] + x * fm.strides[1] + c * fm.strides[2]
    }

    fn get(&self, fm: &FeatureMap, y: usize, x: usize, c: usize) -> i64 {
        let a = Self::addr(fm, y, x, c);
        let b = &self.bufs[fm.buffer.index()];
        assert!(
            a + fm.dtype.bytes() <= b.len(),
            "read past buffer {}",
            fm.buffer
        );
        match fm.dtype {
            ElemType::I8 => i64::from(b[a] as i8),
            ElemType::U8 => i64::from(b[a]),
            ElemType::I16 => i64::from(i16::from_le_bytes([b[a], b[a + 1]])),
            ElemType::I32 => i64::from(i32::from_le_bytes([b[a], b[a + 1], b[a + 2], b[a + 3]])),
        }
    }

    fn put(&mut self, fm: &FeatureMap, y: usize, x: usize, c: usize, v: i64) {
        let a = Self::addr(fm, y, x, c);
        let b = &mut self.bufs[fm.buffer.index()];
        assert!(
            a + fm.dtype.bytes() <= b.len(),
            "write past buffer {}",
            fm.buffer
        );
        match fm.dtype {
            ElemType::I8 | ElemType::U8 => b[a] = v as u8,
            ElemType::I16 => b[a..a + 2].copy_from_slice(&(v as i16).to_le_bytes()),
            ElemType::I32 => b[a..a + 4].copy_from_slice(&(v as i32).to_le_bytes()),
        }
    }

    /// Runs every operation of `p`.
    pub fn run(&mut self, p: &Program) {
        for op in &p.ops {
            self.op(p, op);
        }
    }

    fn op(&mut self, p: &Program, op: &NpuOp) {
        let [oh, ow, oc] = op.ofm.shape;
        let mut out = vec![0i64; oh * ow * oc];
        match &op.kind {
            NpuOpKind::Conv(_) | NpuOpKind::Depthwise(_) | NpuOpKind::Pool(_) => {
                self.kernel_op(op, &mut out)
            }
            NpuOpKind::Elementwise { .. } => self.elementwise(op, &mut out),
        }
        let lut = op.activation.lut.map(|b| match &p.buffers[b].kind {
            BufferKind::Const(t) => t.clone(),
            BufferKind::Arena => panic!("LUT in the arena"),
        });
        let (tlo, thi) = op.ofm.dtype.range();
        for y in 0..oh {
            for x in 0..ow {
                for c in 0..oc {
                    let v = out[(y * ow + x) * oc + c];
                    let v = match op.activation.builtin {
                        None => v,
                        Some(Builtin::Sigmoid) => builtin_act::sigmoid(v),
                        Some(Builtin::Tanh) => builtin_act::tanh(v),
                    };
                    let v = v + i64::from(op.ofm.zero_point);
                    // The 16-bit clamp registers do not limit 32-bit OFMs (as the simulator,
                    // checked on Vela's int32 intermediates).
                    let v = if op.ofm.dtype == ElemType::I32 {
                        v
                    } else {
                        v.clamp(
                            i64::from(op.activation.min),
                            i64::from(op.activation.max.max(op.activation.min)),
                        )
                    };
                    let v = match &lut {
                        None => v,
                        Some(t) => {
                            assert_eq!(t.len(), 256);
                            let idx = if tlo < 0 { v + 128 } else { v };
                            let raw = t[idx.clamp(0, 255) as usize];
                            if tlo < 0 {
                                i64::from(raw as i8)
                            } else {
                                i64::from(raw)
                            }
                        }
                    };
                    self.put(&op.ofm, y, x, c, v.clamp(tlo, thi));
                }
            }
        }
    }

    /// Conv, depthwise and pooling: values before the OFM zero point.
    fn kernel_op(&self, op: &NpuOp, out: &mut [i64]) {
        let [oh, ow, oc] = op.ofm.shape;
        let [ih, iw, ic] = op.ifm.shape;
        let k = op.kernel;
        let (dkh, dkw) = (k.dilated_h(), k.dilated_w());
        let pad = op.padding;
        // The hardware derives the IFM extent from the OFM, kernel and pads: check they agree.
        let reach_h = (oh - 1) * k.stride_y + dkh;
        let reach_w = (ow - 1) * k.stride_x + dkw;
        assert_eq!(
            pad.bottom,
            reach_h.saturating_sub(pad.top + ih),
            "{}: PAD_BOTTOM",
            op.name
        );
        assert_eq!(
            pad.right,
            reach_w.saturating_sub(pad.left + iw),
            "{}: PAD_RIGHT",
            op.name
        );
        assert!(pad.top.max(pad.left).max(pad.bottom).max(pad.right) <= 127);
        assert!((1..=3).contains(&k.stride_y) && (1..=3).contains(&k.stride_x));
        assert!((1..=2).contains(&k.dilation_y) && (1..=2).contains(&k.dilation_x));
        let zp = i64::from(op.ifm.zero_point);
        for oy in 0..oh {
            for ox in 0..ow {
                for o in 0..oc {
                    let mut acc = 0i64;
                    let mut max = i64::MIN;
                    for ky in 0..k.h {
                        let iy = (oy * k.stride_y + ky * k.dilation_y) as i64 - pad.top as i64;
                        if iy < 0 || iy >= ih as i64 {
                            continue;
                        }
                        for kx in 0..k.w {
                            let ix = (ox * k.stride_x + kx * k.dilation_x) as i64 - pad.left as i64;
                            if ix < 0 || ix >= iw as i64 {
                                continue;
                            }
                            let (iy, ix) = (iy as usize, ix as usize);
                            match &op.kind {
                                NpuOpKind::Conv(w) => {
                                    assert_eq!(w.shape, [oc, k.h, k.w, ic]);
                                    for i in 0..ic {
                                        let wv = w.values[((o * k.h + ky) * k.w + kx) * ic + i];
                                        acc += (self.get(&op.ifm, iy, ix, i) - zp) * i64::from(wv);
                                    }
                                }
                                NpuOpKind::Depthwise(w) => {
                                    assert_eq!(w.shape, [oc, k.h, k.w, 1]);
                                    let wv = w.values[(o * k.h + ky) * k.w + kx];
                                    acc += (self.get(&op.ifm, iy, ix, o) - zp) * i64::from(wv);
                                }
                                NpuOpKind::Pool(_) => {
                                    let v = self.get(&op.ifm, iy, ix, o) - zp;
                                    acc += v;
                                    max = max.max(v);
                                }
                                NpuOpKind::Elementwise { .. } => unreachable!(),
                            }
                        }
                    }
                    let v = match &op.kind {
                        NpuOpKind::Conv(w) | NpuOpKind::Depthwise(w) => {
                            assert!(op.ofm_scale.is_none());
                            let s = w.scales[o];
                            let a = (acc + s.bias).clamp(i32::MIN.into(), i32::MAX.into());
                            scale(
                                a,
                                Scale {
                                    scale: s.scale,
                                    shift: s.shift,
                                },
                                op.ofm_round,
                                0,
                            )
                        }
                        NpuOpKind::Pool(mode) => {
                            let s = op.ofm_scale.expect("pooling has a global scale");
                            match mode {
                                PoolingMode::Max => scale(max, s, op.ofm_round, 0),
                                _ => scale(acc, s, op.ofm_round, 0),
                            }
                        }
                        NpuOpKind::Elementwise { .. } => unreachable!(),
                    };
                    out[(oy * ow + ox) * oc + o] = v;
                }
            }
        }
    }

    fn elementwise(&self, op: &NpuOp, out: &mut [i64]) {
        let NpuOpKind::Elementwise {
            mode,
            ifm2,
            reversed,
            input_scaling,
        } = &op.kind
        else {
            unreachable!()
        };
        let [oh, ow, oc] = op.ofm.shape;
        assert_eq!(
            op.ifm.shape, op.ofm.shape,
            "{}: IFM must have the OFM's shape",
            op.name
        );
        // MIN and MAX are unscaled (the per-channel scale mode bit, no scale stream).
        let s = match mode {
            ElementwiseMode::Min | ElementwiseMode::Max => Scale::UNIT,
            _ => op.ofm_scale.expect("elementwise has a global scale"),
        };
        for y in 0..oh {
            for x in 0..ow {
                for c in 0..oc {
                    let a = self.get(&op.ifm, y, x, c) - i64::from(op.ifm.zero_point);
                    let b = match ifm2 {
                        Some(Operand2::Scalar { value, zero_point }) => {
                            i64::from(*value) - i64::from(*zero_point)
                        }
                        Some(Operand2::Tensor(f)) => {
                            let at = |d: usize, i: usize| {
                                assert!(f.shape[d] == op.ofm.shape[d] || f.shape[d] == 1);
                                if f.shape[d] == 1 { 0 } else { i }
                            };
                            self.get(f, at(0, y), at(1, x), at(2, c)) - i64::from(f.zero_point)
                        }
                        None => 0,
                    };
                    let (a, b) = if *reversed { (b, a) } else { (a, b) };
                    let v = match mode {
                        ElementwiseMode::Mul => scale(a * b, s, op.ofm_round, 0),
                        ElementwiseMode::Add | ElementwiseMode::Sub => {
                            let sc = input_scaling.expect("add/sub input scaling");
                            let scaled = |v: i64| scale(v, sc.opa, RoundMode::Dbl, 20);
                            let (a, b) = match sc.mode {
                                IfmScaleMode::OpaOpb16 => {
                                    // Only the unshifted scales the lowerings use are modelled
                                    // (exact products).
                                    assert_eq!(sc.opa.shift, 0);
                                    (a * i64::from(sc.opa.scale), b * i64::from(sc.opb))
                                }
                                _ if op.ifm.dtype.bits() != 8 => panic!("not modelled"),
                                IfmScaleMode::Opa32 => (scaled(a), b << 19),
                                IfmScaleMode::Opb32 => (a << 19, scaled(b)),
                            };
                            let r = if *mode == ElementwiseMode::Add {
                                a + b
                            } else {
                                a - b
                            };
                            scale(r, s, op.ofm_round, 0)
                        }
                        ElementwiseMode::Min => a.min(b),
                        ElementwiseMode::Max => a.max(b),
                        ElementwiseMode::Abs => scale(a.abs(), s, op.ofm_round, 0),
                        other => panic!("{other:?} not modelled"),
                    };
                    out[(y * ow + x) * oc + c] = v;
                }
            }
        }
    }
}

/// `v * scale / 2^shift` with the NPU's rounding (the simulator's arithmetic, one home).
fn scale(v: i64, s: Scale, round: RoundMode, dbl_bits: u32) -> i64 {
    npu_rt::ethos_u::numerics::scale(v, s.scale, u32::from(s.shift), round, dbl_bits)
}
