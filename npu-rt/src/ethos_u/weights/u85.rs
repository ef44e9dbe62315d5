//! Ethos-U85 weight and scale/bias streams (as Vela 5.2 writes them).
//!
//! The U85 keeps the U55's compressed bitstream ("standard weight decoder", SWD: the same slices,
//! palettes, zero runs and Golomb-Rice codes, decoded by [`StreamDecoder`]) and adds a "fast
//! weight decoder" format (FWD: one 256-bit header, then fixed-width 2-, 4- or 8-bit codes). What
//! differs most is the order of the values in a stream, which follows the U85's MAC array:
//! [`for_each_core_position`] walks it. The scale/bias record is still 10 bytes per output
//! channel but with a different layout ([`decode_scales_u85`]).
//!
//! Stream order for core `c` (of `cores` weight decoders; see `docs/u85-weights.md`):
//!
//! ```text
//! for each OFM block (ofm_block_depth channels)
//!   for each IFM block (ifm_block_depth channels; forward for even OFM blocks, backward for odd)
//!     for each sub-kernel column (8 / dilation_x wide), then row (8 / dilation_y high)
//!       for each IFM ublock of the IFM block (part-kernel-first 16-bit: 8 channels; else all)
//!         for each OFM ublock of the OFM block (ofm_ublock_depth channels)
//!           for each stride phase (y, x) (depth-first: one phase)
//!             for each kernel row of the phase, each column (odd rows right to left)
//!               for each group of 8 IFM channels of the IFM ublock (depthwise: one channel)
//!                 for each group of 4 OFM channels of core c (groups c, c + cores, ...)
//!                   for each of the 4 OFM channels
//!                     for each IFM channel of the group of 8
//!               [depthwise: after every 10th element, dw_pad elements of zeros]
//!           [padding: kernel elements up to a multiple of 5 (part-kernel-first 8-bit),
//!            10 (16-bit part-kernel-first, depthwise), plus dw_pad for depthwise]
//! ```
//!
//! Everything here is `no_std`, allocation-free and panic-free on any input: malformed streams
//! and inconsistent geometries are [`WeightError`]s.
//!
//! Facts from Vela 5.2.0 `regor/architecture/ethosu85/ethos_u85_weight_encoder.cpp`,
//! `regor/dependencies/mlw_codec/source/mlw_encode_fwd.cpp` and `mlw_decode.cpp`,
//! `regor/compiler/scheduler.cpp`; verified on every U85 fixture by
//! `tests/tests/weights_vela_u85.rs`.

use super::{SCALE_ENTRY_BYTES, ScaleEntry, StreamDecoder, Traversal, WeightError};

/// `NPU_SET_WEIGHT_FORMAT.weight_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// `WEIGHT_FORMAT_SWD`: the compressed bitstream shared with the U55; one stream per core
    /// (`WEIGHT_BASE`, `WEIGHT1_BASE`, `WEIGHT2_BASE`, `WEIGHT3_BASE`).
    Swd,
    /// `WEIGHT_FORMAT_FWD`: header plus fixed-width codes; one stream for all cores, the cores'
    /// orders interleaved block by block.
    Fwd,
}

/// `NPU_SET_ACC_FORMAT.acc_format`: selects the scale/bias record layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccFormat {
    /// `ACC_FORMAT_I32`: 32-bit bias, 31-bit multiplier.
    I32,
    /// `ACC_FORMAT_I48`: 48-bit bias, 15-bit multiplier.
    I48,
}

/// Groups of 4 OFM channels are dealt to the cores in turn (Vela's `InterleaveDepth`).
pub const CORE_INTERLEAVE: u32 = 4;
/// IFM channels per innermost group (non-depthwise).
const IFM_GROUP: u32 = 8;
/// Bits of the FWD header.
pub const FWD_HEADER_BITS: usize = 256;
/// FWD streams are padded with zero bits to a multiple of this many bits.
pub const FWD_ALIGN_BITS: usize = 256;
/// Largest size the 16-bit `*_M1` registers can express.
const MAX_DIM: u32 = 1 << 16;

/// Everything that determines the order of an Ethos-U85 weight stream.
///
/// A simulator fills it from the register state at `NPU_OP_CONV` / `NPU_OP_DEPTHWISE` and the
/// accelerator configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct U85Geometry {
    /// `NPU_OP_DEPTHWISE` -> [`Traversal::Depthwise`]; `NPU_OP_CONV` ->
    /// `NPU_SET_KERNEL_STRIDE.weight_order`.
    pub traversal: Traversal,
    /// `NPU_SET_WEIGHT_FORMAT.weight_format`.
    pub format: WeightFormat,
    /// Output channels: `NPU_SET_OFM_DEPTH_M1 + 1`.
    pub ofm_depth: u32,
    /// `NPU_SET_OFM_BLK_DEPTH_M1 + 1`; a multiple of `ofm_ublock_depth`.
    pub ofm_block_depth: u32,
    /// OFM microblock depth: [`ofm_ublock_depth`] of the MAC count and
    /// `NPU_SET_ACC_FORMAT.microblock`; a multiple of `4 * cores`.
    pub ofm_ublock_depth: u32,
    /// Input channels per output channel: `NPU_SET_IFM_DEPTH_M1 + 1` (ignored for depthwise).
    pub ifm_depth: u32,
    /// IFM block depth (not a register; see [`ifm_block_depth`]); a multiple of 8. Ignored for
    /// depthwise.
    pub ifm_block_depth: u32,
    /// Kernel height before dilation (`NPU_SET_KERNEL_HEIGHT_M1` holds the dilated size).
    pub kernel_height: u32,
    /// Kernel width before dilation.
    pub kernel_width: u32,
    /// Horizontal stride, 1..=4 (`stride_x_msb:stride_x_lsb` + 1); orders part-kernel-first and
    /// depthwise streams, ignored by depth-first.
    pub stride_x: u32,
    /// Vertical stride, 1..=4.
    pub stride_y: u32,
    /// Horizontal dilation, 1 or 2.
    pub dilation_x: u32,
    /// Vertical dilation, 1 or 2.
    pub dilation_y: u32,
    /// IFM element size in bits: 8, 16 or 32 (`NPU_SET_IFM_PRECISION`).
    pub ifm_bits: u32,
    /// MACs of the configuration (128, 256, 512, 1024 or 2048).
    pub macs: u32,
    /// Weight decoders (cores): 1 for U85-128/256, 2 for 512, 4 for 1024/2048.
    pub cores: u32,
}

