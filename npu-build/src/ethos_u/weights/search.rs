//! Choosing how to compress a weight stream: zero-run mode, palette, direct offset, and the
//! Golomb-Rice parameters of each slice.
//!
//! Our own design: every choice is scored by its bit cost. Palettes (the k most frequent values,
//! k = 0 or 2..=32) and both zero-run modes are ranked with a histogram estimate; the best
//! candidates are then encoded for real, with slice boundaries and per-slice parameters chosen by
//! dynamic programming over (weight code, zero-run divisor) states, and the shortest bitstream
//! wins.

use super::slice::{BitWriter, Palette, SliceSpec, WCode, write_slice};

/// Bits of a slice header without palette (ZDIV, SLICELEN, WDIV, WTRUNC, NEWPAL).
const SLICE_HEADER_BITS: u32 = 23;
/// Extra bits a slice boundary costs on average: the unused unary positions of the last
/// weight and zero-run chunks.
const SLICE_END_WASTE: u32 = 12;
/// Most weights one slice can hold (15-bit SLICELEN).
const MAX_SLICE: usize = 1 << 15;
/// Cost standing for "cannot be coded".
const INVALID: u32 = 1 << 24;
/// Candidates (zero-run mode, palette) encoded exactly after ranking by estimate.
const EXACT_CANDIDATES: usize = 3;

/// Sign-magnitude value of a weight as the format stores it.
fn palval(w: i16) -> u16 {
    (w.unsigned_abs() << 1) | u16::from(w < 0)
}

/// Weight codes available to a slice of a section with palette `pal` whose indices all fit
/// `max_index`.
fn wcodes(pal: &Palette, all_in_palette: bool) -> Vec<WCode> {
    let mut v = Vec::with_capacity(13);
    for div in 0..=5 {
        v.push(WCode::Grc { div });
        v.push(WCode::Trunc { div });
    }
    if pal.entries.is_empty() || all_in_palette {
        v.push(WCode::Uncompressed {
            bits: pal.uncompressed_bits(),
        });
    }
    v
}

fn zcost(r: u32, zdiv: u32) -> u32 {
    (r >> zdiv).saturating_add(1 + zdiv)
}

/// A section's values split into coded weights and zero runs.
struct Split {
    /// Sign-magnitude values of the coded weights, in order.
    coded: Vec<u16>,
    /// Zero runs: leading run, then one after each coded weight (empty without zero runs).
    runs: Vec<u32>,
}

fn split(values: &[i16], zero_runs: bool) -> Split {
    if !zero_runs {
        return Split {
            coded: values.iter().map(|&w| palval(w)).collect(),
            runs: Vec::new(),
        };
    }
    let mut coded = Vec::new();
    let mut runs = vec![0u32];
    for (i, &w) in values.iter().enumerate() {
        // A slice needs at least one coded weight: an all-zero section codes its first zero.
        if w != 0 || (i == 0 && values.iter().all(|&v| v == 0)) {
            coded.push(palval(w));
            runs.push(0);
        } else if let Some(r) = runs.last_mut() {
            *r += 1;
        }
    }
    Split { coded, runs }
}

