//! The build-time API: compile a model (with a cache) and generate its typed Rust module.
//! `include_model!` and the build.rs path ([`Model::compile`]) both go through
//! [`Model::expand`], so they produce the same API.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), npu_build::Error> {
//!     npu_build::Model::new("models/mv2.onnx")
//!         .target("ethos-u55-128")
//!         .compile()?;
//!     Ok(())
//! }
//! // src/main.rs: npu_rt::include_compiled!(mv2);
//! ```

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;

use crate::codegen::{self, ArtifactFiles, IoApi, ModelApi, StepApi};
use crate::error::{Error, IoSide, NameKind, Result};
use crate::ethos_u::{Compiled, Step};
use crate::import;
use crate::target::Target;

/// A hash of the compiler's source (`build.rs`): part of the cache key, so any change to the
/// compiler invalidates every cached model without anyone having to remember to.
const SOURCE_HASH: &str = env!("NPU_BUILD_SOURCE_HASH");

/// A model to compile at build time, with its options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    path: PathBuf,
    target: Option<String>,
    system_config: Option<String>,
    memory_mode: Option<String>,
    name: Option<String>,
    sram_limit: Option<u64>,
    cpu_fallback: Option<bool>,
    force_cpu: Vec<String>,
    weights_section: Option<String>,
    input_names: Option<Vec<String>>,
    output_names: Option<Vec<String>>,
    optimise_size: bool,
}

/// What [`Model::expand`] produced.
#[derive(Debug)]
pub struct Expanded {
    pub api: ModelApi,
    /// The generated module.
    pub tokens: TokenStream,
    /// The model file actually read (absolute).
    pub model_path: PathBuf,
    /// Whether the artifact came from the cache.
    pub cached: bool,
    /// Files the model reads besides itself (ONNX external data; absolute when the model is).
    pub side_files: Vec<PathBuf>,
}

