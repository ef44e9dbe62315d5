//! Block configuration selection: the OFM block and shared-buffer layout of each operation.
//!
//! This is the search Arm's Vela 5.2.0 (Regor core, `ArchEthosU55::FindBlockConfig`) performs,
//! reproduced so that our choices equal Vela's on every fixture (docs/blocks.md): every
//! OFM block of the search space (multiples of the OFM micro-block, at most 32x64x128) is
//! tried; a block fits when the double-buffered IFM block and the accumulators (for elementwise
//! operations: both IFMs) fit the shared buffer (SHRAM) banks; among the fitting blocks the
//! one with the lowest estimated fetch cost wins. The cost is computed in `f32` exactly as Vela
//! does, because ties and near-ties decide the choice.
//!
//! Two inputs Vela has and an [`NpuOp`] does not are fixed here: every operation counts as
//! "scaled" (true for everything a quantized model lowers to; it only matters for 16-bit
//! IFMs, which then accumulate in 40 bits), and 32-bit copies are expected to arrive already
//! re-viewed as 16-bit copies of twice the depth (Vela does that inside its emitter).

use npu_rt::ethos_u::config::{AcceleratorConfig, ShramElement};
use npu_rt::ethos_u::regs::{AccFormat, IfmUpscaleMode, PoolingMode};

use super::npu_op::{BlockConfig, Kernel, NpuOp, NpuOpKind, Operand2};
use crate::error::{Error, Result};

/// OFM depths are split in multiples of this when the block is shallower than the OFM.
const OFM_SPLIT_DEPTH: usize = 16;
/// Largest feature-map dimension the 16-bit size registers hold.
const MAX_DIM: usize = 1 << 16;

/// The hardware operation class, as the search distinguishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Conv,
    Depthwise,
    Pool,
    ReduceSum,
    Elementwise,
}

/// How an elementwise operation uses the IFM area of the shared buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EwUsage {
    /// Not elementwise: IFM plus accumulators.
    No,
    /// Two IFM streams.
    Full,
    /// One IFM stream and a scalar.
    Scalar,
}

/// Everything the search looks at.
#[derive(Clone, Copy, Debug)]
struct Query {
    class: Class,
    /// `[H, W, C]` of the IFM (for elementwise operations the larger of the two inputs).
    ifm: [usize; 3],
    ofm: [usize; 3],
    ifm_bits: usize,
    kernel: Kernel,
    /// One of the inputs is a single element (elementwise only).
    scalar_input: bool,
    /// A binary elementwise operation (IFM2_IB_START is used).
    has_ifm2: bool,
    uses_lut: bool,
    upscale: IfmUpscaleMode,
    scaled: bool,
}

/// Shared-buffer layout of a fitting block, in banks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    ib_end: usize,
    ib2_start: usize,
    ab_start: usize,
}

/// What decides whether a block fits the shared buffer (`ArchEthosU55::TryBlockConfig`).
struct Shram<'a> {
    accel: &'a AcceleratorConfig,
    ew_usage: EwUsage,
    ifm_bits: usize,
    ifm_granule: usize,
    acc_bits: usize,
    acc_granule: usize,
    /// First bank of the LUT area (end of the IFM/accumulator area).
    lut_start: usize,
}

impl Shram<'_> {
    /// The bank layout of an OFM block `[h, w, c]` fed by an IFM block `[h, w, c]`, if both
    /// fit. IFM and accumulator areas are double-buffered.
    fn try_block(&self, ofm_block: [usize; 3], ifm_block: [usize; 3]) -> Option<Layout> {
        let bank = self.accel.shram_bank_bytes as usize;
        let banks = |bytes: usize, granule: usize| {
            round_up(bytes.div_ceil(bank).saturating_mul(2), granule)
        };
        let ifm_bytes = (ifm_block[0] * ifm_block[1])
            .saturating_mul(round_up(ifm_block[2] * self.ifm_bits / 8, 8));
        let ifm_banks = banks(ifm_bytes, self.ifm_granule);
        let ib_end = (self.accel.shram_reserved_output_banks as usize).saturating_add(ifm_banks);
        let ib2_start = ib_end;
        if self.ew_usage == EwUsage::No {
            let acc_bytes = (ofm_block[0] * ofm_block[1])
                .saturating_mul(round_up(ofm_block[2], 8))
                .saturating_mul(self.acc_bits)
                / 8;
            let ab_start = self
                .lut_start
                .checked_sub(banks(acc_bytes, self.acc_granule))?;
            (ib_end <= ab_start).then_some(Layout {
                ib_end,
                ib2_start,
                ab_start,
            })
        } else {
            // No accumulators: the IFM area runs up to the LUT, the second IFM after the first.
            let ifm2_banks = if self.ew_usage == EwUsage::Full {
                ifm_banks
            } else {
                0
            };
            let ab_start = self.lut_start;
            (ib2_start.saturating_add(ifm2_banks) <= ab_start).then_some(Layout {
                ib_end: ab_start,
                ib2_start,
                ab_start,
            })
        }
    }
}

