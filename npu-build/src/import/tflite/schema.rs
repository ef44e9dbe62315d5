//! Reading the TFLite flatbuffer through the readers planus generates from TFLite's `schema.fbs`
//! ([`super::generated`]): error context, raw enum values, operator and type names, and the
//! structural check of a whole file before anything is imported from it.

use super::generated::tflite::{
    BufferRef, BuiltinOperator, ModelRef, OperatorRef, SubGraphRef, TensorRef, TensorType,
};
use super::generated::{BUILTIN_OPERATOR_NAMES, TENSOR_TYPE_NAMES};
use super::malformed;
use crate::error::{Error, Result};
use planus::errors::ErrorKind;

/// Maps a planus reading error to [`Error::Malformed`], prefixed with what was being read
/// (`tensors[3]`, `operators[7] options`) and naming the schema field and byte offset at fault.
pub(super) fn fb_error(what: &str, e: planus::Error) -> Error {
    let kind = match e.error_kind {
        ErrorKind::InvalidOffset => "an offset points outside the file".to_string(),
        ErrorKind::InvalidLength => "a length runs past the end of the file".to_string(),
        ErrorKind::InvalidVtableLength { length } => {
            format!("a vtable has an invalid length {length}")
        }
        ErrorKind::InvalidUtf8 { .. } => "a string is not UTF-8".to_string(),
        ErrorKind::UnknownEnumTag { source } => format!("unknown enum value {}", source.tag),
        ErrorKind::UnknownUnionTag { tag } => format!("unknown union type {tag}"),
        other => other.to_string(),
    };
    let loc = e.source_location;
    // `[ModelRef]` for the root, `Tensor` for a table's field.
    let ty = loc.type_.trim_matches(|c| c == '[' || c == ']');
    let ty = ty.strip_suffix("Ref").unwrap_or(ty);
    // planus marks an unknown position with usize::MAX.
    let at = if loc.byte_offset == usize::MAX {
        String::new()
    } else {
        format!(" (table at offset {})", loc.byte_offset)
    };
    malformed(format!("{what}: {kind} reading {ty}.{}{at}", loc.method))
}

/// Attaches [`fb_error`]'s context to a planus result.
pub(super) fn ctx<T>(r: planus::Result<T>, what: &str) -> Result<T> {
    r.map_err(|e| fb_error(what, e))
}

/// The raw value of an enum field: an unknown value is not a malformed file but something the
/// importer reports itself, in its own words (`unknown padding mode 7`, `element type type 42`).
pub(super) fn raw<E, R>(r: planus::Result<E>) -> planus::Result<R>
where
    R: From<E> + TryFrom<i128>,
{
    match r {
        Ok(v) => Ok(R::from(v)),
        Err(e) => match e.error_kind {
            ErrorKind::UnknownEnumTag { source } => R::try_from(source.tag).map_err(|_| e),
            _ => Err(e),
        },
    }
}

/// A string field, with invalid UTF-8 read as absent: names only label tensors and messages
/// (the importer makes one up), so a corrupted name does not reject a model. Its bounds were
/// checked before its encoding.
pub(super) fn lenient_str(r: planus::Result<Option<&str>>) -> planus::Result<Option<&str>> {
    match r {
        Err(e) if matches!(e.error_kind, ErrorKind::InvalidUtf8 { .. }) => Ok(None),
        r => r,
    }
}

/// A union field, with a tag this schema does not know read as absent (as TFLite does with options
/// written by a newer converter).
pub(super) fn known_union<U>(r: planus::Result<Option<U>>) -> planus::Result<Option<U>> {
    match r {
        Err(e) if matches!(e.error_kind, ErrorKind::UnknownUnionTag { .. }) => Ok(None),
        r => r,
    }
}

// The name tables the generation script appends and planus's enums list the same values (the
// script checks the values are 0, 1, 2, ... so a value indexes its name).
const _: () = assert!(BUILTIN_OPERATOR_NAMES.len() == BuiltinOperator::ENUM_VALUES.len());
const _: () = assert!(TENSOR_TYPE_NAMES.len() == TensorType::ENUM_VALUES.len());

