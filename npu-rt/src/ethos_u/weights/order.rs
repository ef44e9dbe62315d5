//! The order in which the NPU consumes weights: stream position -> (OFM channel, ky, kx, IFM channel).
//!
//! The MAC array reads weights block by block. For one core's stream:
//!
//! ```text
//! for each OFM block (ofm_block_depth / cores channels of this core)
//!   for each IFM block (32 channels; 16 for part-kernel-first or 16-bit IFM; one for depthwise)
//!     for each sub-kernel (kernel split into pieces of at most 8/dilation x 8/dilation)
//!       [part-kernel-first: for each IFM ublock of the IFM block]
//!         for each OFM ublock of the OFM block
//!           for each kernel element of the sub-kernel (rounded up: 4 for depthwise and 8-bit
//!                                                      part-kernel-first, 2 for 16-bit)
//!             [depth-first: for each IFM ublock of the IFM block]
//!               for each OFM channel of the ublock
//!                 for each IFM channel of the ublock (one for depthwise)
//! ```
//!
//! Positions past the real OFM depth, IFM depth or sub-kernel height are padding (Vela writes
//! zeros there). Depth-first traversal pads every IFM block to its full depth; part-kernel-first
//! pads only to the IFM ublock.

use crate::ethos_u::config::AcceleratorConfig;

use super::WeightError;

/// How the kernel is traversed: `NPU_SET_KERNEL_STRIDE.weight_order` for `NPU_OP_CONV`, always
/// [`Traversal::Depthwise`] for `NPU_OP_DEPTHWISE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Traversal {
    /// `WEIGHT_ORDER_DEPTH_FIRST`: IFM depth innermost (deep IFMs, fully-connected).
    DepthFirst,
    /// `WEIGHT_ORDER_PART_KERNEL_FIRST`: kernel elements innermost (shallow IFMs).
    PartKernelFirst,
    /// Depthwise convolution: one weight per channel per kernel element.
    Depthwise,
}

/// Which output channels one core's stream covers.
///
/// Core `core` of `cores` handles channels `core, core + cores, core + 2 * cores, ...` below
/// `ofm_depth`, in that order, in both its weight stream and its scale stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoreSplit {
    /// Output channels of the operation (all cores): `NPU_SET_OFM_DEPTH_M1 + 1`.
    pub ofm_depth: u32,
    /// Number of cores of the accelerator ([`AcceleratorConfig::cores`]).
    pub cores: u32,
    /// This stream's core: 0 for `WEIGHT_BASE`/`SCALE_BASE`, 1 for `WEIGHT1_BASE`/`SCALE1_BASE`.
    pub core: u32,
}

impl CoreSplit {
    /// Number of output channels of this core (0 when `ofm_depth <= core`).
    pub const fn channels(&self) -> u32 {
        if self.cores == 0 || self.core >= self.cores {
            return 0;
        }
        // ceil((ofm_depth - core) / cores) without overflow.
        let d = self.ofm_depth as u64;
        let c = self.core as u64;
        if d <= c {
            0
        } else {
            ((d - c - 1) / self.cores as u64 + 1) as u32
        }
    }

    /// The operation's channel index of this core's `i`-th channel.
    pub const fn channel(&self, i: u32) -> u64 {
        self.core as u64 + i as u64 * self.cores as u64
    }
}

/// Everything that determines the layout of one weight stream.
///
/// A simulator fills it from the register state at `NPU_OP_CONV` / `NPU_OP_DEPTHWISE` and the
/// accelerator configuration; the compiler fills it from its own choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightGeometry {
    /// `NPU_OP_DEPTHWISE` -> [`Traversal::Depthwise`]; `NPU_OP_CONV` -> from the `weight_order`
    /// field of `NPU_SET_KERNEL_STRIDE`.
    pub traversal: Traversal,
    /// Output channels of this operation, all cores together: `NPU_SET_OFM_DEPTH_M1 + 1`. When
    /// Vela splits a layer into depth stripes, each stripe's operation has its own stream holding
    /// just its channels.
    pub ofm_depth: u32,
    /// OFM block depth: `NPU_SET_OFM_BLK_DEPTH_M1 + 1` (all cores together; each core's stream is
    /// ordered in blocks of `ceil((ofm_block_depth - core) / cores)` of its channels).
    pub ofm_block_depth: u32,
    /// Input channels per output channel: `NPU_SET_IFM_DEPTH_M1 + 1` for convolutions and
    /// fully-connected layers. Ignored for depthwise (one input channel per output channel).
    pub ifm_depth: u32,
    /// Kernel height before dilation: `NPU_SET_KERNEL_HEIGHT_M1` holds the dilated height
    /// `(kernel_height - 1) * dilation_y + 1` minus one; see [`undilated_kernel_size`].
    pub kernel_height: u32,
    /// Kernel width before dilation (from `NPU_SET_KERNEL_WIDTH_M1`, like `kernel_height`).
    pub kernel_width: u32,
    /// Horizontal dilation, 1 or 2: `NPU_SET_KERNEL_STRIDE.dilation_x` + 1.
    pub dilation_x: u32,
    /// Vertical dilation, 1 or 2: `NPU_SET_KERNEL_STRIDE.dilation_y` + 1.
    pub dilation_y: u32,
    /// IFM element size in bits, 8 or 16: `NPU_SET_IFM_PRECISION.activation_precision`.
    pub ifm_bits: u32,
    /// [`AcceleratorConfig::ofm_ublock`] depth.
    pub ofm_ublock_depth: u32,
    /// [`AcceleratorConfig::ifm_ublock`] depth.
    pub ifm_ublock_depth: u32,
    /// [`AcceleratorConfig::cores`].
    pub cores: u32,
    /// Which core's stream this is (0 = `WEIGHT_BASE`, 1 = `WEIGHT1_BASE`).
    pub core: u32,
}

