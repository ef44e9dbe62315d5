//! Round-trip properties: random weights and geometries, encode -> decode == input.

use super::*;
use npu_rt::ethos_u::config::ALL;
use npu_rt::ethos_u::weights::{decode_scales, decode_stream, decode_weights};

/// xorshift64*: deterministic pseudo-random numbers for property tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Weight distributions that exercise different encoder paths.
#[derive(Clone, Copy, Debug)]
enum Dist {
    /// Uniform int8 (incompressible, like the fixtures' random models).
    UniformI8,
    /// Mostly small magnitudes (Golomb-Rice territory).
    Peaked,
    /// 90 % zeros (zero-run mode).
    Sparse,
    /// A handful of distinct values (palette, fixed-width indices).
    FewValues,
    /// The full 9-bit range.
    Wide,
    AllZero,
    Constant,
}

fn sample(rng: &mut Rng, dist: Dist, n: usize) -> Vec<i16> {
    let few: Vec<i16> = (0..5).map(|_| rng.range(-100, 100) as i16).collect();
    let c = rng.range(-255, 255) as i16;
    (0..n)
        .map(|_| match dist {
            Dist::UniformI8 => rng.range(-127, 127) as i16,
            Dist::Peaked => {
                let m = rng.below(64).min(rng.below(64)).min(rng.below(64)) as i16;
                if rng.below(2) == 0 { m } else { -m }
            }
            Dist::Sparse => {
                if rng.below(10) == 0 {
                    rng.range(-128, 127) as i16
                } else {
                    0
                }
            }
            Dist::FewValues => few[rng.below(5) as usize],
            Dist::Wide => rng.range(-255, 255) as i16,
            Dist::AllZero => 0,
            Dist::Constant => c,
        })
        .collect()
}

const DISTS: [Dist; 7] = [
    Dist::UniformI8,
    Dist::Peaked,
    Dist::Sparse,
    Dist::FewValues,
    Dist::Wide,
    Dist::AllZero,
    Dist::Constant,
];

fn round_trip(values: &[i16]) -> Vec<u8> {
    let stream = encode_stream(values).unwrap();
    assert!(stream.len().is_multiple_of(16));
    let mut out = vec![0i16; values.len() + 1];
    let n = decode_stream(&stream, &mut out).unwrap();
    assert_eq!(&out[..n], values);
    stream
}

#[test]
fn streams_round_trip() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..600 {
        let dist = DISTS[round % DISTS.len()];
        let n = match round % 5 {
            0 => 1 + rng.below(16) as usize,
            1 => 1 + rng.below(300) as usize,
            _ => 1 + rng.below(5000) as usize,
        };
        let values = sample(&mut rng, dist, n);
        round_trip(&values);
    }
}

#[test]
fn long_streams_split_slices() {
    // More than 32768 coded weights per section forces several slices.
    let mut rng = Rng(7);
    for dist in [Dist::UniformI8, Dist::Sparse, Dist::Peaked] {
        let values = sample(&mut rng, dist, 80_000);
        round_trip(&values);
    }
    // Mixed statistics in one stream: dense, then sparse, then peaked.
    let mut values = sample(&mut rng, Dist::UniformI8, 3000);
    values.extend(sample(&mut rng, Dist::Sparse, 5000));
    values.extend(sample(&mut rng, Dist::Peaked, 4000));
    round_trip(&values);
}

#[test]
fn compression_is_effective() {
    let mut rng = Rng(99);
    // Uniform int8 needs 8 bits per weight at most (plus headers and padding).
    let values = sample(&mut rng, Dist::UniformI8, 4096);
    assert!(round_trip(&values).len() <= 4096 + 64);
    // Sparse data compresses well below one byte per weight.
    let values = sample(&mut rng, Dist::Sparse, 4096);
    assert!(round_trip(&values).len() < 4096 / 2);
    // All zeros: a few bytes.
    assert!(round_trip(&[0; 4096]).len() <= 32 + 4096 / 8);
    // Five distinct values fit 3-bit indices.
    let values = sample(&mut rng, Dist::FewValues, 4096);
    assert!(round_trip(&values).len() <= 4096 * 3 / 8 + 64);
}

#[test]
fn out_of_range_weights_are_errors() {
    assert_eq!(
        encode_stream(&[0, 256]),
        Err(EncodeError::WeightRange {
            index: 1,
            value: 256
        })
    );
    assert!(encode_stream(&[-256]).is_err());
    assert_eq!(encode_stream(&[]), Ok(Vec::new()));
}

