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
/// Candidates (palettes) per zero-run mode encoded exactly at least, after ranking by estimate.
const EXACT_CANDIDATES: usize = 2;
/// Values x candidates planned exactly per zero-run mode (bounds the time of large streams).
const EXACT_BUDGET: usize = 100_000;
/// Most candidates planned exactly per zero-run mode.
const MAX_CANDIDATES: usize = 8;

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
    // (estimated bits, palette size) of every candidate, per zero-run mode.
    let mut modes = Vec::new();
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
        let mut ranked: Vec<(u64, usize)> = Vec::new();
        let max_k = by_freq.len().min(32);
        // k = 1 is padded to a two-entry palette (a single distinct value still gains from one).
        let first_k = if max_k >= 2 { 2 } else { 1 };
        for k in std::iter::once(0).chain(first_k..=max_k) {
            let Some((pal, index, all_in)) = make_palette(&by_freq, k, zero_runs) else {
                continue;
            };
            // Distinct values have distinct indices: the index histogram is `by_freq` mapped.
            let wbits = wcodes(&pal, all_in)
                .iter()
                .map(|c| {
                    by_freq
                        .iter()
                        .map(|&(v, f)| {
                            let x = u32::from(index[usize::from(v)]);
                            u64::from(f) * u64::from(c.cost(x).unwrap_or(INVALID))
                        })
                        .sum::<u64>()
                })
                .min()
                .unwrap_or(u64::MAX);
            let header = u64::from(pal.palbits) * pal.entries.len() as u64;
            ranked.push((wbits + header + zbits, k));
        }
        ranked.sort();
        modes.push((zero_runs, sp, by_freq, ranked));
    }
    // Plan (dynamic programming, no writing) the best candidates of each mode by estimate;
    // small sections can afford more of them.
    let per_mode = (EXACT_BUDGET / values.len().max(1)).clamp(EXACT_CANDIDATES, MAX_CANDIDATES);
    let mut best: Option<(u64, Palette, Vec<u32>, usize, Plan)> = None;
    for (zero_runs, sp, by_freq, ranked) in &modes {
        for &(_, k) in ranked.iter().take(per_mode) {
            let Some((pal, index, all_in)) = make_palette(by_freq, k, *zero_runs) else {
                continue;
            };
            let w: Vec<u32> = sp
                .coded
                .iter()
                .map(|&v| u32::from(index[usize::from(v)]))
                .collect();
            let plan = plan_section(&pal, &w, &sp.runs, all_in);
            let cost = plan.bits + u64::from(pal.palbits) * pal.entries.len() as u64;
            if best.as_ref().is_none_or(|b| cost < b.0) {
                best = Some((cost, pal, w, usize::from(*zero_runs), plan));
            }
        }
    }
    if let Some((_, pal, w, mode, plan)) = best {
        let runs = modes
            .iter()
            .find(|m| usize::from(m.0) == mode)
            .map_or(&[][..], |m| &m.1.runs[..]);
        write_plan(bits, &pal, &w, runs, &plan);
    }
}

/// Slices of a section: `(start, end, weight code, zero-run divisor)` over coded weights.
struct Plan {
    slices: Vec<(usize, usize, WCode, u32)>,
    /// Estimated bits (values, slice headers, end-of-slice waste).
    bits: u64,
}

/// Cost of a state that does not exist: above any real path, far from overflowing.
const UNUSED_STATE: u32 = 1 << 31;

