//! `NPU_OP_CONV` and `NPU_OP_DEPTHWISE`.
//!
//! The weight stream(s) and scale/bias stream(s) are decoded with [`crate::ethos_u::weights`]
//! into OHWI weights and one [`ScaleEntry`] per output channel (one stream per core on dual-core
//! configurations, interleaved channels). Each output is
//! `scale(sum((ifm - ifm_zp) * w) + bias, multiplier, shift)` followed by the output stage.

use crate::sim::within_limits;
use std::vec;
use std::vec::Vec;

use crate::ethos_u::config::AcceleratorConfig;
use crate::ethos_u::regs::{
    AccFormat, ActivationPrecision, IfmPrecision, IfmUpscaleMode, KernelStride, OfmScaleMode,
    WeightOrder,
};
use crate::ethos_u::weights::{
    ScaleEntry, Traversal, WeightGeometry, decode_scales, decode_weights,
    order::undilated_kernel_size,
};

use super::super::error::{Access, SimErrorKind};
use super::super::fmap::{FeatureMap, FmKind};
use super::super::memory::Regions;
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
    let Sizes {
        kh,
        kw,
        ifm_bits,
        ic,
        ofm_elems,
        macs,
    } = Sizes::checked(s, &g, depthwise, [h, w, d], limits)?;

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

    let (vals, read) = ifm.gather(mem, g.ifm_h, g.ifm_w, ic, Access::IfmRead)?;
    st.read(ifm.region, read);
    let k = Window {
        kh: kh as usize,
        kw: kw as usize,
        sy: g.stride_y as usize,
        sx: g.stride_x as usize,
        dy: g.dil_y as usize,
        dx: g.dil_x as usize,
        ph: ((h - 1) * g.stride_y + s.kernel_height_m1 as u64 + 1) as usize,
        pw: ((w - 1) * g.stride_x + s.kernel_width_m1 as u64 + 1) as usize,
    };
    let (hu, wu, du, icu) = (h as usize, w as usize, d as usize, ic as usize);
    let mut result = vec![0i32; hu * wu * du];
    let requant: Vec<_> = weights.scales.iter().map(|e| out.requant(e)).collect();
    // i32 lanes are exact for 8-bit inputs while kernel volume * 255 * 255 < 2^31.
    let kvol = kh as usize * kw as usize;
    let terms = kvol * if depthwise { 1 } else { icu };
    // 8-bit inputs: products are at most 255 * 255, so i32 sums of `terms` products are exact
    // below 33025 terms, and f32 partial sums of up to F32_EXACT_TERMS products are exact.
    let narrow = ifm_bits == 8 && terms <= 32_768 && (!depthwise || kvol <= F32_EXACT_TERMS);
    if narrow {
        let img = build_image(&vals, &g, &k, icu, icu, ifm.zero_point, |v| v as f32);
        let mut acc = vec![0i32; du];
        let mut accf = vec![0f32; du];
        let mut nz = vec![(0f32, 0usize); terms];
        for oy in 0..hu {
            for ox in 0..wu {
                let in_f32 = if depthwise {
                    depthwise_pixel(&img, &weights.packed, &k, oy, ox, &mut accf);
                    true
                } else {
                    conv_pixel(
                        &img,
                        &weights.packed,
                        &k,
                        icu,
                        oy,
                        ox,
                        &mut nz,
                        &mut accf,
                        &mut acc,
                    )
                };
                let pixel = oy * wu + ox;
                let row = result.get_mut(pixel * du..(pixel + 1) * du);
                if in_f32 {
                    // Exact: the sums are integers below 2^24.
                    out.requant_row(&accf, exact_f32_to_i64, &requant, row);
                } else {
                    out.requant_row(&acc, |a| a as i64, &requant, row);
                }
            }
        }
    } else {
        let img = build_image(&vals, &g, &k, icu, icu, ifm.zero_point, |v| v);
        let mut wide = vec![0i64; du];
        for oy in 0..hu {
            for ox in 0..wu {
                wide_pixel(&img, &weights.ohwi, &k, icu, depthwise, oy, ox, &mut wide);
                let pixel = oy * wu + ox;
                let row = result
                    .get_mut(pixel * du..(pixel + 1) * du)
                    .unwrap_or(&mut []);
                for ((o, &a), r) in row.iter_mut().zip(&wide).zip(&requant) {
                    *o = out.channel(r, saturate_acc(a, acc_format));
                }
            }
        }
    }
    let written = ofm.scatter(mem, h, w, d, &result, Access::OfmWrite)?;
    st.write(ofm.region, written);
    st.macs = macs;
    st.ofm_elements = ofm_elems;
    Ok(())
}

