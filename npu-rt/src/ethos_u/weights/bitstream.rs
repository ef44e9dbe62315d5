//! Decoding of the compressed weight bitstream into values in stream order.
//!
//! Format (bits are read LSB first within each byte):
//!
//! - A stream is a sequence of **slices**, ended by an end-of-stream marker (ZDIV = 7) that is
//!   padded with one bits to a byte; Vela then pads with `0xff` bytes to 16 bytes, each of which
//!   reads as another end-of-stream marker.
//! - Slice header: `ZDIV:3 SLICELEN:15 WDIV:3 WTRUNC:1 NEWPAL:1`, and if NEWPAL:
//!   `DIROFS:5 PALSIZE:5 PALBITS:3` followed by `PALSIZE+1` entries of `PALBITS+2` bits
//!   (PALSIZE = 0 means no palette). SLICELEN + 1 is the number of weights coded in the slice.
//! - ZDIV 0..3 enables **zero runs**: zeros are not coded as weights but as run lengths, one after
//!   each weight, plus one before the first weight of a slice that defines a palette. ZDIV 6
//!   disables them.
//! - Each weight is an index: below the palette size it selects a palette entry, otherwise
//!   `index - palsize + DIROFS` is the value directly. Values are sign-magnitude with the sign
//!   in bit 0 (`2 * |w| + (w < 0)`).
//! - Indices and run lengths are Golomb-Rice coded with divisors `2^WDIV` / `2^ZDIV`. WTRUNC
//!   limits the weight quotient to 0..=2 (one unary position per value). WDIV = 7 means fixed
//!   width: `ceil(log2(palsize))` bits, or PALBITS bits without a palette.
//! - The two sub-streams are interleaved in **chunks**: `WUNARY0:12` (one bit per unary position,
//!   set when the position adds to the quotient), `ZUNARY:12` (`8` when ZDIV >= 3), `WUNARY1`
//!   (one bit per set WUNARY0 bit: add 2 and continue instead of add 1 and stop), then the
//!   remainders of the values whose quotients were completed in the *previous* chunk. Flow control
//!   keeps the weight sub-stream at most 8 values ahead of the zero-run sub-stream.

use super::{WDIV_UNCOMPRESSED, WeightError, ZDIV_DISABLE, ZDIV_EOS};

/// LSB-first bit reader over a byte slice.
#[derive(Clone, Debug)]
struct BitReader<'a> {
    data: &'a [u8],
    /// Bit position of the next read.
    pos: usize,
}

impl<'a> BitReader<'a> {
    fn remaining(&self) -> usize {
        self.data.len().saturating_mul(8).saturating_sub(self.pos)
    }

    /// Reads `n <= 24` bits.
    fn read(&mut self, n: u32) -> Result<u32, WeightError> {
        if n == 0 {
            return Ok(0);
        }
        if (n as usize) > self.remaining() {
            return Err(WeightError::Truncated { bit: self.pos });
        }
        let mut value = 0u32;
        let mut got = 0u32;
        while got < n {
            let byte = match self.data.get(self.pos >> 3) {
                Some(&b) => u32::from(b),
                None => return Err(WeightError::Truncated { bit: self.pos }),
            };
            let offset = (self.pos & 7) as u32;
            let take = (8 - offset).min(n - got);
            let bits = (byte >> offset) & ((1 << take) - 1);
            value |= bits << got;
            got += take;
            self.pos += take as usize;
        }
        Ok(value)
    }

    /// Skips to the next byte boundary.
    fn align(&mut self) {
        self.pos = self.pos.saturating_add(7) & !7;
    }
}

/// A fixed-capacity FIFO (the decoder must not allocate).
#[derive(Clone, Debug)]
struct Fifo<T: Copy + Default, const N: usize> {
    buf: [T; N],
    head: usize,
    len: usize,
}

impl<T: Copy + Default, const N: usize> Fifo<T, N> {
    fn new() -> Self {
        Fifo {
            buf: [T::default(); N],
            head: 0,
            len: 0,
        }
    }

    fn push(&mut self, v: T) -> bool {
        if self.len >= N {
            return false;
        }
        let i = (self.head + self.len) % N;
        if let Some(slot) = self.buf.get_mut(i) {
            *slot = v;
            self.len += 1;
            true
        } else {
            false
        }
    }

    fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf.get(self.head).copied();
        self.head = (self.head + 1) % N;
        self.len -= 1;
        v
    }

    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

/// Symbols (quotients) of one sub-stream in one chunk; at most 12.
#[derive(Clone, Copy, Debug, Default)]
struct Chunk {
    enabled: bool,
    q: [u32; 12],
    n: usize,
}