/// Chooses the block configuration of `op` on `accel`.
///
/// Fails with [`Error::HardwareLimit`] when a dimension is outside what the registers hold or
/// no OFM block fits the shared buffer.
pub fn choose(op: &NpuOp, accel: &AcceleratorConfig) -> Result<BlockConfig> {
    let q = query(op, accel)?;
    search(&q, accel).ok_or_else(|| {
        limit(
            op,
            accel,
            format!(
                "no OFM block fits the {} KiB shared buffer (IFM {:?} x {} bits, OFM {:?}, kernel {}x{} stride {}x{})",
                accel.shram_bytes() / 1024,
                q.ifm,
                q.ifm_bits,
                q.ofm,
                q.kernel.h,
                q.kernel.w,
                q.kernel.stride_y,
                q.kernel.stride_x
            ),
        )
    })
}

/// A short name of the operation class, for messages.
pub(crate) fn kind_name(kind: &NpuOpKind) -> String {
    match kind {
        NpuOpKind::Conv(_) => "NPU_OP_CONV".into(),
        NpuOpKind::Depthwise(_) => "NPU_OP_DEPTHWISE".into(),
        NpuOpKind::Pool(mode) => format!("NPU_OP_POOL {}", mode.name()),
        NpuOpKind::Elementwise { mode, .. } => format!("NPU_OP_ELEMENTWISE {}", mode.name()),
    }
}

fn limit(op: &NpuOp, accel: &AcceleratorConfig, detail: String) -> Error {
    Error::HardwareLimit {
        node: op.name.clone(),
        op: kind_name(&op.kind),
        target: accel.name.into(),
        limit: detail,
    }
}

/// Checks the operation's dimensions and collects the search inputs.
fn query(op: &NpuOp, accel: &AcceleratorConfig) -> Result<Query> {
    let (class, ifm2) = match &op.kind {
        NpuOpKind::Conv(_) => (Class::Conv, None),
        NpuOpKind::Depthwise(_) => (Class::Depthwise, None),
        NpuOpKind::Pool(PoolingMode::ReduceSum) => (Class::ReduceSum, None),
        NpuOpKind::Pool(_) => (Class::Pool, None),
        NpuOpKind::Elementwise { ifm2, .. } => (
            Class::Elementwise,
            ifm2.as_ref().map(|o| match o {
                Operand2::Tensor(fm) => fm.shape,
                Operand2::Scalar { .. } => [1, 1, 1],
            }),
        ),
    };
    let dims_ok = |s: &[usize; 3]| s.iter().all(|&d| (1..=MAX_DIM).contains(&d));
    for (what, shape) in [
        ("IFM", Some(op.ifm.shape)),
        ("IFM2", ifm2),
        ("OFM", Some(op.ofm.shape)),
    ] {
        if let Some(s) = shape
            && !dims_ok(&s)
        {
            return Err(limit(
                op,
                accel,
                format!("{what} shape {s:?}: every dimension must be 1..={MAX_DIM}"),
            ));
        }
    }
    let k = op.kernel;
    if ![k.h, k.w, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x]
        .iter()
        .all(|&v| (1..=MAX_DIM).contains(&v))
    {
        return Err(limit(
            op,
            accel,
            format!("kernel {k:?}: sizes, strides and dilations must be 1..={MAX_DIM}"),
        ));
    }
    let elements = |s: &[usize; 3]| s.iter().product::<usize>();
    let is_scalar = |s: &[usize; 3]| s.iter().all(|&d| d == 1);
    // Vela sizes elementwise buffers after the larger input (broadcasts are the smaller).
    let ifm = match ifm2 {
        Some(s2) if elements(&s2) > elements(&op.ifm.shape) => s2,
        _ => op.ifm.shape,
    };
    let scalar_input = class == Class::Elementwise
        && (is_scalar(&op.ifm.shape) || ifm2.is_some_and(|s| is_scalar(&s)));
    Ok(Query {
        class,
        ifm,
        ofm: op.ofm.shape,
        ifm_bits: op.ifm.dtype.bits(),
        kernel: k,
        scalar_input,
        has_ifm2: ifm2.is_some(),
        uses_lut: op.activation.lut.is_some(),
        upscale: op.upscale,
        scaled: true,
    })
}

