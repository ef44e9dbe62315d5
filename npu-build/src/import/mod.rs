//! Model importers: ONNX and TFLite into the one [`crate::ir`].

use std::path::Path;

use crate::error::{Error, Result};
use crate::ir::Graph;

mod fuse_act;
pub mod onnx;
pub mod tflite;

/// Model file formats we read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Onnx,
    Tflite,
}

/// Guesses the format from the content (TFLite's `TFL3` identifier), then from the extension.
pub fn sniff(bytes: &[u8], path: &Path) -> Option<Format> {
    if bytes.len() >= 8 && &bytes[4..8] == b"TFL3" {
        return Some(Format::Tflite);
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("tflite") => Some(Format::Tflite),
        Some(e) if e.eq_ignore_ascii_case("onnx") => Some(Format::Onnx),
        _ => {
            // An ONNX ModelProto starts with field 1 (ir_version, varint): tag byte 0x08.
            if bytes.first() == Some(&0x08) {
                Some(Format::Onnx)
            } else {
                None
            }
        }
    }
}

/// Reads and imports a model file (ONNX or TFLite), validated.
pub fn load(path: &Path) -> Result<Graph> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("model")
        .to_string();
    let format = sniff(&bytes, path).ok_or_else(|| Error::NotAModel {
        path: path.to_path_buf(),
        detail: "neither a TFLite flatbuffer (no TFL3 identifier) nor an ONNX protobuf".into(),
    })?;
    // External data files are found next to the model.
    match path.parent() {
        Some(dir) => from_bytes_in(&bytes, format, &name, dir),
        None => from_bytes(&bytes, format, &name),
    }
}

/// Every operator of a model file as `(node name, operator name as the format spells it,
/// supported)`, in order, read without importing: what `npu inspect` lists for a model that
/// does not import. `supported` is whether the importer knows the operator at all.
pub fn operator_list(path: &Path) -> Result<Vec<(String, String, bool)>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    match sniff(&bytes, path) {
        Some(Format::Tflite) => Ok(tflite::operator_list(&bytes)?
            .into_iter()
            .map(|(node, op)| {
                let ok = crate::operators::tflite_names().any(|n| n == op);
                (node, op, ok)
            })
            .collect()),
        Some(Format::Onnx) => Ok(onnx::operator_list(&bytes)?
            .into_iter()
            .map(|(node, op)| {
                let ok = onnx::is_known(&op);
                (node, op, ok)
            })
            .collect()),
        None => Err(Error::NotAModel {
            path: path.to_path_buf(),
            detail: "neither a TFLite flatbuffer (no TFL3 identifier) nor an ONNX protobuf".into(),
        }),
    }
}

/// Imports a model from memory, validated; an ONNX model's external data files are read from
/// `dir` (the directory the model came from).
pub fn from_bytes_in(bytes: &[u8], format: Format, name: &str, dir: &Path) -> Result<Graph> {
    let graph = match format {
        Format::Onnx => onnx::import_from(bytes, name, Some(dir))?,
        Format::Tflite => tflite::import(bytes, name)?,
    };
    finish(graph)
}

/// The side files a model reads besides itself (an ONNX model's external data files, resolved
/// against `dir`), for build tracking and cache keys. Unreadable models list none (their import
/// reports the error).
pub fn side_files(bytes: &[u8], format: Format, dir: &Path) -> Vec<std::path::PathBuf> {
    match format {
        Format::Onnx => onnx::external_files(bytes, dir),
        Format::Tflite => Vec::new(),
    }
}

/// Imports a model from memory, validated.
pub fn from_bytes(bytes: &[u8], format: Format, name: &str) -> Result<Graph> {
    let graph = match format {
        Format::Onnx => onnx::import(bytes, name)?,
        Format::Tflite => tflite::import(bytes, name)?,
    };
    finish(graph)
}

/// The passes both importers' graphs go through, whichever entry point imported them, then
/// validation.
fn finish(mut graph: Graph) -> Result<Graph> {
    fuse_act::fuse_swish(&mut graph);
    fuse_act::fuse_float_islands(&mut graph);
    graph.validate()?;
    Ok(graph)
}
