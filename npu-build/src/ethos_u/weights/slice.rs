//! Writing slices of the compressed weight bitstream (the inverse of
//! [`npu_rt::ethos_u::weights::StreamDecoder`]).

use npu_rt::ethos_u::weights::{WDIV_UNCOMPRESSED, ZDIV_DISABLE, ZDIV_EOS};

/// Unary positions of one weight chunk, and of one zero-run chunk for small and large divisors.
const W_POSITIONS: usize = 12;

/// LSB-first bit writer.
#[derive(Default, Debug)]
pub(crate) struct BitWriter {
    pub bytes: Vec<u8>,
    /// Bits written.
    pub len: usize,
}

impl BitWriter {
    /// Appends the low `n` bits of `v` (`n <= 32`).
    pub fn put(&mut self, n: u32, v: u32) {
        let mut n = n.min(32);
        let mut v = u64::from(v) & ((1u64 << n) - 1);
        let offset = (self.len % 8) as u32;
        if offset != 0 && n > 0 {
            let take = (8 - offset).min(n);
            if let Some(last) = self.bytes.last_mut() {
                *last |= ((v & ((1 << take) - 1)) << offset) as u8;
            }
            v >>= take;
            n -= take;
            self.len += take as usize;
        }
        while n > 0 {
            let take = n.min(8);
            self.bytes.push((v & ((1 << take) - 1)) as u8);
            v >>= take;
            n -= take;
            self.len += take as usize;
        }
    }

    /// Ends the stream: an end-of-stream marker, ones to the byte boundary, then `0xff` bytes up
    /// to a multiple of 16 bytes (the alignment the hardware needs between streams).
    pub fn finish(mut self) -> Vec<u8> {
        self.put(3, ZDIV_EOS);
        while !self.len.is_multiple_of(8) {
            self.put(1, 1);
        }
        while !self.bytes.len().is_multiple_of(16) {
            self.bytes.push(0xff);
        }
        self.bytes
    }
}

/// Golomb-Rice parameters of the weight indices of one slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WCode {
    /// Quotient in unary (each position adds 1 or 2), `div` remainder bits; quotient <= 31.
    Grc { div: u32 },
    /// Quotient 0..=2 in one position, `div` remainder bits.
    Trunc { div: u32 },
    /// Fixed `bits`-wide indices (the width is implied by the palette, see [`Palette`]).
    Uncompressed { bits: u32 },
}

impl WCode {
    /// Bits to code index `x`, or `None` if it cannot be coded.
    #[inline]
    pub fn cost(self, x: u32) -> Option<u32> {
        match self {
            WCode::Grc { div } => {
                let q = x >> div;
                (q <= 31).then_some(q + 1 + div)
            }
            WCode::Trunc { div } => {
                let q = x >> div;
                match q {
                    0 => Some(1 + div),
                    1 | 2 => Some(2 + div),
                    _ => None,
                }
            }
            WCode::Uncompressed { bits } => (x < (1 << bits)).then_some(bits),
        }
    }
}

/// Palette and direct-value mapping of a section (what a NEWPAL header defines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Palette {
    /// Sign-magnitude values (`2|w| + (w < 0)`) of the palette entries; empty or 2..=32 entries.
    pub entries: Vec<u16>,
    /// Added to a direct index (past the palette) to get the sign-magnitude value.
    pub direct_offset: u32,
    /// PALBITS: width of palette entries, or of fixed-width indices without a palette (2..=9).
    pub palbits: u32,
    /// Zeros are coded as run lengths instead of weights.
    pub zero_runs: bool,
}

impl Palette {
    /// Width of fixed-width indices in uncompressed slices.
    pub fn uncompressed_bits(&self) -> u32 {
        let n = self.entries.len() as u32;
        if n > 0 {
            32 - (n - 1).leading_zeros()
        } else {
            self.palbits
        }
    }
}

/// One slice: a run of coded weights with fixed Golomb-Rice parameters.
#[derive(Clone, Debug)]
pub(crate) struct SliceSpec<'a> {
    /// Weight indices (at most 32768).
    pub w: &'a [u32],
    /// Zero runs: one after each weight, plus one leading run when `new_palette` (so
    /// `w.len() + 1` of them); empty without zero runs.
    pub z: &'a [u32],
    pub wcode: WCode,
    /// ZDIV (0..=3); ignored without zero runs.
    pub zdiv: u32,
    /// The slice starts a section: write the palette header.
    pub new_palette: bool,
}

/// Encoder state of one sub-stream (weights or zero runs) within a slice.
struct Sub {
    /// Values whose unary part has been completely written.
    pos: usize,
    /// Unary positions still to write for the current value (quotient left), if started.
    q_left: Option<u32>,
}