impl Model {
    /// A model file; relative paths are resolved against `CARGO_MANIFEST_DIR`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Model {
            path: path.into(),
            ..Default::default()
        }
    }

    /// Accelerator configuration, e.g. `ethos-u55-128` (default: `[package.metadata.npu]`, else
    /// `ethos-u55-128`).
    pub fn target(mut self, name: impl Into<String>) -> Self {
        self.target = Some(name.into());
        self
    }

    /// System configuration (Vela's vela.ini names).
    pub fn system_config(mut self, name: impl Into<String>) -> Self {
        self.system_config = Some(name.into());
        self
    }

    /// Memory mode (`Shared_Sram`, `Sram_Only`, `Dedicated_Sram`).
    pub fn memory_mode(mut self, name: impl Into<String>) -> Self {
        self.memory_mode = Some(name.into());
        self
    }

    /// Module name (default: the file stem in snake_case).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Largest arena (SRAM) the model may need, in bytes; more is an error stating both numbers.
    pub fn sram_limit(mut self, bytes: u64) -> Self {
        self.sram_limit = Some(bytes);
        self
    }

    /// Whether operators the NPU cannot run may run on the CPU (default true).
    pub fn cpu_fallback(mut self, allowed: bool) -> Self {
        self.cpu_fallback = Some(allowed);
        self
    }

    /// Runs this node (by name) or every operator of this kind (`Softmax`, `Conv2D`, ...) on the
    /// CPU even where the NPU could (repeatable).
    pub fn cpu(mut self, node_or_op: impl Into<String>) -> Self {
        self.force_cpu.push(node_or_op.into());
        self
    }

    /// Linker section for the statics the NPU reads: weights and command streams (default
    /// `.rodata`).
    pub fn weights_section(mut self, section: impl Into<String>) -> Self {
        self.weights_section = Some(section.into());
        self
    }

    /// Names the inputs' fields and modules in the generated API, in model order, instead of
    /// the names the exporter gave them (`serving_default_keras_tensor_0`). Each must be a Rust
    /// identifier; a count that differs from the model's inputs is an error listing them.
    ///
    /// ```
    /// let m = npu_build::Model::new("models/digits.tflite").inputs(["image"]).outputs(["logits"]);
    /// # let _ = m;
    /// ```
    pub fn inputs<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.input_names = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// `"performance"` (default) or `"size"`: stripe chains of operations for the smallest
    /// arena, as Vela's `--optimise Size` (more cycles). Other values are an error.
    pub fn optimise(mut self, goal: &str) -> Result<Self> {
        self.optimise_size = match goal {
            "performance" => false,
            "size" => true,
            other => {
                return Err(Error::UnknownName {
                    what: NameKind::Optimise,
                    given: other.into(),
                    valid: "performance, size".into(),
                });
            }
        };
        Ok(self)
    }

    /// Names the outputs, like [`Model::inputs`].
    pub fn outputs<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.output_names = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The module name this model gets.
    pub fn module_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => codegen::snake_ident(
                self.path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("model"),
            ),
        }
    }

    fn manifest_dir() -> PathBuf {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The model file path, resolved against `CARGO_MANIFEST_DIR`.
    pub fn resolved_path(&self) -> PathBuf {
        if self.path.is_absolute() {
            self.path.clone()
        } else {
            Self::manifest_dir().join(&self.path)
        }
    }

    /// Compiles (or loads from the cache) and generates the module's tokens.
    ///
    /// `cache_root` holds one directory per cache key; see [`default_cache_root`].
    pub fn expand(&self, cache_root: &Path) -> Result<Expanded> {
        let model_path = self.resolved_path();
        let bytes = std::fs::read(&model_path).map_err(|e| Error::io(&model_path, e))?;
        let target = Target::new(
            self.target.as_deref().unwrap_or("ethos-u55-128"),
            self.system_config.as_deref(),
            self.memory_mode.as_deref(),
        )?;
        let module = self.module_name();
        if syn_ident_ok(&module).is_none() {
            return Err(Error::UnknownName {
                what: NameKind::ModuleName,
                given: module,
                valid: "a Rust identifier".into(),
            });
        }
        // An ONNX model's external data is part of what it computes: its bytes join the key.
        let dir_of_model = model_path.parent().unwrap_or(Path::new("."));
        let side_files = import::sniff(&bytes, &model_path)
            .map(|f| import::side_files(&bytes, f, dir_of_model))
            .unwrap_or_default();
        let mut keyed = bytes.clone();
        for f in &side_files {
            keyed.extend(std::fs::read(f).map_err(|e| Error::io(f, e))?);
        }
        let key = self.cache_key(&keyed, &target);
        let dir = cache_root.join(format!("{module}-{key:032x}"));
        let api_path = dir.join("api.json");
        let (mut api, cached) = match std::fs::read(&api_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<ModelApi>(&b).ok())
        {
            Some(api)
                if dir.join("cmd_stream.bin").exists() && dir.join("weights.bin").exists() =>
            {
                (api, true)
            }
            _ => {
                let format =
                    import::sniff(&bytes, &model_path).ok_or_else(|| Error::NotAModel {
                        path: model_path.clone(),
                        detail:
                            "neither a TFLite flatbuffer (no TFL3 identifier) nor an ONNX protobuf"
                                .into(),
                    })?;
                let graph = import::from_bytes_in(&bytes, format, &module, dir_of_model)?;
                // The SRAM budget: the arena's where it is SRAM (striping fits it), the fast
                // scratch's where the arena is in DRAM.
                let limit = self
                    .sram_limit
                    .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
                let options = crate::ethos_u::CompileOptions::for_target(&target)
                    .with_sram_limit(&target, limit)
                    .with(|o| {
                        o.cpu_fallback = self.cpu_fallback.unwrap_or(true);
                        o.force_cpu = self.force_cpu.clone();
                        o.optimise_size = self.optimise_size;
                    });
                let compiled = crate::ethos_u::compile_with(&graph, target.accelerator, &options)?;
                let api = model_api(&compiled, &graph, &target, &self.path);
                write_cache(&dir, &compiled, &api)?;
                (api, false)
            }
        };
        api.module = module;
        rename_io(
            &mut api,
            self.input_names.as_deref(),
            self.output_names.as_deref(),
        )?;
        if let Some(limit) = self.sram_limit
            && api.sram_bytes as u64 > limit
        {
            return Err(Error::Budget {
                what: format!(
                    "model '{}' on {} ({})",
                    self.path.display(),
                    api.target,
                    api.memory_mode
                ),
                needed: api.sram_bytes as u64,
                limit,
            });
        }
        let tokens = codegen::generate(
            &api,
            &ArtifactFiles {
                command_stream: &dir.join("cmd_stream.bin"),
                weights: &dir.join("weights.bin"),
                model: Some(&model_path),
                side_files: &side_files,
            },
            self.weights_section.as_deref(),
        );
        Ok(Expanded {
            api,
            tokens,
            model_path,
            cached,
            side_files,
        })
    }

    fn cache_key(&self, bytes: &[u8], target: &Target) -> u128 {
        let parts = |seed: u64| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            seed.hash(&mut h);
            env!("CARGO_PKG_VERSION").hash(&mut h);
            SOURCE_HASH.hash(&mut h);
            bytes.hash(&mut h);
            target.accelerator.name.hash(&mut h);
            target.system_config.name.hash(&mut h);
            target.memory_mode.name.hash(&mut h);
            self.cpu_fallback.hash(&mut h);
            self.force_cpu.hash(&mut h);
            // It caps the arena (striping) or the fast scratch.
            self.sram_limit.hash(&mut h);
            self.optimise_size.hash(&mut h);
            h.finish()
        };
        (u128::from(parts(0x6e70_7531)) << 64) | u128::from(parts(0x6e70_7532))
    }

    /// The build.rs path: compiles the model, writes `$OUT_DIR/<name>.rs` and prints the
    /// `cargo:rerun-if-changed` lines. Options not set here come from `[package.metadata.npu]`
    /// of the crate being built (keys `target`, `system_config`, `memory_mode`, `sram_limit`).
    /// Returns the path of the generated file; include it with `npu_rt::include_compiled!(name)`.
    pub fn compile(&self) -> Result<PathBuf> {
        let out_dir = std::env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| {
                Error::BuildEnv(
                    "OUT_DIR is not set: Model::compile is meant for build scripts".into(),
                )
            })?;
        let manifest = Self::manifest_dir().join("Cargo.toml");
        let with_defaults = self.clone().with_metadata_defaults(&manifest)?;
        let expanded = with_defaults.expand(&out_dir.join("npu-cache"))?;
        let file = out_dir.join(format!("{}.rs", expanded.api.module));
        let code = format!(
            "// Generated by npu-build from {}. Do not edit.\n{}\n",
            expanded.model_path.display(),
            expanded.tokens
        );
        std::fs::write(&file, code).map_err(|e| Error::io(&file, e))?;
        println!("cargo:rerun-if-changed={}", expanded.model_path.display());
        for f in &expanded.side_files {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        println!("cargo:rerun-if-changed={}", manifest.display());
        Ok(file)
    }

    /// Fills unset options from `[package.metadata.npu]` of `manifest` (read with cargo_metadata).
    pub fn with_metadata_defaults(mut self, manifest: &Path) -> Result<Self> {
        let Some(npu) = npu_metadata(manifest)? else {
            return Ok(self);
        };
        let text = |key: &str| npu.get(key).and_then(|v| v.as_str()).map(str::to_string);
        if self.target.is_none() {
            self.target = text("target");
        }
        if self.system_config.is_none() {
            self.system_config = text("system_config");
        }
        if self.memory_mode.is_none() {
            self.memory_mode = text("memory_mode");
        }
        if self.sram_limit.is_none()
            && let Some(v) = npu.get("sram_limit")
        {
            let parsed = match v {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => parse_size(s),
                _ => None,
            };
            self.sram_limit = Some(parsed.ok_or_else(|| Error::UnknownName {
                what: NameKind::SramLimitMetadata,
                given: v.to_string(),
                valid: "a byte count such as 524288, \"512K\" or \"2M\"".into(),
            })?);
        }
        Ok(self)
    }
}