/// Optimal segmentation of `n` items into runs of constant state: `cost(i, out)` fills the
/// cost of item `i` in every state; starting a new segment costs `header` except at the item
/// indices in `free` (sorted). Returns `(segments as (start, end, state), total cost)`.
///
/// The inner loops run over all `N` lanes (states past `states` cost [`UNUSED_STATE`]) with a
/// fixed trip count the compiler unrolls; an unused state is never the cheapest, and ties go
/// to the lowest state, so the result is that of `states` lanes.
fn segment<const N: usize>(
    n: usize,
    states: usize,
    mut cost: impl FnMut(usize, &mut [u32; N]),
    header: u64,
    free: &[usize],
) -> (Vec<(usize, usize, usize)>, u64) {
    let states = states.min(N);
    if n == 0 || states == 0 {
        return (Vec::new(), 0);
    }
    let mut c = [0u32; N];
    let mut fill = |i: usize, c: &mut [u32; N]| {
        cost(i, c);
        for x in &mut c[states..] {
            *x = UNUSED_STATE;
        }
    };
    let mut dp = [0u64; N];
    fill(0, &mut c);
    for (d, &x) in dp.iter_mut().zip(&c) {
        *d = u64::from(x);
    }
    // Per item: which states started a new segment there, and the best state before it.
    let mut switched = vec![0u16; n];
    let mut argmin = vec![0u8; n];
    let mut free_iter = free.iter().peekable();
    for i in 1..n {
        let mut best_s = 0;
        let mut best = dp[0];
        for (s, &d) in dp.iter().enumerate().skip(1) {
            if d < best {
                best = d;
                best_s = s;
            }
        }
        argmin[i] = best_s as u8;
        while free_iter.next_if(|&&f| f < i).is_some() {}
        let free_here = free_iter.next_if(|&&f| f == i).is_some();
        let base = best + if free_here { 0 } else { header };
        fill(i, &mut c);
        let mut mask = 0u16;
        for s in 0..N {
            let stay = dp[s];
            let take = base < stay;
            dp[s] = stay.min(base) + u64::from(c[s]);
            mask |= u16::from(take) << s;
        }
        switched[i] = mask;
    }
    let (mut s, total) = dp
        .iter()
        .take(states)
        .copied()
        .enumerate()
        .min_by_key(|&(_, d)| d)
        .unwrap_or((0, 0));
    let mut segments = Vec::new();
    let mut end = n;
    for i in (1..n).rev() {
        if (switched[i] >> s) & 1 == 1 {
            segments.push((i, end, s));
            end = i;
            s = usize::from(argmin[i]);
        }
    }
    segments.push((0, end, s));
    segments.reverse();
    (segments, total)
}

/// Chooses slices for a section with known palette and indices: the weight codes first, then
/// the zero-run divisors (boundaries the weights already pay for are free for the runs).
fn plan_section(pal: &Palette, w: &[u32], runs: &[u32], all_in: bool) -> Plan {
    let codes = wcodes(pal, all_in);
    let header = u64::from(SLICE_HEADER_BITS + SLICE_END_WASTE);
    // Cost table: index x weight code (one row copied per weight).
    let mut wtab = vec![[INVALID; 16]; 512];
    for (x, row) in wtab.iter_mut().enumerate() {
        for (slot, c) in row.iter_mut().zip(&codes) {
            *slot = c.cost(x as u32).unwrap_or(INVALID);
        }
    }
    let (wsegs, wbits) = segment::<16>(
        w.len(),
        codes.len(),
        |i, out| *out = wtab[(w[i] as usize).min(511)],
        header,
        &[],
    );
    let mut bits = wbits + u64::from(SLICE_HEADER_BITS) + 13;
    let zsegs = if pal.zero_runs {
        let starts: Vec<usize> = wsegs.iter().map(|s| s.0).collect();
        let (zsegs, zbits) = segment::<4>(
            w.len(),
            4,
            |i, out| {
                for (zd, o) in out.iter_mut().enumerate() {
                    *o = zcost(runs[i + 1], zd as u32);
                    if i == 0 {
                        *o += zcost(runs[0], zd as u32);
                    }
                }
            },
            header,
            &starts,
        );
        bits += zbits;
        zsegs
    } else {
        vec![(0, w.len(), 0)]
    };
    // Merge both segmentations into slices.
    let mut slices = Vec::new();
    let (mut wi, mut zi, mut start) = (0, 0, 0);
    while let (Some(ws), Some(zs)) = (wsegs.get(wi), zsegs.get(zi)) {
        let end = ws.1.min(zs.1);
        slices.push((start, end, codes[ws.2], zs.2 as u32));
        start = end;
        if ws.1 == end {
            wi += 1;
        }
        if zs.1 == end {
            zi += 1;
        }
    }
    Plan { slices, bits }
}

/// Writes a planned section.
fn write_plan(bits: &mut BitWriter, pal: &Palette, w: &[u32], runs: &[u32], plan: &Plan) {
    let mut first = true;
    for &(start, end, wcode, zdiv) in &plan.slices {
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