/// A convolution's kernel, input and work sizes, checked against the register encoding and the
/// simulator's limits.
struct Sizes {
    kh: u64,
    kw: u64,
    ifm_bits: u32,
    /// Input channels.
    ic: u64,
    ofm_elems: u64,
    macs: u64,
}

impl Sizes {
    fn checked(
        s: &RegisterState,
        g: &Geometry,
        depthwise: bool,
        [h, w, d]: [u64; 3],
        limits: &ConvLimits,
    ) -> Result<Sizes, SimErrorKind> {
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
        within_limits(&[
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
        ])?;
        Ok(Sizes {
            kh,
            kw,
            ifm_bits,
            ic,
            ofm_elems,
            macs,
        })
    }
}

/// Kernel window geometry in the padded image.
struct Window {
    kh: usize,
    kw: usize,
    sy: usize,
    sx: usize,
    dy: usize,
    dx: usize,
    /// Padded image height and width.
    ph: usize,
    pw: usize,
}

impl Window {
    /// Index of the first channel of image position (row, col) for output (oy, ox) and kernel
    /// element (ky, kx).
    #[inline]
    fn at(&self, oy: usize, ox: usize, ky: usize, kx: usize, channels: usize) -> usize {
        ((oy * self.sy + ky * self.dy) * self.pw + ox * self.sx + kx * self.dx) * channels
    }
}

/// The IFM as the kernel sees it: padding and upscaling resolved, zero point subtracted,
/// `channels` per position (the real ones followed by zeros).
fn build_image<T: Copy + Default>(
    vals: &[i32],
    g: &Geometry,
    k: &Window,
    ic: usize,
    channels: usize,
    zp: i64,
    cast: impl Fn(i32) -> T,
) -> Vec<T> {
    // Zero points are 16-bit and inputs at most 16-bit here, so i32 differences are exact.
    let zp = zp as i32;
    let mut img = vec![T::default(); k.ph * k.pw * channels];
    let plain = g.upscale == IfmUpscaleMode::None && ic == channels;
    for py in 0..k.ph {
        let Some(iy) = g.source(py as i64 - g.pad_top as i64, g.up_h) else {
            continue;
        };
        if plain {
            // Without upscaling a padded row is [left padding][the IFM row][right padding].
            let (pl, w) = (g.pad_left as usize, g.ifm_w as usize);
            let src = iy as usize * w * ic;
            let dst = (py * k.pw + pl) * ic;
            let n = (w * ic).min(k.pw.saturating_sub(pl) * ic);
            if let (Some(s), Some(d)) = (vals.get(src..src + n), img.get_mut(dst..dst + n)) {
                for (o, &v) in d.iter_mut().zip(s) {
                    *o = cast(v.wrapping_sub(zp));
                }
            }
            continue;
        }
        for px in 0..k.pw {
            let Some(ix) = g.source(px as i64 - g.pad_left as i64, g.up_w) else {
                continue;
            };
            let src = (iy as usize * g.ifm_w as usize + ix as usize) * ic;
            let dst = (py * k.pw + px) * channels;
            if let (Some(s), Some(d)) = (vals.get(src..src + ic), img.get_mut(dst..dst + ic)) {
                for (o, &v) in d.iter_mut().zip(s) {
                    *o = cast(v.wrapping_sub(zp));
                }
            }
        }
    }
    img
}