/// Writes one slice (header, palette if new, chunks) into `bits`.
///
/// The chunk schedule mirrors the decoder's flow control exactly: per iteration the weight
/// sub-stream is enabled while it is less than 8 values ahead of the zero runs, the zero runs
/// while they are not ahead; remainders follow one chunk after their quotients.
pub(crate) fn write_slice(bits: &mut BitWriter, pal: &Palette, s: &SliceSpec<'_>) {
    let nvalues = s.w.len();
    debug_assert!((1..=32768).contains(&nvalues));
    let zero_runs = pal.zero_runs;
    let (wdiv_field, w_div, trunc, uncompressed) = match s.wcode {
        WCode::Grc { div } => (div, div, false, false),
        WCode::Trunc { div } => (div, div, true, false),
        WCode::Uncompressed { bits } => (WDIV_UNCOMPRESSED, bits, false, true),
    };
    let zdiv = if zero_runs { s.zdiv } else { ZDIV_DISABLE };
    bits.put(3, zdiv);
    bits.put(15, (nvalues - 1) as u32);
    bits.put(3, wdiv_field);
    bits.put(1, u32::from(trunc));
    bits.put(1, u32::from(s.new_palette));
    if s.new_palette {
        let n = pal.entries.len() as u32;
        bits.put(5, pal.direct_offset);
        bits.put(5, n.saturating_sub(1));
        bits.put(3, pal.palbits - 2);
        for &e in &pal.entries {
            bits.put(pal.palbits, u32::from(e));
        }
    }
    let z_n = if zero_runs { s.z.len() } else { 0 };
    let w_positions = if uncompressed && w_div > 5 {
        8
    } else {
        W_POSITIONS
    };
    let z_div = if zero_runs { s.zdiv } else { 0 };
    let z_positions = if z_div < 3 { 12 } else { 8 };

    let mut w = Sub {
        pos: 0,
        q_left: None,
    };
    let mut z = Sub {
        pos: 0,
        q_left: None,
    };
    // Values completed in the previous chunk, whose remainders are due now.
    let mut w_prev: (usize, usize) = (0, 0);
    let mut z_prev: (usize, usize) = (0, 0);
    loop {
        let balance = if zero_runs {
            w.pos as isize - z.pos as isize
        } else {
            0
        };
        let w_enable = (balance < 8 || !zero_runs) && w.pos < nvalues;
        let z_enable = balance >= 0 && zero_runs && z.pos < z_n;
        let w_start = w.pos;
        let z_start = z.pos;

        let mut unary0 = 0u32;
        let mut unary1 = 0u32;
        let mut unary1_len = 0u32;
        if w_enable {
            let mut j = 0;
            while j < w_positions {
                let Some(&x) = s.w.get(w.pos) else {
                    // Past the last value: the positions stay 0 (decoded as padding symbols).
                    break;
                };
                if uncompressed {
                    w.pos += 1;
                    j += 1;
                    continue;
                }
                let mut q = w.q_left.unwrap_or(x >> w_div);
                while j < w_positions {
                    if q > 0 {
                        unary0 |= 1 << j;
                        if q > 1 {
                            unary1 |= 1 << unary1_len;
                        }
                        unary1_len += 1;
                    }
                    j += 1;
                    let step = if trunc { 3 } else { 2 };
                    if q < step {
                        q = u32::MAX; // done
                        break;
                    }
                    q -= step;
                }
                if q == u32::MAX {
                    w.q_left = None;
                    w.pos += 1;
                } else {
                    w.q_left = Some(q);
                }
            }
        }
        let mut zunary = 0u32;
        if z_enable {
            let mut j = 0;
            while j < z_positions {
                let Some(&r) = s.z.get(z.pos) else {
                    break;
                };
                let mut q = z.q_left.unwrap_or(r >> z_div);
                while j < z_positions && q > 0 {
                    zunary |= 1 << j;
                    j += 1;
                    q -= 1;
                }
                if j < z_positions {
                    // The terminating zero.
                    j += 1;
                    z.q_left = None;
                    z.pos += 1;
                } else {
                    z.q_left = Some(q);
                }
            }
        }
        if w_enable && !uncompressed {
            bits.put(12, unary0);
        }
        if z_enable {
            bits.put(z_positions as u32, zunary);
        }
        if w_enable && !uncompressed {
            bits.put(unary1_len, unary1);
        }
        for &x in &s.w[w_prev.0..w_prev.1] {
            bits.put(w_div, x & ((1 << w_div) - 1));
        }
        for &r in &s.z[z_prev.0..z_prev.1] {
            bits.put(z_div, r & ((1 << z_div) - 1));
        }
        if !(w_enable || z_enable) {
            break;
        }
        w_prev = (w_start, w.pos);
        z_prev = (z_start, z.pos);
    }
}