/// Name of a `TensorType` value, for messages.
pub fn tensor_type_name(t: i8) -> String {
    usize::try_from(t)
        .ok()
        .and_then(|i| TENSOR_TYPE_NAMES.get(i))
        .map_or_else(|| format!("type {t}"), |s| (*s).to_string())
}

/// Name of a `BuiltinOperator` value, for messages (`CONV_2D`, ...).
pub fn builtin_name(code: i32) -> String {
    usize::try_from(code)
        .ok()
        .and_then(|i| BUILTIN_OPERATOR_NAMES.get(i))
        .map_or_else(|| format!("BUILTIN_{code}"), |s| (*s).to_string())
}

/// Bytes the structural check may visit, counting shared tables and vectors each time they are
/// reached: a small file whose offsets all point at one large vector cannot expand into
/// gigabytes of reads.
struct Budget {
    left: usize,
}

impl Budget {
    fn charge(&mut self, bytes: usize) -> Result<()> {
        self.left = self.left.checked_sub(bytes).ok_or_else(|| {
            malformed(
                "the file's tables and vectors, counted each time an offset reaches them, \
                 exceed 4x its size (offsets share data excessively)",
            )
        })?;
        Ok(())
    }

    /// Charges a vector field of `elem` bytes per element (4 more for its length).
    fn vector<T: ?Sized>(
        &mut self,
        v: planus::Result<Option<planus::Vector<'_, T>>>,
        elem: usize,
        what: &str,
    ) -> Result<()> {
        if let Some(v) = ctx(v, what)? {
            self.charge(v.len().saturating_mul(elem).saturating_add(4))?;
        }
        Ok(())
    }
}

/// Checks the structure of a whole TFLite model before it is read: every table, vector and
/// string the importer may reach (in all subgraphs, tensors, operators and buffers) lies inside
/// the file, so a truncated or corrupted file is reported as such even where the importer would
/// not look (the generated readers only check what they are asked for).
///
/// Enum fields may hold values this schema does not know (the importer reports those), and
/// union fields only need a readable table.
pub(super) fn verify(buf: &[u8]) -> Result<ModelRef<'_>> {
    let mut budget = Budget {
        left: buf.len().saturating_mul(4).max(1 << 20),
    };
    let m: ModelRef = ctx(planus::ReadAsRoot::read_as_root(buf), "Model")?;
    ctx(m.version(), "Model")?;
    ctx(lenient_str(m.description()), "Model")?;
    if let Some(codes) = ctx(m.operator_codes(), "Model")? {
        budget.charge(4usize.saturating_mul(codes.len()))?;
        for (i, c) in codes.iter().enumerate() {
            let what = format!("operator_codes[{i}]");
            let c = ctx(c, &what)?;
            budget.charge(4)?;
            ctx(c.deprecated_builtin_code(), &what)?;
            ctx(lenient_str(c.custom_code()), &what)?;
            ctx(c.version(), &what)?;
            ctx(raw::<_, i32>(c.builtin_code()), &what)?;
        }
    }
    if let Some(subgraphs) = ctx(m.subgraphs(), "Model")? {
        budget.charge(4usize.saturating_mul(subgraphs.len()))?;
        for (i, s) in subgraphs.iter().enumerate() {
            let what = format!("subgraphs[{i}]");
            verify_subgraph(ctx(s, &what)?, &what, &mut budget)?;
        }
    }
    if let Some(buffers) = ctx(m.buffers(), "Model")? {
        budget.charge(4usize.saturating_mul(buffers.len()))?;
        for (i, b) in buffers.iter().enumerate() {
            let what = format!("buffers[{i}]");
            verify_buffer(ctx(b, &what)?, &what, &mut budget)?;
        }
    }
    Ok(m)
}

