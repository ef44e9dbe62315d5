//! `NPU_OP_CONV` and `NPU_OP_DEPTHWISE`.
//!
//! The weight stream(s) and scale/bias stream(s) are decoded with [`crate::ethos_u::weights`]
//! into OHWI weights and one [`ScaleEntry`] per output channel (one stream per core on dual-core
//! configurations, interleaved channels). Each output is
//! `scale(sum((ifm - ifm_zp) * w) + bias, multiplier, shift)` followed by the output stage.

use std::vec;
use std::vec::Vec;

use crate::ethos_u::config::AcceleratorConfig;
use crate::ethos_u::regs::{
    AccFormat, ActivationPrecision, IfmPrecision, KernelStride, OfmScaleMode, WeightOrder,
};
use crate::ethos_u::weights::{
    ScaleEntry, Traversal, WeightGeometry, decode_scales, decode_weights,
    order::undilated_kernel_size,
};

use super::super::error::{Access, SimErrorKind};
use super::super::fmap::{FeatureMap, FmKind};
use super::super::memory::Regions;
use super::super::numerics;
use super::super::state::RegisterState;
use super::super::stats::OpStats;
use super::super::weight_cache::{DecodedWeights, WeightCache};
use super::output::OutputStage;
use super::pool::saturate_acc;
use super::{Geometry, ofm_dims};

/// Limits one convolution may use.
pub(crate) struct ConvLimits {
    pub max_elements: u64,
    pub max_macs: u64,
}

