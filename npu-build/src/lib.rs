//! `npu-build`: the compiler from quantized ONNX/TFLite models to Ethos-U command streams.
//!
//! Data flows one way: file -> [`import`] -> [`ir`] -> ([`reference`] | [`ethos_u`] backend)
//! -> artifact -> codegen. The `npu` command-line tool ([`cli`]) drives the same pieces.
//!
//! ```no_run
//! let graph = npu_build::import::load(std::path::Path::new("model.tflite"))?;
//! println!("{} ops", graph.ops.len());
//! # Ok::<(), npu_build::Error>(())
//! ```

pub mod build_api;
pub mod cli;
pub mod codegen;
pub mod error;
pub mod ethos_u;
pub mod import;
pub mod ir;
pub mod reference;
pub mod target;
pub mod value;

pub use build_api::Model;
pub use error::{Error, Result};
