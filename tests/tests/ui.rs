//! trybuild suite for `include_model!`: every error a user can make is a compile error pointing
//! at the argument at fault with a message they can act on (`ui/fail/*.rs` + reviewed `.stderr`),
//! and the generated API compiles and runs (`ui/pass/*.rs`).
//!
//! The model paths in the cases are relative to the manifest directory of the crate trybuild
//! generates (`<target>/tests/trybuild/npu-tests/`); the models are copied there first.
//! The expected `.stderr` of `missing_file.rs` contains that path as trybuild normalizes it, so
//! run this suite with the default target directory (`target/` in the workspace).

use std::path::{Path, PathBuf};

/// `<target>/tests/trybuild/<crate>`: where trybuild builds the cases.
fn trybuild_project() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // <target>/<profile>/deps/ui-<hash>
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test binary inside a target directory");
    target
        .join("tests")
        .join("trybuild")
        .join(env!("CARGO_PKG_NAME"))
}

fn copy_models(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("ui")
        .join("models");
    std::fs::create_dir_all(to).expect("create the trybuild models directory");
    for entry in std::fs::read_dir(&from).expect("ui/models") {
        let entry = entry.expect("directory entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a model");
    }
}

#[test]
fn ui() {
    copy_models(&trybuild_project().join("models"));
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
    t.pass("ui/pass/*.rs");
}