/// The OFM microblock depth of an Ethos-U85 with `macs` MACs for the
/// `NPU_SET_ACC_FORMAT.microblock` field value (`U1X1 = 0, U1X2, U1X4, U2X2, U2X4, U4X4`), or
/// `None` for other values.
///
/// Every microblock of Vela's configuration table holds `macs / 8` elements (e.g. U85-256:
/// 1x2x16, 1x4x8, 2x2x8), so the depth is `macs / 8 / (height * width)`.
pub const fn ofm_ublock_depth(macs: u32, microblock: u32) -> Option<u32> {
    let area = match microblock {
        0 => 1,
        1 => 2,
        2 | 3 => 4,
        4 => 8,
        5 => 16,
        _ => return None,
    };
    let elements = macs / 8;
    if elements == 0 || !elements.is_multiple_of(area) {
        None
    } else {
        Some(elements / area)
    }
}

/// The IFM block depth Vela 5.2 uses (non-sparse weights): 16 for part-kernel-first, 32 for
/// 32-bit IFMs or a 16-deep OFM microblock on U85-128/256, else 64. Depthwise ignores it.
pub const fn ifm_block_depth(
    traversal: Traversal,
    ifm_bits: u32,
    macs: u32,
    ofm_ublock: u32,
) -> u32 {
    match traversal {
        Traversal::PartKernelFirst => 16,
        _ if ifm_bits == 32 || ((macs == 128 || macs == 256) && ofm_ublock == 16) => 32,
        _ => 64,
    }
}

/// Splits `total` into pieces of `step`: `[(count, size); 2]` (full pieces, then the remainder).
const fn pieces(total: u64, step: u64) -> [(u64, u64); 2] {
    if step == 0 {
        return [(0, 0), (0, 0)];
    }
    [
        (total / step, step),
        (if total.is_multiple_of(step) { 0 } else { 1 }, total % step),
    ]
}

impl U85Geometry {
    /// Kernel elements of a sub-kernel are padded to a multiple of this.
    const fn element_round(&self) -> u32 {
        match self.traversal {
            Traversal::DepthFirst => 1,
            Traversal::Depthwise => 10,
            Traversal::PartKernelFirst => {
                if self.ifm_bits == 16 {
                    10
                } else {
                    5
                }
            }
        }
    }

    /// IFM channels per IFM ublock (the loop outside the OFM ublocks).
    const fn ifm_ublock(&self) -> u32 {
        match self.traversal {
            Traversal::Depthwise => 1,
            Traversal::PartKernelFirst if self.ifm_bits == 16 => IFM_GROUP,
            _ => self.ifm_block_depth,
        }
    }

    /// IFM channels per innermost group.
    const fn ifm_group(&self) -> u32 {
        match self.traversal {
            Traversal::Depthwise => 1,
            _ => IFM_GROUP,
        }
    }

    /// Extra zero elements per 10 depthwise kernel elements: none for 8-bit IFMs on up to 256
    /// MACs, 2 up to 512 MACs, else 6.
    const fn dw_pad(&self) -> u32 {
        let dw = matches!(self.traversal, Traversal::Depthwise);
        if !dw || (self.ifm_bits != 16 && self.macs <= 256) {
            0
        } else if self.macs <= 512 {
            2
        } else {
            6
        }
    }

    /// Strides that order the kernel elements (depth-first ignores the stride).
    const fn order_stride(&self) -> (u32, u32) {
        match self.traversal {
            Traversal::DepthFirst => (1, 1),
            _ => (self.stride_x, self.stride_y),
        }
    }

    /// Input channels of the weight volume (1 for depthwise).
    pub const fn weight_ifm_depth(&self) -> u32 {
        match self.traversal {
            Traversal::Depthwise => 1,
            _ => self.ifm_depth,
        }
    }

    /// Number of weight streams: `cores` for SWD, 1 for FWD.
    pub const fn streams(&self) -> u32 {
        match self.format {
            WeightFormat::Swd => self.cores,
            WeightFormat::Fwd => 1,
        }
    }

