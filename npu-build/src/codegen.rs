//! The typed Rust API of a compiled model, as tokens: used by `include_model!` and by the
//! build.rs path (which writes the same tokens to `$OUT_DIR/<name>.rs`).
//!
//! For a model `mv2` the generated module holds `Input`/`Output` structs with one nested-array
//! field per model tensor, a per-tensor module with `SHAPE`, `SCALE`, `ZERO_POINT`, the `Arena`
//! type, the command stream and weights as 16-byte aligned statics, and `run`/`run_into`.

use std::path::{Path, PathBuf};

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};
use serde::{Deserialize, Serialize};

use crate::ir::DType;

/// One graph input or output as the generated API exposes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoApi {
    /// Tensor name in the model.
    pub name: String,
    /// Rust identifier of its field and module (snake_case, unique).
    pub ident: String,
    pub shape: Vec<usize>,
    /// `i8`, `u8`, `i16`, `i32` or `f32`.
    pub dtype: String,
    pub scale: f32,
    pub zero_point: i32,
    /// Byte offset in the arena.
    pub offset: usize,
}

/// Everything the generated code says about a compiled model (cached next to the artifact).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelApi {
    /// Module name.
    pub module: String,
    /// The model file as the user named it.
    pub source: String,
    pub target: String,
    pub system_config: String,
    pub memory_mode: String,
    pub arena_size: usize,
    pub fast_scratch_size: usize,
    pub command_stream_len: usize,
    pub weights_len: usize,
    pub inputs: Vec<IoApi>,
    pub outputs: Vec<IoApi>,
    pub npu_ops: usize,
    pub cpu_ops: usize,
    /// Operator counts of the source model, e.g. `[("Conv2D", 35), ...]`.
    pub op_counts: Vec<(String, usize)>,
    pub sram_bytes: usize,
    pub flash_bytes: usize,
    /// The steps of `run` when the model mixes NPU and CPU operators (empty: one command stream,
    /// `cmd_stream.bin`).
    #[serde(default)]
    pub steps: Vec<StepApi>,
    /// The estimator's cycles for the NPU command streams (CPU steps not counted).
    #[serde(default)]
    pub npu_cycles_estimate: u64,
    /// NPU core clock of the system configuration, Hz.
    #[serde(default)]
    pub npu_clock_hz: u64,
    /// Variable tensors (LSTM states) kept in the arena between runs.
    #[serde(default)]
    pub state: Option<StateApi>,
}

/// Where a model's variable tensors live and how they start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateApi {
    /// Arena byte that is 0 until the first run has initialised the state.
    pub flag: usize,
    /// `(offset, bytes, fill byte)` of each variable tensor.
    pub fills: Vec<(usize, usize, u8)>,
}

/// One step of the generated `run`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StepApi {
    /// A command stream: file `file` (in the artifact directory) of `len` bytes.
    Npu { file: String, len: usize },
    /// A CPU operator: IR node and operator, why it is on the CPU, and its encoded
    /// [`npu_rt::cpu::Op`].
    Cpu {
        node: String,
        op: String,
        reason: String,
        words: Vec<u32>,
    },
}

/// Rust keywords and names the generated module uses itself (a tensor with such a name gets a
/// `_t` suffix).
const RESERVED: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try", "union", "run", "run_into", "npu_rt",
    "core", "std",
];

/// A snake_case Rust identifier for a model tensor name: non-alphanumerics become `_`, camel
/// humps are split, leading digits get a `t_` prefix, reserved words a `_t` suffix.
///
/// ```
/// use npu_build::codegen::snake_ident;
/// assert_eq!(snake_ident("serving_default_input:0"), "serving_default_input_0");
/// assert_eq!(snake_ident("MobilenetV2/Logits"), "mobilenet_v2_logits");
/// assert_eq!(snake_ident("1st"), "t_1st");
/// assert_eq!(snake_ident("type"), "type_t");
/// assert_eq!(snake_ident("::"), "t");
/// ```
pub fn snake_ident(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() {
                let prev = i.checked_sub(1).map(|j| chars[j]);
                let next = chars.get(i + 1);
                let hump = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
                    || (prev.is_some_and(|p| p.is_ascii_uppercase())
                        && next.is_some_and(|n| n.is_ascii_lowercase()));
                if hump && !out.ends_with('_') && !out.is_empty() {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        return "t".into();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "t_");
    }
    if RESERVED.contains(&out.as_str()) {
        out.push_str("_t");
    }
    out
}

