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

/// Weights in OHWI order and one scale entry per output channel.
#[derive(Clone, Debug, Default)]
pub(crate) struct DecodedWeights {
    pub ohwi: Vec<i16>,
    pub scales: Vec<ScaleEntry>,
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

fn fnv(streams: &[(&[u8], &[u8])]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (a, b) in streams {
        for &x in a.iter().chain(b.iter()) {
            h = (h ^ x as u64).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
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
        let key = (*geom, fnv(streams));
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