/// The `[package.metadata.npu]` table of the package whose manifest is `manifest` (read with
/// cargo_metadata), or `None` when the package has none (a workspace root without a package has
/// none either). The build.rs API and `cargo npu` both take their defaults from it.
pub fn npu_metadata(manifest: &Path) -> Result<Option<serde_json::Value>> {
    let meta = cargo_metadata::MetadataCommand::new()
        .manifest_path(manifest)
        .no_deps()
        .exec()
        .map_err(|e| Error::BuildEnv(format!("cargo metadata for {}: {e}", manifest.display())))?;
    let canonical = manifest
        .canonicalize()
        .unwrap_or_else(|_| manifest.to_path_buf());
    let package = meta.packages.into_iter().find(|p| {
        p.manifest_path
            .as_std_path()
            .canonicalize()
            .is_ok_and(|m| m == canonical)
    });
    Ok(package.and_then(|p| p.metadata.get("npu").cloned()))
}

fn syn_ident_ok(s: &str) -> Option<()> {
    let mut chars = s.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_').then_some(())?;
    chars
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(())
}

/// Parses a size such as `524288`, `512K`, `512KiB`, `2M` or `1.5M` (binary units).
///
/// ```
/// assert_eq!(npu_build::build_api::parse_size("512K"), Some(512 * 1024));
/// assert_eq!(npu_build::build_api::parse_size("2MiB"), Some(2 << 20));
/// assert_eq!(npu_build::build_api::parse_size("100"), Some(100));
/// assert_eq!(npu_build::build_api::parse_size("lots"), None);
/// ```
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let (num, mult) = [
        ("kib", 1u64 << 10),
        ("k", 1 << 10),
        ("kb", 1 << 10),
        ("mib", 1 << 20),
        ("m", 1 << 20),
        ("mb", 1 << 20),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, m)| {
        lower
            .strip_suffix(suffix)
            .map(|n| (n.trim().to_string(), *m))
    })
    .unwrap_or((lower.clone(), 1));
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult);
    }
    let f: f64 = num.parse().ok()?;
    (f.is_finite() && f >= 0.0).then_some((f * mult as f64) as u64)
}

