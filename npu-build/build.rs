//! Derives the compile cache's key from the compiler's own source.
//!
//! `include_model!` and `Model::compile` cache compiled models by a key of the model bytes and the
//! options; the key also holds this hash of the sources that decide the output (this crate's
//! `src/` and, inside the workspace, `npu-rt/src/`: the weight encoder, register definitions and
//! CPU kernel encodings live there), so a stale cache cannot outlive any change to the compiler.

use std::path::{Path, PathBuf};

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let mut roots = vec![here.join("src")];
    let runtime = here.join("..").join("npu-rt").join("src");
    if runtime.is_dir() {
        roots.push(runtime);
    }
    let mut hash = Fnv::new();
    for root in &roots {
        println!("cargo:rerun-if-changed={}", root.display());
        let mut files = Vec::new();
        collect(root, &mut files);
        files.sort();
        for file in files {
            let relative = file.strip_prefix(root).unwrap_or(&file);
            hash.write(relative.to_string_lossy().as_bytes());
            hash.write(&[0]);
            hash.write(&std::fs::read(&file).unwrap_or_default());
            hash.write(&[0]);
        }
    }
    println!("cargo:rustc-env=NPU_BUILD_SOURCE_HASH={:016x}", hash.0);
}

/// Every file under `dir`, recursively (unreadable entries are skipped: the hash only has to
/// change when the source does).
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}
