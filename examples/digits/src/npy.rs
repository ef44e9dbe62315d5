//! Just enough of the `.npy` format for the held-out set: version 1-3 headers, 1-byte element
//! types, C order.

/// An array of 1-byte elements.
pub struct Npy<'a> {
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

/// Parses `file` and checks its element type is `want` (`|i1`, `|u1`).
pub fn parse<'a>(file: &'a [u8], want: &str) -> Result<Npy<'a>, String> {
    if file.len() < 10 || &file[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (header_len, start) = match file[6] {
        1 => (u16::from_le_bytes([file[8], file[9]]) as usize, 10),
        2 | 3 if file.len() >= 12 => (
            u32::from_le_bytes([file[8], file[9], file[10], file[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy version {v} is not supported")),
    };
    let header = file
        .get(start..start + header_len)
        .ok_or("the .npy header is cut short")?;
    let header = std::str::from_utf8(header).map_err(|e| format!(".npy header: {e}"))?;
    let field = |key: &str| -> Result<&str, String> {
        let at = header
            .find(key)
            .ok_or_else(|| format!(".npy header has no {key}: {header}"))?;
        Ok(header[at + key.len()..].trim_start_matches([':', ' ']))
    };
    let descr = field("'descr'")?
        .trim_start_matches('\'')
        .split('\'')
        .next()
        .unwrap_or_default()
        .to_string();
    if descr != want {
        return Err(format!("expected elements {want}, the file has {descr}"));
    }
    if field("'fortran_order'")?.starts_with("True") {
        return Err("Fortran-order .npy files are not supported".into());
    }
    let dims = field("'shape'")?
        .trim_start_matches('(')
        .split(')')
        .next()
        .unwrap_or_default();
    let shape = dims
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse::<usize>().map_err(|e| format!("shape {dims}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let data = &file[start + header_len..];
    let count: usize = shape.iter().product();
    if data.len() != count {
        return Err(format!(
            "shape {shape:?} needs {count} bytes, the file has {}",
            data.len()
        ));
    }
    Ok(Npy { shape, data })
}