/// The cache directory for `include_model!`: `$NPU_CACHE_DIR`, else `npu-cache` in the Cargo
/// target directory (`$CARGO_TARGET_DIR`, else `target/` of the workspace holding
/// `CARGO_MANIFEST_DIR`, found by its `Cargo.lock`).
pub fn default_cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("NPU_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d).join("npu-cache");
    }
    let manifest = Model::manifest_dir();
    let root = manifest
        .ancestors()
        .filter(|a| a.join("Cargo.lock").exists())
        .last()
        .unwrap_or(&manifest)
        .to_path_buf();
    root.join("target").join("npu-cache")
}

/// Applies the user's names for the inputs and outputs (see [`Model::inputs`]).
fn rename_io(
    api: &mut ModelApi,
    inputs: Option<&[String]>,
    outputs: Option<&[String]>,
) -> Result<()> {
    for (which, names, list) in [
        (IoSide::Inputs, inputs, &mut api.inputs),
        (IoSide::Outputs, outputs, &mut api.outputs),
    ] {
        let Some(names) = names else { continue };
        if names.len() != list.len() {
            let have: Vec<String> = list
                .iter()
                .map(|t| format!("'{}' (default name `{}`)", t.name, t.ident))
                .collect();
            return Err(Error::IoNames {
                which,
                detail: format!(
                    "names {} tensor{} but the model has {} {}: {}",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    list.len(),
                    if list.len() == 1 {
                        which.as_str().trim_end_matches('s')
                    } else {
                        which.as_str()
                    },
                    have.join(", ")
                ),
            });
        }
        for (t, n) in list.iter_mut().zip(names) {
            if syn_ident_ok(n).is_none() || codegen::is_reserved(n) {
                return Err(Error::IoNames {
                    which,
                    detail: format!(
                        "name `{n}` for tensor '{}' is not usable: it must be a Rust identifier \
                         and not a keyword or one of the module's own names (run, run_into, core, std)",
                        t.name
                    ),
                });
            }
            t.ident = n.clone();
        }
    }
    let mut seen = std::collections::HashSet::new();
    for t in api.inputs.iter().chain(&api.outputs) {
        if !seen.insert(t.ident.as_str()) {
            return Err(Error::IoNames {
                which: IoSide::Both,
                detail: format!(
                    "name `{}` is used twice (inputs and outputs share the module's namespace)",
                    t.ident
                ),
            });
        }
    }
    Ok(())
}

