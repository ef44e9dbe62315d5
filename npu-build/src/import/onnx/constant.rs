//! Constant tensors: decoding `TensorProto`s (checked sizes) and the element plumbing that constant
//! folding and weight re-layout use.

use super::layout::element_count;
use super::proto::{self, data_type};
use crate::error::{Error, Result};
use crate::ir::DType;

/// Largest constant (in elements) that folding may create; a model asking for more is malformed.
pub(crate) const MAX_FOLD_ELEMENTS: usize = 1 << 24;

/// Largest constant we decode, in bytes (the IR's tensor size limit).
const MAX_CONST_BYTES: usize = 1 << 31;

/// Element storage of a constant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Elems {
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    I16(Vec<i16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Applies `$body` to the vector inside any [`Elems`] variant, rebuilding the same variant.
macro_rules! map_elems {
    ($e:expr, $v:ident => $body:expr) => {
        match $e {
            Elems::F32($v) => Elems::F32($body),
            Elems::I64($v) => Elems::I64($body),
            Elems::I32($v) => Elems::I32($body),
            Elems::I16($v) => Elems::I16($body),
            Elems::I8($v) => Elems::I8($body),
            Elems::U8($v) => Elems::U8($body),
            Elems::Bool($v) => Elems::Bool($body),
        }
    };
}

impl Elems {
    pub fn len(&self) -> usize {
        match self {
            Elems::F32(v) => v.len(),
            Elems::I64(v) => v.len(),
            Elems::I32(v) => v.len(),
            Elems::I16(v) => v.len(),
            Elems::I8(v) => v.len(),
            Elems::U8(v) => v.len(),
            Elems::Bool(v) => v.len(),
        }
    }

    /// The ONNX data type of the elements.
    pub fn onnx_type(&self) -> i32 {
        match self {
            Elems::F32(_) => data_type::FLOAT,
            Elems::I64(_) => data_type::INT64,
            Elems::I32(_) => data_type::INT32,
            Elems::I16(_) => data_type::INT16,
            Elems::I8(_) => data_type::INT8,
            Elems::U8(_) => data_type::UINT8,
            Elems::Bool(_) => data_type::BOOL,
        }
    }

    /// Type name for messages.
    pub fn type_name(&self) -> String {
        data_type::name(self.onnx_type())
    }

    /// The IR element type, when the IR has one.
    pub fn ir_dtype(&self) -> Option<DType> {
        match self {
            Elems::F32(_) => Some(DType::F32),
            Elems::I64(_) => Some(DType::I64),
            Elems::I32(_) => Some(DType::I32),
            Elems::I16(_) => Some(DType::I16),
            Elems::I8(_) => Some(DType::I8),
            Elems::U8(_) => Some(DType::U8),
            Elems::Bool(_) => None,
        }
    }

    /// Elements at `idx` (in order). Fails (instead of panicking) on an index out of range.
    pub fn take(&self, idx: &[usize]) -> Option<Elems> {
        fn pick<T: Copy>(v: &[T], idx: &[usize]) -> Option<Vec<T>> {
            idx.iter().map(|&i| v.get(i).copied()).collect()
        }
        Some(map_elems!(self, v => pick(v, idx)?))
    }

    /// An empty vector of the same element type.
    pub fn empty_like(&self) -> Elems {
        map_elems!(self, _v => Vec::new())
    }

    /// Appends `other` (same element type) to `self`.
    pub fn extend(&mut self, other: &Elems) -> bool {
        match (self, other) {
            (Elems::F32(a), Elems::F32(b)) => a.extend_from_slice(b),
            (Elems::I64(a), Elems::I64(b)) => a.extend_from_slice(b),
            (Elems::I32(a), Elems::I32(b)) => a.extend_from_slice(b),
            (Elems::I16(a), Elems::I16(b)) => a.extend_from_slice(b),
            (Elems::I8(a), Elems::I8(b)) => a.extend_from_slice(b),
            (Elems::U8(a), Elems::U8(b)) => a.extend_from_slice(b),
            (Elems::Bool(a), Elems::Bool(b)) => a.extend_from_slice(b),
            _ => return false,
        }
        true
    }

    /// Integer elements widened to `i64` (`None` for floats).
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        match self {
            Elems::F32(_) => None,
            Elems::I64(v) => Some(v.clone()),
            Elems::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Elems::I16(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Elems::I8(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Elems::U8(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Elems::Bool(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
        }
    }

    /// All elements as `f64` (exact for every stored type but large `i64`s).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            Elems::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elems::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Elems::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elems::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elems::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elems::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elems::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        }
    }

    /// Converts to ONNX data type `to` as `Cast` does (floats truncate toward zero, saturating).
    pub fn cast(&self, to: i32) -> Option<Elems> {
        if let Some(ints) = self.to_i64() {
            return Some(match to {
                data_type::FLOAT => Elems::F32(ints.iter().map(|&x| x as f32).collect()),
                data_type::INT64 => Elems::I64(ints),
                data_type::INT32 => Elems::I32(ints.iter().map(|&x| x as i32).collect()),
                data_type::INT8 => Elems::I8(ints.iter().map(|&x| x as i8).collect()),
                data_type::UINT8 => Elems::U8(ints.iter().map(|&x| x as u8).collect()),
                data_type::BOOL => Elems::Bool(ints.iter().map(|&x| x != 0).collect()),
                _ => return None,
            });
        }
        let f = self.to_f64();
        Some(match to {
            data_type::FLOAT => Elems::F32(f.iter().map(|&x| x as f32).collect()),
            data_type::INT64 => Elems::I64(f.iter().map(|&x| x as i64).collect()),
            data_type::INT32 => Elems::I32(f.iter().map(|&x| x as i32).collect()),
            data_type::INT16 => Elems::I16(f.iter().map(|&x| x as i16).collect()),
            data_type::INT8 => Elems::I8(f.iter().map(|&x| x as i8).collect()),
            data_type::UINT8 => Elems::U8(f.iter().map(|&x| x as u8).collect()),
            data_type::BOOL => Elems::Bool(f.iter().map(|&x| x != 0.0).collect()),
            _ => return None,
        })
    }

    /// Little-endian bytes (the IR's constant storage). Booleans are one byte each.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Elems::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elems::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elems::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elems::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Elems::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Elems::U8(v) => v.clone(),
            Elems::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        }
    }
}

/// A constant tensor in ONNX layout.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Const {
    pub dims: Vec<usize>,
    pub elems: Elems,
}