fn random_layout(rng: &mut Rng) -> (WeightLayout, u32) {
    let config = rng.pick(&ALL);
    let traversal = rng.pick(&[
        Traversal::DepthFirst,
        Traversal::PartKernelFirst,
        Traversal::Depthwise,
    ]);
    let ofm_depth = 1 + rng.below(70) as u32;
    // Block depths the hardware uses: multiples of the ublock depth times the cores.
    let granule = config.ofm_ublock.depth * config.cores;
    let ofm_block_depth = granule * (1 + rng.below(8) as u32);
    let layout = WeightLayout {
        config,
        traversal,
        ofm_block_depth,
        ifm_depth: 1 + rng.below(70) as u32,
        kernel_height: 1 + rng.below(10) as u32,
        kernel_width: 1 + rng.below(10) as u32,
        dilation_x: 1 + rng.below(2) as u32,
        dilation_y: 1 + rng.below(2) as u32,
        ifm_bits: rng.pick(&[8, 16]),
    };
    (layout, ofm_depth)
}

#[test]
fn weights_round_trip_through_geometry() {
    let mut rng = Rng(0xfeed_beef);
    for _ in 0..300 {
        let (layout, ofm_depth) = random_layout(&mut rng);
        let dist = rng.pick(&DISTS);
        let geom = layout.geometry(ofm_depth, 0);
        let ohwi = sample(&mut rng, dist, geom.ohwi_len().unwrap());
        let mut decoded = vec![i16::MIN; ohwi.len()];
        for core in 0..layout.config.cores {
            let g = layout.geometry(ofm_depth, core);
            let stream = encode_weights(&ohwi, &g).unwrap();
            decode_weights(&stream, &g, &mut decoded).unwrap();
        }
        assert_eq!(decoded, ohwi, "{layout:?} depth {ofm_depth}");
    }
}

#[test]
fn ops_round_trip_with_stripes_and_cores() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let (layout, ofm_depth) = random_layout(&mut rng);
        let per = layout.per_channel();
        let dist = rng.pick(&DISTS);
        let ohwi = sample(&mut rng, dist, ofm_depth as usize * per);
        let scales: Vec<ScaleEntry> = (0..ofm_depth)
            .map(|_| ScaleEntry {
                bias: rng.range(ScaleEntry::BIAS_MIN, ScaleEntry::BIAS_MAX),
                multiplier: rng.next() as u32,
                shift: rng.below(64) as u8,
            })
            .collect();
        let mut offsets = vec![0u32];
        while let Some(&last) = offsets.last()
            && last < ofm_depth
        {
            offsets.push((last + 1 + rng.below(24) as u32).min(ofm_depth));
        }
        let enc = encode_op(&ohwi, &scales, &layout, &offsets).unwrap();
        assert_eq!(enc.stripes.len(), offsets.len() - 1);
        let mut decoded_w = vec![i16::MIN; ohwi.len()];
        let mut decoded_s = vec![ScaleEntry::default(); scales.len()];
        for stripe in &enc.stripes {
            let (a, b) = (
                stripe.depth_offset as usize,
                (stripe.depth_offset + stripe.depth) as usize,
            );
            for cs in &stripe.cores {
                assert!(cs.scale_offset.is_multiple_of(16) && cs.weight_offset.is_multiple_of(16));
                assert!(cs.scale_len.is_multiple_of(16) && cs.weight_len.is_multiple_of(16));
                let g = layout.geometry(stripe.depth, cs.core);
                let w = &enc.data[cs.weight_offset..cs.weight_offset + cs.weight_len];
                decode_weights(w, &g, &mut decoded_w[a * per..b * per]).unwrap();
                let s = &enc.data[cs.scale_offset..cs.scale_offset + cs.scale_len];
                decode_scales(s, g.split(), &mut decoded_s[a..b]).unwrap();
            }
        }
        assert_eq!(decoded_w, ohwi);
        assert_eq!(decoded_s, scales);
    }
}

#[test]
fn op_argument_errors() {
    let layout = WeightLayout {
        config: &npu_rt::ethos_u::config::ETHOS_U55_128,
        traversal: Traversal::DepthFirst,
        ofm_block_depth: 16,
        ifm_depth: 4,
        kernel_height: 1,
        kernel_width: 1,
        dilation_x: 1,
        dilation_y: 1,
        ifm_bits: 8,
    };
    let scales = [ScaleEntry::default(); 8];
    assert!(matches!(
        encode_op(&[0; 31], &scales, &layout, &[0, 8]),
        Err(EncodeError::WeightCount { .. })
    ));
    for offsets in [&[0u32][..], &[0, 9], &[4, 4, 8]] {
        assert!(matches!(
            encode_op(&[0; 32], &scales, &layout, offsets),
            Err(EncodeError::Stripes { .. })
        ));
    }
    let bad = [ScaleEntry {
        bias: 1 << 40,
        ..Default::default()
    }; 8];
    assert!(matches!(
        encode_op(&[0; 32], &bad, &layout, &[0, 8]),
        Err(EncodeError::ScaleRange { channel: 0, .. })
    ));
}