fn model_api(c: &Compiled, graph: &crate::ir::Graph, target: &Target, source: &Path) -> ModelApi {
    // One namespace for inputs and outputs: each gets a `pub mod` in the generated module.
    let mut idents =
        codegen::unique_idents(c.inputs.iter().chain(&c.outputs).map(|t| t.name.as_str()))
            .into_iter();
    let mut io = |list: &[crate::ethos_u::IoTensor]| -> Vec<IoApi> {
        let idents: Vec<String> = idents.by_ref().take(list.len()).collect();
        list.iter()
            .zip(idents)
            .map(|(t, ident)| IoApi {
                name: t.name.clone(),
                ident,
                shape: t.shape.clone(),
                dtype: codegen::rust_elem(t.dtype).into(),
                scale: t.scale,
                zero_point: t.zero_point,
                offset: t.offset,
            })
            .collect()
    };
    let mut op_counts: Vec<(String, usize)> = Vec::new();
    for op in &graph.ops {
        let name = op.kind.name();
        match op_counts.iter_mut().find(|(n, _)| n == name) {
            Some((_, k)) => *k += 1,
            None => op_counts.push((name.to_string(), 1)),
        }
    }
    let (sram, _dram, flash) = target.memory_use(c.arena_size, c.flash_bytes());
    // The fast scratch is SRAM too.
    let sram = sram + c.fast_scratch_size;
    // The estimator on each command stream, as `npu report` does (CPU steps not included).
    let npu_cycles_estimate = crate::ethos_u::perf::npu_cycles(c, target).unwrap_or(0);
    ModelApi {
        module: String::new(),
        source: source.display().to_string(),
        target: c.accelerator.name.into(),
        system_config: target.system_config.name.into(),
        memory_mode: target.memory_mode.name.into(),
        arena_size: c.arena_size,
        fast_scratch_size: c.fast_scratch_size,
        command_stream_len: c.command_stream.len(),
        weights_len: c.weights.len(),
        inputs: io(&c.inputs),
        outputs: io(&c.outputs),
        npu_ops: c.npu_ops,
        cpu_ops: c.cpu_ops(),
        op_counts,
        sram_bytes: sram,
        flash_bytes: flash,
        steps: step_apis(c),
        npu_cycles_estimate,
        npu_clock_hz: target.system_config.core_clock_hz as u64,
        state: c.state_flag.map(|flag| codegen::StateApi {
            flag,
            fills: c
                .variables
                .iter()
                .map(|v| (v.offset, v.byte_size(), v.initial_byte()))
                .collect(),
        }),
    }
}

/// The steps of a mixed model (empty for a model that runs entirely on the NPU).
fn step_apis(c: &Compiled) -> Vec<StepApi> {
    if c.cpu_ops() == 0 {
        return Vec::new();
    }
    c.steps
        .iter()
        .enumerate()
        .map(|(k, s)| match s {
            Step::Npu { command_stream, .. } => StepApi::Npu {
                file: step_file(k),
                len: command_stream.len(),
            },
            Step::Cpu(cpu) => StepApi::Cpu {
                node: cpu.node.clone(),
                op: cpu.op.clone(),
                reason: cpu.reason.clone(),
                words: cpu.words(),
            },
        })
        .collect()
}

/// File name of the command stream of step `k` of a mixed model.
fn step_file(k: usize) -> String {
    format!("cmd_stream_{k}.bin")
}

fn write_cache(dir: &Path, c: &Compiled, api: &ModelApi) -> Result<()> {
    // Write into a fresh temporary directory and rename, so a concurrent or interrupted build
    // never sees half an artifact.
    let parent = dir.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("model")
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let put = |name: &str, bytes: &[u8]| {
        let p = tmp.join(name);
        std::fs::write(&p, bytes).map_err(|e| Error::io(p, e))
    };
    put("cmd_stream.bin", &c.command_stream)?;
    if c.cpu_ops() > 0 {
        for (k, s) in c.steps.iter().enumerate() {
            if let Step::Npu { command_stream, .. } = s {
                put(&step_file(k), command_stream)?;
            }
        }
    }
    put("weights.bin", &c.weights)?;
    let json = serde_json::to_vec_pretty(api).map_err(|e| Error::Internal(e.to_string()))?;
    put("api.json", &json)?;
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another build finished the same key first: keep theirs.
        Err(_) if dir.join("api.json").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => Err(Error::io(dir, e)),
    }
}
