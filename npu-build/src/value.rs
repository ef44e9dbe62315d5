//! Runtime tensor values (inputs and outputs of the interpreters) and their `.npy` I/O.

#[cfg(feature = "npy")]
use std::path::Path;

use crate::error::{Error, Result};
use crate::ir::DType;

/// Element storage of a [`Value`].
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    I8(Vec<i8>),
    U8(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    /// 64-bit integers (ARG_MAX / ARG_MIN indices of type INT64).
    I64(Vec<i64>),
}

/// A dense tensor value in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::I8(_) => DType::I8,
            Data::U8(_) => DType::U8,
            Data::I16(_) => DType::I16,
            Data::I32(_) => DType::I32,
            Data::F32(_) => DType::F32,
            Data::I64(_) => DType::I64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::I8(v) => v.len(),
            Data::U8(v) => v.len(),
            Data::I16(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Little-endian bytes of the elements.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Data::U8(v) => v.clone(),
            Data::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// Elements from little-endian bytes (`bytes.len()` must be a multiple of the element size).
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Result<Data> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            return Err(Error::Data(format!(
                "{} bytes is not a whole number of {dtype} elements",
                bytes.len()
            )));
        }
        Ok(match dtype {
            DType::I8 => Data::I8(bytes.iter().map(|&b| b as i8).collect()),
            DType::U8 => Data::U8(bytes.to_vec()),
            DType::I16 => Data::I16(
                bytes
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            DType::I32 => Data::I32(
                bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::F32 => Data::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::I64 => Data::I64(
                bytes
                    .chunks_exact(8)
                    .map(|c| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        i64::from_le_bytes(b)
                    })
                    .collect(),
            ),
        })
    }
}

impl Value {
    /// A value, checking that `data` has as many elements as `shape` says.
    pub fn new(shape: Vec<usize>, data: Data) -> Result<Value> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::Data(format!(
                "shape {shape:?} needs {n} elements but {} were given",
                data.len()
            )));
        }
        Ok(Value { shape, data })
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Reads a `.npy` file of i8, u8, i16, i32, f32 or i64 (any shape, C order).
    #[cfg(feature = "npy")]
    pub fn read_npy(path: &Path) -> Result<Value> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let bad = |e: ndarray_npy::ReadNpyError| {
            Error::Data(format!(
                "{}: not a readable .npy array: {e}",
                path.display()
            ))
        };
        macro_rules! try_type {
            ($t:ty, $variant:ident) => {{
                let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
                match <ndarray::ArrayD<$t> as ndarray_npy::ReadNpyExt>::read_npy(f) {
                    Ok(a) => {
                        let shape = a.shape().to_vec();
                        let a = a.as_standard_layout().into_owned();
                        let (v, _) = a.into_raw_vec_and_offset();
                        return Value::new(shape, Data::$variant(v));
                    }
                    Err(ndarray_npy::ReadNpyError::WrongDescriptor(_)) => {}
                    Err(e) => return Err(bad(e)),
                }
            }};
        }
        drop(file);
        try_type!(i8, I8);
        try_type!(u8, U8);
        try_type!(i16, I16);
        try_type!(i32, I32);
        try_type!(f32, F32);
        try_type!(i64, I64);
        Err(Error::Data(format!(
            "{}: .npy element type is not one of i8, u8, i16, i32, f32, i64",
            path.display()
        )))
    }

    /// Writes the value as a `.npy` file.
    #[cfg(feature = "npy")]
    pub fn write_npy(&self, path: &Path) -> Result<()> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let shape = ndarray::IxDyn(&self.shape);
        let err = |e: ndarray_npy::WriteNpyError| Error::Data(format!("{}: {e}", path.display()));
        macro_rules! write {
            ($v:expr) => {{
                let a = ndarray::ArrayD::from_shape_vec(shape, $v.clone())
                    .map_err(|e| Error::Data(e.to_string()))?;
                ndarray_npy::WriteNpyExt::write_npy(&a, file).map_err(err)
            }};
        }
        match &self.data {
            Data::I8(v) => write!(v),
            Data::U8(v) => write!(v),
            Data::I16(v) => write!(v),
            Data::I32(v) => write!(v),
            Data::F32(v) => write!(v),
            Data::I64(v) => write!(v),
        }
    }
}