/// State of the slice being decoded.
#[derive(Clone, Copy, Debug, Default)]
struct Slice {
    /// Weights coded in the slice.
    nvalues: u32,
    /// Zero runs coded in the slice (`nvalues + 1` when the slice defines a palette).
    z_nvalues: u32,
    use_zero_runs: bool,
    w_div: u32,
    w_trunc: bool,
    w_uncompressed: bool,
    /// Unary positions per weight chunk.
    w_positions: u32,
    z_div: u32,
    /// Unary positions per zero-run chunk.
    z_positions: u32,
    /// Symbols whose quotient has been read (may run past the end: trailing chunk padding).
    w_pos: u64,
    z_pos: u64,
    /// Values completed (remainder read).
    w_done: u32,
    z_done: u32,
    /// Partial quotient carried into the next chunk.
    w_carry: u32,
    z_carry: u32,
    w_prev: Chunk,
    z_prev: Chunk,
    /// The chunk loop has ended: every value of the slice is in the FIFOs or emitted.
    finished: bool,
    /// Emission state: weights emitted, and whether the next token is a zero run.
    w_emitted: u32,
    expect_run: bool,
}

const FIFO: usize = 64;

/// Decodes a weight stream into its values, in stream order, as an iterator.
///
/// Yields `Ok(weight)` (in `-255..=255`) for each value, `Err(_)` once if the stream is malformed
/// (then `None`), and `None` at the end of the stream. Never panics and never allocates.
/// The stream is read up to its end; trailing `0xff` padding is consumed as end-of-stream markers.
#[derive(Clone, Debug)]
pub struct StreamDecoder<'a> {
    state: State<'a>,
    /// The slice being decoded, if any.
    slice: Option<Slice>,
    /// Zeros still to emit from the last zero run.
    pending_zeros: u32,
    stopped: bool,
}

/// Everything but the slice: bit reader, palette, value FIFOs.
#[derive(Clone, Debug)]
struct State<'a> {
    bits: BitReader<'a>,
    palette: [u16; 32],
    palsize: u32,
    palbits: u32,
    direct_offset: u32,
    /// A palette has been defined since the start or the last end-of-stream marker.
    have_palette: bool,
    prev_zero_runs: bool,
    weights: Fifo<i16, FIFO>,
    runs: Fifo<u32, FIFO>,
}

/// Decodes the whole `stream` into `out` in stream order and returns the number of values.
///
/// Fails with [`WeightError::OutputTooSmall`] if `out` cannot hold them.
pub fn decode_stream(stream: &[u8], out: &mut [i16]) -> Result<usize, WeightError> {
    let mut n = 0usize;
    for v in StreamDecoder::new(stream) {
        let v = v?;
        match out.get_mut(n) {
            Some(slot) => *slot = v,
            None => {
                return Err(WeightError::OutputTooSmall {
                    needed: n + 1,
                    got: out.len(),
                });
            }
        }
        n += 1;
    }
    Ok(n)
}

/// What [`State::advance`] produced.
enum Token {
    Weight(i16),
    /// A zero run of this length.
    Run(u32),
    /// The slice is complete.
    End,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder reading `stream` from its first byte.
    pub fn new(stream: &'a [u8]) -> Self {
        StreamDecoder {
            state: State {
                bits: BitReader {
                    data: stream,
                    pos: 0,
                },
                palette: [0; 32],
                palsize: 0,
                palbits: 2,
                direct_offset: 0,
                have_palette: false,
                prev_zero_runs: false,
                weights: Fifo::new(),
                runs: Fifo::new(),
            },
            slice: None,
            pending_zeros: 0,
            stopped: false,
        }
    }

    /// Bit offset of the next read (for error messages and statistics).
    pub fn bit_position(&self) -> usize {
        self.state.bits.pos
    }

