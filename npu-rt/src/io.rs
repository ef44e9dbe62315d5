//! Copying typed tensor data into and out of the arena (little-endian bytes), for generated code.

/// An element type a model's inputs and outputs can have.
pub trait Element: Copy + Default {
    /// Bytes per element.
    const SIZE: usize;
    /// Writes `self` little-endian into `out[..SIZE]`.
    fn write_le(self, out: &mut [u8]);
    /// Reads an element from `bytes[..SIZE]` (little-endian).
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn write_le(self, out: &mut [u8]) {
                out[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; core::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..Self::SIZE]);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}
element!(i8, u8, i16, i32, f32);

/// Copies `src` into `dst` as little-endian bytes; `dst` must hold exactly `src.len()` elements.
///
/// ```
/// let mut arena = [0u8; 4];
/// npu_rt::io::write(&mut arena, &[-1i8, 2, 3, 4]);
/// assert_eq!(arena, [255, 2, 3, 4]);
/// ```
pub fn write<T: Element>(dst: &mut [u8], src: &[T]) {
    for (d, s) in dst.chunks_exact_mut(T::SIZE).zip(src) {
        s.write_le(d);
    }
}

/// Copies little-endian elements from `src` into `dst`.
///
/// ```
/// let mut out = [0i16; 2];
/// npu_rt::io::read(&mut out, &[1, 0, 0xff, 0xff]);
/// assert_eq!(out, [1, -1]);
/// ```
pub fn read<T: Element>(dst: &mut [T], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(T::SIZE)) {
        *d = T::read_le(s);
    }
}

/// Quantizes real values into `dst`: `q = round(x / scale) + zero_point`, saturated to `T`'s
/// range (round half away from zero, as TFLite's reference quantizer).
pub fn quantize<T: Quantized>(dst: &mut [T], src: &[f32], scale: f32, zero_point: i32) {
    for (d, &x) in dst.iter_mut().zip(src) {
        let q = libm_round(x / scale) as i64 + zero_point as i64;
        *d = T::saturate(q);
    }
}

/// Dequantizes: `x = scale * (q - zero_point)`.
pub fn dequantize<T: Quantized>(dst: &mut [f32], src: &[T], scale: f32, zero_point: i32) {
    for (d, &q) in dst.iter_mut().zip(src) {
        *d = scale * (q.widen() - zero_point as i64) as f32;
    }
}

/// Integer element types with quantization.
pub trait Quantized: Element {
    fn saturate(v: i64) -> Self;
    fn widen(self) -> i64;
}

macro_rules! quantized {
    ($($t:ty),*) => {$(
        impl Quantized for $t {
            fn saturate(v: i64) -> Self {
                v.clamp(<$t>::MIN as i64, <$t>::MAX as i64) as $t
            }
            fn widen(self) -> i64 {
                self as i64
            }
        }
    )*};
}
quantized!(i8, u8, i16, i32);

/// `f32::round` without std (half away from zero).
fn libm_round(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let t = x as i64 as f32; // truncation toward zero (saturating for huge values)
    let frac = x - t;
    if frac >= 0.5 {
        t + 1.0
    } else if frac <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_rounds_half_away_and_saturates() {
        let mut q = [0i8; 5];
        quantize(&mut q, &[0.25, -0.25, 100.0, -100.0, 0.74], 0.5, 1);
        assert_eq!(q, [2, 0, 127, -128, 2]);
        let mut x = [0f32; 2];
        dequantize(&mut x, &[3i8, -1], 0.5, 1);
        assert_eq!(x, [1.0, -1.0]);
    }
}