fn round_up(v: usize, align: usize) -> usize {
    v.div_ceil(align).saturating_mul(align)
}

/// Vela's `ChooseKernelMethod`: part-kernel-first traversal when the IFM is shallow or the
/// kernel's element count fills the MAC array better than the IFM depth does.
fn part_kernel_first(ifm_depth: usize, ifm_bits: usize, kernel: &Kernel) -> bool {
    if ifm_depth <= 8 {
        return true;
    }
    let k = kernel.h * kernel.w;
    let c = ifm_depth as f64;
    let depth_util = c / round_up(ifm_depth, if ifm_bits == 8 { 32 } else { 16 }) as f64;
    let part_util = (c / round_up(ifm_depth, 8) as f64)
        * (k as f64 / round_up(k, if ifm_bits == 8 { 4 } else { 2 }) as f64);
    part_util >= depth_util
}

/// IFM rows (or columns) needed for `out` OFM rows: Vela's `RequiredInputSize`.
fn required_input(
    out: usize,
    stride: usize,
    kernel: usize,
    upscale: usize,
    rounding: usize,
) -> usize {
    (out - 1)
        .saturating_mul(stride)
        .saturating_add(kernel)
        .saturating_add(rounding)
        .div_ceil(upscale)
}

/// What the search derives from a query before it tries blocks: the SHRAM layout rules and the
/// constants of every candidate's cost.
struct Setup<'a> {
    shram: Shram<'a>,
    acc: ShramElement,
    /// The IFM block is as deep as the OFM block (elementwise, pooling, depthwise).
    equal_depth: bool,
    depthwise: bool,
    part_kernel: bool,
    upscale: usize,
    rounding: usize,
    ifm_repeats: usize,
    ifm_block_depth: usize,
    weight_fetch_wh: usize,
    /// Largest block per axis, in whole micro-blocks.
    space: [usize; 3],
}

