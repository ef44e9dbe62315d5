//! `cargo npu`: the command line Cargo passes, and the defaults of the package it runs in.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use npu_build::error::{Error, Result};

use crate::Defaults;

/// Splits Cargo's `cargo-npu npu [--manifest-path PATH] SUBCOMMAND ...` into the `npu` command
/// line and the defaults of the package's `[package.metadata.npu]`.
pub(crate) fn arguments(mut argv: Vec<OsString>) -> Result<(Vec<OsString>, Defaults)> {
    // Cargo passes its own subcommand name after the program; run directly, it is absent.
    if argv.get(1).is_some_and(|a| a == "npu") {
        argv.remove(1);
    }
    let mut manifest = None;
    if argv.get(1).is_some_and(|a| a == "--manifest-path") {
        let path = argv
            .get(2)
            .cloned()
            .ok_or_else(|| Error::Usage("--manifest-path needs a path".into()))?;
        manifest = Some(PathBuf::from(path));
        argv.drain(1..3);
    }
    if let Some(first) = argv.first_mut() {
        *first = "cargo npu".into();
    }
    // `--help` and `--version` work outside a package.
    let wants_help = argv
        .iter()
        .skip(1)
        .all(|a| a == "--help" || a == "-h" || a == "--version" || a == "-V" || a == "help");
    let manifest = match manifest {
        Some(m) => m,
        None => match find_manifest() {
            Some(m) => m,
            None if wants_help => return Ok((argv, Defaults::default())),
            None => {
                return Err(Error::Usage(
                    "cargo npu: no Cargo.toml in this directory or above it (give \
                     --manifest-path PATH, or use `npu` outside a package)"
                        .into(),
                ));
            }
        },
    };
    let defaults = read_defaults(&manifest)?;
    Ok((argv, defaults))
}

/// The nearest `Cargo.toml` from the current directory upwards.
fn find_manifest() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let candidate = dir.join("Cargo.toml");
        if candidate.is_file() {
            return Some(candidate);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// `[package.metadata.npu]` of the package whose manifest is `manifest` (empty defaults for a
/// package without the table; a workspace root without a package has none either).
pub(crate) fn read_defaults(manifest: &Path) -> Result<Defaults> {
    let Some(table) = npu_build::build_api::npu_metadata(manifest)? else {
        return Ok(Defaults::default());
    };
    let text = |key: &str| -> Result<Option<String>> {
        match table.get(key) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(Error::Metadata {
                manifest: manifest.to_path_buf(),
                detail: format!("{key} must be a string, not {v}"),
            }),
        }
    };
    // The same forms the build.rs API takes: a byte count, or a size string such as "512K".
    let sram_limit = match table.get("sram_limit") {
        None => None,
        Some(v) => Some(
            match v {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => npu_build::build_api::parse_size(s),
                _ => None,
            }
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Error::Metadata {
                manifest: manifest.to_path_buf(),
                detail: format!(
                    "sram_limit must be a byte count such as 524288, \"512K\" or \"2M\", not {v}"
                ),
            })?,
        ),
    };
    let dir = manifest.parent().unwrap_or(Path::new("."));
    Ok(Defaults {
        sram_limit,
        model: text("model")?.map(|m| dir.join(m)),
        target: text("target")?,
        system_config: text("system_config")?,
        memory_mode: text("memory_mode")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn reads_the_example_package_metadata() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("examples")
            .join("buildrs-conv")
            .join("Cargo.toml");
        let (args, d) = arguments(os(&[
            "cargo-npu",
            "npu",
            "--manifest-path",
            manifest.to_str().expect("utf-8 path"),
            "report",
        ]))
        .expect("arguments");
        assert_eq!(args, os(&["cargo npu", "report"]));
        assert_eq!(d.target.as_deref(), Some("ethos-u65-256"));
        assert!(
            d.model
                .as_ref()
                .is_some_and(|m| m.ends_with("models/conv3x3.tflite"))
        );
        assert_eq!(d.memory_mode.as_deref(), Some("Dedicated_Sram"));
        // "64K": `npu report`'s default budget.
        assert_eq!(d.sram_limit, Some(64 * 1024));
    }

    #[test]
    fn a_missing_manifest_path_value_is_an_error() {
        let e = arguments(os(&["cargo-npu", "npu", "--manifest-path"])).unwrap_err();
        assert!(
            e.to_string().contains("--manifest-path needs a path"),
            "{e}"
        );
    }
}