    fn next_value(&mut self) -> Result<Option<i16>, WeightError> {
        loop {
            if self.pending_zeros > 0 {
                self.pending_zeros -= 1;
                return Ok(Some(0));
            }
            let Some(slice) = self.slice.as_mut() else {
                match self.state.start_slice()? {
                    Some(s) => {
                        self.slice = Some(s);
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            match self.state.advance(slice)? {
                Token::Weight(w) => return Ok(Some(w)),
                Token::Run(n) => self.pending_zeros = n,
                Token::End => self.slice = None,
            }
        }
    }
}

impl State<'_> {
    /// Reads slice headers (skipping end-of-stream markers); `None` at the end of the data.
    fn start_slice(&mut self) -> Result<Option<Slice>, WeightError> {
        let zdiv = loop {
            let remaining = self.bits.remaining();
            if remaining == 0 {
                return Ok(None);
            }
            if remaining < 3 {
                // Not enough room for a header: only end-of-stream padding (ones) may remain.
                let at = self.bits.pos;
                let rest = self.bits.read(remaining as u32)?;
                if rest == (1 << remaining) - 1 {
                    return Ok(None);
                }
                return Err(WeightError::BadHeader {
                    bit: at,
                    field: "ZDIV",
                    value: rest,
                });
            }
            let zdiv = self.bits.read(3)?;
            if zdiv != ZDIV_EOS {
                break zdiv;
            }
            self.bits.align();
            self.have_palette = false;
        };
        let header_bit = self.bits.pos.saturating_sub(3);
        if zdiv > 3 && zdiv != ZDIV_DISABLE {
            return Err(WeightError::BadHeader {
                bit: header_bit,
                field: "ZDIV",
                value: zdiv,
            });
        }
        let use_zero_runs = zdiv != ZDIV_DISABLE;
        let nvalues = self.bits.read(15)? + 1;
        let wdiv = self.bits.read(3)?;
        if wdiv > 5 && wdiv != WDIV_UNCOMPRESSED {
            return Err(WeightError::BadHeader {
                bit: header_bit + 18,
                field: "WDIV",
                value: wdiv,
            });
        }
        let w_trunc = self.bits.read(1)? == 1;
        let new_palette = self.bits.read(1)? == 1;
        if new_palette {
            self.direct_offset = self.bits.read(5)?;
            let palsize = self.bits.read(5)?;
            self.palsize = if palsize > 0 { palsize + 1 } else { 0 };
            self.palbits = self.bits.read(3)? + 2;
            for i in 0..self.palsize as usize {
                let entry = self.bits.read(self.palbits)? as u16;
                if let Some(slot) = self.palette.get_mut(i) {
                    *slot = entry;
                }
            }
            self.have_palette = true;
        } else if !self.have_palette {
            return Err(WeightError::NoPalette { bit: header_bit });
        } else if use_zero_runs != self.prev_zero_runs {
            // The palette excludes zero in zero-run mode, so the mode cannot change without one.
            return Err(WeightError::ZeroRunModeChange { bit: header_bit });
        }
        self.prev_zero_runs = use_zero_runs;

        let w_uncompressed = wdiv == WDIV_UNCOMPRESSED;
        let w_div = if w_uncompressed {
            if self.palsize > 0 {
                // Index width: ceil(log2(palsize)).
                32 - (self.palsize - 1).leading_zeros()
            } else {
                self.palbits
            }
        } else {
            wdiv
        };
        let z_div = if use_zero_runs { zdiv } else { 0 };
        self.weights.clear();
        self.runs.clear();
        Ok(Some(Slice {
            nvalues,
            z_nvalues: nvalues + u32::from(new_palette),
            use_zero_runs,
            w_div,
            w_trunc,
            w_uncompressed,
            w_positions: if w_uncompressed && w_div > 5 { 8 } else { 12 },
            z_div,
            z_positions: if z_div < 3 { 12 } else { 8 },
            expect_run: use_zero_runs && new_palette,
            ..Slice::default()
        }))
    }

    /// Maps a decoded weight index to the signed weight.
    fn weight_value(&self, index: u32) -> Result<i16, WeightError> {
        let bad = |value| WeightError::ValueOutOfRange {
            bit: self.bits.pos,
            value,
        };
        if index >= 512 {
            return Err(bad(index));
        }
        let val = if index < self.palsize {
            match self.palette.get(index as usize) {
                Some(&p) => u32::from(p),
                None => return Err(bad(index)),
            }
        } else {
            index - self.palsize + self.direct_offset
        };
        if val >= 512 {
            return Err(bad(val));
        }
        let mag = (val >> 1) as i16;
        Ok(if val & 1 == 1 { -mag } else { mag })
    }

    /// Emits the next token of slice `s`, decoding chunks as needed.
    fn advance(&mut self, s: &mut Slice) -> Result<Token, WeightError> {
        loop {
            if s.expect_run {
                if let Some(run) = self.runs.pop() {
                    s.expect_run = false;
                    return Ok(Token::Run(run));
                }
            } else if s.w_emitted < s.nvalues {
                if let Some(w) = self.weights.pop() {
                    s.w_emitted += 1;
                    s.expect_run = s.use_zero_runs;
                    return Ok(Token::Weight(w));
                }
            } else if s.finished {
                return Ok(Token::End);
            }
            if s.finished {
                // The chunk loop ended but a value is missing: the format's flow control makes
                // this impossible, so the stream is inconsistent.
                return Err(WeightError::Desync { bit: self.bits.pos });
            }
            self.step(s)?;
        }
    }

    /// Decodes one chunk of slice `s` into the FIFOs.
    fn step(&mut self, s: &mut Slice) -> Result<(), WeightError> {
        let balance = if s.use_zero_runs {
            s.w_pos as i64 - s.z_pos as i64
        } else {
            0
        };
        let w_enable = (balance < 8 || !s.use_zero_runs) && s.w_pos < u64::from(s.nvalues);
        let z_enable = balance >= 0 && s.use_zero_runs && s.z_pos < u64::from(s.z_nvalues);

        let w_unary0 = if w_enable && !s.w_uncompressed {
            self.bits.read(12)?
        } else {
            0
        };
        let mut z_cur = Chunk {
            enabled: z_enable,
            ..Chunk::default()
        };
        if z_enable {
            let unary = self.bits.read(s.z_positions)?;
            let mut count = s.z_carry;
            for i in 0..s.z_positions {
                if unary & (1 << i) != 0 {
                    count = count.saturating_add(1);
                } else {
                    if let Some(slot) = z_cur.q.get_mut(z_cur.n) {
                        *slot = count;
                    }
                    z_cur.n += 1;
                    count = 0;
                }
            }
            s.z_carry = count;
            s.z_pos += z_cur.n as u64;
        }
        let mut w_cur = Chunk {
            enabled: w_enable,
            ..Chunk::default()
        };
        if w_enable {
            let mask = (1u32 << s.w_positions) - 1;
            let mut unary1 = self.bits.read((w_unary0 & mask).count_ones())?;
            let mut count = s.w_carry;
            for i in 0..s.w_positions {
                let mut code = 0;
                if w_unary0 & (1 << i) != 0 {
                    code = 1 + (unary1 & 1);
                    unary1 >>= 1;
                }
                count = count.saturating_add(code);
                if code < 2 || s.w_trunc {
                    if let Some(slot) = w_cur.q.get_mut(w_cur.n) {
                        *slot = count;
                    }
                    w_cur.n += 1;
                    count = 0;
                }
            }
            s.w_carry = count;
            s.w_pos += w_cur.n as u64;
        }
        // Remainders of the values whose quotients the previous chunk completed.
        if s.w_prev.enabled {
            for &q in s.w_prev.q.iter().take(s.w_prev.n) {
                if s.w_done >= s.nvalues {
                    break;
                }
                let remain = self.bits.read(s.w_div)?;
                // A quotient this large cannot form a 9-bit index; avoid shifting it.
                let index = if q >= 512 {
                    u32::MAX
                } else {
                    (q << s.w_div) + remain
                };
                let w = self.weight_value(index)?;
                if !self.weights.push(w) {
                    return Err(WeightError::Desync { bit: self.bits.pos });
                }
                s.w_done += 1;
            }
        }
        if s.z_prev.enabled {
            for &q in s.z_prev.q.iter().take(s.z_prev.n) {
                if s.z_done >= s.z_nvalues {
                    break;
                }
                let remain = self.bits.read(s.z_div)?;
                let run = q
                    .checked_shl(s.z_div)
                    .filter(|v| v >> s.z_div == q)
                    .and_then(|v| v.checked_add(remain))
                    .unwrap_or(u32::MAX);
                if !self.runs.push(run) {
                    return Err(WeightError::Desync { bit: self.bits.pos });
                }
                s.z_done += 1;
            }
        }
        s.w_prev = w_cur;
        s.z_prev = z_cur;
        // The chunk loop runs while a sub-stream was enabled: an iteration with neither only
        // flushes the last remainders.
        s.finished = !(w_enable || z_enable);
        Ok(())
    }
}

impl Iterator for StreamDecoder<'_> {
    type Item = Result<i16, WeightError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        match self.next_value() {
            Ok(Some(v)) => Some(Ok(v)),
            Ok(None) => {
                self.stopped = true;
                None
            }
            Err(e) => {
                self.stopped = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LSB-first bit writer for hand-made streams.
    struct Bits {
        bytes: [u8; 64],
        pos: usize,
    }

    impl Bits {
        fn new() -> Self {
            Bits {
                bytes: [0; 64],
                pos: 0,
            }
        }
        fn put(&mut self, n: u32, v: u32) -> &mut Self {
            for i in 0..n {
                if v >> i & 1 == 1 {
                    self.bytes[self.pos / 8] |= 1 << (self.pos % 8);
                }
                self.pos += 1;
            }
            self
        }
        /// End-of-stream marker, padded with ones to 16 bytes.
        fn finish(&mut self) -> &[u8] {
            self.put(3, ZDIV_EOS);
            while !self.pos.is_multiple_of(128) {
                self.put(1, 1);
            }
            &self.bytes[..self.pos / 8]
        }
    }

    /// Header of a slice without palette in fixed-width mode: `n` values of `bits` bits.
    fn plain_slice(b: &mut Bits, values: &[u32], bits: u32) {
        b.put(3, ZDIV_DISABLE)
            .put(15, values.len() as u32 - 1)
            .put(3, WDIV_UNCOMPRESSED)
            .put(1, 0)
            .put(1, 1)
            .put(5, 0)
            .put(5, 0)
            .put(3, bits - 2);
        // One chunk of 12 (or 8) quotient-free symbols, then the remainders in the next.
        for &v in values {
            b.put(bits, v);
        }
    }

    fn decode_all(stream: &[u8]) -> Result<([i16; 64], usize), WeightError> {
        let mut out = [0i16; 64];
        let n = decode_stream(stream, &mut out)?;
        Ok((out, n))
    }

    #[test]
    fn fixed_width_slice() {
        let mut b = Bits::new();
        // 2*|w| + sign: 3 -> 6, -2 -> 5, 0 -> 0, -255 -> 511.
        plain_slice(&mut b, &[6, 5, 0, 511], 9);
        let (out, n) = decode_all(b.finish()).unwrap();
        assert_eq!(&out[..n], &[3, -2, 0, -255]);
    }

    #[test]
    fn two_slices_keep_palette_and_grc() {
        let mut b = Bits::new();
        plain_slice(&mut b, &[2, 3], 4);
        // Second slice reuses the (empty) palette: Golomb-Rice with WDIV = 1, no truncation.
        // Indices 4 (quotient 2, remainder 0) and 1 (quotient 0, remainder 1). Unary positions:
        // 4 -> code 2 (continue) then code 0; 1 -> code 0; the other 9 positions are padding.
        b.put(3, ZDIV_DISABLE)
            .put(15, 1)
            .put(3, 1)
            .put(1, 0)
            .put(1, 0);
        b.put(12, 0b0000_0000_0001); // WUNARY0: only position 0 adds to a quotient
        b.put(1, 1); // WUNARY1 of position 0: add 2 and continue
        // Next chunk: no more quotients, only the previous chunk's remainders.
        b.put(1, 0).put(1, 1);
        let (out, n) = decode_all(b.finish()).unwrap();
        // 2 -> 1, 3 -> -1, index 4 -> 2, index 1 -> -0 = 0
        assert_eq!(&out[..n], &[1, -1, 2, 0]);
    }

    #[test]
    fn header_errors() {
        let mut b = Bits::new();
        b.put(3, 4);
        assert!(matches!(
            decode_all(b.finish()),
            Err(WeightError::BadHeader { field: "ZDIV", .. })
        ));
        let mut b = Bits::new();
        b.put(3, ZDIV_DISABLE)
            .put(15, 0)
            .put(3, 6)
            .put(1, 0)
            .put(1, 1);
        assert!(matches!(
            decode_all(b.finish()),
            Err(WeightError::BadHeader { field: "WDIV", .. })
        ));
        let mut b = Bits::new();
        b.put(3, ZDIV_DISABLE)
            .put(15, 0)
            .put(3, 0)
            .put(1, 0)
            .put(1, 0);
        assert!(matches!(
            decode_all(b.finish()),
            Err(WeightError::NoPalette { .. })
        ));
        // Truncated in the middle of a slice.
        let mut b = Bits::new();
        plain_slice(&mut b, &[1, 2, 3], 8);
        assert!(matches!(
            decode_all(&b.bytes[..4]),
            Err(WeightError::Truncated { .. })
        ));
        // Empty and padding-only streams hold no values.
        assert_eq!(decode_all(&[]).unwrap().1, 0);
        assert_eq!(decode_all(&[0xff; 16]).unwrap().1, 0);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut buf = [0u8; 256];
        let mut out = [0i16; 4096];
        for round in 0..20_000 {
            let len = (next() % 256) as usize;
            for b in buf.iter_mut().take(len) {
                *b = next() as u8;
            }
            // Bias some rounds towards valid-looking headers (first slice with a palette).
            if round % 2 == 0 && len > 3 {
                buf[0] = (buf[0] & !7) | (next() % 4) as u8;
                buf[2] |= 0x40;
            }
            let _ = decode_stream(&buf[..len], &mut out);
        }
    }
}