    /// Checks the geometry; every other method relies on it.
    pub fn validate(&self) -> Result<(), WeightError> {
        let bad = |why| Err(WeightError::BadGeometry(why));
        let sizes = [
            self.ofm_depth,
            self.ofm_block_depth,
            self.ofm_ublock_depth,
            self.weight_ifm_depth(),
            self.kernel_height,
            self.kernel_width,
        ];
        if sizes.contains(&0) {
            return bad("a depth or kernel size is 0");
        }
        if sizes.iter().any(|&v| v > MAX_DIM) {
            return bad("a size exceeds 65536");
        }
        if !matches!(self.cores, 1 | 2 | 4) {
            return bad("cores must be 1, 2 or 4");
        }
        if !matches!(self.macs, 128 | 256 | 512 | 1024 | 2048) {
            return bad("macs must be 128, 256, 512, 1024 or 2048");
        }
        if !self
            .ofm_ublock_depth
            .is_multiple_of(CORE_INTERLEAVE * self.cores)
        {
            return bad("OFM ublock depth is not a multiple of 4 * cores");
        }
        // A block that is not whole ublocks would make Vela's ublock loop run into the next
        // block; Vela never emits it and the hardware's behaviour is not documented.
        if !self.ofm_block_depth.is_multiple_of(self.ofm_ublock_depth) {
            return bad("OFM block depth is not a multiple of the OFM ublock depth");
        }
        if !matches!(self.traversal, Traversal::Depthwise)
            && (self.ifm_block_depth == 0
                || self.ifm_block_depth > MAX_DIM
                || !self.ifm_block_depth.is_multiple_of(IFM_GROUP))
        {
            return bad("IFM block depth must be a non-zero multiple of 8");
        }
        if !matches!(self.dilation_x, 1 | 2) || !matches!(self.dilation_y, 1 | 2) {
            return bad("dilation must be 1 or 2");
        }
        if !(1..=4).contains(&self.stride_x) || !(1..=4).contains(&self.stride_y) {
            return bad("stride must be 1..=4");
        }
        if !matches!(self.ifm_bits, 8 | 16 | 32) {
            return bad("ifm_bits must be 8, 16 or 32");
        }
        if matches!(
            (self.format, self.traversal),
            (WeightFormat::Fwd, Traversal::Depthwise)
        ) {
            // Vela never encodes depthwise weights as FWD; the layout is not known.
            return bad("FWD depthwise weights are not supported");
        }
        self.ohwi_len().map(|_| ())
    }

    /// Elements of the OHWI weight volume: `ofm_depth * kernel_height * kernel_width *
    /// weight_ifm_depth()`.
    pub fn ohwi_len(&self) -> Result<usize, WeightError> {
        (self.ofm_depth as u64)
            .checked_mul(self.kernel_height as u64)
            .and_then(|n| n.checked_mul(self.kernel_width as u64))
            .and_then(|n| n.checked_mul(self.weight_ifm_depth() as u64))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(WeightError::BadGeometry("weight volume too large"))
    }

    /// Values (including padding) in one core's order; every core has the same number.
    pub fn core_len(&self) -> Result<usize, WeightError> {
        self.validate()?;
        let round = self.element_round() as u64;
        let dw_pad = self.dw_pad() as u64;
        let padded = |e: u64| {
            let r = e.div_ceil(round) * round;
            r + dw_pad * e.div_ceil(10)
        };
        // Kernel elements over all sub-kernels, each rounded and padded.
        let mut elements = 0u64;
        for (nx, w) in pieces(self.kernel_width as u64, 8 / self.dilation_x as u64) {
            for (ny, h) in pieces(self.kernel_height as u64, 8 / self.dilation_y as u64) {
                elements += nx * ny * padded(w * h);
            }
        }
        // IFM values per OFM channel per kernel element over all IFM blocks.
        let iub = self.ifm_ublock() as u64;
        let ifm_values = match self.traversal {
            Traversal::Depthwise => 1,
            _ => {
                let mut v = 0;
                for (n, d) in pieces(self.ifm_depth as u64, self.ifm_block_depth as u64) {
                    v += n * d.div_ceil(iub) * iub;
                }
                v
            }
        };
        // OFM channels of this core, padded to ublocks, over all OFM blocks.
        let oub = self.ofm_ublock_depth as u64;
        let mut ofm_values = 0;
        for (n, d) in pieces(self.ofm_depth as u64, self.ofm_block_depth as u64) {
            ofm_values += n * d.div_ceil(oub) * oub;
        }
        let ofm_values = ofm_values / self.cores as u64;
        ofm_values
            .checked_mul(elements)
            .and_then(|n| n.checked_mul(ifm_values))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(WeightError::BadGeometry("weight stream too long"))
    }

    /// FWD: values of one core taken in turn before the next core's (the interleave block).
    fn fwd_block(&self) -> u64 {
        // Each factor is at most 2^16 after validate(), so the product fits u64.
        self.ofm_ublock_depth as u64 * self.ifm_ublock() as u64 * self.element_round() as u64
            / self.cores.max(1) as u64
    }
}