/// Whether `ident` is one the generated module cannot give a tensor (a Rust keyword or one of
/// the module's own names, e.g. `run`).
pub fn is_reserved(ident: &str) -> bool {
    RESERVED.contains(&ident)
}

/// Unique identifiers for a list of tensor names (duplicates get `_2`, `_3`, ...).
///
/// Inputs and outputs share the module's namespace (each gets a `pub mod`), so callers pass
/// both lists in one call.
pub fn unique_idents<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .map(|n| {
            let base = snake_ident(n);
            let mut id = base.clone();
            let mut k = 2;
            while !seen.insert(id.clone()) {
                id = format!("{base}_{k}");
                k += 1;
            }
            id
        })
        .collect()
}

/// The element type name used in generated code for an IR dtype.
pub fn rust_elem(dtype: DType) -> &'static str {
    match dtype {
        DType::I8 => "i8",
        DType::U8 => "u8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::F32 => "f32",
    }
}

fn nested_array(elem: &Ident, shape: &[usize]) -> TokenStream {
    let mut ty = quote!(#elem);
    for &d in shape.iter().rev() {
        let d = Literal::usize_unsuffixed(d);
        ty = quote!([#ty; #d]);
    }
    ty
}

fn zero_value(elem: &Ident, shape: &[usize]) -> TokenStream {
    let mut v = if elem == "f32" {
        quote!(0.0)
    } else {
        quote!(0)
    };
    for &d in shape.iter().rev() {
        let d = Literal::usize_unsuffixed(d);
        v = quote!([#v; #d]);
    }
    v
}

/// `&expr` as a flat slice: `.as_flattened()` once per dimension beyond the first.
fn flatten(expr: TokenStream, rank: usize) -> TokenStream {
    if rank <= 1 {
        return quote!(&#expr[..]);
    }
    let mut e = expr;
    for _ in 1..rank {
        e = quote!(#e.as_flattened());
    }
    e
}

/// `&mut expr` as a flat slice.
fn flatten_mut(expr: TokenStream, rank: usize) -> TokenStream {
    if rank <= 1 {
        return quote!(&mut #expr[..]);
    }
    let mut e = expr;
    for _ in 1..rank {
        e = quote!(#e.as_flattened_mut());
    }
    e
}

/// Paths of the artifact files the generated code includes.
pub struct ArtifactFiles<'a> {
    pub command_stream: &'a Path,
    pub weights: &'a Path,
    /// The model file, included (and discarded) so rustc rebuilds when it changes.
    pub model: Option<&'a Path>,
    /// Files the model reads besides itself (ONNX external data), tracked the same way.
    pub side_files: &'a [PathBuf],
}

/// The statics and the body of `run_into` for the steps of a mixed NPU/CPU model.
fn mixed_steps(
    steps: &[StepApi],
    dir: &Path,
    section: Option<&TokenStream>,
) -> (TokenStream, TokenStream) {
    let mut statics = Vec::new();
    let mut body = Vec::new();
    for (k, step) in steps.iter().enumerate() {
        match step {
            StepApi::Npu { file, len } => {
                let name = format_ident!("COMMAND_STREAM_{}", k);
                let path = dir.join(file).to_string_lossy().into_owned();
                let len = Literal::usize_unsuffixed(*len);
                let doc = format!("COP1 command stream of step {k} (NPU).");
                statics.push(quote! {
                    #section
                    #[doc = #doc]
                    pub static #name: npu_rt::Aligned16<[u8; #len]> =
                        npu_rt::Aligned16(*include_bytes!(#path));
                });
                body.push(quote! {
                    npu.run(npu_rt::Job {
                        command_stream: &#name.0,
                        weights: &WEIGHTS.0,
                        arena: &mut *arena,
                        fast_scratch: &mut *fast,
                        arena_needed: ARENA_SIZE,
                        fast_scratch_needed: FAST_SCRATCH_SIZE,
                    })?;
                });
            }
            StepApi::Cpu {
                node,
                op,
                reason,
                words,
            } => {
                let name = format_ident!("CPU_STEP_{}", k);
                let n = Literal::usize_unsuffixed(words.len());
                let ws = words.iter().map(|&w| Literal::u32_unsuffixed(w));
                let doc = format!("Step {k} (CPU): node `{node}` ({op}), because: {reason}.");
                let k = Literal::usize_unsuffixed(k);
                statics.push(quote! {
                    #[doc = #doc]
                    pub static #name: [u32; #n] = [#(#ws),*];
                });
                body.push(quote! {
                    npu.cpu_op(#k, #op, &mut || {
                        npu_rt::cpu::run(#k, &#name, &WEIGHTS.0, &mut *arena)
                    })?;
                });
            }
        }
    }
    (quote!(#(#statics)*), quote!(#(#body)*))
}

/// The generated `Input` or `Output` struct's pieces: one entry per tensor in each list.
#[derive(Default)]
struct IoItems {
    /// Struct fields.
    fields: Vec<TokenStream>,
    /// A module per tensor with its shape and quantization constants.
    mods: Vec<TokenStream>,
    /// Field initializers of `zeroed()`.
    zeros: Vec<TokenStream>,
    /// Copies between the struct and the arena inside `run_into`.
    copies: Vec<TokenStream>,
    /// Methods: flat views, quantize/dequantize helpers.
    helpers: Vec<TokenStream>,
}

impl IoItems {
    fn of(list: &[IoApi], is_input: bool) -> IoItems {
        let mut items = IoItems::default();
        for t in list {
            items.push(t, is_input);
        }
        items
    }

    fn push(&mut self, t: &IoApi, is_input: bool) {
        let id = Ident::new(&t.ident, Span::call_site());
        let elem = Ident::new(&t.dtype, Span::call_site());
        let rank = t.shape.len().max(1);
        let count: usize = t.shape.iter().product();
        let off = Literal::usize_unsuffixed(t.offset);
        let elem_size: usize = match t.dtype.as_str() {
            "i8" | "u8" => 1,
            "i16" => 2,
            _ => 4,
        };
        let bytes = Literal::usize_unsuffixed(count * elem_size);
        let doc = format!(
            "Model tensor `{}`: shape {:?}, {} (scale {}, zero point {}).",
            t.name, t.shape, t.dtype, t.scale, t.zero_point
        );
        // A scalar is held as a one-element array.
        let zero = t.shape.is_empty();
        let ty = if zero {
            quote!([#elem; 1])
        } else {
            nested_array(&elem, &t.shape)
        };
        self.fields.push(quote! {
            #[doc = #doc]
            pub #id: #ty,
        });
        let z = zero_value(&elem, if zero { &[1][..] } else { &t.shape[..] });
        self.zeros.push(quote!(#id: #z,));
        self.mods.push(tensor_module(t, &id, &doc));
        let get_flat = format_ident!("{}_flat", t.ident);
        let get_flat_mut = format_ident!("{}_flat_mut", t.ident);
        let doc_flat = format!(
            "`{}` as a flat row-major slice of {count} elements.",
            t.ident
        );
        let flat_ref = flatten(quote!(self.#id), rank);
        let flat_mut = flatten_mut(quote!(self.#id), rank);
        self.helpers.push(quote! {
            #[doc = #doc_flat]
            pub fn #get_flat(&self) -> &[#elem] {
                #flat_ref
            }
            #[doc = #doc_flat]
            pub fn #get_flat_mut(&mut self) -> &mut [#elem] {
                #flat_mut
            }
        });
        let float = t.dtype == "f32";
        if is_input {
            let src = flatten(quote!(input.#id), rank);
            self.copies.push(quote! {
                npu_rt::io::write(&mut arena[#off..#off + #bytes], #src);
            });
            if !float {
                let set = format_ident!("set_{}_f32", t.ident);
                let doc = format!(
                    "Fills `{}` by quantizing real values (row-major, {count} elements).",
                    t.ident
                );
                self.helpers.push(quote! {
                    #[doc = #doc]
                    pub fn #set(&mut self, values: &[f32]) {
                        npu_rt::io::quantize(#flat_mut, values, #id::SCALE, #id::ZERO_POINT);
                    }
                });
            }
        } else {
            let dst = flatten_mut(quote!(output.#id), rank);
            self.copies.push(quote! {
                npu_rt::io::read(#dst, &arena[#off..#off + #bytes]);
            });
            if !float {
                let get = format_ident!("{}_f32", t.ident);
                let doc = format!(
                    "Dequantizes `{}` into `out` (row-major, {count} elements).",
                    t.ident
                );
                self.helpers.push(quote! {
                    #[doc = #doc]
                    pub fn #get(&self, out: &mut [f32]) {
                        npu_rt::io::dequantize(out, #flat_ref, #id::SCALE, #id::ZERO_POINT);
                    }
                });
            }
        }
    }
}

/// `pub mod <tensor>` with the tensor's shape, element count, quantization and arena offset.
fn tensor_module(t: &IoApi, id: &Ident, doc: &str) -> TokenStream {
    let shape_lits = t.shape.iter().map(|&d| Literal::usize_unsuffixed(d));
    let rank_lit = Literal::usize_unsuffixed(t.shape.len());
    let count_lit = Literal::usize_unsuffixed(t.shape.iter().product());
    let scale = Literal::f32_suffixed(t.scale);
    let zp = Literal::i32_suffixed(t.zero_point);
    let off = Literal::usize_unsuffixed(t.offset);
    quote! {
        #[doc = #doc]
        pub mod #id {
            /// Shape of the tensor.
            pub const SHAPE: [usize; #rank_lit] = [#(#shape_lits),*];
            /// Number of elements.
            pub const ELEMENTS: usize = #count_lit;
            /// Quantization scale: `real = SCALE * (q - ZERO_POINT)`.
            pub const SCALE: f32 = #scale;
            /// Quantization zero point.
            pub const ZERO_POINT: i32 = #zp;
            /// Byte offset of the tensor in the arena.
            pub const ARENA_OFFSET: usize = #off;
        }
    }
}

/// `include_bytes!` of the model and its side files, so that editing them recompiles the crate.
fn track_model_files(files: &ArtifactFiles<'_>) -> TokenStream {
    let model = files.model.map(|m| {
        let m = m.to_string_lossy().into_owned();
        quote! {
            // Makes rustc track the model file: editing it recompiles this crate.
            const _: &[u8] = include_bytes!(#m);
        }
    });
    let side = files.side_files.iter().map(|f| {
        let f = f.to_string_lossy().into_owned();
        quote! {
            // Makes rustc track the model's external data file too.
            const _: &[u8] = include_bytes!(#f);
        }
    });
    quote!(#model #(#side)*)
}

/// The module's doc line: source, target, operator counts and memory.
fn module_doc(api: &ModelApi) -> String {
    let ops: Vec<String> = api
        .op_counts
        .iter()
        .map(|(op, n)| format!("{n} {op}"))
        .collect();
    format!(
        "Model `{}` compiled for {} ({}, {}): {}. {} NPU operations, {} CPU operations; arena (SRAM) {} bytes, flash {} bytes.",
        api.source,
        api.target,
        api.system_config,
        api.memory_mode,
        ops.join(", "),
        api.npu_ops,
        api.cpu_ops,
        api.arena_size,
        api.flash_bytes,
    )
}

/// The command stream statics and the body of `run_into` that runs them: one COP1 payload, or
/// (with CPU operators) one per NPU step with the CPU steps between.
fn stream_items(
    api: &ModelApi,
    files: &ArtifactFiles<'_>,
    section: Option<&TokenStream>,
) -> (TokenStream, TokenStream) {
    if let Some(dir) = files.command_stream.parent()
        && !api.steps.is_empty()
    {
        return mixed_steps(&api.steps, dir, section);
    }
    let cmd_len = Literal::usize_unsuffixed(api.command_stream_len);
    let cmd_path = files.command_stream.to_string_lossy().into_owned();
    (
        quote! {
            /// The COP1 command stream payload.
            #section
            pub static COMMAND_STREAM: npu_rt::Aligned16<[u8; #cmd_len]> =
                npu_rt::Aligned16(*include_bytes!(#cmd_path));
        },
        quote! {
            npu.run(npu_rt::Job {
                command_stream: &COMMAND_STREAM.0,
                weights: &WEIGHTS.0,
                arena: &mut *arena,
                fast_scratch: &mut *fast,
                arena_needed: ARENA_SIZE,
                fast_scratch_needed: FAST_SCRATCH_SIZE,
            })?;
        },
    )
}

/// Variable tensors (LSTM states): the statement that sets them on an arena's first run, and
/// `reset_state`. Empty for models without state.
fn state_items(api: &ModelApi) -> (TokenStream, TokenStream) {
    let Some(st) = &api.state else {
        return (quote! {}, quote! {});
    };
    let flag = Literal::usize_unsuffixed(st.flag);
    let fills = st.fills.iter().map(|&(off, len, byte)| {
        let (off, end) = (
            Literal::usize_unsuffixed(off),
            Literal::usize_unsuffixed(off + len),
        );
        let byte = Literal::u8_unsuffixed(byte);
        quote! { arena[#off..#end].fill(#byte); }
    });
    (
        quote! {
            if arena[#flag] == 0 {
                #(#fills)*
                arena[#flag] = 1;
            }
        },
        quote! {
            /// Makes the next [`run`] start from the model's initial state: its variable
            /// tensors (LSTM hidden and cell states) otherwise carry over from one run to
            /// the next, as in TFLite, starting at zero (real value) on an arena's first
            /// run.
            pub fn reset_state(arena: &mut Arena) {
                arena.0[#flag] = 0;
            }
        },
    )
}

/// `pub struct NAME(pub [u8; SIZE])`, 16-byte aligned, with a zeroing `const fn new` and
/// `Default`: the arena and the fast scratch the caller provides.
fn aligned_bytes(name: &str, size: &str, doc: &str, new_doc: &str) -> TokenStream {
    let name = Ident::new(name, Span::call_site());
    let size = Ident::new(size, Span::call_site());
    quote! {
        #[doc = #doc]
        #[repr(C, align(16))]
        pub struct #name(pub [u8; #size]);

        impl #name {
            #[doc = #new_doc]
            pub const fn new() -> Self {
                #name([0; #size])
            }
        }

        impl Default for #name {
            fn default() -> Self {
                Self::new()
            }
        }
    }
}

/// `run`, `run_into` (and `FastScratch` for a model that uses one), around `body`: the
/// statements between taking the arena and returning.
fn run_fns(uses_fast_scratch: bool, body: TokenStream) -> TokenStream {
    // A model with a fast scratch (region 2: the SRAM when the arena is in DRAM) takes it as a
    // parameter of its own, so the caller places it in the NPU's SRAM.
    let (fast_struct, fast_param, fast_arg, fast_slice, with_fast) = if uses_fast_scratch {
        (
            aligned_bytes(
                "FastScratch",
                "FAST_SCRATCH_SIZE",
                "The fast scratch (region 2): intermediate feature maps the compiler placed in the \
                 NPU's SRAM (the arena is in DRAM in this memory mode). Place it in a `static` in \
                 that SRAM.",
                "A zeroed fast scratch (usable in `static` initializers).",
            ),
            quote!(fast: &mut FastScratch,),
            quote!(fast,),
            quote!(let fast = &mut fast.0[..];),
            " with `fast` as the fast scratch",
        )
    } else {
        (
            quote!(),
            quote!(),
            quote!(),
            quote!(let fast: &mut [u8] = &mut [];),
            "",
        )
    };
    let run_doc = format!(
        "Runs the model: copies `input` into the arena, runs the command stream(s) on `npu`{with_fast} \
         (and the CPU operators, if any, in between), and returns the outputs."
    );
    quote! {
        #fast_struct

        #[doc = #run_doc]
        pub fn run<N: npu_rt::Npu + ?Sized>(
            npu: &mut N,
            arena: &mut Arena,
            #fast_param
            input: &Input,
        ) -> Result<Output, npu_rt::Error> {
            let mut output = Output::zeroed();
            run_into(npu, arena, #fast_arg input, &mut output)?;
            Ok(output)
        }

        /// Like [`run`], writing the outputs into `output` (no copy of the output struct).
        pub fn run_into<N: npu_rt::Npu + ?Sized>(
            npu: &mut N,
            arena: &mut Arena,
            #fast_param
            input: &Input,
            output: &mut Output,
        ) -> Result<(), npu_rt::Error> {
            let arena = &mut arena.0[..];
            #fast_slice
            let _ = &fast;
            #body
            Ok(())
        }
    }
}

/// The `Input` and `Output` structs with their methods, and a module per tensor.
fn io_structs(inputs: &IoItems, outputs: &IoItems) -> TokenStream {
    let (in_fields, in_zeros, in_helpers, in_mods) =
        (&inputs.fields, &inputs.zeros, &inputs.helpers, &inputs.mods);
    let (out_fields, out_zeros, out_helpers, out_mods) = (
        &outputs.fields,
        &outputs.zeros,
        &outputs.helpers,
        &outputs.mods,
    );
    quote! {
                /// The model's inputs, one field per input tensor, in model order.
                #[derive(Clone, Debug, PartialEq)]
                pub struct Input {
                    #(#in_fields)*
                }

                impl Input {
                    /// All elements zero.
                    pub const fn zeroed() -> Self {
                        Input { #(#in_zeros)* }
                    }
                    #(#in_helpers)*
                }

                impl Default for Input {
                    fn default() -> Self {
                        Self::zeroed()
                    }
                }

                /// The model's outputs, one field per output tensor, in model order.
                #[derive(Clone, Debug, PartialEq)]
                pub struct Output {
                    #(#out_fields)*
                }

                impl Output {
                    /// All elements zero.
                    pub const fn zeroed() -> Self {
                        Output { #(#out_zeros)* }
                    }
                    #(#out_helpers)*
                }

                impl Default for Output {
                    fn default() -> Self {
                        Self::zeroed()
                    }
                }

                #(#in_mods)*
                #(#out_mods)*

    }
}

/// Generated module of `api`.
///
/// `weights_section` places the statics the NPU reads (weights and command streams) in a linker
/// section (`#[unsafe(link_section)]`); `None` leaves them in `.rodata`.
pub fn generate(
    api: &ModelApi,
    files: &ArtifactFiles<'_>,
    weights_section: Option<&str>,
) -> TokenStream {
    let module = Ident::new(&api.module, Span::call_site());
    let arena_size = Literal::usize_unsuffixed(api.arena_size.max(16));
    let weights_len = Literal::usize_unsuffixed(api.weights_len);
    let weights_path = files.weights.to_string_lossy().into_owned();
    let target = &api.target;
    let fast = Literal::usize_unsuffixed(api.fast_scratch_size);
    let est_cycles = Literal::u64_unsuffixed(api.npu_cycles_estimate);
    let npu_ops = Literal::usize_unsuffixed(api.npu_ops);
    let cpu_ops = Literal::usize_unsuffixed(api.cpu_ops);
    let clock_hz = Literal::u64_unsuffixed(api.npu_clock_hz);
    let system_config = &api.system_config;
    let memory_mode = &api.memory_mode;
    let module_doc = module_doc(api);
    let arena = aligned_bytes(
        "Arena",
        "ARENA_SIZE",
        "The arena: scratch memory of exactly the size the model needs, 16-byte aligned. Place \
         it in a `static` (it is usually too large for a stack).",
        "A zeroed arena (usable in `static` initializers).",
    );
    let track = track_model_files(files);
    let section = weights_section.map(|s| quote!(#[unsafe(link_section = #s)]));

    let inputs = IoItems::of(&api.inputs, true);
    let outputs = IoItems::of(&api.outputs, false);
    let (in_copies, out_copies) = (&inputs.copies, &outputs.copies);
    let io_structs = io_structs(&inputs, &outputs);
    let (stream_statics, steps_body) = stream_items(api, files, section.as_ref());
    let (state_init, state_fns) = state_items(api);
    let run_fns = run_fns(
        api.fast_scratch_size > 0,
        quote! {
            #state_init
            #(#in_copies)*
            #steps_body
            #(#out_copies)*
        },
    );
    quote! {
            #[doc = #module_doc]
            #[allow(dead_code, clippy::all)]
            pub mod #module {
                #track

                /// Accelerator configuration the command stream was compiled for.
                pub const TARGET: &str = #target;
                /// Bytes of the arena (region 1): feature maps, inputs and outputs.
                pub const ARENA_SIZE: usize = #arena_size;
                /// System configuration (Vela's vela.ini name) the memory timing was taken from.
                pub const SYSTEM_CONFIG: &str = #system_config;
                /// Memory mode (`Shared_Sram`, `Sram_Only`, `Dedicated_Sram`).
                pub const MEMORY_MODE: &str = #memory_mode;
                /// NPU cycles of one inference as npu-build's estimator predicts them for this
                /// target and system configuration (NPU command streams only; CPU operators are
                /// not counted). Divide by [`NPU_CLOCK_HZ`] for seconds.
                pub const ESTIMATED_NPU_CYCLES: u64 = #est_cycles;
                /// NPU core clock of the system configuration, Hz.
                pub const NPU_CLOCK_HZ: u64 = #clock_hz;
                /// Operations of the model's graph that run on the NPU.
                pub const NPU_OPERATIONS: usize = #npu_ops;
                /// Operations of the model's graph that run on the CPU kernels (`npu_rt::cpu`).
                pub const CPU_OPERATIONS: usize = #cpu_ops;
                /// Bytes of the fast scratch (region 2); 0 when unused.
                pub const FAST_SCRATCH_SIZE: usize = #fast;

                #stream_statics
                /// Region 0: encoded weights, scales, lookup tables and constants.
                #section
                pub static WEIGHTS: npu_rt::Aligned16<[u8; #weights_len]> =
                    npu_rt::Aligned16(*include_bytes!(#weights_path));

                #arena

                #io_structs

    #run_fns
    #state_fns
            }
        }
}