/// Largest depth or kernel size the 16-bit `*_M1` registers can express.
pub const MAX_DIM: u32 = 1 << 16;

/// The kernel size before dilation from the dilated size minus one held by
/// `NPU_SET_KERNEL_HEIGHT_M1`/`_WIDTH_M1`, or `None` if they are inconsistent.
pub const fn undilated_kernel_size(dilated_m1: u32, dilation: u32) -> Option<u32> {
    if dilation == 0 || !dilated_m1.is_multiple_of(dilation) {
        None
    } else {
        Some(dilated_m1 / dilation + 1)
    }
}

impl WeightGeometry {
    /// A 1x1, 1-channel depth-first geometry for core 0 of `config`, with 8-bit IFM; set the
    /// other fields with struct update syntax.
    pub const fn new(config: &AcceleratorConfig, traversal: Traversal) -> Self {
        WeightGeometry {
            traversal,
            ofm_depth: 1,
            ofm_block_depth: 1,
            ifm_depth: 1,
            kernel_height: 1,
            kernel_width: 1,
            dilation_x: 1,
            dilation_y: 1,
            ifm_bits: 8,
            ofm_ublock_depth: config.ofm_ublock.depth,
            ifm_ublock_depth: config.ifm_ublock.depth,
            cores: config.cores,
            core: 0,
        }
    }

    /// The same geometry for another core.
    pub const fn for_core(mut self, core: u32) -> Self {
        self.core = core;
        self
    }

    /// The channel split of this stream.
    pub const fn split(&self) -> CoreSplit {
        CoreSplit {
            ofm_depth: self.ofm_depth,
            cores: self.cores,
            core: self.core,
        }
    }

    /// Input channels of the weight volume (1 for depthwise).
    pub const fn weight_ifm_depth(&self) -> u32 {
        match self.traversal {
            Traversal::Depthwise => 1,
            _ => self.ifm_depth,
        }
    }

    /// OFM block depth of this core's stream.
    pub const fn core_block_depth(&self) -> u32 {
        if self.cores == 0 || self.core >= self.cores {
            return 0;
        }
        let b = self.ofm_block_depth as u64;
        let c = self.core as u64;
        if b <= c {
            0
        } else {
            ((b - c - 1) / self.cores as u64 + 1) as u32
        }
    }

    /// IFM block depth of the traversal.
    const fn ifm_block_depth(&self) -> u32 {
        if matches!(self.traversal, Traversal::PartKernelFirst) || self.ifm_bits == 16 {
            16
        } else {
            32
        }
    }

    /// Kernel elements of a sub-kernel are padded to a multiple of this.
    const fn element_round(&self) -> u32 {
        match self.traversal {
            Traversal::Depthwise => 4,
            Traversal::PartKernelFirst => {
                if self.ifm_bits == 16 {
                    2
                } else {
                    4
                }
            }
            Traversal::DepthFirst => 1,
        }
    }

