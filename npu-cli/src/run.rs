//! `npu run MODEL --engine reference --input IN.npy [--input ...] --output OUT.npy [--output ...]`:
//! runs a model on an engine. Inputs are given in the model's input order and must have the
//! model's dtypes (int8 models take int8 `.npy`, float-boundary models float32); outputs are
//! written in the model's output order.

use std::path::PathBuf;

use npu_build::error::{Error, Result};
use npu_build::value::Value;

/// Engines a model can run on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The int8 reference interpreter (bit-exact with TFLite's reference kernels).
    Reference,
    /// The virtual Ethos-U NPU running the compiled command streams, with the CPU kernels of
    /// operators the NPU cannot run in between.
    Sim,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model file (.tflite or .onnx); under `cargo npu`, default `[package.metadata.npu] model`.
    pub path: Option<PathBuf>,
    /// Engine to run on.
    #[arg(long, value_enum, default_value_t = Engine::Reference)]
    pub engine: Engine,
    /// Input .npy files, in the model's input order.
    #[arg(long = "input", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output .npy files, in the model's output order (without any, the outputs are summarized on
    /// stdout).
    #[arg(long = "output")]
    pub outputs: Vec<PathBuf>,
    /// Reference engine: write every activation the interpreter computes to this directory
    /// (`NNNN.npy` by tensor id, and `index.json` with each tensor's name, shape, type and
    /// quantization), for comparing a model layer by layer with another runtime.
    #[arg(long, value_name = "DIR")]
    pub dump_dir: Option<PathBuf>,
    /// Target of the sim engine.
    #[command(flatten)]
    pub target: crate::compile::TargetArgs,
}

/// Writes the interpreter's value of every activation of `graph` into `dir`.
fn dump(graph: &npu_build::ir::Graph, inputs: &[Value], dir: &std::path::Path) -> Result<()> {
    let values = npu_build::reference::Interpreter::new(graph)?.run_all(inputs)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut index = Vec::new();
    for (id, (t, v)) in graph.tensors.iter().zip(&values).enumerate() {
        let Some(v) = v.as_ref().filter(|_| !t.is_const()) else {
            continue;
        };
        let file = format!("{id:04}.npy");
        v.write_npy(&dir.join(&file))?;
        let (scale, zero_point) = t
            .quant
            .as_ref()
            .map_or((None, None), |q| (Some(q.scale()), Some(q.zero_point())));
        index.push(serde_json::json!({
            "file": file,
            "name": t.name,
            "shape": t.shape,
            "dtype": t.dtype.name(),
            "scale": scale,
            "zero_point": zero_point,
        }));
    }
    let path = dir.join("index.json");
    let text = serde_json::to_string_pretty(&index).map_err(|e| Error::Internal(e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    println!("{} tensors -> {}", index.len(), dir.display());
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    let graph = npu_build::import::load(&crate::model_path(args.path.as_deref())?)?;
    if !args.outputs.is_empty() && args.outputs.len() != graph.outputs.len() {
        return Err(Error::Usage(format!(
            "the model has {} output(s) but {} --output path(s) were given",
            graph.outputs.len(),
            args.outputs.len()
        )));
    }
    let inputs = args
        .inputs
        .iter()
        .map(|p| Value::read_npy(p))
        .collect::<Result<Vec<_>>>()?;
    if let Some(dir) = &args.dump_dir {
        if args.engine != Engine::Reference {
            return Err(Error::Usage(
                "--dump-dir needs the reference engine (the NPU keeps only what it must)".into(),
            ));
        }
        dump(&graph, &inputs, dir)?;
    }
    let outputs = match args.engine {
        Engine::Reference => npu_build::reference::run(&graph, &inputs)?,
        Engine::Sim => {
            let target = args.target.resolve()?;
            let options = args.target.options(&target);
            let compiled = npu_build::ethos_u::compile_with(&graph, target.accelerator, &options)?;
            compiled.run_sim(&inputs)?.0
        }
    };
    for (k, v) in outputs.iter().enumerate() {
        let name = graph
            .outputs
            .get(k)
            .and_then(|&t| graph.tensors.get(t.index()))
            .map_or("", |t| t.name.as_str());
        match args.outputs.get(k) {
            Some(path) => {
                v.write_npy(path)?;
                println!(
                    "output {k} '{name}': {} {:?} -> {}",
                    v.dtype(),
                    v.shape,
                    path.display()
                );
            }
            None => {
                let bytes = v.data.to_le_bytes();
                let size = v.dtype().size();
                let head: Vec<String> = bytes
                    .chunks_exact(size)
                    .take(16)
                    .map(|c| match v.data {
                        npu_build::value::Data::F32(_) => {
                            format!("{}", f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        }
                        npu_build::value::Data::I8(_) => format!("{}", c[0] as i8),
                        npu_build::value::Data::U8(_) => format!("{}", c[0]),
                        npu_build::value::Data::I16(_) => {
                            format!("{}", i16::from_le_bytes([c[0], c[1]]))
                        }
                        npu_build::value::Data::I32(_) => {
                            format!("{}", i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        }
                        npu_build::value::Data::I64(_) => {
                            let mut b = [0u8; 8];
                            b.copy_from_slice(c);
                            format!("{}", i64::from_le_bytes(b))
                        }
                    })
                    .collect();
                let more = if v.data.len() > head.len() {
                    ", ..."
                } else {
                    ""
                };
                println!(
                    "output {k} '{name}': {} {:?} [{}{more}]",
                    v.dtype(),
                    v.shape,
                    head.join(", ")
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_writes_every_activation_with_its_name() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/op_lstm");
        let graph = npu_build::import::load(&root.join("op_lstm.tflite")).expect("import");
        let x = Value::read_npy(&root.join("io/input_0.npy")).expect("input");
        let dir = std::env::temp_dir().join(format!("npu-dump-{}", std::process::id()));
        dump(&graph, std::slice::from_ref(&x), &dir).expect("dump");
        let index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).expect("index"))
                .expect("json");
        let entries = index.as_array().expect("list");
        // Input, the LSTM's two states, its output and the sliced graph output.
        assert_eq!(entries.len(), 5, "{entries:?}");
        let out = &graph.tensors[graph.outputs[0]].name;
        let e = entries
            .iter()
            .find(|e| e["name"] == out.as_str())
            .expect("the output is dumped");
        let got = Value::read_npy(&dir.join(e["file"].as_str().expect("file"))).expect("npy");
        let want = npu_build::reference::run(&graph, &[x]).expect("run");
        assert_eq!(got, want[0]);
        assert_eq!(e["dtype"], "i8");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