/// Executes one convolution or depthwise convolution.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    s: &RegisterState,
    depthwise: bool,
    cfg: &AcceleratorConfig,
    mem: &mut Regions,
    shram: &[u8],
    lut_base: usize,
    limits: &ConvLimits,
    cache: &mut WeightCache,
    st: &mut OpStats,
) -> Result<(), SimErrorKind> {
    let (h, w, d) = ofm_dims(s);
    let g = Geometry::new(s, h, w)?;
    let ifm = FeatureMap::new(&s.ifm, FmKind::Ifm)?;
    let ofm = FeatureMap::new(&s.ofm, FmKind::Ofm)?;
    let out = OutputStage::new(s, &ofm, shram, lut_base)?;
    if out.scale_mode != OfmScaleMode::PerChannel {
        return Err(SimErrorKind::Unsupported {
            what: "convolution with GLOBAL OFM scaling",
        });
    }
    let acc_format =
        AccFormat::from_bits(s.acc_format as u8).ok_or(SimErrorKind::InvalidRegister {
            register: "ACC_FORMAT",
            value: s.acc_format as u64,
            reason: "undefined accumulator format",
        })?;
    let ks = KernelStride(s.kernel_stride);
    let bad_kernel = |register, value: u16| SimErrorKind::InvalidRegister {
        register,
        value: value as u64,
        reason: "dilated kernel size is not (k - 1) * dilation + 1",
    };
    let kh = undilated_kernel_size(s.kernel_height_m1 as u32, ks.dilation_y())
        .ok_or(bad_kernel("KERNEL_HEIGHT_M1", s.kernel_height_m1))? as u64;
    let kw = undilated_kernel_size(s.kernel_width_m1 as u32, ks.dilation_x())
        .ok_or(bad_kernel("KERNEL_WIDTH_M1", s.kernel_width_m1))? as u64;
    let ifm_bits = match IfmPrecision(s.ifm.precision).precision() {
        ActivationPrecision::B8 => 8,
        ActivationPrecision::B16 => 16,
        _ => {
            return Err(SimErrorKind::Unsupported {
                what: "convolution of 32-bit IFMs",
            });
        }
    };
    let ic = if depthwise {
        d
    } else {
        s.ifm_depth_m1 as u64 + 1
    };
    let ofm_elems = h.saturating_mul(w).saturating_mul(d);
    let macs = ofm_elems
        .saturating_mul(kh.saturating_mul(kw))
        .saturating_mul(if depthwise { 1 } else { ic });
    let ifm_elems = g.ifm_h.saturating_mul(g.ifm_w).saturating_mul(ic);
    let padded = (g.up_h + g.pad_top + s.pad[3] as u64)
        .saturating_mul(g.up_w + g.pad_left + s.pad[2] as u64)
        .saturating_mul(ic);
    for (what, n, limit) in [
        (
            "OFM elements of one operation",
            ofm_elems,
            limits.max_elements,
        ),
        (
            "IFM elements of one operation",
            ifm_elems.max(padded),
            limits.max_elements,
        ),
        ("MACs of one operation", macs, limits.max_macs),
    ] {
        if n > limit {
            return Err(SimErrorKind::LimitExceeded {
                what,
                requested: n,
                limit,
            });
        }
    }

    // Weights and scales.
    let traversal = if depthwise {
        Traversal::Depthwise
    } else if ks.weight_order() == WeightOrder::PartKernelFirst {
        Traversal::PartKernelFirst
    } else {
        Traversal::DepthFirst
    };
    let cores = if s.parallel_mode == 1 {
        cfg.cores.max(1)
    } else {
        1
    };
    let geom = WeightGeometry {
        ofm_depth: d as u32,
        ofm_block_depth: s.ofm_blk_m1[2] as u32 + 1,
        ifm_depth: ic as u32,
        kernel_height: kh as u32,
        kernel_width: kw as u32,
        dilation_x: ks.dilation_x(),
        dilation_y: ks.dilation_y(),
        ifm_bits,
        cores,
        ..WeightGeometry::new(cfg, traversal)
    };
    let weights = load_weights(s, &geom, mem, cache, st)?;

    // Input: zero-point-subtracted, padded, upscaled image.
    let (vals, read) = ifm.gather(mem, g.ifm_h, g.ifm_w, ic, Access::IfmRead)?;
    st.read(ifm.region, read);
    let ph = (h - 1) * g.stride_y + s.kernel_height_m1 as u64 + 1;
    let pw = (w - 1) * g.stride_x + s.kernel_width_m1 as u64 + 1;
    let icu = ic as usize;
    let mut img = vec![0i16; (ph * pw * ic) as usize];
    let zp = ifm.zero_point;
    for py in 0..ph {
        let Some(iy) = g.source(py as i64 - g.pad_top as i64, g.up_h) else {
            continue;
        };
        for px in 0..pw {
            let Some(ix) = g.source(px as i64 - g.pad_left as i64, g.up_w) else {
                continue;
            };
            let src = ((iy * g.ifm_w + ix) * ic) as usize;
            let dst = ((py * pw + px) * ic) as usize;
            if let (Some(s), Some(dd)) = (vals.get(src..src + icu), img.get_mut(dst..dst + icu)) {
                for (o, &v) in dd.iter_mut().zip(s) {
                    // 8-bit minus zero point fits i16; 16-bit inputs saturate (never with valid zp).
                    *o = (v as i64 - zp).clamp(i16::MIN as i64, i16::MAX as i64) as i16;
                }
            }
        }
    }

    let (hu, wu, du) = (h as usize, w as usize, d as usize);
    // i32 lanes are exact while kernel volume * 255 * 255 < 2^31.
    let wide = ifm_bits == 16 || kh * kw * ic > 32_768;
    let mut accs = vec![0i64; hu * wu * du];
    if depthwise {
        depthwise_acc(
            &img,
            &weights.ohwi,
            &g,
            kh,
            kw,
            pw as usize,
            du,
            hu,
            wu,
            &mut accs,
        );
    } else {
        conv_acc(
            &img,
            &weights.ohwi,
            &g,
            kh,
            kw,
            pw as usize,
            icu,
            du,
            hu,
            wu,
            wide,
            &mut accs,
        );
    }
    let mut result = Vec::with_capacity(accs.len());
    for (i, &acc) in accs.iter().enumerate() {
        let e = weights.scales.get(i % du).copied().unwrap_or_default();
        let v = saturate_acc(
            saturate_acc(acc, acc_format).saturating_add(e.bias),
            AccFormat::I40,
        );
        let scaled = numerics::scale(v, e.multiplier, e.shift as u32, out.round, 0);
        result.push(out.finish(scaled));
    }
    let written = ofm.scatter(mem, h, w, d, &result, Access::OfmWrite)?;
    st.write(ofm.region, written);
    st.macs = macs;
    st.ofm_elements = ofm_elems;
    Ok(())
}

/// Reads and decodes the weight and scale streams of every core (through the cache).
fn load_weights<'c>(
    s: &RegisterState,
    geom: &WeightGeometry,
    mem: &Regions,
    cache: &'c mut WeightCache,
    st: &mut OpStats,
) -> Result<&'c DecodedWeights, SimErrorKind> {
    let mut streams: [(&[u8], &[u8]); 2] = [(&[], &[]), (&[], &[])];
    for core in 0..geom.cores as usize {
        let (Some(&wb), Some(&wl), Some(&sb), Some(&sl)) = (
            s.weight_base.get(core),
            s.weight_length.get(core),
            s.scale_base.get(core),
            s.scale_length.get(core),
        ) else {
            return Err(SimErrorKind::Unsupported {
                what: "more than two cores",
            });
        };
        let ws = mem.read(s.weight_region, wb, wl as u64, Access::WeightRead)?;
        let ss = mem.read(s.scale_region, sb, sl as u64, Access::ScaleRead)?;
        st.read(s.weight_region, wl as u64);
        st.read(s.scale_region, sl as u64);
        if let Some(slot) = streams.get_mut(core) {
            *slot = (ws, ss);
        }
    }
    cache.get_or_decode(geom, &streams[..geom.cores as usize], |geom, streams| {
        let ohwi_len = geom.ohwi_len().map_err(SimErrorKind::Weights)?;
        let mut ohwi = vec![0i16; ohwi_len];
        let mut scales = vec![ScaleEntry::default(); geom.ofm_depth as usize];
        for (core, (ws, ss)) in streams.iter().enumerate() {
            let g = geom.for_core(core as u32);
            if g.split().channels() == 0 {
                continue;
            }
            decode_weights(ws, &g, &mut ohwi).map_err(SimErrorKind::Weights)?;
            decode_scales(ss, g.split(), &mut scales).map_err(SimErrorKind::Weights)?;
        }
        Ok(DecodedWeights { ohwi, scales })
    })
}