impl<'a> Setup<'a> {
    fn new(q: &Query, accel: &'a AcceleratorConfig) -> Option<Setup<'a>> {
        let ub = accel.ofm_ublock;
        let (ub_h, ub_w, ub_c) = (ub.height as usize, ub.width as usize, ub.depth as usize);
        let max = accel.ofm_block_max;
        let sub = accel.sub_kernel_max;
        let (sub_h, sub_w) = (sub.height as usize, sub.width as usize);
        let ew_usage = match q.class {
            Class::Elementwise if q.scalar_input && q.ifm_bits <= 16 => EwUsage::Scalar,
            Class::Elementwise => EwUsage::Full,
            _ => EwUsage::No,
        };
        let is_pooling = matches!(q.class, Class::Pool | Class::ReduceSum);
        let depthwise = q.class == Class::Depthwise;
        let part_kernel =
            q.class == Class::Conv && part_kernel_first(q.ifm[2], q.ifm_bits, &q.kernel);
        let (upscale, rounding) = match q.upscale {
            IfmUpscaleMode::None => (1, 0),
            IfmUpscaleMode::Nearest => (2, 1),
            IfmUpscaleMode::Zeros => (2, 0),
        };
        let acc = if q.ifm_bits == 16 && (!is_pooling || q.class == Class::ReduceSum) && q.scaled {
            ShramElement::Acc40
        } else {
            ShramElement::Acc32
        };
        let ifm_granule = accel.shram_granule(match (ew_usage != EwUsage::No, q.ifm_bits) {
            (_, 32) => ShramElement::Ifm32,
            (true, 16) => ShramElement::Ifm16Elementwise,
            (true, _) => ShramElement::Ifm8Elementwise,
            (false, 16) => ShramElement::Ifm16,
            (false, _) => ShramElement::Ifm8,
        }) as usize;
        let lut_bytes = if q.uses_lut {
            accel.shram_lut_bytes as usize
        } else {
            0
        };
        let lut_banks = lut_bytes
            .div_ceil(accel.shram_bank_bytes as usize)
            .max(accel.shram_reserved_end_banks as usize);
        let lut_start = (accel.shram_banks as usize).checked_sub(lut_banks)?;
        let k = &q.kernel;
        let ifm_block_depth = if q.ifm_bits == 16 {
            round_up(q.ifm[2].min(16), 4)
        } else {
            round_up(
                q.ifm[2].min(if part_kernel { 16 } else { 32 }),
                accel.ifm_ublock.depth as usize,
            )
        };
        Some(Setup {
            shram: Shram {
                accel,
                ew_usage,
                ifm_bits: q.ifm_bits,
                ifm_granule,
                acc_bits: acc.bits() as usize,
                acc_granule: accel.shram_granule(acc) as usize,
                lut_start,
            },
            acc,
            equal_depth: ew_usage != EwUsage::No || q.class == Class::Pool || depthwise,
            depthwise,
            part_kernel,
            upscale,
            rounding,
            ifm_repeats: k
                .dilated_w()
                .div_ceil(sub_w)
                .saturating_mul(k.dilated_h().div_ceil(sub_h)),
            ifm_block_depth,
            weight_fetch_wh: if matches!(q.class, Class::Conv | Class::Depthwise) {
                k.h * k.w
            } else {
                0
            },
            space: [
                round_up(q.ofm[0].min(max.height as usize), ub_h),
                round_up(q.ofm[1].min(max.width as usize), ub_w),
                round_up(q.ofm[2].min(max.depth as usize), ub_c),
            ],
        })
    }

    /// The register values of an OFM block that fits, with its IFM block and bank layout.
    fn config(
        &self,
        q: &Query,
        ofm_block: [usize; 3],
        ifm_block: [usize; 3],
        layout: &Layout,
    ) -> Option<BlockConfig> {
        Some(BlockConfig {
            ofm_block,
            ifm_block,
            ifm_ib_end: u8::try_from(layout.ib_end).ok()?,
            ab_start: u8::try_from(layout.ab_start).ok()?,
            ifm2_ib_start: if q.has_ifm2 {
                Some(u8::try_from(layout.ib2_start).ok()?)
            } else {
                None
            },
            acc_format: if self.acc == ShramElement::Acc40 {
                AccFormat::I40
            } else {
                AccFormat::I32
            },
            part_kernel_first: self.part_kernel,
        })
    }
}

/// The search itself (`ArchEthosU55::FindBlockConfig` + `TryBlockConfig`).
fn search(q: &Query, accel: &AcceleratorConfig) -> Option<BlockConfig> {
    let setup = Setup::new(q, accel)?;
    let ub = accel.ofm_ublock;
    let (ub_h, ub_w, ub_c) = (ub.height as usize, ub.width as usize, ub.depth as usize);
    let sub = accel.sub_kernel_max;
    let (sub_h, sub_w) = (sub.height as usize, sub.width as usize);
    let k = &q.kernel;
    let (dil_h, dil_w) = (k.dilated_h(), k.dilated_w());
    let space = setup.space;
    let ofm_elements = q.ofm.iter().product::<usize>();
    let ifm_elements = q.ifm.iter().product::<usize>();

    let mut best_cost = f32::INFINITY;
    let mut best_coverage = f32::INFINITY;
    let mut best: Option<BlockConfig> = None;
    let mut wont_fit: Vec<(usize, usize)> = Vec::new();

    let mut depth = ub_c.max(space[2].min(OFM_SPLIT_DEPTH));
    if depth < q.ofm[2] {
        depth = round_up(depth, OFM_SPLIT_DEPTH);
    }
    while depth <= space[2] {
        for height in (ub_h..=space[0]).step_by(ub_h) {
            for width in (ub_w..=space[1]).step_by(ub_w) {
                if wont_fit.contains(&(height, width)) {
                    continue;
                }
                let (up, round) = (setup.upscale, setup.rounding);
                let ifm_h = round_up(
                    required_input(height, k.stride_y, dil_h.min(sub_h), up, round),
                    ub_h,
                );
                let ifm_w = round_up(
                    required_input(width, k.stride_x, dil_w.min(sub_w), up, round),
                    ub_w,
                );
                let ifm_d = if setup.equal_depth {
                    depth
                } else {
                    setup.ifm_block_depth
                };
                // 256/512-MAC "Conv1D" case: a 1-row OFM only needs accumulators for 1 row.
                let fit_h = if q.ofm[0] == 1 && k.h == 1 && ub_h == 2 {
                    height.min(q.ofm[0])
                } else {
                    height
                };
                let Some(layout) = setup
                    .shram
                    .try_block([fit_h, width, depth], [ifm_h, ifm_w, ifm_d])
                else {
                    wont_fit.push((height, width));
                    continue;
                };

                let cost = relative_cost(&CostInput {
                    q,
                    equal_depth: setup.equal_depth,
                    depthwise: setup.depthwise,
                    weight_fetch_wh: setup.weight_fetch_wh,
                    ifm_repeats: setup.ifm_repeats,
                    ofm_block: [fit_h, width, depth],
                    ifm_block: [ifm_h, ifm_w],
                    loop_block: [height, width, depth],
                    ofm_elements,
                    ifm_elements,
                    ifm_block_elements: ifm_h * ifm_w * ifm_d,
                });
                match cost.partial_cmp(&best_cost) {
                    Some(std::cmp::Ordering::Less) => best_coverage = f32::INFINITY,
                    Some(std::cmp::Ordering::Equal) => {
                        // Equal cost: prefer small blocks covering more of the IFM.
                        let cov_h = q.ifm[0].min(ifm_h);
                        let cov_w = q.ifm[1].min(ifm_w);
                        let coverage = (q.ifm[0] * q.ifm[1]) as f32 / (cov_h * cov_w).max(1) as f32;
                        if !(coverage <= best_coverage && height <= 4 && width <= 4) {
                            continue;
                        }
                        best_coverage = coverage;
                    }
                    _ => continue,
                }
                best_cost = cost;
                best = Some(setup.config(
                    q,
                    [height, width, depth],
                    [ifm_h, ifm_w, ifm_d],
                    &layout,
                )?);
            }
        }
        depth += ub_c;
        if depth < q.ofm[2] {
            depth = round_up(depth, OFM_SPLIT_DEPTH);
        }
    }
    best
}

/// Inputs of the cost of one candidate block.
struct CostInput<'a> {
    q: &'a Query,
    equal_depth: bool,
    depthwise: bool,
    weight_fetch_wh: usize,
    ifm_repeats: usize,
    /// The block as fitted to the OFM (height possibly reduced).
    ofm_block: [usize; 3],
    /// IFM block height and width.
    ifm_block: [usize; 2],
    /// The block as enumerated (elementwise cost uses it).
    loop_block: [usize; 3],
    ofm_elements: usize,
    ifm_elements: usize,
    ifm_block_elements: usize,
}