impl Const {
    /// A constant, checking that the element count matches the shape.
    pub fn new(dims: Vec<usize>, elems: Elems) -> Option<Const> {
        (element_count(&dims)? == elems.len()).then_some(Const { dims, elems })
    }

    /// A 1-D `i64` constant.
    pub fn i64_vec(v: Vec<i64>) -> Const {
        Const {
            dims: vec![v.len()],
            elems: Elems::I64(v),
        }
    }

    pub fn len(&self) -> usize {
        self.elems.len()
    }

    /// The single element as `f64`, if the constant has exactly one element.
    pub fn scalar_f64(&self) -> Option<f64> {
        match self.elems.to_f64().as_slice() {
            [x] => Some(*x),
            _ => None,
        }
    }

    /// The transposed constant: `out.dims[i] = dims[perm[i]]`.
    pub fn transpose(&self, perm: &[usize]) -> Option<Const> {
        let idx = super::layout::transpose_indices(&self.dims, perm)?;
        let dims = super::layout::permute(&self.dims, perm)?;
        Const::new(dims, self.elems.take(&idx)?)
    }
}

/// Decodes an initializer or attribute tensor (`what` names it in errors).
pub(crate) fn decode(t: &proto::TensorProto, what: &str) -> Result<Const> {
    let bad = |detail: String| Error::InvalidTensor {
        tensor: what.to_string(),
        detail,
    };
    if t.data_location == Some(proto::DATA_LOCATION_EXTERNAL) || !t.external_data.is_empty() {
        return Err(bad(
            "its data is stored in an external file (read for initializers only)".into(),
        ));
    }
    if t.segment.is_some() {
        return Err(bad("segmented tensors are not supported".into()));
    }
    let mut dims = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        dims.push(usize::try_from(d).map_err(|_| bad(format!("negative dimension {d}")))?);
    }
    let ty = t.data_type;
    let elem_size = match ty {
        data_type::FLOAT | data_type::INT32 => 4,
        data_type::INT64 => 8,
        data_type::INT16 => 2,
        data_type::INT8 | data_type::UINT8 | data_type::BOOL => 1,
        other => {
            return Err(bad(format!(
                "element type {} is not supported",
                data_type::name(other)
            )));
        }
    };
    let n = element_count(&dims)
        .filter(|&n| n.saturating_mul(elem_size) <= MAX_CONST_BYTES)
        .ok_or_else(|| bad(format!("shape {dims:?} is too large (its size overflows)")))?;
    let count_err = |have: usize| {
        bad(format!(
            "shape {dims:?} needs {n} elements of {} but the data holds {have}",
            data_type::name(ty)
        ))
    };
    let elems = if !t.raw_data.is_empty() {
        let raw = &t.raw_data;
        if !raw.len().is_multiple_of(elem_size) || raw.len() / elem_size != n {
            return Err(count_err(raw.len() / elem_size));
        }
        let w4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
        match ty {
            data_type::FLOAT => Elems::F32(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(w4(c)))
                    .collect(),
            ),
            data_type::INT32 => Elems::I32(
                raw.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(w4(c)))
                    .collect(),
            ),
            data_type::INT64 => Elems::I64(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
            ),
            data_type::INT16 => Elems::I16(
                raw.chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            data_type::INT8 => Elems::I8(raw.iter().map(|&b| b as i8).collect()),
            data_type::UINT8 => Elems::U8(raw.clone()),
            _ => Elems::Bool(raw.iter().map(|&b| b != 0).collect()),
        }
    } else {
        let narrow = |v: &[i32], lo: i32, hi: i32| -> Result<Vec<i32>> {
            if v.len() != n {
                return Err(count_err(v.len()));
            }
            if let Some(x) = v.iter().find(|&&x| x < lo || x > hi) {
                return Err(bad(format!(
                    "value {x} is out of range for {}",
                    data_type::name(ty)
                )));
            }
            Ok(v.to_vec())
        };
        match ty {
            data_type::FLOAT => {
                if t.float_data.len() != n {
                    return Err(count_err(t.float_data.len()));
                }
                Elems::F32(t.float_data.clone())
            }
            data_type::INT64 => {
                if t.int64_data.len() != n {
                    return Err(count_err(t.int64_data.len()));
                }
                Elems::I64(t.int64_data.clone())
            }
            data_type::INT32 => Elems::I32(narrow(&t.int32_data, i32::MIN, i32::MAX)?),
            data_type::INT16 => Elems::I16(
                narrow(&t.int32_data, -32768, 32767)?
                    .into_iter()
                    .map(|x| x as i16)
                    .collect(),
            ),
            data_type::INT8 => Elems::I8(
                narrow(&t.int32_data, -128, 127)?
                    .into_iter()
                    .map(|x| x as i8)
                    .collect(),
            ),
            data_type::UINT8 => Elems::U8(
                narrow(&t.int32_data, 0, 255)?
                    .into_iter()
                    .map(|x| x as u8)
                    .collect(),
            ),
            _ => Elems::Bool(
                narrow(&t.int32_data, 0, 1)?
                    .into_iter()
                    .map(|x| x != 0)
                    .collect(),
            ),
        }
    };
    Ok(Const { dims, elems })
}