fn bits_for(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// The palette of the `k` most frequent values (`by_freq` sorted by descending frequency), and
/// the index of every sign-magnitude value; `None` if some index would exceed 511.
fn make_palette(
    by_freq: &[(u16, u32)],
    k: usize,
    zero_runs: bool,
) -> Option<(Palette, [u16; 512], bool)> {
    let mut entries: Vec<u16> = by_freq.iter().take(k).map(|&(v, _)| v).collect();
    if entries.len() == 1 {
        // A one-entry palette cannot be expressed; add an entry that is never used.
        let unused = (0..512u16).find(|v| *v != entries[0]).unwrap_or(0);
        entries.push(unused);
    }
    let rest = &by_freq[k.min(by_freq.len())..];
    let direct_offset = rest
        .iter()
        .map(|&(v, _)| u32::from(v))
        .min()
        .unwrap_or(0)
        .min(31);
    let n = entries.len() as u32;
    let mut index = [u16::MAX; 512];
    for (i, &e) in entries.iter().enumerate() {
        index[usize::from(e)] = i as u16;
    }
    let mut max_index = n.saturating_sub(1);
    for &(v, _) in rest {
        let x = n + u32::from(v) - direct_offset;
        if x > 511 {
            return None;
        }
        index[usize::from(v)] = x as u16;
        max_index = max_index.max(x);
    }
    let palbits = if n > 0 {
        bits_for(entries.iter().copied().max().map_or(0, u32::from))
    } else {
        bits_for(max_index)
    }
    .max(2);
    Some((
        Palette {
            entries,
            direct_offset,
            palbits,
            zero_runs,
        },
        index,
        rest.is_empty(),
    ))
}

/// Encodes one section (one palette) of stream values into `bits`.
fn encode_section(values: &[i16], bits: &mut BitWriter) {
    let has_zero = values.contains(&0);
    // (estimated bits, zero runs, palette size) of every candidate.
    let mut ranked: Vec<(u64, bool, usize)> = Vec::new();
    let mut splits = Vec::new();
    for zero_runs in [false, true] {
        if zero_runs && !has_zero {
            continue;
        }
        let sp = split(values, zero_runs);
        let mut freq = [0u32; 512];
        for &v in &sp.coded {
            freq[usize::from(v)] += 1;
        }
        let mut by_freq: Vec<(u16, u32)> = (0..512u16)
            .filter(|&v| freq[usize::from(v)] > 0)
            .map(|v| (v, freq[usize::from(v)]))
            .collect();
        by_freq.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        // Zero-run cost with the best single divisor (the same for every palette).
        let zbits = if zero_runs {
            (0..4)
                .map(|zd| {
                    sp.runs
                        .iter()
                        .map(|&r| u64::from(zcost(r, zd)))
                        .sum::<u64>()
                })
                .min()
                .unwrap_or(0)
        } else {
            0
        };
        // Rank palettes by an estimate: best single weight code over the index histogram.
        let max_k = by_freq.len().min(32);
        // k = 1 is padded to a two-entry palette (a single distinct value still gains from one).
        let first_k = if max_k >= 2 { 2 } else { 1 };
        for k in std::iter::once(0).chain(first_k..=max_k) {
            let Some((pal, index, all_in)) = make_palette(&by_freq, k, zero_runs) else {
                continue;
            };
            let mut hist = [0u32; 512];
            for &(v, f) in &by_freq {
                hist[usize::from(index[usize::from(v)])] += f;
            }
            let wbits = wcodes(&pal, all_in)
                .iter()
                .map(|c| {
                    hist.iter()
                        .enumerate()
                        .filter(|(_, h)| **h > 0)
                        .map(|(x, &h)| {
                            u64::from(h) * u64::from(c.cost(x as u32).unwrap_or(INVALID))
                        })
                        .sum::<u64>()
                })
                .min()
                .unwrap_or(u64::MAX);
            let header = u64::from(pal.palbits) * pal.entries.len() as u64;
            ranked.push((wbits + header + zbits, zero_runs, k));
        }
        splits.push((zero_runs, sp, by_freq));
    }
    ranked.sort();
    let best_estimate = ranked.first().map_or(0, |r| r.0);
    let mut best: Option<BitWriter> = None;
    for &(estimate, zero_runs, k) in ranked.iter().take(EXACT_CANDIDATES) {
        // Candidates estimated clearly worse than the best are not worth encoding.
        if estimate > best_estimate + best_estimate / 50 + 64 {
            break;
        }
        let Some((_, sp, by_freq)) = splits.iter().find(|s| s.0 == zero_runs) else {
            continue;
        };
        {
            let Some((pal, index, all_in)) = make_palette(by_freq, k, zero_runs) else {
                continue;
            };
            let w: Vec<u32> = sp
                .coded
                .iter()
                .map(|&v| u32::from(index[usize::from(v)]))
                .collect();
            let mut trial = BitWriter::default();
            write_section(&mut trial, &pal, &w, &sp.runs, all_in);
            if best.as_ref().is_none_or(|b| trial.len < b.len) {
                best = Some(trial);
            }
        }
    }
    if let Some(trial) = best {
        bits.append(&trial);
    }
}

/// Writes a section with known palette and indices: slices chosen by dynamic programming.
fn write_section(bits: &mut BitWriter, pal: &Palette, w: &[u32], runs: &[u32], all_in: bool) {
    let codes = wcodes(pal, all_in);
    let zdivs: &[u32] = if pal.zero_runs { &[0, 1, 2, 3] } else { &[0] };
    let nz = zdivs.len();
    let states: Vec<(WCode, u32)> = codes
        .iter()
        .flat_map(|&c| zdivs.iter().map(move |&z| (c, z)))
        .collect();
    let ns = states.len();
    let n = w.len();
    // Cost tables: weight code x index, so the inner loop is two lookups and an add.
    let wtab: Vec<[u32; 512]> = codes
        .iter()
        .map(|c| {
            let mut t = [INVALID; 512];
            for (x, slot) in t.iter_mut().enumerate() {
                *slot = c.cost(x as u32).unwrap_or(INVALID);
            }
            t
        })
        .collect();
    let mut zc = [0u32; 4];
    let mut item = vec![0u64; ns];
    let mut item_costs = |i: usize, item: &mut [u64]| {
        if pal.zero_runs {
            for (z, slot) in zc.iter_mut().enumerate().take(nz) {
                *slot = zcost(runs[i + 1], z as u32);
                if i == 0 {
                    *slot += zcost(runs[0], z as u32);
                }
            }
        }
        let x = (w[i] as usize).min(511);
        for (ci, t) in wtab.iter().enumerate() {
            let wcost = u64::from(t[x]);
            for z in 0..nz {
                item[ci * nz + z] = wcost + u64::from(zc[z]);
            }
        }
    };
    // dp over items; `switched[i]` bit s: state s at item i starts a new slice.
    let header = u64::from(SLICE_HEADER_BITS + SLICE_END_WASTE);
    item_costs(0, &mut item);
    let mut dp = item.clone();
    let mut switched = vec![0u64; n];
    let mut argmin = vec![0u8; n];
    for i in 1..n {
        let mut best_s = 0;
        let mut best = u64::MAX;
        for (s, &d) in dp.iter().enumerate() {
            if d < best {
                best = d;
                best_s = s;
            }
        }
        argmin[i - 1] = best_s as u8;
        item_costs(i, &mut item);
        let switch_base = best + header;
        let mut mask = 0u64;
        for (s, (d, &c)) in dp.iter_mut().zip(item.iter()).enumerate() {
            if switch_base < *d {
                *d = switch_base + c;
                mask |= 1 << s;
            } else {
                *d += c;
            }
        }
        switched[i] = mask;
    }
    // Backtrack: slices as (start, end, state).
    let mut s = dp
        .iter()
        .copied()
        .enumerate()
        .min_by_key(|&(_, c)| c)
        .map_or(0, |(s, _)| s);
    let mut slices = Vec::new();
    let mut end = n;
    for i in (1..n).rev() {
        if switched[i] >> s & 1 == 1 {
            slices.push((i, end, s));
            end = i;
            s = usize::from(argmin[i - 1]);
        }
    }
    slices.push((0, end, s));
    slices.reverse();
    let mut first = true;
    for (start, end, s) in slices {
        let (wcode, zdiv) = states[s];
        let mut a = start;
        while a < end {
            let b = end.min(a + MAX_SLICE);
            let z: &[u32] = if !pal.zero_runs {
                &[]
            } else if first {
                &runs[..=b]
            } else {
                &runs[a + 1..=b]
            };
            write_slice(
                bits,
                pal,
                &SliceSpec {
                    w: &w[a..b],
                    z,
                    wcode,
                    zdiv,
                    new_palette: first,
                },
            );
            first = false;
            a = b;
        }
    }
}

/// Compresses weight values (in stream order, each in `-255..=255`) into a complete stream:
/// slices, end-of-stream marker, padding to 16 bytes. An empty input gives an empty stream.
pub(crate) fn encode_values(values: &[i16]) -> Vec<u8> {
    if values.is_empty() {
        return Vec::new();
    }
    let mut bits = BitWriter::default();
    encode_section(values, &mut bits);
    bits.finish()
}
