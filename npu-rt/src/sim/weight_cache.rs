//! Cache of decoded weight and scale streams.
//!
//! Decoding a compressed weight stream costs far more than the convolution that uses it on
//! small layers, and the same streams run on every inference. Entries are keyed by the decode
//! geometry and the exact stream bytes (a copy is kept and compared on every hit), so a changed
//! stream is always decoded again.

use std::collections::HashMap;
use std::vec::Vec;

use crate::ethos_u::weights::{ScaleEntry, WeightGeometry};

use super::error::SimErrorKind;

/// Weights in OHWI order and one scale entry per output channel, plus the weights in the
/// layout the convolution kernels read.
#[derive(Clone, Debug, Default)]
pub(crate) struct DecodedWeights {
    pub ohwi: Vec<i16>,
    pub scales: Vec<ScaleEntry>,
    pub packed: Vec<f32>,
}

struct Entry {
    streams: Vec<(Vec<u8>, Vec<u8>)>,
    decoded: DecodedWeights,
}

/// The cache; bounded by [`WeightCache::capacity_bytes`] of decoded data.
pub(crate) struct WeightCache {
    map: HashMap<(WeightGeometry, u64), Vec<Entry>>,
    bytes: usize,
    /// Decoded bytes kept before the cache is cleared.
    pub capacity_bytes: usize,
    /// Whether to cache at all.
    pub enabled: bool,
}

impl Default for WeightCache {
    fn default() -> Self {
        WeightCache {
            map: HashMap::new(),
            bytes: 0,
            capacity_bytes: 256 << 20,
            enabled: true,
        }
    }
}

/// A fast 64-bit hash of the streams (8 bytes per step); hits are confirmed by comparing bytes.
fn hash(streams: &[(&[u8], &[u8])]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    let mut mix = |v: u64| {
        h = (h ^ v).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 32;
    };
    for (a, b) in streams {
        for part in [a, b] {
            mix(part.len() as u64);
            let mut chunks = part.chunks_exact(8);
            for c in &mut chunks {
                mix(u64::from_le_bytes([
                    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                ]));
            }
            for &x in chunks.remainder() {
                mix(x as u64);
            }
        }
    }
    h
}

impl WeightCache {
    /// Returns the decoded weights for these streams, decoding with `decode` on a miss.
    pub fn get_or_decode(
        &mut self,
        geom: &WeightGeometry,
        streams: &[(&[u8], &[u8])],
        decode: impl FnOnce(&WeightGeometry, &[(&[u8], &[u8])]) -> Result<DecodedWeights, SimErrorKind>,
    ) -> Result<&DecodedWeights, SimErrorKind> {
        let key = (*geom, hash(streams));
        let same = |e: &Entry| {
            e.streams.len() == streams.len()
                && e.streams
                    .iter()
                    .zip(streams)
                    .all(|((a, b), (x, y))| a == x && b == y)
        };
        let hit = self.map.get(&key).and_then(|v| v.iter().position(same));
        if let Some(i) = hit {
            return self
                .map
                .get(&key)
                .and_then(|v| v.get(i))
                .map(|e| &e.decoded)
                .ok_or(SimErrorKind::Unsupported {
                    what: "weight cache inconsistency",
                });
        }
        let decoded = decode(geom, streams)?;
        let size = decoded.ohwi.len() * 2
            + decoded.scales.len() * 16
            + streams
                .iter()
                .map(|(a, b)| a.len() + b.len())
                .sum::<usize>();
        if !self.enabled || self.bytes + size > self.capacity_bytes {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += size;
        let entry = Entry {
            streams: streams
                .iter()
                .map(|(a, b)| (a.to_vec(), b.to_vec()))
                .collect(),
            decoded,
        };
        let list = self.map.entry(key).or_default();
        list.push(entry);
        list.last()
            .map(|e| &e.decoded)
            .ok_or(SimErrorKind::Unsupported {
                what: "weight cache inconsistency",
            })
    }
}