/// Dot product of two equally long i16 slices. With `wide` false the inputs are 8-bit values
/// minus a zero point (|x| <= 255, |w| <= 255), so i32 lanes cannot overflow for the kernel
/// volumes the limits allow; the compiler vectorises that loop. 16-bit inputs use i64.
#[inline]
fn dot(a: &[i16], b: &[i16], wide: bool) -> i64 {
    if wide {
        return a.iter().zip(b).map(|(&x, &y)| x as i64 * y as i64).sum();
    }
    let mut acc = 0i32;
    for (&x, &y) in a.iter().zip(b) {
        acc = acc.wrapping_add(x as i32 * y as i32);
    }
    acc as i64
}

#[allow(clippy::too_many_arguments)]
fn conv_acc(
    img: &[i16],
    ohwi: &[i16],
    g: &Geometry,
    kh: u64,
    kw: u64,
    pw: usize,
    ic: usize,
    d: usize,
    h: usize,
    w: usize,
    wide: bool,
    accs: &mut [i64],
) {
    let (kh, kw) = (kh as usize, kw as usize);
    let (sy, sx, dy, dx) = (
        g.stride_y as usize,
        g.stride_x as usize,
        g.dil_y as usize,
        g.dil_x as usize,
    );
    let per_oc = kh * kw * ic;
    for oy in 0..h {
        for ox in 0..w {
            let base = (oy * w + ox) * d;
            for oc in 0..d {
                let wk = ohwi.get(oc * per_oc..(oc + 1) * per_oc).unwrap_or(&[]);
                let mut acc = 0i64;
                for ky in 0..kh {
                    let row = oy * sy + ky * dy;
                    if dx == 1 {
                        // kw * ic contiguous values in both the image and the weights.
                        let start = (row * pw + ox * sx) * ic;
                        let a = img.get(start..start + kw * ic).unwrap_or(&[]);
                        let b = wk.get(ky * kw * ic..(ky + 1) * kw * ic).unwrap_or(&[]);
                        acc += dot(a, b, wide);
                    } else {
                        for kx in 0..kw {
                            let start = (row * pw + ox * sx + kx * dx) * ic;
                            let a = img.get(start..start + ic).unwrap_or(&[]);
                            let b = wk
                                .get((ky * kw + kx) * ic..(ky * kw + kx + 1) * ic)
                                .unwrap_or(&[]);
                            acc += dot(a, b, wide);
                        }
                    }
                }
                if let Some(slot) = accs.get_mut(base + oc) {
                    *slot = acc;
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn depthwise_acc(
    img: &[i16],
    ohwi: &[i16],
    g: &Geometry,
    kh: u64,
    kw: u64,
    pw: usize,
    d: usize,
    h: usize,
    w: usize,
    accs: &mut [i64],
) {
    let (kh, kw) = (kh as usize, kw as usize);
    let (sy, sx, dy, dx) = (
        g.stride_y as usize,
        g.stride_x as usize,
        g.dil_y as usize,
        g.dil_x as usize,
    );
    // Weights as [ky][kx][c] so the channel loop is contiguous.
    let mut wt = vec![0i16; kh * kw * d];
    for c in 0..d {
        for k in 0..kh * kw {
            if let (Some(dst), Some(&v)) = (wt.get_mut(k * d + c), ohwi.get(c * kh * kw + k)) {
                *dst = v;
            }
        }
    }
    let mut acc = vec![0i64; d];
    for oy in 0..h {
        for ox in 0..w {
            acc.iter_mut().for_each(|a| *a = 0);
            for ky in 0..kh {
                for kx in 0..kw {
                    let start = ((oy * sy + ky * dy) * pw + ox * sx + kx * dx) * d;
                    let a = img.get(start..start + d).unwrap_or(&[]);
                    let b = wt
                        .get((ky * kw + kx) * d..(ky * kw + kx + 1) * d)
                        .unwrap_or(&[]);
                    for ((s, &x), &y) in acc.iter_mut().zip(a).zip(b) {
                        *s += x as i64 * y as i64;
                    }
                }
            }
            let base = (oy * w + ox) * d;
            if let Some(dst) = accs.get_mut(base..base + d) {
                dst.copy_from_slice(&acc);
            }
        }
    }
}
