//! Encoding of weights and per-channel scale/bias into the streams the NPU reads.
//!
//! The format and the stream order are described in [`npu_rt::ethos_u::weights`] (the decoder);
//! this is its inverse, with a compressor of our own ([`search`]): palettes, zero runs and
//! per-slice Golomb-Rice parameters chosen by exact bit cost.
//!
//! [`encode_op`] produces everything one operation needs, in the layout Vela uses (and the
//! hardware reads): per OFM depth stripe, per core, the scale/bias stream padded to 16 bytes, then
//! the compressed weight stream (a multiple of 16 bytes).

mod search;
mod slice;

use npu_rt::ethos_u::config::AcceleratorConfig;
use npu_rt::ethos_u::weights::for_each_stream_position;
pub use npu_rt::ethos_u::weights::{
    CoreSplit, SCALE_ENTRY_BYTES, STREAM_ALIGN, ScaleEntry, Traversal, WeightError, WeightGeometry,
};

/// Why weights or scales could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The geometry is inconsistent (see [`WeightGeometry::validate`]).
    #[error("{0}")]
    Geometry(WeightError),
    /// A weight (after zero-point subtraction) is outside the hardware's 9-bit range.
    #[error("weight {value} at OHWI index {index} is outside -255..=255")]
    WeightRange { index: usize, value: i16 },
    /// The weight slice does not have the geometry's size.
    #[error("expected {expected} weights (OHWI), got {got}")]
    WeightCount { expected: usize, got: usize },
    /// A bias does not fit 40 bits or a shift 6 bits.
    #[error(
        "channel {channel}: bias {bias} or shift {shift} out of range (40-bit bias, shift < 64)"
    )]
    ScaleRange {
        channel: usize,
        bias: i64,
        shift: u8,
    },
    /// The depth stripes are not increasing or leave the OFM depth.
    #[error("depth offsets {offsets:?} must increase and end at most at the OFM depth {ofm_depth}")]
    Stripes { offsets: Vec<u32>, ofm_depth: usize },
}

impl From<WeightError> for EncodeError {
    fn from(e: WeightError) -> Self {
        EncodeError::Geometry(e)
    }
}

impl From<EncodeError> for crate::Error {
    fn from(e: EncodeError) -> Self {
        crate::Error::Internal(format!("weight encoding: {e}"))
    }
}

/// Everything that fixes the weight layout of one operation except its OFM depth and the core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightLayout {
    /// The accelerator (ublock depths and number of cores come from it).
    pub config: &'static AcceleratorConfig,
    /// Depthwise, or the convolution's weight order (goes into `NPU_SET_KERNEL_STRIDE`).
    pub traversal: Traversal,
    /// OFM block depth of the operation, all cores together (`NPU_SET_OFM_BLK_DEPTH_M1 + 1`).
    pub ofm_block_depth: u32,
    /// Input channels per output channel (ignored for depthwise).
    pub ifm_depth: u32,
    /// Kernel height before dilation.
    pub kernel_height: u32,
    /// Kernel width before dilation.
    pub kernel_width: u32,
    /// Dilation in x, 1 or 2.
    pub dilation_x: u32,
    /// Dilation in y, 1 or 2.
    pub dilation_y: u32,
    /// IFM element size in bits, 8 or 16.
    pub ifm_bits: u32,
}

impl WeightLayout {
    /// The geometry of core `core`'s stream for an operation (or stripe) of `ofm_depth` channels.
    pub fn geometry(&self, ofm_depth: u32, core: u32) -> WeightGeometry {
        WeightGeometry {
            ofm_depth,
            ofm_block_depth: self.ofm_block_depth,
            ifm_depth: self.ifm_depth,
            kernel_height: self.kernel_height,
            kernel_width: self.kernel_width,
            dilation_x: self.dilation_x,
            dilation_y: self.dilation_y,
            ifm_bits: self.ifm_bits,
            core,
            ..WeightGeometry::new(self.config, self.traversal)
        }
    }

    /// Weights per output channel (`kernel_height * kernel_width * ifm_depth`, depthwise: `kh * kw`).
    pub fn per_channel(&self) -> usize {
        let i = match self.traversal {
            Traversal::Depthwise => 1,
            _ => self.ifm_depth as usize,
        };
        self.kernel_height as usize * self.kernel_width as usize * i
    }
}

/// One core's weights in stream order (padding positions hold 0), from OHWI weights of the
/// whole operation (`geom.ohwi_len()` values).
pub fn reorder(ohwi: &[i16], geom: &WeightGeometry) -> Result<Vec<i16>, EncodeError> {
    let expected = geom.ohwi_len()?;
    if ohwi.len() != expected {
        return Err(EncodeError::WeightCount {
            expected,
            got: ohwi.len(),
        });
    }
    let mut out = Vec::with_capacity(geom.stream_len()?);
    for_each_stream_position::<EncodeError>(geom, |target| {
        let v = match target {
            Some(i) => *ohwi.get(i).ok_or(EncodeError::WeightCount {
                expected,
                got: ohwi.len(),
            })?,
            None => 0,
        };
        out.push(v);
        Ok(())
    })?;
    Ok(out)
}

/// Compresses weight values given in stream order into a complete stream (end-of-stream
/// marker and `0xff` padding to a multiple of 16 bytes). No values give an empty stream.
pub fn encode_stream(values: &[i16]) -> Result<Vec<u8>, EncodeError> {
    if let Some((index, &value)) = values
        .iter()
        .enumerate()
        .find(|(_, v)| !(-255..=255).contains(*v))
    {
        return Err(EncodeError::WeightRange { index, value });
    }
    Ok(search::encode_values(values))
}