/// Vela's relative fetch cost of a block, in `f32` with Vela's operation order.
fn relative_cost(c: &CostInput<'_>) -> f32 {
    let q = c.q;
    let [bh, bw, bd] = c.ofm_block;
    let full = [
        q.ofm[0].div_ceil(bh),
        q.ofm[1].div_ceil(bw),
        q.ofm[2].div_ceil(bd),
    ];
    // Vela's Point3 from HWC() is (x = W, y = H, z = C).
    let blocks_x = q.ofm[1] as f32 / bw as f32;
    let blocks_y = q.ofm[0] as f32 / bh as f32;
    let blocks_z = q.ofm[2] as f32 / bd as f32;

    let mut weight_fetch = (c.weight_fetch_wh as u64)
        .saturating_mul(q.ifm[2] as u64)
        .saturating_mul((full[0] * full[1]) as u64) as f32;
    if !c.depthwise {
        weight_fetch *= blocks_z * bd as f32;
    }
    let mut ifm_fetch = ((c.ifm_block[0] * c.ifm_block[1]) as u64)
        .saturating_mul(q.ifm[2] as u64)
        .saturating_mul(c.ifm_repeats as u64) as f32
        * blocks_x
        * blocks_y;
    if !c.equal_depth {
        ifm_fetch *= full[2] as f32;
    }
    let [lh, lw, ld] = c.loop_block;
    let mut cost = if q.class == Class::Elementwise {
        c.ofm_elements as f32 / (lh * lw * ld) as f32
    } else {
        (ifm_fetch + weight_fetch) / c.ofm_elements as f32
    };
    // The whole IFM fits both buffers: prefer this block.
    if c.ifm_elements < c.ifm_block_elements.saturating_mul(2) {
        cost /= 2.0;
    }
    cost
}

#[cfg(test)]
mod tests;
