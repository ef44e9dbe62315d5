//! `npu disasm`.

use std::path::PathBuf;

use crate::error::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file or compiled directory.
    pub path: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    Err(Error::Other(format!("npu disasm {}: not written yet", args.path.display())))
}
