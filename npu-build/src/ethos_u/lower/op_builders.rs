//! NPU operation builders shared by the lowerings: copies, rescales and table lookups as 1x1
//! pools, element-wise and pooling operations with the common defaults, the OFM scale of a real
//! multiplier and the clamp of a fused activation.

use npu_rt::ethos_u::regs::fields::{
    ActivationClipRange, ElementwiseMode, IfmScaleMode, PoolingMode, RoundMode,
};
use npu_rt::fixed::quantize_multiplier;

use super::Lowering;
use super::fmap::as_i16_pairs;
use crate::error::Result;
use crate::ethos_u::npu_op::{
    Activation as NpuActivation, BufferId, ChannelScale, ConvWeights, ElemType, FeatureMap,
    InputScaling, Kernel, NpuOp, NpuOpKind, Operand2, Scale,
};
use crate::ir::quant::activation_range;
use crate::ir::{Activation, DType, Op, TensorId};

/// The single input and output of `op`.
pub(super) fn single_io(op: &Op) -> Result<(TensorId, TensorId)> {
    match (op.inputs.as_slice(), op.outputs.as_slice()) {
        ([x], [y]) => Ok((*x, *y)),
        _ => Err(Lowering::invalid(op, "expects one input and one output")),
    }
}

/// A real multiplier as OFM_SCALE: TFLite's `QuantizeMultiplier` mantissa, and its exponent as
/// a right shift `31 - exponent` in 0..=63. None if out of range (negative, not finite, or so
/// large that it would need a left shift).
pub(super) fn ofm_scale(real: f64) -> Option<Scale> {
    if !(real.is_finite() && real >= 0.0) {
        return None;
    }
    let (m, e) = quantize_multiplier(real);
    if m == 0 {
        return Some(Scale { scale: 0, shift: 0 });
    }
    let shift = 31 - e;
    (0..=63).contains(&shift).then_some(Scale {
        scale: m as u32,
        shift: shift as u8,
    })
}

/// The clamp of the fused activation `act` on output `y` (TFLite's
/// `CalculateActivationRangeQuantized`), as ACTIVATION_MIN/MAX.
pub(super) fn clamp(
    cx: &Lowering<'_>,
    op: &Op,
    act: Activation,
    y: TensorId,
    dtype: ElemType,
) -> Result<NpuActivation> {
    if dtype == ElemType::I32 {
        if act != Activation::None {
            return Err(cx.limit(op, "a fused activation on an i32 output"));
        }
        return Ok(NpuActivation::none(dtype));
    }
    let (scale, zero_point) = cx.quant(y);
    let ir_dtype = match dtype {
        ElemType::I8 => DType::I8,
        ElemType::U8 => DType::U8,
        ElemType::I16 => DType::I16,
        ElemType::I32 => DType::I32,
    };
    let (lo, hi) = activation_range(act, scale, zero_point, ir_dtype);
    Ok(NpuActivation {
        min: lo,
        // An empty range clamps everything to the lower bound, as the reference does.
        max: hi.max(lo),
        clip_range: ActivationClipRange::OfmPrecision,
        lut: None,
        builtin: None,
    })
}

/// A 1x1 AVERAGE pool: `ofm = clamp(zp_out + scale(ifm - zp_in))`.
pub(super) fn nop(
    name: &str,
    ifm: FeatureMap,
    ofm: FeatureMap,
    scale: Scale,
    round: RoundMode,
    activation: NpuActivation,
) -> NpuOp {
    NpuOp::new(name, NpuOpKind::Pool(PoolingMode::Average), ifm, ofm)
        .with_scale(scale)
        .with_ofm_round(round)
        .with_activation(activation)
}

/// A table lookup: a 1x1 AVERAGE pool with unit scale and zero points 0, so the output stage
/// indexes table `lut` with the raw input value (8-bit tables; 16-bit interpolating tables for
/// 16-bit OFMs).
pub(super) fn lookup(name: &str, mut ifm: FeatureMap, mut ofm: FeatureMap, lut: BufferId) -> NpuOp {
    ifm.zero_point = 0;
    ofm.zero_point = 0;
    let activation = NpuActivation::table(ofm.dtype, lut);
    nop(name, ifm, ofm, Scale::UNIT, RoundMode::Natural, activation)
}

