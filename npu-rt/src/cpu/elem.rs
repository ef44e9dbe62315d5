//! Element types of CPU operands and typed access to little-endian bytes.

/// Element type of an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Elem {
    I8 = 0,
    U8 = 1,
    I16 = 2,
    I32 = 3,
    F32 = 4,
}

impl Elem {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Elem::I8 | Elem::U8 => 1,
            Elem::I16 => 2,
            Elem::I32 | Elem::F32 => 4,
        }
    }

    /// The element type of an encoded code (see [`super::Op::encode`]).
    pub const fn from_code(code: u32) -> Option<Elem> {
        Some(match code {
            0 => Elem::I8,
            1 => Elem::U8,
            2 => Elem::I16,
            3 => Elem::I32,
            4 => Elem::F32,
            _ => return None,
        })
    }

    /// Lowest and highest value of an integer type (`None` for f32).
    pub const fn int_range(self) -> Option<(i32, i32)> {
        match self {
            Elem::I8 => Some((i8::MIN as i32, i8::MAX as i32)),
            Elem::U8 => Some((0, u8::MAX as i32)),
            Elem::I16 => Some((i16::MIN as i32, i16::MAX as i32)),
            Elem::I32 => Some((i32::MIN, i32::MAX)),
            Elem::F32 => None,
        }
    }
}

/// An integer element type stored little-endian in a byte slice.
pub trait Int: Copy {
    const SIZE: usize;
    const MIN: i32;
    const MAX: i32;
    /// Element `i` of `b` (the caller has checked `b.len() >= (i + 1) * SIZE`).
    fn load(b: &[u8], i: usize) -> i32;
    /// Stores `v` (already within `MIN..=MAX`) as element `i` of `b`.
    fn store(b: &mut [u8], i: usize, v: i32);
}

impl Int for i8 {
    const SIZE: usize = 1;
    const MIN: i32 = i8::MIN as i32;
    const MAX: i32 = i8::MAX as i32;
    #[inline(always)]
    fn load(b: &[u8], i: usize) -> i32 {
        i32::from(b[i] as i8)
    }
    #[inline(always)]
    fn store(b: &mut [u8], i: usize, v: i32) {
        b[i] = v as i8 as u8;
    }
}

impl Int for u8 {
    const SIZE: usize = 1;
    const MIN: i32 = 0;
    const MAX: i32 = u8::MAX as i32;
    #[inline(always)]
    fn load(b: &[u8], i: usize) -> i32 {
        i32::from(b[i])
    }
    #[inline(always)]
    fn store(b: &mut [u8], i: usize, v: i32) {
        b[i] = v as u8;
    }
}

impl Int for i16 {
    const SIZE: usize = 2;
    const MIN: i32 = i16::MIN as i32;
    const MAX: i32 = i16::MAX as i32;
    #[inline(always)]
    fn load(b: &[u8], i: usize) -> i32 {
        i32::from(i16::from_le_bytes([b[2 * i], b[2 * i + 1]]))
    }
    #[inline(always)]
    fn store(b: &mut [u8], i: usize, v: i32) {
        b[2 * i..2 * i + 2].copy_from_slice(&(v as i16).to_le_bytes());
    }
}

impl Int for i32 {
    const SIZE: usize = 4;
    const MIN: i32 = i32::MIN;
    const MAX: i32 = i32::MAX;
    #[inline(always)]
    fn load(b: &[u8], i: usize) -> i32 {
        i32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    }
    #[inline(always)]
    fn store(b: &mut [u8], i: usize, v: i32) {
        b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// Element `i` of little-endian f32 bytes (the caller has checked the length).
#[inline(always)]
pub fn load_f32(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

/// Stores f32 `v` as element `i` of `b`.
#[inline(always)]
pub fn store_f32(b: &mut [u8], i: usize, v: f32) {
    b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
}

/// Runs `$body` with `$T` bound to the Rust type of integer [`Elem`] `$e`; `$other` for f32.
macro_rules! with_int {
    ($e:expr, $T:ident => $body:expr, else $other:expr) => {
        match $e {
            $crate::cpu::Elem::I8 => {
                type $T = i8;
                $body
            }
            $crate::cpu::Elem::U8 => {
                type $T = u8;
                $body
            }
            $crate::cpu::Elem::I16 => {
                type $T = i16;
                $body
            }
            $crate::cpu::Elem::I32 => {
                type $T = i32;
                $body
            }
            $crate::cpu::Elem::F32 => $other,
        }
    };
}
pub(crate) use with_int;
