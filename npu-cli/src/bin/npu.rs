//! The `npu` command-line tool; see `npu --help`.

fn main() -> std::process::ExitCode {
    npu_cli::report_exit(npu_cli::main())
}