    /// Checks the geometry; every other method relies on it.
    pub fn validate(&self) -> Result<(), WeightError> {
        let bad = |why| Err(WeightError::BadGeometry(why));
        if self.ofm_depth == 0 {
            return bad("ofm_depth is 0");
        }
        if self.ofm_block_depth == 0 {
            return bad("ofm_block_depth is 0");
        }
        if self.ifm_depth == 0 {
            return bad("ifm_depth is 0");
        }
        if self.kernel_height == 0 || self.kernel_width == 0 {
            return bad("kernel size is 0");
        }
        // The registers hold these sizes minus one in 16 bits.
        if [
            self.ofm_depth,
            self.ofm_block_depth,
            self.ifm_depth,
            self.kernel_height,
            self.kernel_width,
        ]
        .iter()
        .any(|&v| v > MAX_DIM)
        {
            return bad("a size exceeds 65536");
        }
        if !matches!(self.dilation_x, 1 | 2) || !matches!(self.dilation_y, 1 | 2) {
            return bad("dilation must be 1 or 2");
        }
        if !matches!(self.ifm_bits, 8 | 16) {
            return bad("ifm_bits must be 8 or 16");
        }
        if self.ofm_ublock_depth == 0 || self.ifm_ublock_depth == 0 {
            return bad("ublock depth is 0");
        }
        if self.cores == 0 || self.core >= self.cores {
            return bad("core must be below cores");
        }
        let channels = self.split().channels();
        let block = self.core_block_depth();
        if channels > 0 && block == 0 {
            return bad("ofm_block_depth gives this core no channels per block");
        }
        // With a partial ublock per block, Vela's ordering would repeat channels across blocks;
        // Vela never emits that and the hardware's behaviour for it is not documented.
        if block < channels && !block.is_multiple_of(self.ofm_ublock_depth) {
            return bad("OFM block depth per core is not a multiple of the OFM ublock depth");
        }
        self.ohwi_len().map(|_| ())
    }

    /// Elements of the whole operation's OHWI weight volume:
    /// `ofm_depth * kernel_height * kernel_width * weight_ifm_depth()`.
    pub fn ohwi_len(&self) -> Result<usize, WeightError> {
        let n = (self.ofm_depth as u64)
            .checked_mul(self.kernel_height as u64)
            .and_then(|n| n.checked_mul(self.kernel_width as u64))
            .and_then(|n| n.checked_mul(self.weight_ifm_depth() as u64))
            .and_then(|n| usize::try_from(n).ok());
        n.ok_or(WeightError::BadGeometry("weight volume too large"))
    }

    /// Number of values (including padding) in this core's weight stream.
    pub fn stream_len(&self) -> Result<usize, WeightError> {
        self.validate()?;
        let core_ofm = self.split().channels() as u64;
        if core_ofm == 0 {
            return Ok(0);
        }
        let block = self.core_block_depth() as u64;
        let oub = self.ofm_ublock_depth as u64;
        let iub = self.ifm_ublock_depth as u64;
        let ifm_block = self.ifm_block_depth() as u64;
        let ifm_depth = self.ifm_depth as u64;
        let round = self.element_round() as u64;

        // Kernel elements over all sub-kernels, each sub-kernel rounded up. Sub-kernels are
        // full-size pieces plus one remainder piece per axis.
        let pieces = |size: u32, dilation: u32| {
            let piece = 8 / dilation as u64;
            let size = size as u64;
            [
                (size / piece, piece),
                (u64::from(!size.is_multiple_of(piece)), size % piece),
            ]
        };
        let mut elements = 0u64;
        for (ny, h) in pieces(self.kernel_height, self.dilation_y) {
            for (nx, w) in pieces(self.kernel_width, self.dilation_x) {
                elements += ny * nx * (h * w).div_ceil(round) * round;
            }
        }

        // IFM values per OFM channel per kernel element, over all IFM blocks.
        let ifm_values = match self.traversal {
            Traversal::Depthwise => 1,
            Traversal::DepthFirst => ifm_depth.div_ceil(ifm_block) * ifm_block.div_ceil(iub) * iub,
            Traversal::PartKernelFirst => {
                let full = ifm_depth / ifm_block;
                let rest = ifm_depth % ifm_block;
                full * ifm_block.div_ceil(iub) * iub + rest.div_ceil(iub) * iub
            }
        };

        // OFM channels (padded to ublocks) over all OFM blocks.
        let full = core_ofm / block;
        let rest = core_ofm % block;
        let ofm_values = full * block.div_ceil(oub) * oub + rest.div_ceil(oub) * oub;

        ofm_values
            .checked_mul(elements)
            .and_then(|n| n.checked_mul(ifm_values))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(WeightError::BadGeometry("weight stream too long"))
    }
}