/// An f32 holding an integer of magnitude below 2^24 as i64, without the saturation checks
/// of `as` (exact: the f64 sum keeps the integer in its low mantissa bits).
#[inline]
fn exact_f32_to_i64(f: f32) -> i64 {
    const MAGIC: f64 = 6755399441055744.0; // 2^52 + 2^51
    ((f as f64 + MAGIC).to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64)
}

/// Products of 8-bit values minus zero points are at most 255 * 255; f32 sums of up to this
/// many of them stay below 2^24 and are therefore exact.
const F32_EXACT_TERMS: usize = 258;

/// One output position of a convolution with 8-bit inputs.
///
/// The kernel window's non-zero inputs are collected first (zero activations, e.g. after ReLU,
/// and padding cost nothing), then each group of four is applied to all output channels as
/// `acc[o] += x0 * w0[o] + x1 * w1[o] + x2 * w2[o] + x3 * w3[o]` with weights `[term][oc]`.
/// The sums are f32, exact because at most [`F32_EXACT_TERMS`] products are added before
/// they are moved into the i32 accumulators.
#[allow(clippy::too_many_arguments)]
#[inline]
fn conv_pixel(
    img: &[f32],
    hwio: &[f32],
    k: &Window,
    ic: usize,
    oy: usize,
    ox: usize,
    nz: &mut [(f32, usize)],
    accf: &mut [f32],
    acc: &mut [i32],
) -> bool {
    let oc = acc.len();
    // Branch-free compaction of the non-zero inputs into `nz` (capacity: every term).
    let mut n = 0usize;
    for ky in 0..k.kh {
        for kx in 0..k.kw {
            let at = k.at(oy, ox, ky, kx, ic);
            let (Some(x), Some(dst)) = (img.get(at..at + ic), nz.get_mut(n..n + ic)) else {
                continue;
            };
            let term0 = (ky * k.kw + kx) * ic;
            let mut m = 0usize;
            for (i, &v) in x.iter().enumerate() {
                if let Some(slot) = dst.get_mut(m) {
                    *slot = (v, term0 + i);
                }
                m += (v != 0.0) as usize;
            }
            n += m;
        }
    }
    let row = |t: usize| hwio.get(t * oc..(t + 1) * oc).unwrap_or(&[]);
    // Chunks of up to F32_EXACT_TERMS terms, each summed exactly in f32.
    let chunks = nz.get(..n).unwrap_or(&[]).chunks(F32_EXACT_TERMS / 4 * 4);
    let single = n <= F32_EXACT_TERMS / 4 * 4;
    let mut first = true;
    for chunk in chunks {
        let mut quads = chunk.chunks_exact(4);
        let mut fresh = true;
        for q in &mut quads {
            let (w0, w1, w2, w3) = (row(q[0].1), row(q[1].1), row(q[2].1), row(q[3].1));
            let n = oc.min(w0.len()).min(w1.len()).min(w2.len()).min(w3.len());
            let (a, w0, w1, w2, w3) = (&mut accf[..n], &w0[..n], &w1[..n], &w2[..n], &w3[..n]);
            let (x0, x1, x2, x3) = (q[0].0, q[1].0, q[2].0, q[3].0);
            if fresh {
                for o in 0..n {
                    a[o] = x0 * w0[o] + x1 * w1[o] + x2 * w2[o] + x3 * w3[o];
                }
                fresh = false;
            } else {
                for o in 0..n {
                    a[o] += x0 * w0[o] + x1 * w1[o] + x2 * w2[o] + x3 * w3[o];
                }
            }
        }
        if fresh {
            accf.iter_mut().for_each(|a| *a = 0.0);
        }
        for &(x, t) in quads.remainder() {
            for (a, &w) in accf.iter_mut().zip(row(t)) {
                *a += x * w;
            }
        }
        if single {
            // The whole sum is in accf.
            return true;
        }
        if first {
            acc.iter_mut()
                .zip(accf.iter())
                .for_each(|(a, &f)| *a = f as i32);
            first = false;
        } else {
            acc.iter_mut()
                .zip(accf.iter())
                .for_each(|(a, &f)| *a = a.wrapping_add(f as i32));
        }
    }
    if first {
        // No non-zero input at all.
        accf.iter_mut().for_each(|a| *a = 0.0);
        return true;
    }
    false
}

