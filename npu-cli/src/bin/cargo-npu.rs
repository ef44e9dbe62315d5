//! `cargo npu`: the `npu` tool with defaults from `[package.metadata.npu]`; see `cargo npu --help`.

fn main() -> std::process::ExitCode {
    npu_cli::report_exit(npu_cli::cargo_main())
}
