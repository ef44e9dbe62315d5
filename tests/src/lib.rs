//! Shared helpers of the conformance tests: where the copied fixtures live.

use std::path::PathBuf;

/// `fixtures/` at the workspace root (copied from the shared fixtures; tests never read `../shared`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("fixtures")
}