/// Calls `f` for each position of core `core`'s order with the OHWI index of the weight there
/// (`[ofm][ky][kx][ifm]`; depthwise `[channel][ky][kx]`), or `None` for padding.
///
/// Stops at the first error `f` returns.
pub fn for_each_core_position<E: From<WeightError>>(
    geom: &U85Geometry,
    core: u32,
    mut f: impl FnMut(Option<usize>) -> Result<(), E>,
) -> Result<(), E> {
    geom.validate()?;
    if core >= geom.cores {
        return Err(WeightError::BadGeometry("core must be below cores").into());
    }
    let dw = matches!(geom.traversal, Traversal::Depthwise);
    let ofm = geom.ofm_depth;
    let ifm = geom.weight_ifm_depth();
    let (kh, kw) = (geom.kernel_height, geom.kernel_width);
    let (sx, sy) = geom.order_stride();
    let round = geom.element_round();
    let iub = geom.ifm_ublock();
    let group = geom.ifm_group();
    let oub = geom.ofm_ublock_depth;
    let dw_pad = geom.dw_pad();
    let per_core = oub / geom.cores;
    let (decomp_x, decomp_y) = (8 / geom.dilation_x, 8 / geom.dilation_y);
    let ifm_block = if dw { 1 } else { geom.ifm_block_depth };
    let ifm_blocks = ifm.div_ceil(ifm_block);
    // validate() bounds every size by 2^16, so indices fit u64 and (on 32-bit targets) the
    // checked ohwi_len() bounds the real ones.
    let index = |o: u32, y: u32, x: u32, i: u32| -> usize {
        let idx =
            ((o as u64 * kh as u64 + y as u64) * kw as u64 + x as u64) * ifm as u64 + i as u64;
        idx as usize
    };

    for (ob_index, ob) in (0..ofm).step_by(geom.ofm_block_depth as usize).enumerate() {
        let clipped_ob = geom.ofm_block_depth.min(ofm - ob);
        for ib_step in 0..ifm_blocks {
            // The IFM blocks go forward for even OFM blocks and backward for odd ones.
            let ib = if ob_index % 2 == 0 {
                ib_step
            } else {
                ifm_blocks - 1 - ib_step
            } * ifm_block;
            let clipped_ib = ifm_block.min(ifm - ib);
            for skx in (0..kw).step_by(decomp_x as usize) {
                let sub_w = (kw - skx).min(decomp_x);
                for sky in (0..kh).step_by(decomp_y as usize) {
                    let sub_h = (kh - sky).min(decomp_y);
                    let outer = if dw { 1 } else { clipped_ib };
                    for iuo in (0..outer).step_by(iub as usize) {
                        for ouo in (0..clipped_ob).step_by(oub as usize) {
                            let mut remaining = (sub_w * sub_h).div_ceil(round) * round;
                            for phase_y in 0..sy {
                                let rows = (sub_h + sy - 1 - phase_y) / sy;
                                for phase_x in 0..sx {
                                    let cols = (sub_w + sx - 1 - phase_x) / sx;
                                    for ky in 0..rows {
                                        for kx in 0..cols {
                                            // Odd rows run right to left.
                                            let x = if ky % 2 == 0 { kx } else { cols - 1 - kx };
                                            let wx = skx + phase_x + x * sx;
                                            let wy = sky + phase_y + ky * sy;
                                            remaining -= 1;
                                            for iui in (0..iub).step_by(group as usize) {
                                                for ouz in (core * CORE_INTERLEAVE..oub).step_by(
                                                    (CORE_INTERLEAVE * geom.cores) as usize,
                                                ) {
                                                    for oui in 0..CORE_INTERLEAVE {
                                                        let o = ob + ouo + ouz + oui;
                                                        for iuz in 0..group {
                                                            let i = ib + iuo + iui + iuz;
                                                            f((o < ofm && i < ifm)
                                                                .then(|| index(o, wy, wx, i)))?;
                                                        }
                                                    }
                                                }
                                            }
                                            if dw && remaining.is_multiple_of(round) {
                                                for _ in 0..dw_pad * per_core {
                                                    f(None)?;
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                            if remaining > 0 {
                                // Up to 70 elements of up to 2^16 x 2^16 values: count in u64.
                                let n = u64::from(remaining + dw_pad)
                                    * u64::from(iub)
                                    * u64::from(per_core);
                                for _ in 0..n {
                                    f(None)?;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// What a decode found besides the weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Values decoded, padding included, all streams together.
    pub values: usize,
    /// Padding positions holding a non-zero value (Vela writes zeros; the hardware multiplies
    /// them with nothing, so a decoder only reports them).
    pub nonzero_padding: usize,
}

/// Decodes an operation's weight streams into `out` (OHWI: `[ofm_depth][kernel_height]
/// [kernel_width][ifm_depth]`; depthwise `[channels][kernel_height][kernel_width]`).
///
/// `streams` holds [`U85Geometry::streams`] byte slices: for SWD one per core (`WEIGHT_BASE`,
/// `WEIGHT1_BASE`, ...), each holding exactly [`U85Geometry::core_len`] values; for FWD the one
/// stream (`WEIGHT_BASE`). Weights are in `-255..=255` (int8 weights minus their zero point).
pub fn decode_weights_u85(
    streams: &[&[u8]],
    geom: &U85Geometry,
    out: &mut [i16],
) -> Result<DecodeStats, WeightError> {
    let needed = geom.ohwi_len()?;
    let expected = geom.core_len()?;
    if out.len() < needed {
        return Err(WeightError::OutputTooSmall {
            needed,
            got: out.len(),
        });
    }
    if streams.len() != geom.streams() as usize {
        return Err(WeightError::BadGeometry(
            "one stream per core (SWD) or one stream (FWD) needed",
        ));
    }
    let mut stats = DecodeStats::default();
    let mut store = |target: Option<usize>, value: i16, stats: &mut DecodeStats| {
        stats.values += 1;
        match target {
            Some(index) => match out.get_mut(index) {
                Some(slot) => {
                    *slot = value;
                    Ok(())
                }
                None => Err(WeightError::BadGeometry("index outside OHWI volume")),
            },
            None => {
                stats.nonzero_padding += usize::from(value != 0);
                Ok(())
            }
        }
    };
    match geom.format {
        WeightFormat::Swd => {
            for (core, stream) in (0..geom.cores).zip(streams) {
                let mut decoder = StreamDecoder::new(stream);
                let mut got = 0usize;
                for_each_core_position(geom, core, |target| {
                    let value = match decoder.next() {
                        Some(v) => v?,
                        None => return Err(WeightError::TooFewValues { expected, got }),
                    };
                    got += 1;
                    store(target, value, &mut stats)
                })?;
                match decoder.next() {
                    None => {}
                    Some(Err(e)) => return Err(e),
                    Some(Ok(_)) => return Err(WeightError::TooManyValues { expected }),
                }
            }
        }
        WeightFormat::Fwd => {
            let stream = streams.first().copied().unwrap_or(&[]);
            let fwd = FwdStream::new(stream, expected.saturating_mul(geom.cores as usize))?;
            let block = usize::try_from(geom.fwd_block()).unwrap_or(0);
            if block == 0 || !expected.is_multiple_of(block) {
                return Err(WeightError::BadGeometry(
                    "FWD: core order is not whole interleave blocks",
                ));
            }
            let cores = geom.cores as usize;
            for core in 0..geom.cores {
                let mut q = 0usize;
                for_each_core_position(geom, core, |target| {
                    // Core c's q-th value is in its (q / block)-th block, which follows that
                    // block of cores 0..c.
                    let p = (q / block) * block * cores + core as usize * block + q % block;
                    q += 1;
                    store(target, fwd.value(p)?, &mut stats)
                })?;
            }
        }
    }
    Ok(stats)
}

/// A parsed FWD stream: header fields and the code width.
#[derive(Clone, Copy, Debug)]
struct FwdStream<'a> {
    data: &'a [u8],
    /// Bits per value: 2 (4-entry LUT), 4 (16-entry LUT) or 8 (raw).
    width: usize,
    raw: bool,
    zero_adjust: i16,
    lut: [i16; 16],
}

/// Reads `n <= 16` bits LSB-first at bit `pos`.
fn bits_at(data: &[u8], pos: usize, n: usize) -> Result<u32, WeightError> {
    let mut v = 0u32;
    for k in 0..n {
        let bit = pos + k;
        let byte = data
            .get(bit / 8)
            .ok_or(WeightError::Truncated { bit: pos })?;
        v |= u32::from((byte >> (bit % 8)) & 1) << k;
    }
    Ok(v)
}

/// A 9-bit sign-magnitude value with the sign in bit 0.
const fn unfold(v: u32) -> i16 {
    let mag = (v >> 1) as i16;
    if v & 1 != 0 { -mag } else { mag }
}

impl<'a> FwdStream<'a> {
    /// Parses the header of a stream that must hold `values` codes.
    fn new(data: &'a [u8], values: usize) -> Result<Self, WeightError> {
        let raw = bits_at(data, 0, 1)? != 0;
        let small = bits_at(data, 1, 1)? != 0;
        if raw && small {
            return Err(WeightError::BadHeader {
                bit: 0,
                field: "FWD raw and small-LUT flags",
                value: 3,
            });
        }
        // Bits 2..104 are written as zero by Vela; their meaning is unknown and they are not
        // checked.
        let zero_adjust = bits_at(data, 104, 8)? as u8 as i8 as i16;
        let mut lut = [0i16; 16];
        for (k, slot) in lut.iter_mut().enumerate() {
            *slot = unfold(bits_at(data, 112 + 9 * k, 9)?);
        }
        let width = if raw {
            8
        } else if small {
            2
        } else {
            4
        };
        let end_bit = values
            .checked_mul(width)
            .and_then(|b| b.checked_add(FWD_HEADER_BITS))
            .ok_or(WeightError::BadGeometry("FWD stream too long"))?;
        if end_bit > data.len().saturating_mul(8) {
            return Err(WeightError::Truncated {
                bit: data.len().saturating_mul(8),
            });
        }
        Ok(FwdStream {
            data,
            width,
            raw,
            zero_adjust,
            lut,
        })
    }

    /// The `p`-th value of the stream.
    fn value(&self, p: usize) -> Result<i16, WeightError> {
        let pos = p
            .checked_mul(self.width)
            .and_then(|b| b.checked_add(FWD_HEADER_BITS))
            .ok_or(WeightError::BadGeometry("FWD stream too long"))?;
        let code = bits_at(self.data, pos, self.width)?;
        if self.raw {
            Ok(i16::from(code as u8 as i8) - self.zero_adjust)
        } else {
            // A 2- or 4-bit code always indexes the 16-entry LUT.
            Ok(self.lut.get(code as usize).copied().unwrap_or(0))
        }
    }
}

/// Bits per code of an FWD stream (2, 4 or 8) as its header selects, or `None` if the header
/// is truncated or sets both the raw and the small-LUT flag.
pub fn fwd_code_bits(stream: &[u8]) -> Option<usize> {
    FwdStream::new(stream, 0).ok().map(|s| s.width)
}

/// Number of bytes Vela's FWD stream of `values` codes occupies: header and codes, padded to
/// 256 bits, for the code width the header selects; `None` if the header is malformed.
pub fn fwd_stream_bytes(stream: &[u8], values: usize) -> Option<usize> {
    let s = FwdStream::new(stream, values).ok()?;
    let bits = values.checked_mul(s.width)?.checked_add(FWD_HEADER_BITS)?;
    Some(bits.div_ceil(FWD_ALIGN_BITS) * FWD_ALIGN_BITS / 8)
}

/// Scale/bias entries in the stream of an operation with `ofm_depth` channels: rounded up to a
/// multiple of the OFM ublock depth rounded up to 16 (the extra entries are zero).
pub const fn scale_entries(ofm_depth: u32, ofm_ublock_depth: u32) -> u32 {
    let unit = ofm_ublock_depth.div_ceil(16) * 16;
    if unit == 0 {
        return ofm_depth;
    }
    ofm_depth.div_ceil(unit) * unit
}

/// Reads one U85 scale/bias record (10 bytes, little-endian).
///
/// - `I32`: bytes 0..4 bias (signed 32-bit), bytes 4..8 multiplier (31 bits; bit 31 reserved),
///   byte 8 bits 0..6 shift, byte 9 reserved.
/// - `I48`: bytes 0..6 bias (signed 48-bit), bytes 6..8 multiplier (15 bits), byte 8 bits 0..6
///   shift, byte 9 reserved.
///
/// Reserved bits are ignored (Vela writes zeros).
pub const fn scale_from_bytes(b: &[u8; SCALE_ENTRY_BYTES], acc: AccFormat) -> ScaleEntry {
    match acc {
        AccFormat::I32 => ScaleEntry {
            bias: i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            multiplier: u32::from_le_bytes([b[4], b[5], b[6], b[7]]) & 0x7fff_ffff,
            shift: b[8] & 0x3f,
        },
        AccFormat::I48 => {
            let raw = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], 0, 0]);
            ScaleEntry {
                bias: ((raw << 16) as i64) >> 16,
                multiplier: u16::from_le_bytes([b[6], b[7]]) as u32 & 0x7fff,
                shift: b[8] & 0x3f,
            }
        }
    }
}

/// Writes one U85 scale/bias record, or `None` if a field does not fit its bits.
pub const fn scale_to_bytes(e: &ScaleEntry, acc: AccFormat) -> Option<[u8; SCALE_ENTRY_BYTES]> {
    if e.shift >= 64 {
        return None;
    }
    match acc {
        AccFormat::I32 => {
            if e.bias < i32::MIN as i64 || e.bias > i32::MAX as i64 || e.multiplier > 0x7fff_ffff {
                return None;
            }
            let b = (e.bias as i32).to_le_bytes();
            let m = e.multiplier.to_le_bytes();
            Some([b[0], b[1], b[2], b[3], m[0], m[1], m[2], m[3], e.shift, 0])
        }
        AccFormat::I48 => {
            if e.bias < -(1 << 47) || e.bias >= (1 << 47) || e.multiplier > 0x7fff {
                return None;
            }
            let b = e.bias.to_le_bytes();
            let m = (e.multiplier as u16).to_le_bytes();
            Some([b[0], b[1], b[2], b[3], b[4], b[5], m[0], m[1], e.shift, 0])
        }
    }
}

/// Decodes the first `out.len()` records of a U85 scale/bias stream (one stream for all cores,
/// indexed by output channel). Bytes after them (zero records and alignment) are ignored.
pub fn decode_scales_u85(
    stream: &[u8],
    acc: AccFormat,
    out: &mut [ScaleEntry],
) -> Result<(), WeightError> {
    let needed = out.len().saturating_mul(SCALE_ENTRY_BYTES);
    if stream.len() < needed {
        return Err(WeightError::ScaleStreamTooShort {
            needed,
            got: stream.len(),
        });
    }
    for (slot, chunk) in out.iter_mut().zip(stream.chunks_exact(SCALE_ENTRY_BYTES)) {
        let Ok(bytes) = <&[u8; SCALE_ENTRY_BYTES]>::try_from(chunk) else {
            return Err(WeightError::ScaleStreamTooShort {
                needed,
                got: stream.len(),
            });
        };
        *slot = scale_from_bytes(bytes, acc);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::{vec, vec::Vec};

    /// A 1x1 part-kernel-first geometry on one core, 8-bit IFM; adjust with struct update.
    fn geom() -> U85Geometry {
        U85Geometry {
            traversal: Traversal::PartKernelFirst,
            format: WeightFormat::Swd,
            ofm_depth: 8,
            ofm_block_depth: 8,
            ofm_ublock_depth: 8,
            ifm_depth: 8,
            ifm_block_depth: 16,
            kernel_height: 1,
            kernel_width: 1,
            stride_x: 1,
            stride_y: 1,
            dilation_x: 1,
            dilation_y: 1,
            ifm_bits: 8,
            macs: 256,
            cores: 1,
        }
    }

    fn positions(g: &U85Geometry, core: u32) -> Vec<Option<usize>> {
        let mut v = Vec::new();
        for_each_core_position::<WeightError>(g, core, |t| {
            v.push(t);
            Ok(())
        })
        .unwrap();
        assert_eq!(v.len(), g.core_len().unwrap());
        v
    }

    /// LSB-first bit writer.
    fn put(bytes: &mut [u8], pos: &mut usize, n: usize, v: u32) {
        for k in 0..n {
            if v >> k & 1 != 0 {
                bytes[(*pos + k) / 8] |= 1 << ((*pos + k) % 8);
            }
        }
        *pos += n;
    }

    #[test]
    fn ublock_and_ifm_block_rules() {
        // Vela's table: U85-256 has 1x2x16, 1x4x8, 2x2x8; U85-2048 4x4x16, 2x2x64.
        assert_eq!(ofm_ublock_depth(256, 1), Some(16));
        assert_eq!(ofm_ublock_depth(256, 2), Some(8));
        assert_eq!(ofm_ublock_depth(256, 3), Some(8));
        assert_eq!(ofm_ublock_depth(2048, 5), Some(16));
        assert_eq!(ofm_ublock_depth(2048, 3), Some(64));
        assert_eq!(ofm_ublock_depth(128, 6), None);
        assert_eq!(ifm_block_depth(Traversal::PartKernelFirst, 8, 2048, 64), 16);
        assert_eq!(ifm_block_depth(Traversal::DepthFirst, 8, 256, 16), 32);
        assert_eq!(ifm_block_depth(Traversal::DepthFirst, 8, 256, 8), 64);
        assert_eq!(ifm_block_depth(Traversal::DepthFirst, 32, 2048, 64), 32);
    }

    #[test]
    fn part_kernel_first_pads_elements_to_five_and_ifm_to_sixteen() {
        // 1x1 kernel, 8 OFM x 8 IFM: one element plus four padding elements, each 16 IFM
        // channels (two groups of 8) for 8 OFM channels (two groups of 4).
        let g = geom();
        let p = positions(&g, 0);
        assert_eq!(p.len(), 5 * 16 * 8);
        // First group of 8 IFM: OFM 0..4 then 4..8, IFM innermost.
        for o in 0..8 {
            for i in 0..8 {
                assert_eq!(p[o * 8 + i], Some(o * 8 + i));
            }
        }
        // Second group of 8 IFM channels is past the IFM depth, then 4 padding elements.
        assert!(p[64..].iter().all(Option::is_none));
    }

    #[test]
    fn cores_take_groups_of_four_channels_in_turn() {
        let g = U85Geometry {
            traversal: Traversal::DepthFirst,
            ofm_depth: 16,
            ofm_block_depth: 16,
            ofm_ublock_depth: 16,
            ifm_block_depth: 8,
            macs: 512,
            cores: 2,
            ..geom()
        };
        let ofm_of = |t: Option<usize>| t.map(|i| i / 8);
        let p1 = positions(&g, 1);
        let ofms: Vec<_> = p1.iter().step_by(8).map(|&t| ofm_of(t)).collect();
        assert_eq!(
            ofms,
            [4, 5, 6, 7, 12, 13, 14, 15].map(Some).to_vec(),
            "core 1 gets channels 4..8 and 12..16"
        );
    }

    #[test]
    fn part_kernel_first_walks_stride_phases_and_snakes_rows() {
        // 3x3 kernel, stride 2: phase (0,0) rows 0,2 cols 0,2; row 1 of the phase (ky = 2)
        // runs right to left.
        let g = U85Geometry {
            kernel_height: 3,
            kernel_width: 3,
            stride_x: 2,
            stride_y: 2,
            ifm_depth: 1,
            ofm_depth: 1,
            ..geom()
        };
        let p = positions(&g, 0);
        let per_element = 16 * 8;
        let kernel_pos: Vec<usize> = (0..9).map(|e| p[e * per_element].unwrap() % 9).collect();
        // (y, x) as y * 3 + x: phase (0,0): (0,0) (0,2) (2,2) (2,0); phase (0,1): (0,1) (2,1);
        // phase (1,0): (1,0) (1,2); phase (1,1): (1,1).
        assert_eq!(kernel_pos, [0, 2, 8, 6, 1, 7, 3, 5, 4]);
        // Rounded up to 10 elements.
        assert_eq!(p.len(), 10 * per_element);
    }

    #[test]
    fn ifm_blocks_snake_across_ofm_blocks() {
        let g = U85Geometry {
            traversal: Traversal::DepthFirst,
            ofm_depth: 16,
            ofm_block_depth: 8,
            ifm_depth: 16,
            ifm_block_depth: 8,
            ..geom()
        };
        let p = positions(&g, 0);
        let ifm_block_of = |k: usize| p[k].unwrap() % 16 / 8;
        // OFM block 0: IFM blocks 0, 1; OFM block 1: IFM blocks 1, 0.
        assert_eq!([0, 64, 128, 192].map(ifm_block_of), [0, 1, 1, 0]);
    }

    #[test]
    fn depthwise_pads_to_ten_elements_plus_dw_padding() {
        let g = U85Geometry {
            traversal: Traversal::Depthwise,
            ofm_depth: 16,
            ofm_block_depth: 16,
            ofm_ublock_depth: 16,
            kernel_height: 3,
            kernel_width: 3,
            macs: 512,
            cores: 2,
            ..geom()
        };
        // Per core 8 channels; 9 elements + 1 round-up + 2 padding elements.
        let p = positions(&g, 0);
        assert_eq!(p.len(), 12 * 8);
        assert_eq!(p[..8].iter().filter(|t| t.is_some()).count(), 8);
        assert!(p[72..].iter().all(Option::is_none));
    }

    #[test]
    fn fwd_modes_decode() {
        // 1x1 depth-first, 8 OFM x 8 IFM on one core: 8 * 64 = 512 values (IFM padded to 64).
        let g = U85Geometry {
            traversal: Traversal::DepthFirst,
            format: WeightFormat::Fwd,
            ifm_block_depth: 64,
            ..geom()
        };
        let n = g.core_len().unwrap();
        assert_eq!(n, 8 * 64);
        let want = |k: usize| ((k * 7) % 5) as i16 - 2;
        // 4-entry LUT (2-bit codes) holding -2..=2 does not fit: 5 values -> 4-bit LUT.
        let mut s = vec![0u8; 32 + n / 2];
        let mut pos = 112;
        for v in [-2i16, -1, 0, 1, 2] {
            let folded = (v.unsigned_abs() as u32) << 1 | u32::from(v < 0);
            put(&mut s, &mut pos, 9, folded);
        }
        let mut pos = 256;
        let mut expect = vec![0i16; 64];
        for (k, &t) in positions(&g, 0).iter().enumerate() {
            let v = if t.is_some() { want(k) } else { 0 };
            put(&mut s, &mut pos, 4, (v + 2) as u32);
            if let Some(i) = t {
                expect[i] = v;
            }
        }
        let mut out = vec![99i16; 64];
        let st = decode_weights_u85(&[&s], &g, &mut out).unwrap();
        assert_eq!(out, expect);
        assert_eq!(st.nonzero_padding, 0);
        assert_eq!(fwd_stream_bytes(&s, n), Some(32 + 256));

        // Raw mode with zero_adjust -3: byte b decodes to (b as i8) + 3.
        let mut r = vec![0u8; 32 + n];
        r[0] = 1;
        r[13] = (-3i8) as u8;
        r[32] = 0x80;
        let mut out = vec![0i16; 64];
        decode_weights_u85(&[&r], &g, &mut out).unwrap();
        assert_eq!(out[0], -125);
        // One byte short is an error naming the end of the data.
        assert_eq!(
            decode_weights_u85(&[&r[..r.len() - 1]], &g, &mut out),
            Err(WeightError::Truncated {
                bit: (r.len() - 1) * 8
            })
        );
    }

    #[test]
    fn scale_records_round_trip() {
        let e = ScaleEntry {
            bias: -5,
            multiplier: 0x7fff_fffe,
            shift: 38,
        };
        let b = scale_to_bytes(&e, AccFormat::I32).unwrap();
        assert_eq!(b, [0xfb, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0x7f, 38, 0]);
        assert_eq!(scale_from_bytes(&b, AccFormat::I32), e);
        let e48 = ScaleEntry {
            bias: -(1 << 40),
            multiplier: 0x4000,
            shift: 15,
        };
        let b = scale_to_bytes(&e48, AccFormat::I48).unwrap();
        assert_eq!(scale_from_bytes(&b, AccFormat::I48), e48);
        assert_eq!(scale_to_bytes(&e, AccFormat::I48), None);
        assert_eq!(scale_entries(20, 8), 32);
        assert_eq!(scale_entries(20, 64), 64);
        let mut out = [ScaleEntry::default(); 2];
        assert_eq!(
            decode_scales_u85(&b[..], AccFormat::I48, &mut out),
            Err(WeightError::ScaleStreamTooShort {
                needed: 20,
                got: 10
            })
        );
    }

    #[test]
    fn random_bytes_and_geometries_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = vec![0i16; 1 << 16];
        for _ in 0..3000 {
            let pick = |r: u64, options: &[u32]| options[(r % options.len() as u64) as usize];
            let g = U85Geometry {
                traversal: [
                    Traversal::DepthFirst,
                    Traversal::PartKernelFirst,
                    Traversal::Depthwise,
                ][(next() % 3) as usize],
                format: if next() % 2 == 0 {
                    WeightFormat::Swd
                } else {
                    WeightFormat::Fwd
                },
                ofm_depth: pick(next(), &[0, 1, 3, 8, 17, 64, 70000]),
                ofm_block_depth: pick(next(), &[0, 8, 16, 32, 24]),
                ofm_ublock_depth: pick(next(), &[0, 8, 16, 64, 6]),
                ifm_depth: pick(next(), &[0, 1, 5, 16, 33]),
                ifm_block_depth: pick(next(), &[0, 16, 32, 64, 12]),
                kernel_height: pick(next(), &[0, 1, 3, 9, 70000]),
                kernel_width: pick(next(), &[1, 2, 5, 17]),
                stride_x: pick(next(), &[0, 1, 2, 3, 5]),
                stride_y: pick(next(), &[1, 2, 4]),
                dilation_x: pick(next(), &[1, 2, 3]),
                dilation_y: pick(next(), &[1, 2]),
                ifm_bits: pick(next(), &[8, 16, 32, 4]),
                macs: pick(next(), &[128, 256, 512, 2048, 100]),
                cores: pick(next(), &[1, 2, 4, 3]),
            };
            let len = (next() % 400) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let streams: Vec<&[u8]> = (0..g.streams()).map(|_| &bytes[..]).collect();
            let _ = decode_weights_u85(&streams, &g, &mut out);
            let _ = decode_weights_u85(&[&bytes], &g, &mut out[..3]);
            let mut scales = [ScaleEntry::default(); 40];
            let _ = decode_scales_u85(&bytes, AccFormat::I32, &mut scales);
            let _ = fwd_stream_bytes(&bytes, len * 3);
        }
        // Valid geometries (every traversal, format and core count) over random bytes and over
        // a valid FWD stream with random bits flipped.
        for _ in 0..2000 {
            let cores = [1, 2, 4][(next() % 3) as usize];
            let traversal = [
                Traversal::DepthFirst,
                Traversal::PartKernelFirst,
                Traversal::Depthwise,
            ][(next() % 3) as usize];
            let format = if traversal != Traversal::Depthwise && next() % 2 == 0 {
                WeightFormat::Fwd
            } else {
                WeightFormat::Swd
            };
            let g = U85Geometry {
                traversal,
                format,
                ofm_depth: (next() % 40 + 1) as u32,
                ofm_block_depth: 16,
                ofm_ublock_depth: 16,
                ifm_depth: (next() % 40 + 1) as u32,
                kernel_height: (next() % 10 + 1) as u32,
                kernel_width: (next() % 10 + 1) as u32,
                stride_x: (next() % 4 + 1) as u32,
                stride_y: (next() % 4 + 1) as u32,
                dilation_x: (next() % 2 + 1) as u32,
                ifm_bits: [8, 16][(next() % 2) as usize],
                macs: [512, 2048][(next() % 2) as usize],
                cores,
                ..geom()
            };
            let n = g.core_len().unwrap() * cores as usize;
            let mut bytes: Vec<u8> = (0..(next() % 600) as usize).map(|_| next() as u8).collect();
            if format == WeightFormat::Fwd && next() % 2 == 0 {
                bytes = vec![0u8; 32 + n];
                bytes[0] = 1;
                for _ in 0..8 {
                    let bit = (next() % (bytes.len() as u64 * 8)) as usize;
                    bytes[bit / 8] ^= 1 << (bit % 8);
                }
            }
            let streams: Vec<&[u8]> = (0..g.streams()).map(|_| &bytes[..]).collect();
            let _ = decode_weights_u85(&streams, &g, &mut out);
        }
    }
}