/// Calls `f(sub_y, sub_height, sub_x, sub_width)` for each sub-kernel, in stream order.
fn for_each_sub_kernel(geom: &WeightGeometry, mut f: impl FnMut(u32, u32, u32, u32)) {
    let decomp_y = 8 / geom.dilation_y.max(1);
    let decomp_x = 8 / geom.dilation_x.max(1);
    let mut sub_y = 0;
    while sub_y < geom.kernel_height {
        let sub_h = (geom.kernel_height - sub_y).min(decomp_y);
        let mut sub_x = 0;
        while sub_x < geom.kernel_width {
            let sub_w = (geom.kernel_width - sub_x).min(decomp_x);
            f(sub_y, sub_h, sub_x, sub_w);
            sub_x += decomp_x;
        }
        sub_y += decomp_y;
    }
}

/// Walks one core's weight stream in order, calling `f` once per stream value with the OHWI
/// index (into the whole operation's volume, see [`WeightGeometry::ohwi_len`]) it belongs to, or
/// `None` for a padding position.
///
/// `f` is called exactly [`WeightGeometry::stream_len`] times unless it returns an error, which
/// stops the walk and is returned.
pub fn for_each_stream_position<E: From<WeightError>>(
    geom: &WeightGeometry,
    mut f: impl FnMut(Option<usize>) -> Result<(), E>,
) -> Result<(), E> {
    geom.validate()?;
    let split = geom.split();
    let core_ofm = split.channels();
    if core_ofm == 0 {
        return Ok(());
    }
    let depthwise = matches!(geom.traversal, Traversal::Depthwise);
    let part_kernel = matches!(geom.traversal, Traversal::PartKernelFirst);
    let block = geom.core_block_depth();
    let oub = geom.ofm_ublock_depth;
    let iub = geom.ifm_ublock_depth;
    let ifm_block = geom.ifm_block_depth();
    let ifm_depth = geom.weight_ifm_depth();
    let round = geom.element_round();
    let (kh, kw) = (geom.kernel_height as usize, geom.kernel_width as usize);
    let ifm_stride = ifm_depth as usize;
    // validate() checked that ohwi_len() fits in usize, so every in-range index below does too.
    let index = |ofm_z: u32, wy: u32, wx: u32, ifm_z: u32| -> usize {
        let ch = split.channel(ofm_z) as usize;
        ((ch * kh + wy as usize) * kw + wx as usize) * ifm_stride + ifm_z as usize
    };

    let mut ofm_block_z = 0u32;
    while ofm_block_z < core_ofm {
        let clipped_ofm = block.min(core_ofm - ofm_block_z);
        let ifm_blocks_end = if depthwise { 1 } else { ifm_depth };
        let mut ifm_block_z = 0u32;
        while ifm_block_z < ifm_blocks_end {
            let clipped_ifm = if depthwise {
                iub
            } else if part_kernel {
                ifm_block.min(ifm_depth - ifm_block_z)
            } else {
                ifm_block
            };
            let (outer, inner) = if part_kernel {
                (clipped_ifm, 1)
            } else {
                (1, clipped_ifm)
            };
            let ifm_ublock_z_end = if depthwise { 1 } else { iub };
            let mut result = Ok(());
            for_each_sub_kernel(geom, |sub_y, sub_h, sub_x, sub_w| {
                if result.is_err() {
                    return;
                }
                let elements = (sub_h * sub_w).div_ceil(round) * round;
                let mut ifm_outer = 0;
                while ifm_outer < outer {
                    let mut ofm_ublk = 0;
                    while ofm_ublk < clipped_ofm {
                        for element in 0..elements {
                            let kx = element % sub_w;
                            let ky = element / sub_w;
                            let mut ifm_inner = 0;
                            while ifm_inner < inner {
                                for ofm_uz in 0..oub {
                                    for ifm_uz in 0..ifm_ublock_z_end {
                                        let ifm_z = ifm_block_z + ifm_outer + ifm_inner + ifm_uz;
                                        let ofm_z = ofm_block_z + ofm_ublk + ofm_uz;
                                        let target = if ifm_z < ifm_depth
                                            && ofm_z < core_ofm
                                            && ky < sub_h
                                        {
                                            Some(index(ofm_z, sub_y + ky, sub_x + kx, ifm_z))
                                        } else {
                                            None
                                        };
                                        if let Err(e) = f(target) {
                                            result = Err(e);
                                            return;
                                        }
                                    }
                                }
                                ifm_inner += iub;
                            }
                        }
                        ofm_ublk += oub;
                    }
                    ifm_outer += iub;
                }
            });
            result?;
            ifm_block_z += ifm_block;
        }
        ofm_block_z += block;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethos_u::config::ALL;

    fn count(geom: &WeightGeometry) -> (usize, usize) {
        let mut n = 0;
        let mut real = 0;
        for_each_stream_position::<WeightError>(geom, |t| {
            n += 1;
            real += t.is_some() as usize;
            Ok(())
        })
        .unwrap();
        (n, real)
    }

    #[test]
    fn stream_len_matches_walk_and_covers_volume() {
        let traversals = [
            Traversal::DepthFirst,
            Traversal::PartKernelFirst,
            Traversal::Depthwise,
        ];
        let mut skipped = 0;
        for cfg in ALL {
            for traversal in traversals {
                for (ofm, blk, ifm, kh, kw, dil, bits) in [
                    (1, 1, 1, 1, 1, 1, 8),
                    (64, 32, 32, 1, 1, 1, 8),
                    (24, 16, 8, 3, 3, 1, 8),
                    (37, 16, 45, 5, 3, 2, 8),
                    (17, 8, 33, 9, 10, 1, 16),
                    (5, 64, 3, 7, 7, 2, 16),
                ] {
                    let geom = WeightGeometry {
                        ofm_depth: ofm,
                        ofm_block_depth: blk,
                        ifm_depth: ifm,
                        kernel_height: kh,
                        kernel_width: kw,
                        dilation_x: dil,
                        dilation_y: 1,
                        ifm_bits: bits,
                        ..WeightGeometry::new(cfg, traversal)
                    };
                    if let Err(e) = geom.validate() {
                        assert_eq!(
                            e,
                            WeightError::BadGeometry(
                                "OFM block depth per core is not a multiple of the OFM ublock depth"
                            )
                        );
                        skipped += 1;
                        continue;
                    }
                    let mut covered = 0;
                    for core in 0..cfg.cores {
                        let g = geom.for_core(core);
                        let (n, real) = count(&g);
                        assert_eq!(n, g.stream_len().unwrap(), "{g:?}");
                        covered += real;
                    }
                    assert_eq!(covered, geom.ohwi_len().unwrap(), "{geom:?}");
                }
            }
        }
        // Only the 8-deep blocks on the two-core configuration are invalid.
        assert_eq!(skipped, 3);
    }

    #[test]
    fn every_index_visited_once() {
        let cfg = &crate::ethos_u::config::ETHOS_U65_512;
        let geom = WeightGeometry {
            ofm_depth: 19,
            ofm_block_depth: 16,
            ifm_depth: 21,
            kernel_height: 3,
            kernel_width: 2,
            ..WeightGeometry::new(cfg, Traversal::PartKernelFirst)
        };
        let mut seen = [0u8; 19 * 3 * 2 * 21];
        for core in 0..2 {
            for_each_stream_position::<WeightError>(&geom.for_core(core), |t| {
                if let Some(i) = t {
                    seen[i] += 1;
                }
                Ok(())
            })
            .unwrap();
        }
        assert!(seen.iter().all(|&s| s == 1));
    }

    #[test]
    fn bad_geometries_are_errors() {
        let cfg = &crate::ethos_u::config::ETHOS_U65_512;
        let good = WeightGeometry {
            ofm_depth: 40,
            ofm_block_depth: 16,
            ..WeightGeometry::new(cfg, Traversal::DepthFirst)
        };
        assert!(good.validate().is_ok());
        for g in [
            WeightGeometry {
                ofm_block_depth: 1,
                ..good
            }
            .for_core(1),
            WeightGeometry {
                ofm_block_depth: 8,
                ..good
            },
            WeightGeometry {
                ofm_depth: 0,
                ..good
            },
            WeightGeometry {
                dilation_y: 3,
                ..good
            },
            WeightGeometry {
                ifm_bits: 32,
                ..good
            },
            good.for_core(2),
            WeightGeometry {
                ofm_depth: u32::MAX,
                ifm_depth: u32::MAX,
                kernel_height: u32::MAX,
                kernel_width: u32::MAX,
                ..good
            },
            WeightGeometry {
                ofm_depth: MAX_DIM,
                ifm_depth: MAX_DIM,
                kernel_height: MAX_DIM,
                kernel_width: MAX_DIM,
                ..good
            },
        ] {
            assert!(
                matches!(g.validate(), Err(WeightError::BadGeometry(_))),
                "{g:?}"
            );
            assert!(g.stream_len().is_err());
        }
        // A core without channels has an empty stream.
        let one = WeightGeometry {
            ofm_depth: 1,
            ..good
        }
        .for_core(1);
        assert_eq!(one.stream_len(), Ok(0));
    }

    #[test]
    fn undilated() {
        assert_eq!(undilated_kernel_size(4, 2), Some(3));
        assert_eq!(undilated_kernel_size(2, 1), Some(3));
        assert_eq!(undilated_kernel_size(3, 2), None);
        assert_eq!(undilated_kernel_size(3, 0), None);
    }
}
