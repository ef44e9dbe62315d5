//! The NPU weight stream (compressed weights) and scale/bias stream formats.
//!
//! An Ethos-U55/U65 convolution reads two streams from memory:
//!
//! - the **weight stream** (`NPU_SET_WEIGHT_BASE`/`_LENGTH`, and `NPU_SET_WEIGHT1_*` for the
//!   second core of `ethos-u65-512`): weights compressed with palettes, zero runs and
//!   Golomb-Rice codes, in the order the MAC array consumes them ([`order`]). [`decode_weights`]
//!   turns one such stream back into weights in OHWI order; [`StreamDecoder`] yields the raw
//!   values in stream order.
//! - the **scale/bias stream** (`NPU_SET_SCALE_BASE`/`_LENGTH`, `NPU_SET_SCALE1_*`): 10 bytes per
//!   output channel ([`ScaleEntry`]), decoded by [`decode_scales`].
//!
//! With several cores (`cores > 1`), core `c` gets output channels `c, c + cores, ...` of the
//! operation: its own weight stream and scale stream hold only those channels.
//!
//! Everything here is `no_std`, allocation-free and panic-free on any input bytes: malformed
//! streams and inconsistent geometries are reported as [`WeightError`]s.
//!
//! The Ethos-U85's streams (same bitstream, another order and a fast format) are in [`u85`].
//!
//! Facts from Arm Vela 5.2.0 (`ethosu/mlw_codec/mlw_decode.c`, `ethosu/vela/weight_compressor.py`,
//! `regor/architecture/ethosu55/ethos_u55_weight_encoder.cpp`); verified by decoding every weight
//! stream of the Vela fixtures (`tests/tests/weights_vela.rs`).

mod bitstream;
pub mod order;
mod scale;
pub mod u85;

pub use bitstream::{StreamDecoder, decode_stream};
pub use order::{CoreSplit, Traversal, WeightGeometry, for_each_stream_position};
pub use scale::{SCALE_ENTRY_BYTES, ScaleEntry, decode_scales};

/// Value of the 3-bit ZDIV slice-header field meaning "no zero runs in this slice".
pub const ZDIV_DISABLE: u32 = 6;
/// Value of the 3-bit ZDIV field marking the end of a stream (followed by padding to a byte).
pub const ZDIV_EOS: u32 = 7;
/// Value of the 3-bit WDIV field meaning "weights are stored uncompressed (fixed width)".
pub const WDIV_UNCOMPRESSED: u32 = 7;
/// Weight streams start and end on this alignment (bytes); the tail is padded with `0xff`.
pub const STREAM_ALIGN: usize = 16;
/// Largest slice length (values) the 15-bit SLICELEN field can express.
pub const MAX_SLICE_LEN: usize = 1 << 15;

/// Why a weight or scale stream could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightError {
    /// The stream ended in the middle of a slice; `bit` is the bit offset of the failed read.
    Truncated { bit: usize },
    /// A slice header field holds a value the format does not define.
    BadHeader {
        bit: usize,
        field: &'static str,
        value: u32,
    },
    /// The first slice (or the first after an end-of-stream marker) does not define a palette.
    NoPalette { bit: usize },
    /// A slice switches between zero-run and plain mode without redefining the palette.
    ZeroRunModeChange { bit: usize },
    /// A decoded weight index or value does not fit the 9-bit weight range.
    ValueOutOfRange { bit: usize, value: u32 },
    /// Internal queue overflow: the zero-run and weight sub-streams drifted apart further than the
    /// format's flow control allows (only malformed streams can cause this).
    Desync { bit: usize },
    /// The stream holds fewer values than the geometry needs.
    TooFewValues { expected: usize, got: usize },
    /// The stream holds more values than the geometry needs.
    TooManyValues { expected: usize },
    /// The output buffer is smaller than the geometry needs.
    OutputTooSmall { needed: usize, got: usize },
    /// A scale stream is shorter than `channels * 10` bytes.
    ScaleStreamTooShort { needed: usize, got: usize },
    /// The geometry is inconsistent (zero sizes, dilation other than 1/2, core >= cores, ...).
    BadGeometry(&'static str),
}

impl core::fmt::Display for WeightError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            WeightError::Truncated { bit } => {
                write!(f, "weight stream truncated at bit {bit}")
            }
            WeightError::BadHeader { bit, field, value } => {
                write!(f, "weight stream: invalid {field} = {value} at bit {bit}")
            }
            WeightError::NoPalette { bit } => {
                write!(f, "weight stream: slice at bit {bit} must define a palette")
            }
            WeightError::ZeroRunModeChange { bit } => write!(
                f,
                "weight stream: slice at bit {bit} changes zero-run mode without a new palette"
            ),
            WeightError::ValueOutOfRange { bit, value } => write!(
                f,
                "weight stream: value {value} out of the 9-bit range near bit {bit}"
            ),
            WeightError::Desync { bit } => write!(
                f,
                "weight stream: weight and zero-run sub-streams out of step near bit {bit}"
            ),
            WeightError::TooFewValues { expected, got } => write!(
                f,
                "weight stream holds {got} values but the operation needs {expected}"
            ),
            WeightError::TooManyValues { expected } => write!(
                f,
                "weight stream holds more than the {expected} values the operation needs"
            ),
            WeightError::OutputTooSmall { needed, got } => {
                write!(f, "output buffer has {got} elements, {needed} needed")
            }
            WeightError::ScaleStreamTooShort { needed, got } => {
                write!(f, "scale stream has {got} bytes, {needed} needed")
            }
            WeightError::BadGeometry(why) => write!(f, "invalid weight geometry: {why}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for WeightError {}

/// Decodes one core's weight stream into `out`, which holds the whole operation's weights in
/// OHWI order (`[geom.ofm_depth][kernel_height][kernel_width][ifm_depth]`; depthwise:
/// `[channels][kernel_height][kernel_width][1]`).
///
/// Only this core's output channels (`geom.core`, `geom.core + geom.cores`, ...) are written; call
/// once per core with the same `out` to fill it completely. The stream must hold exactly
/// [`WeightGeometry::stream_len`] values; the values it holds at padding positions (kernel
/// elements, IFM or OFM channels beyond the real sizes, which Vela fills with zeros) are not
/// stored. Weights are in `-255..=255` (the hardware's 9-bit range; int8 weights minus their
/// zero point).
pub fn decode_weights(
    stream: &[u8],
    geom: &WeightGeometry,
    out: &mut [i16],
) -> Result<(), WeightError> {
    let needed = geom.ohwi_len()?;
    if out.len() < needed {
        return Err(WeightError::OutputTooSmall {
            needed,
            got: out.len(),
        });
    }
    let expected = geom.stream_len()?;
    let mut decoder = StreamDecoder::new(stream);
    let mut got = 0usize;
    for_each_stream_position(geom, |target| {
        let value = match decoder.next() {
            Some(v) => v?,
            None => return Err(WeightError::TooFewValues { expected, got }),
        };
        got += 1;
        if let Some(index) = target {
            // for_each_stream_position only yields indices below ohwi_len() <= out.len().
            match out.get_mut(index) {
                Some(slot) => *slot = value,
                None => return Err(WeightError::BadGeometry("index outside OHWI volume")),
            }
        }
        Ok(())
    })?;
    match decoder.next() {
        None => Ok(()),
        Some(Err(e)) => Err(e),
        Some(Ok(_)) => Err(WeightError::TooManyValues { expected }),
    }
}
