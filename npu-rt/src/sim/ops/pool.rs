//! `NPU_OP_POOL`: MAX, AVERAGE and REDUCE_SUM over the kernel window.
//!
//! Padded positions do not take part in MAX; AVERAGE in GLOBAL scale mode is the window sum
//! times `OFM_SCALE` (Vela folds 1/kernel-size into it); in PER_CHANNEL mode (used with padding)
//! it divides by the number of valid positions, rounding half away from zero. REDUCE_SUM sums
//! the window and, when the OFM has depth 1, every IFM channel.

use crate::sim::within_limits;
use std::vec::Vec;

use crate::ethos_u::regs::{AccFormat, OfmScaleMode, PoolingMode};

use super::super::error::{Access, SimErrorKind};
use super::super::fmap::{FeatureMap, FmKind};
use super::super::memory::Regions;
use super::super::state::RegisterState;
use super::super::stats::OpStats;
use super::output::OutputStage;
use super::{Geometry, ofm_dims};

/// Saturates an accumulator to the configured accumulator width.
pub(crate) fn saturate_acc(v: i64, acc: AccFormat) -> i64 {
    match acc {
        AccFormat::I32 => v.clamp(i32::MIN as i64, i32::MAX as i64),
        _ => v.clamp(-(1i64 << 39), (1i64 << 39) - 1),
    }
}

/// Executes one pooling operation.
/// What one OFM element's kernel window holds: the sum, maximum and minimum of its IFM values
/// (zero point removed) and the number of positions inside the IFM (padding excluded).
pub(crate) struct Window {
    pub acc: i64,
    pub max: i64,
    pub min: i64,
    pub count: i64,
}

/// The window of OFM element `(oy, ox, c)`; with `sum_channels` (REDUCE_SUM) every IFM channel
/// of each position is summed instead of channel `c`. `at(y, x, c)` reads the IFM.
pub(crate) fn window(
    g: &Geometry,
    oy: u64,
    ox: u64,
    c: u64,
    ifm_d: u64,
    sum_channels: bool,
    at: &impl Fn(u64, u64, u64) -> i64,
) -> Window {
    let mut w = Window {
        acc: 0,
        max: i64::MIN,
        min: i64::MAX,
        count: 0,
    };
    for ky in 0..g.kh {
        let Some(iy) = g.source(g.row(oy, ky), g.up_h) else {
            continue;
        };
        for kx in 0..g.kw {
            let Some(ix) = g.source(g.col(ox, kx), g.up_w) else {
                continue;
            };
            w.count += 1;
            if sum_channels {
                for ic in 0..ifm_d {
                    w.acc += at(iy, ix, ic);
                }
            } else {
                let v = at(iy, ix, c);
                w.acc += v;
                w.max = w.max.max(v);
                w.min = w.min.min(v);
            }
        }
    }
    w
}

/// `acc / count` rounded half away from zero (TFLite's AVERAGE_POOL_2D); 0 for an empty window.
pub(crate) fn rounded_average(acc: i64, count: i64) -> i64 {
    if count == 0 {
        0
    } else if acc >= 0 {
        (acc + count / 2) / count
    } else {
        (acc - count / 2) / count
    }
}

pub(crate) fn run(
    s: &RegisterState,
    mode: PoolingMode,
    mem: &mut Regions,
    shram: &[u8],
    lut_base: usize,
    max_elements: u64,
    st: &mut OpStats,
) -> Result<(), SimErrorKind> {
    let (h, w, d) = ofm_dims(s);
    let g = Geometry::new(s, h, w)?;
    let ifm = FeatureMap::new(&s.ifm, FmKind::Ifm)?;
    let ofm = FeatureMap::new(&s.ofm, FmKind::Ofm)?;
    let out = OutputStage::new(s, &ofm, shram, lut_base)?;
    let acc_format =
        AccFormat::from_bits(s.acc_format as u8).ok_or(SimErrorKind::InvalidRegister {
            register: "ACC_FORMAT",
            value: s.acc_format as u64,
            reason: "undefined accumulator format",
        })?;
    let ifm_d = if mode == PoolingMode::ReduceSum {
        s.ifm_depth_m1 as u64 + 1
    } else {
        d
    };
    let sum_channels = mode == PoolingMode::ReduceSum && d == 1;
    let ofm_elems = h.saturating_mul(w).saturating_mul(d);
    let work = ofm_elems
        .saturating_mul(g.kh.saturating_mul(g.kw))
        .saturating_mul(if sum_channels { ifm_d } else { 1 });
    let ifm_elems = g.ifm_h.saturating_mul(g.ifm_w).saturating_mul(ifm_d);
    within_limits(&[
        ("OFM elements of one operation", ofm_elems, max_elements),
        ("IFM elements of one operation", ifm_elems, max_elements),
        ("pooling work of one operation", work, max_elements),
    ])?;
    let (vals, read) = ifm.gather(mem, g.ifm_h, g.ifm_w, ifm_d, Access::IfmRead)?;
    st.read(ifm.region, read);
    let zp = ifm.zero_point;
    let at = |y: u64, x: u64, c: u64| -> i64 {
        vals.get(((y * g.ifm_w + x) * ifm_d + c) as usize)
            .copied()
            .unwrap_or(0) as i64
            - zp
    };

    let mut result = Vec::with_capacity((h * w * d) as usize);
    for oy in 0..h {
        for ox in 0..w {
            for c in 0..d {
                let Window {
                    acc, max, count, ..
                } = window(&g, oy, ox, c, ifm_d, sum_channels, &at);
                let acc = saturate_acc(acc, acc_format);
                let r = match mode {
                    PoolingMode::Max => {
                        let m = if count == 0 { 0 } else { max };
                        out.scale_global(m)
                    }
                    PoolingMode::ReduceSum => out.scale_global(acc),
                    PoolingMode::Average => match out.scale_mode {
                        OfmScaleMode::Global => out.scale_global(acc),
                        OfmScaleMode::PerChannel => rounded_average(acc, count),
                    },
                };
                result.push(out.finish(r));
            }
        }
    }
    let written = ofm.scatter(mem, h, w, d, &result, Access::OfmWrite)?;
    st.write(ofm.region, written);
    st.ofm_elements = h * w * d;
    Ok(())
}