/// A memory copy of `ifm` into `ofm` (same shape and type): a 1x1 AVERAGE pool with zero points
/// 0, unit scale and NATURAL rounding. 32-bit elements are copied as pairs of 16-bit ones.
pub(super) fn copy_op(name: &str, ifm: FeatureMap, ofm: FeatureMap) -> Result<NpuOp> {
    let (mut ifm, mut ofm) = (ifm, ofm);
    if ifm.shape != ofm.shape || ifm.dtype != ofm.dtype {
        return Err(crate::error::Error::Internal(format!(
            "{name}: copy of {:?} {:?} into {:?} {:?}",
            ifm.shape, ifm.dtype, ofm.shape, ofm.dtype
        )));
    }
    if ifm.dtype == ElemType::I32 {
        ifm = as_i16_pairs(&ifm).ok_or_else(|| not_nhwc(name))?;
        ofm = as_i16_pairs(&ofm).ok_or_else(|| not_nhwc(name))?;
    }
    ifm.zero_point = 0;
    ofm.zero_point = 0;
    let activation = NpuActivation::none(ofm.dtype);
    Ok(nop(
        name,
        ifm,
        ofm,
        Scale::UNIT,
        RoundMode::Natural,
        activation,
    ))
}

pub(super) fn not_nhwc(name: &str) -> crate::error::Error {
    crate::error::Error::Internal(format!("{name}: 32-bit copies need NHWC feature maps"))
}

/// The same op with NATURAL output rounding (rounding right shifts, sums).
pub(super) fn rounded(op: NpuOp) -> NpuOp {
    op.with_ofm_round(RoundMode::Natural)
}

/// `constant - t` where `constant` is a single int32 element: with one row the constant is the
/// IFM (as Vela orders it); otherwise it must be the broadcast IFM2, as operand A.
pub(super) fn sub_from_const(
    name: &str,
    constant: FeatureMap,
    t: FeatureMap,
    out: FeatureMap,
) -> NpuOp {
    if t.elements() == 1 {
        elementwise(
            name,
            ElementwiseMode::Sub,
            constant,
            Some(t),
            out,
            Scale::UNIT,
        )
    } else {
        let mut op = elementwise(
            name,
            ElementwiseMode::Sub,
            t,
            Some(constant),
            out,
            Scale::UNIT,
        );
        if let NpuOpKind::Elementwise { reversed, .. } = &mut op.kind {
            *reversed = true;
        }
        op
    }
}

/// An element-wise operation with unit input scaling (set explicitly for add/sub so no stale
/// OPA/OPB scale applies), the given OFM scale, DBL rounding and no clamp beyond the OFM type.
pub(super) fn elementwise(
    name: &str,
    mode: ElementwiseMode,
    ifm: FeatureMap,
    ifm2: Option<FeatureMap>,
    ofm: FeatureMap,
    ofm_scale: Scale,
) -> NpuOp {
    let input_scaling =
        matches!(mode, ElementwiseMode::Add | ElementwiseMode::Sub).then_some(InputScaling {
            mode: IfmScaleMode::OpaOpb16,
            opa: Scale::UNIT,
            opb: 1,
        });
    NpuOp::new(
        name,
        NpuOpKind::Elementwise {
            mode,
            ifm2: ifm2.map(Operand2::Tensor),
            reversed: false,
            input_scaling,
        },
        ifm,
        ofm,
    )
    .with_scale(ofm_scale)
}

/// A pooling operation with a 1x1 unit-stride kernel (callers widen it), no padding and no
/// upscaling, DBL rounding and no clamp beyond the OFM type.
pub(super) fn pool_op(
    name: &str,
    mode: PoolingMode,
    ifm: FeatureMap,
    ofm: FeatureMap,
    ofm_scale: Scale,
) -> NpuOp {
    NpuOp::new(name, NpuOpKind::Pool(mode), ifm, ofm).with_scale(ofm_scale)
}

/// A depthwise convolution with the given `[c, kh, kw, 1]` weights (channel-major), bias 0 and a
/// per-channel scale of exactly 1.0 (2^30 / 2^30): sums and selections of window elements.
pub(super) fn unit_depthwise(
    name: &str,
    ifm: FeatureMap,
    ofm: FeatureMap,
    [kh, kw]: [usize; 2],
    values: Vec<i16>,
) -> NpuOp {
    let c = ifm.shape[2];
    NpuOp::new(
        name,
        NpuOpKind::Depthwise(ConvWeights {
            shape: [c, kh, kw, 1],
            values,
            scales: vec![
                ChannelScale {
                    bias: 0,
                    scale: 1 << 30,
                    shift: 30,
                };
                c
            ],
        }),
        ifm,
        ofm,
    )
    .with_kernel(Kernel {
        h: kh,
        w: kw,
        ..Kernel::UNIT
    })
}