/// One core's compressed weight stream from the operation's OHWI weights.
pub fn encode_weights(ohwi: &[i16], geom: &WeightGeometry) -> Result<Vec<u8>, EncodeError> {
    if let Some((index, &value)) = ohwi
        .iter()
        .enumerate()
        .find(|(_, v)| !(-255..=255).contains(*v))
    {
        return Err(EncodeError::WeightRange { index, value });
    }
    encode_stream(&reorder(ohwi, geom)?)
}

/// One core's scale/bias stream (`10 * channels` bytes, unpadded) from one entry per channel of
/// the operation (`scales.len() == split.ofm_depth`).
pub fn encode_scales(scales: &[ScaleEntry], split: CoreSplit) -> Result<Vec<u8>, EncodeError> {
    if scales.len() != split.ofm_depth as usize {
        return Err(EncodeError::WeightCount {
            expected: split.ofm_depth as usize,
            got: scales.len(),
        });
    }
    let channels = split.channels();
    let mut out = Vec::with_capacity(channels as usize * SCALE_ENTRY_BYTES);
    for i in 0..channels {
        let channel = split.channel(i) as usize;
        let entry = scales.get(channel).ok_or(EncodeError::WeightCount {
            expected: split.ofm_depth as usize,
            got: scales.len(),
        })?;
        let bytes = entry.to_bytes().ok_or(EncodeError::ScaleRange {
            channel,
            bias: entry.bias,
            shift: entry.shift,
        })?;
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// The streams of one core within an [`EncodedOp`]; offsets are into [`EncodedOp::data`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreStreams {
    /// 0 for `NPU_SET_SCALE_BASE`/`NPU_SET_WEIGHT_BASE`, 1 for the `*1_BASE` registers.
    pub core: u32,
    /// Start of the scale/bias stream (16-aligned).
    pub scale_offset: usize,
    /// Scale/bias stream length rounded up to 16 bytes (what Vela writes to `SCALE_LENGTH`).
    pub scale_len: usize,
    /// Start of the weight stream (16-aligned).
    pub weight_offset: usize,
    /// Weight stream length, a multiple of 16 (`WEIGHT_LENGTH`).
    pub weight_len: usize,
}

/// The streams of one OFM depth stripe (one `NPU_OP_CONV`/`NPU_OP_DEPTHWISE` per stripe).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedStripe {
    /// First output channel of the stripe.
    pub depth_offset: u32,
    /// Output channels of the stripe (the operation's `OFM_DEPTH_M1 + 1`).
    pub depth: u32,
    /// One entry per core that has channels in this stripe.
    pub cores: Vec<CoreStreams>,
}

/// Encoded weights and scales of one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedOp {
    /// All streams back to back; its start must be 16-aligned in NPU memory.
    pub data: Vec<u8>,
    /// Where each stripe's streams are.
    pub stripes: Vec<EncodedStripe>,
    /// Sum of the compressed weight stream lengths (Vela's `total_npu_encoded_weights`).
    pub weight_bytes: usize,
}

/// Encodes an operation: `ohwi` holds all its weights (OHWI, zero point subtracted; depthwise
/// `[C, KH, KW, 1]`), `scales` one entry per output channel, and `depth_offsets` the OFM depth
/// stripes as a closed list (`[0, 16, 24]`: channels 0..16 and 16..24; `[0, depth]` for one
/// stripe).
pub fn encode_op(
    ohwi: &[i16],
    scales: &[ScaleEntry],
    layout: &WeightLayout,
    depth_offsets: &[u32],
) -> Result<EncodedOp, EncodeError> {
    let ofm_depth = scales.len();
    let per = layout.per_channel();
    let expected = ofm_depth.saturating_mul(per);
    if ohwi.len() != expected {
        return Err(EncodeError::WeightCount {
            expected,
            got: ohwi.len(),
        });
    }
    let stripes_ok = depth_offsets.len() >= 2
        && depth_offsets.windows(2).all(|w| w[0] < w[1])
        && depth_offsets
            .last()
            .is_some_and(|&d| d as usize <= ofm_depth);
    if !stripes_ok {
        return Err(EncodeError::Stripes {
            offsets: depth_offsets.to_vec(),
            ofm_depth,
        });
    }
    let mut data = Vec::new();
    let mut stripes = Vec::new();
    let mut weight_bytes = 0;
    for w in depth_offsets.windows(2) {
        let (start, end) = (w[0], w[1]);
        let depth = end - start;
        let (a, b) = (start as usize, end as usize);
        let stripe_weights = &ohwi[a * per..b * per];
        let stripe_scales = &scales[a..b];
        let mut cores = Vec::new();
        for core in 0..layout.config.cores {
            let geom = layout.geometry(depth, core);
            if geom.split().channels() == 0 {
                continue;
            }
            let scale = encode_scales(stripe_scales, geom.split())?;
            let scale_offset = data.len();
            data.extend_from_slice(&scale);
            pad16(&mut data, 0);
            let scale_len = data.len() - scale_offset;
            let stream = encode_weights(stripe_weights, &geom)?;
            let weight_offset = data.len();
            data.extend_from_slice(&stream);
            weight_bytes += stream.len();
            cores.push(CoreStreams {
                core,
                scale_offset,
                scale_len,
                weight_offset,
                weight_len: stream.len(),
            });
        }
        stripes.push(EncodedStripe {
            depth_offset: start,
            depth,
            cores,
        });
    }
    Ok(EncodedOp {
        data,
        stripes,
        weight_bytes,
    })
}

fn pad16(data: &mut Vec<u8>, fill: u8) {
    while !data.len().is_multiple_of(STREAM_ALIGN) {
        data.push(fill);
    }
}

#[cfg(test)]
mod tests;