/// One output position of a depthwise convolution, 8-bit inputs, in f32 (exact for up to
/// [`F32_EXACT_TERMS`] kernel elements): weights `[ky][kx][c]`.
#[inline]
fn depthwise_pixel(img: &[f32], packed: &[f32], k: &Window, oy: usize, ox: usize, acc: &mut [f32]) {
    acc.iter_mut().for_each(|a| *a = 0.0);
    let c = acc.len();
    for ky in 0..k.kh {
        for kx in 0..k.kw {
            let at = k.at(oy, ox, ky, kx, c);
            let start = (ky * k.kw + kx) * c;
            let (Some(x), Some(w)) = (img.get(at..at + c), packed.get(start..start + c)) else {
                continue;
            };
            for ((a, &x), &w) in acc.iter_mut().zip(x).zip(w) {
                *a += x * w;
            }
        }
    }
}

/// One output position in 64-bit arithmetic (16-bit inputs, or kernels too large for i32).
#[allow(clippy::too_many_arguments)]
fn wide_pixel(
    img: &[i32],
    ohwi: &[i16],
    k: &Window,
    ic: usize,
    depthwise: bool,
    oy: usize,
    ox: usize,
    acc: &mut [i64],
) {
    let oc = acc.len();
    let kvol = k.kh * k.kw;
    for (o, a) in acc.iter_mut().enumerate() {
        let mut sum = 0i64;
        for ky in 0..k.kh {
            for kx in 0..k.kw {
                let at = k.at(oy, ox, ky, kx, ic);
                if depthwise {
                    let x = img.get(at + o).copied().unwrap_or(0) as i64;
                    let w = ohwi.get(o * kvol + ky * k.kw + kx).copied().unwrap_or(0) as i64;
                    sum += x * w;
                } else {
                    let wstart = ((o * k.kh + ky) * k.kw + kx) * ic;
                    let (Some(x), Some(w)) = (img.get(at..at + ic), ohwi.get(wstart..wstart + ic))
                    else {
                        continue;
                    };
                    sum += x
                        .iter()
                        .zip(w)
                        .map(|(&x, &w)| x as i64 * w as i64)
                        .sum::<i64>();
                }
            }
        }
        *a = sum;
    }
    let _ = oc;
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
        let packed = pack(&ohwi, geom);
        Ok(DecodedWeights {
            ohwi,
            scales,
            packed,
        })
    })
}

/// The 8-bit fast paths' weight layouts, in f32: depthwise `[ky][kx][c]`, convolution
/// `[ky][kx][ic][oc]` (one row of output channels per kernel term).
fn pack(ohwi: &[i16], geom: &WeightGeometry) -> Vec<f32> {
    let (oc, kh, kw) = (
        geom.ofm_depth as usize,
        geom.kernel_height as usize,
        geom.kernel_width as usize,
    );
    let ic = geom.weight_ifm_depth() as usize;
    let terms = kh * kw * ic;
    let mut out = vec![0f32; terms * oc];
    for o in 0..oc {
        for t in 0..terms {
            if let (Some(d), Some(&v)) = (out.get_mut(t * oc + o), ohwi.get(o * terms + t)) {
                *d = v as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_float_conversion() {
        for v in [
            -(1i64 << 24),
            -16_646_400,
            -65025,
            -1,
            0,
            1,
            255,
            65025,
            16_646_400,
            1 << 24,
        ] {
            assert_eq!(exact_f32_to_i64(v as f32), v);
        }
    }
}
