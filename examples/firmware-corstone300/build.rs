//! Hands cortex-m-rt's linker script (`link.x`, which includes `memory.x`) to the linker when
//! building for a bare-metal Arm target; host builds (e.g. `cargo fmt`, `cargo metadata`, a
//! stray `cargo build --workspace`) get a stub `main` and no linker script.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=memory.x");
    let target = env::var("TARGET").unwrap_or_default();
    if !target.starts_with("thumb") {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    // No page alignment between the far-apart regions (keeps the ELF small).
    println!("cargo:rustc-link-arg-bins=--nmagic");
}
