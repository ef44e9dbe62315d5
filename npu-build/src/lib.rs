//! `npu-build`: the compiler from quantized ONNX/TFLite models to Ethos-U command streams.
//!
//! Data flows one way: file -> [`import`] -> [`ir`] -> ([`reference`] | [`ethos_u`] backend)
//! -> artifact -> codegen. The `npu` command-line tool (crate `npu-cli`) drives the same pieces.
//!
//! Features: `sim` runs compiled models on the virtual Ethos-U (`Compiled::run_sim`), `npy`
//! reads and writes `.npy` files; an application that only embeds a model needs neither.
//!
//! ```no_run
//! let graph = npu_build::import::load(std::path::Path::new("model.tflite"))?;
//! println!("{} ops", graph.ops.len());
//! # Ok::<(), npu_build::Error>(())
//! ```

pub mod build_api;
pub mod codegen;
pub mod error;
pub mod ethos_u;
pub mod import;
pub mod ir;
pub mod operators;
pub mod reference;
pub mod target;
pub mod value;

pub use build_api::Model;
pub use error::{Error, Result};
