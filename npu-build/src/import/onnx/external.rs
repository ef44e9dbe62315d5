//! Initializers stored as external data (`model.onnx` + a side file such as `model.onnx.data`,
//! as `onnx.save(..., save_as_external_data=True)` and exporters of large models write them).
//!
//! ONNX's external-data convention (`docs/ExternalData.md` of the ONNX repository): a tensor with
//! `data_location = EXTERNAL` lists `location` (a path relative to the model's directory),
//! optional `offset` and `length` (bytes) in `external_data`; its bytes are the tensor's
//! `raw_data`. The importer reads them before decoding, so the rest of it sees ordinary
//! initializers.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::proto;
use crate::error::{Error, Result};

/// Whether tensor `t` keeps its data in an external file.
fn is_external(t: &proto::TensorProto) -> bool {
    t.data_location == Some(proto::DATA_LOCATION_EXTERNAL) || !t.external_data.is_empty()
}

/// The files (in `dir`) holding the external data of `graph`'s initializers, each once, in order;
/// invalid locations are left out (reading the data reports them).
pub(crate) fn locations(graph: &proto::GraphProto, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for t in graph.initializer.iter().filter(|t| is_external(t)) {
        let Some(loc) = t.external_data.iter().find(|e| e.key == "location") else {
            continue;
        };
        let rel = Path::new(&loc.value);
        if rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            let p = dir.join(rel);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Reads the external data of every initializer of `graph` from files in `dir` (the model's
/// directory) into `raw_data`. Returns the files read (a build tracks them for rebuilds).
pub(crate) fn resolve(graph: &mut proto::GraphProto, dir: Option<&Path>) -> Result<Vec<PathBuf>> {
    let mut files: HashMap<PathBuf, Vec<u8>> = HashMap::new();
    let mut order = Vec::new();
    for t in graph.initializer.iter_mut().filter(|t| is_external(t)) {
        let bad = |detail: String| Error::InvalidTensor {
            tensor: t.name.clone(),
            detail,
        };
        let entry = |key: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == key)
                .map(|e| e.value.clone())
        };
        let location = entry("location")
            .ok_or_else(|| bad("its data is external, but no 'location' names the file".into()))?;
        let number = |key: &str| -> Result<Option<usize>> {
            entry(key)
                .map(|v| {
                    v.parse::<usize>()
                        .map_err(|_| bad(format!("external data {key} '{v}' is not a byte count")))
                })
                .transpose()
        };
        let offset = number("offset")?.unwrap_or(0);
        let length = number("length")?;
        let Some(dir) = dir else {
            return Err(bad(format!(
                "its data is in the external file '{location}'; import the model from its path so that file can be read next to it"
            )));
        };
        let rel = Path::new(&location);
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(bad(format!(
                "external data location '{location}' must be a relative path inside the model's directory"
            )));
        }
        let path = dir.join(rel);
        if !files.contains_key(&path) {
            let bytes = std::fs::read(&path).map_err(|e| {
                bad(format!(
                    "its external data file '{}' cannot be read: {e}",
                    path.display()
                ))
            })?;
            files.insert(path.clone(), bytes);
            order.push(path.clone());
        }
        let bytes = &files[&path];
        let end = match length {
            Some(l) => offset.checked_add(l),
            None => Some(bytes.len()),
        };
        let Some(data) = end.and_then(|end| bytes.get(offset..end)) else {
            return Err(bad(format!(
                "its external data file '{}' holds {} bytes, too few for offset {offset} and length {} (a truncated file?)",
                path.display(),
                bytes.len(),
                length.map_or("to the end".to_string(), |l| l.to_string())
            )));
        };
        t.raw_data = data.to_vec();
        t.external_data.clear();
        t.data_location = None;
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx::proto::{StringStringEntryProto, TensorProto, data_type};

    fn external(name: &str, entries: &[(&str, &str)]) -> TensorProto {
        TensorProto {
            name: name.into(),
            data_type: data_type::INT8,
            dims: vec![3],
            data_location: Some(proto::DATA_LOCATION_EXTERNAL),
            external_data: entries
                .iter()
                .map(|(k, v)| StringStringEntryProto {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn graph(t: TensorProto) -> proto::GraphProto {
        proto::GraphProto {
            initializer: vec![t],
            ..Default::default()
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("npu-external-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_offset_and_length_from_the_side_file() {
        let d = temp_dir("ok");
        std::fs::write(d.join("m.onnx.data"), [9u8, 9, 1, 2, 3, 9]).unwrap();
        let mut g = graph(external(
            "w",
            &[
                ("location", "m.onnx.data"),
                ("offset", "2"),
                ("length", "3"),
            ],
        ));
        assert_eq!(locations(&g, &d), [d.join("m.onnx.data")]);
        let files = resolve(&mut g, Some(&d)).unwrap();
        assert_eq!(files, [d.join("m.onnx.data")]);
        assert_eq!(g.initializer[0].raw_data, [1, 2, 3]);
        assert!(g.initializer[0].external_data.is_empty());
    }

    #[test]
    fn missing_truncated_or_escaping_files_are_named() {
        let d = temp_dir("bad");
        std::fs::write(d.join("short.data"), [1u8, 2]).unwrap();
        let err = |t: TensorProto, dir: Option<&Path>| {
            resolve(&mut graph(t), dir).unwrap_err().to_string()
        };
        let e = err(external("w", &[("location", "gone.data")]), Some(&d));
        assert!(
            e.contains("gone.data") && e.contains("cannot be read"),
            "{e}"
        );
        let e = err(
            external("w", &[("location", "short.data"), ("length", "3")]),
            Some(&d),
        );
        assert!(
            e.contains("short.data") && e.contains("holds 2 bytes"),
            "{e}"
        );
        let e = err(external("w", &[("location", "../x.data")]), Some(&d));
        assert!(e.contains("relative path inside"), "{e}");
        let e = err(external("w", &[("location", "short.data")]), None);
        assert!(e.contains("import the model from its path"), "{e}");
        let e = err(
            external("w", &[("location", "short.data"), ("offset", "-1")]),
            Some(&d),
        );
        assert!(e.contains("not a byte count"), "{e}");
    }
}
