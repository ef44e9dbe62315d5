//! The data of a `.npy` file (no allocation: the header is skipped, not parsed).

/// The data after the header of a version 1.x `.npy` file (magic, version, 16-bit header
/// length, header), or `None` if `npy` is not one.
pub fn data(npy: &[u8]) -> Option<&[u8]> {
    let magic = npy.get(..6)?;
    if magic != b"\x93NUMPY" || npy.get(6) != Some(&1) {
        return None;
    }
    let len = u16::from_le_bytes([*npy.get(8)?, *npy.get(9)?]) as usize;
    npy.get(10 + len..)
}

/// 32-bit FNV-1a: a checksum to compare runs by eye.
pub fn fnv1a(bytes: impl Iterator<Item = u8>) -> u32 {
    bytes.fold(0x811c_9dc5, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}