fn verify_subgraph(s: SubGraphRef, what: &str, budget: &mut Budget) -> Result<()> {
    budget.charge(4)?;
    budget.vector(s.inputs(), 4, what)?;
    budget.vector(s.outputs(), 4, what)?;
    ctx(lenient_str(s.name()), what)?;
    if let Some(tensors) = ctx(s.tensors(), what)? {
        budget.charge(4usize.saturating_mul(tensors.len()))?;
        for (i, t) in tensors.iter().enumerate() {
            let what = format!("{what}.tensors[{i}]");
            verify_tensor(ctx(t, &what)?, &what, budget)?;
        }
    }
    if let Some(operators) = ctx(s.operators(), what)? {
        budget.charge(4usize.saturating_mul(operators.len()))?;
        for (i, o) in operators.iter().enumerate() {
            let what = format!("{what}.operators[{i}]");
            verify_operator(ctx(o, &what)?, &what, budget)?;
        }
    }
    Ok(())
}

fn verify_tensor(t: TensorRef, what: &str, budget: &mut Budget) -> Result<()> {
    budget.charge(4)?;
    budget.vector(t.shape(), 4, what)?;
    budget.vector(t.shape_signature(), 4, what)?;
    ctx(raw::<_, i8>(t.type_()), what)?;
    ctx(t.buffer(), what)?;
    ctx(lenient_str(t.name()), what)?;
    ctx(t.is_variable(), what)?;
    ctx(t.sparsity(), what)?;
    if let Some(q) = ctx(t.quantization(), what)? {
        budget.charge(4)?;
        budget.vector(q.min(), 4, what)?;
        budget.vector(q.max(), 4, what)?;
        budget.vector(q.scale(), 4, what)?;
        budget.vector(q.zero_point(), 8, what)?;
        ctx(known_union(q.details()), what)?;
        ctx(q.quantized_dimension(), what)?;
    }
    Ok(())
}

fn verify_operator(o: OperatorRef, what: &str, budget: &mut Budget) -> Result<()> {
    budget.charge(4)?;
    ctx(o.opcode_index(), what)?;
    budget.vector(o.inputs(), 4, what)?;
    budget.vector(o.outputs(), 4, what)?;
    budget.vector(o.intermediates(), 4, what)?;
    ctx(known_union(o.builtin_options()), what)?;
    if let Some(c) = ctx(o.custom_options(), what)? {
        budget.charge(c.len().saturating_add(4))?;
    }
    Ok(())
}

fn verify_buffer(b: BufferRef, what: &str, budget: &mut Budget) -> Result<()> {
    budget.charge(4)?;
    // The data is only bounds-checked, never copied here: a budget on it would count a large
    // model's weights once, which the 4x allowance always covers.
    ctx(b.data(), what)?;
    ctx(b.offset(), what)?;
    ctx(b.size(), what)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_index_the_generated_enums() {
        for (i, op) in BuiltinOperator::ENUM_VALUES.iter().enumerate() {
            assert_eq!(i32::from(*op), i as i32);
        }
        for (i, t) in TensorType::ENUM_VALUES.iter().enumerate() {
            assert_eq!(i8::from(*t), i as i8);
        }
        assert_eq!(builtin_name(3), "CONV_2D");
        assert_eq!(builtin_name(-1), "BUILTIN_-1");
        assert_eq!(builtin_name(100_000), "BUILTIN_100000");
        assert_eq!(tensor_type_name(9), "INT8");
        assert_eq!(tensor_type_name(99), "type 99");
    }

    #[test]
    fn unknown_enum_values_are_read_raw() {
        let unknown = planus::errors::UnknownEnumTagKind { tag: 42 }
            .with_error_location("Tensor", "type_", 8);
        let r: planus::Result<TensorType> = Err(unknown.into());
        assert_eq!(raw::<_, i8>(r).ok(), Some(42));
        // A value out of the field's range stays an error.
        let big = planus::errors::UnknownEnumTagKind { tag: 1000 }
            .with_error_location("Tensor", "type_", 8);
        assert!(raw::<_, i8>(Err::<TensorType, _>(big.into())).is_err());
        assert_eq!(raw::<_, i8>(Ok(TensorType::Int16)).ok(), Some(7));
    }

    #[test]
    fn short_and_garbage_buffers_are_errors() {
        for buf in [
            &[][..],
            &[0; 3],
            &[255; 8],
            &[4, 0, 0, 0, b'T', b'F', b'L', b'3'],
        ] {
            let e = verify(buf).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("malformed TFLite model")),
                "{buf:?}: {e:?}"
            );
        }
    }
}
