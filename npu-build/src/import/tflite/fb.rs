//! Bounds-checked reading of flatbuffer tables, vectors and strings.
//!
//! The flatbuffers crate's generated accessors read without checks (`unsafe`) once a buffer has been
//! verified; this module reads the same wire format with every offset checked instead, so a
//! malformed file can only produce an error, never an out-of-bounds read. Errors are plain strings
//! naming the offset at fault; the importer wraps them with the schema context.

/// A reading failure: what was being read and at which byte offset.
pub type FbResult<T> = Result<T, String>;

fn slice<'b>(buf: &'b [u8], pos: usize, len: usize, what: &str) -> FbResult<&'b [u8]> {
    pos.checked_add(len)
        .and_then(|end| buf.get(pos..end))
        .ok_or_else(|| {
            format!(
                "{what} at offset {pos} ({len} bytes) runs past the end of the file ({} bytes)",
                buf.len()
            )
        })
}

fn read_u16(buf: &[u8], pos: usize, what: &str) -> FbResult<u16> {
    let b = slice(buf, pos, 2, what)?;
    Ok(u16::from_le_bytes([b[0], b[1]]))
}

fn read_u32(buf: &[u8], pos: usize, what: &str) -> FbResult<u32> {
    let b = slice(buf, pos, 4, what)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Follows the unsigned offset stored at `pos` (offsets are relative to their own position).
fn follow(buf: &[u8], pos: usize, what: &str) -> FbResult<usize> {
    let off = read_u32(buf, pos, what)? as usize;
    pos.checked_add(off)
        .filter(|&p| p < buf.len())
        .ok_or_else(|| format!("{what}: offset at {pos} points outside the file"))
}

/// A table: its position and its vtable.
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

impl<'a> Table<'a> {
    /// The root table of a buffer (the first four bytes are its offset).
    pub fn root(buf: &'a [u8], what: &str) -> FbResult<Table<'a>> {
        let pos = follow(buf, 0, what)?;
        Table::at(buf, pos, what)
    }

    /// The table whose start is at `pos`.
    pub fn at(buf: &'a [u8], pos: usize, what: &str) -> FbResult<Table<'a>> {
        let soff = read_u32(buf, pos, what)? as i32;
        // The vtable lives at `pos - soffset`.
        let vtable = if soff >= 0 {
            pos.checked_sub(soff as usize)
        } else {
            pos.checked_add(soff.unsigned_abs() as usize)
        }
        .ok_or_else(|| format!("{what} at offset {pos}: vtable offset {soff} is out of range"))?;
        let vtable_len = read_u16(buf, vtable, what)? as usize;
        if vtable_len < 4 || !vtable_len.is_multiple_of(2) {
            return Err(format!(
                "{what} at offset {pos}: vtable at {vtable} has an invalid length {vtable_len}"
            ));
        }
        slice(buf, vtable, vtable_len, what)?;
        Ok(Table {
            buf,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// Position of field `id` (the n-th field of the schema, unions count twice), if present.
    fn field(&self, id: usize, what: &str) -> FbResult<Option<usize>> {
        let voff = 4 + 2 * id;
        if voff + 2 > self.vtable_len {
            return Ok(None);
        }
        let off = read_u16(self.buf, self.vtable + voff, what)? as usize;
        if off == 0 {
            return Ok(None);
        }
        Ok(Some(self.pos + off))
    }

    fn scalar<const N: usize>(&self, id: usize, what: &str) -> FbResult<Option<[u8; N]>> {
        match self.field(id, what)? {
            None => Ok(None),
            Some(p) => {
                let b = slice(self.buf, p, N, what)?;
                let mut a = [0u8; N];
                a.copy_from_slice(b);
                Ok(Some(a))
            }
        }
    }

    pub fn u8(&self, id: usize, default: u8, what: &str) -> FbResult<u8> {
        Ok(self.scalar::<1>(id, what)?.map_or(default, |b| b[0]))
    }

    pub fn i8(&self, id: usize, default: i8, what: &str) -> FbResult<i8> {
        Ok(self.scalar::<1>(id, what)?.map_or(default, |b| b[0] as i8))
    }

    pub fn bool(&self, id: usize, what: &str) -> FbResult<bool> {
        Ok(self.u8(id, 0, what)? != 0)
    }

    pub fn i32(&self, id: usize, default: i32, what: &str) -> FbResult<i32> {
        Ok(self
            .scalar::<4>(id, what)?
            .map_or(default, i32::from_le_bytes))
    }

    pub fn u32(&self, id: usize, default: u32, what: &str) -> FbResult<u32> {
        Ok(self
            .scalar::<4>(id, what)?
            .map_or(default, u32::from_le_bytes))
    }

    pub fn f32(&self, id: usize, default: f32, what: &str) -> FbResult<f32> {
        Ok(self
            .scalar::<4>(id, what)?
            .map_or(default, f32::from_le_bytes))
    }

    pub fn u64(&self, id: usize, default: u64, what: &str) -> FbResult<u64> {
        Ok(self
            .scalar::<8>(id, what)?
            .map_or(default, u64::from_le_bytes))
    }

    /// A sub-table field.
    pub fn table(&self, id: usize, what: &str) -> FbResult<Option<Table<'a>>> {
        match self.field(id, what)? {
            None => Ok(None),
            Some(p) => {
                let t = follow(self.buf, p, what)?;
                Table::at(self.buf, t, what).map(Some)
            }
        }
    }

    /// A vector field whose elements are `elem_size` bytes each.
    pub fn vector(&self, id: usize, elem_size: usize, what: &str) -> FbResult<Option<Vector<'a>>> {
        match self.field(id, what)? {
            None => Ok(None),
            Some(p) => {
                let start = follow(self.buf, p, what)?;
                let len = read_u32(self.buf, start, what)? as usize;
                let bytes = len
                    .checked_mul(elem_size)
                    .ok_or_else(|| format!("{what}: vector length {len} overflows"))?;
                let data = start + 4;
                slice(self.buf, data, bytes, what)?;
                Ok(Some(Vector {
                    buf: self.buf,
                    data,
                    len,
                    elem_size,
                }))
            }
        }
    }

    /// A string field (invalid UTF-8 is replaced, not rejected: names are only for messages).
    pub fn string(&self, id: usize, what: &str) -> FbResult<Option<String>> {
        Ok(self
            .vector(id, 1, what)?
            .map(|v| String::from_utf8_lossy(v.bytes()).into_owned()))
    }
}

/// A vector of fixed-size elements (scalars or table offsets).
#[derive(Clone, Copy, Debug)]
pub struct Vector<'a> {
    buf: &'a [u8],
    data: usize,
    len: usize,
    elem_size: usize,
}

impl<'a> Vector<'a> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// The raw element bytes (checked when the vector was created).
    pub fn bytes(&self) -> &'a [u8] {
        // In bounds: `Table::vector` checked `data + len * elem_size <= buf.len()`.
        &self.buf[self.data..self.data + self.len * self.elem_size]
    }

    fn elem<const N: usize>(&self, i: usize) -> Option<[u8; N]> {
        if i >= self.len || N != self.elem_size {
            return None;
        }
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes().get(i * N..i * N + N)?);
        Some(a)
    }

    pub fn i32(&self, i: usize) -> Option<i32> {
        self.elem::<4>(i).map(i32::from_le_bytes)
    }

    pub fn f32(&self, i: usize) -> Option<f32> {
        self.elem::<4>(i).map(f32::from_le_bytes)
    }

    pub fn i64(&self, i: usize) -> Option<i64> {
        self.elem::<8>(i).map(i64::from_le_bytes)
    }

    /// All elements as `i32` (the vector must hold 4-byte elements).
    pub fn to_i32s(self) -> Vec<i32> {
        (0..self.len).filter_map(|i| self.i32(i)).collect()
    }

    /// The `i`-th element of a vector of tables.
    pub fn table(&self, i: usize, what: &str) -> FbResult<Table<'a>> {
        if i >= self.len || self.elem_size != 4 {
            return Err(format!(
                "{what}: index {i} out of range ({} elements)",
                self.len
            ));
        }
        let p = self.data + 4 * i;
        let t = follow(self.buf, p, what)?;
        Table::at(self.buf, t, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_built_table() {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let name = b.create_string("hello");
        let v = b.create_vector(&[1i32, -2, 3]);
        let start = b.start_table();
        b.push_slot::<i32>(4, 7, 0);
        b.push_slot_always(6, name);
        b.push_slot_always(8, v);
        let t = b.end_table(start);
        b.finish_minimal(t);
        let buf = b.finished_data();
        let t = Table::root(buf, "root").unwrap();
        assert_eq!(t.i32(0, 0, "x").unwrap(), 7);
        assert_eq!(t.string(1, "s").unwrap().as_deref(), Some("hello"));
        let v = t.vector(2, 4, "v").unwrap().unwrap();
        assert_eq!(v.to_i32s(), vec![1, -2, 3]);
        assert_eq!(t.i32(5, 42, "absent").unwrap(), 42);
    }

    #[test]
    fn truncated_buffers_are_errors() {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let v = b.create_vector(&[1i32, 2, 3, 4]);
        let start = b.start_table();
        b.push_slot_always(4, v);
        let t = b.end_table(start);
        b.finish_minimal(t);
        let buf = b.finished_data();
        for n in 0..buf.len() {
            let cut = &buf[..n];
            if let Ok(t) = Table::root(cut, "root") {
                let _ = t.vector(0, 4, "v");
            }
        }
    }
}
