//! `include_model!`: compiles a quantized ONNX or TFLite model into an Ethos-U command stream
//! while rustc expands the macro, and generates a typed module for it.
//!
//! ```ignore
//! npu_macros::include_model!("models/mv2.onnx", target = "ethos-u55-128");
//!
//! let mut npu = npu_rt::sim::VirtualNpu::new(&npu_rt::ethos_u::config::ETHOS_U55_128);
//! let mut arena = mv2::Arena::new();
//! let out: mv2::Output = mv2::run(&mut npu, &mut arena, &mv2::Input::zeroed())?;
//! ```
//!
//! Options (each at most once): `target = "ethos-u55-128"`, `system_config = "..."`,
//! `memory_mode = "..."`, `name = ident`, `sram_limit = "512K"` (where the arena is SRAM,
//! operations are striped until it fits), `optimise = "size"`, `cpu_fallback = bool`,
//! `cpu = ["Softmax", "node name"]` (run these operator kinds or nodes on the CPU),
//! `weights_section = ".rodata.npu"`, `inputs = [image]` and `outputs = [logits]` (the names of
//! the generated fields and modules, in model order, instead of the exporter's). The path is relative to `CARGO_MANIFEST_DIR`.
//!
//! Every failure is a `compile_error!` at the argument at fault: a missing file (with the
//! resolved path), a file that is not a model, an unknown target (listing the valid ones), an
//! unknown or duplicate option, an unsupported operator, an exceeded SRAM budget, a hardware
//! limit.

use proc_macro::TokenStream;
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Token};

/// See the crate documentation.
#[proc_macro]
pub fn include_model(input: TokenStream) -> TokenStream {
    let args = syn::parse_macro_input!(input as Args);
    match expand(&args) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

struct Opt {
    key: Ident,
    value: Expr,
}

impl Parse for Opt {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        Ok(Opt { key, value })
    }
}

struct Args {
    path: LitStr,
    opts: Vec<Opt>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "include_model! needs a model path: include_model!(\"models/net.onnx\", target = \"ethos-u55-128\")",
            ));
        }
        let path: LitStr = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "the first argument of include_model! must be the model path as a string literal",
            )
        })?;
        let mut opts = Vec::new();
        if input.parse::<Option<Token![,]>>()?.is_some() {
            let rest: Punctuated<Opt, Token![,]> = Punctuated::parse_terminated(input)?;
            opts.extend(rest);
        }
        Ok(Args { path, opts })
    }
}

const OPTIONS: &str = "target, system_config, memory_mode, name, sram_limit, optimise, cpu_fallback, cpu, weights_section, inputs, outputs";

/// The identifiers of `inputs = [a, b]` / `outputs = [...]`.
fn ident_list(opt: &Opt) -> syn::Result<Vec<String>> {
    let err = |e: &dyn quote::ToTokens| {
        syn::Error::new_spanned(
            e,
            format!(
                "`{}` takes an array of identifiers, one per tensor in model order: {} = [name, ...]",
                opt.key, opt.key
            ),
        )
    };
    let Expr::Array(list) = &opt.value else {
        return Err(err(&opt.value));
    };
    list.elems
        .iter()
        .map(|e| match e {
            Expr::Path(p) => p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .ok_or_else(|| err(e)),
            other => Err(err(other)),
        })
        .collect()
}

fn lit_str(opt: &Opt) -> syn::Result<String> {
    match &opt.value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.value()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{}` takes a string literal", opt.key),
        )),
    }
}

fn expand(args: &Args) -> syn::Result<proc_macro2::TokenStream> {
    let mut model = npu_build::Model::new(args.path.value());
    let mut seen: Vec<String> = Vec::new();
    let mut spans = Spans::default();
    for opt in &args.opts {
        let key = opt.key.to_string();
        if seen.contains(&key) {
            return Err(syn::Error::new(
                opt.key.span(),
                format!("option `{key}` is given more than once"),
            ));
        }
        seen.push(key.clone());
        let span = opt.value_span();
        if key == "name" {
            spans.name = Some(span);
        }
        model = match key.as_str() {
            "target" => {
                spans.target = Some(span);
                model.target(lit_str(opt)?)
            }
            "system_config" => {
                spans.system_config = Some(span);
                model.system_config(lit_str(opt)?)
            }
            "memory_mode" => {
                spans.memory_mode = Some(span);
                model.memory_mode(lit_str(opt)?)
            }
            "name" => match &opt.value {
                Expr::Path(p) if p.path.get_ident().is_some() => model.name(
                    p.path
                        .get_ident()
                        .map(|i| i.to_string())
                        .unwrap_or_default(),
                ),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "`name` takes an identifier: name = my_model",
                    ));
                }
            },
            "sram_limit" => {
                spans.sram_limit = Some(span);
                let bytes = match &opt.value {
                    Expr::Lit(ExprLit {
                        lit: Lit::Int(i), ..
                    }) => i.base10_parse::<u64>()?,
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(s), ..
                    }) => npu_build::build_api::parse_size(&s.value()).ok_or_else(|| {
                        syn::Error::new(
                            s.span(),
                            format!(
                                "`sram_limit` = {:?} is not a size; write e.g. \"512K\", \"2M\" or 524288",
                                s.value()
                            ),
                        )
                    })?,
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "`sram_limit` takes a size: \"512K\", \"2M\" or a byte count",
                        ));
                    }
                };
                model.sram_limit(bytes)
            }
            "cpu_fallback" => match &opt.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Bool(b), ..
                }) => model.cpu_fallback(b.value),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "`cpu_fallback` takes `true` or `false`",
                    ));
                }
            },
            "cpu" => {
                let err = |e: &dyn quote::ToTokens| {
                    syn::Error::new_spanned(
                        e,
                        "`cpu` takes an array of operator kinds or node names: cpu = [\"Softmax\"]",
                    )
                };
                let Expr::Array(list) = &opt.value else {
                    return Err(err(&opt.value));
                };
                let mut m = model;
                for e in &list.elems {
                    match e {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(s), ..
                        }) => m = m.cpu(s.value()),
                        other => return Err(err(other)),
                    }
                }
                m
            }
            "weights_section" => model.weights_section(lit_str(opt)?),
            "optimise" | "optimize" => {
                let goal = lit_str(opt)?;
                model
                    .optimise(&goal)
                    .map_err(|e| syn::Error::new(span, e.to_string()))?
            }
            "inputs" => {
                spans.inputs = Some(span);
                model.inputs(ident_list(opt)?)
            }
            "outputs" => {
                spans.outputs = Some(span);
                model.outputs(ident_list(opt)?)
            }
            _ => {
                return Err(syn::Error::new(
                    opt.key.span(),
                    format!("unknown option `{key}`; the options are: {OPTIONS}"),
                ));
            }
        };
    }
    let expanded = model
        .expand(&npu_build::build_api::default_cache_root())
        .map_err(|e| spans.error(&args.path, &model, e))?;
    Ok(expanded.tokens)
}

impl Opt {
    fn value_span(&self) -> Span {
        syn::spanned::Spanned::span(&self.value)
    }
}

/// Spans of the arguments, to point each error at the argument at fault.
#[derive(Default)]
struct Spans {
    target: Option<Span>,
    system_config: Option<Span>,
    memory_mode: Option<Span>,
    sram_limit: Option<Span>,
    name: Option<Span>,
    inputs: Option<Span>,
    outputs: Option<Span>,
}

impl Spans {
    fn error(&self, path: &LitStr, model: &npu_build::Model, e: npu_build::Error) -> syn::Error {
        use npu_build::Error as E;
        use npu_build::error::{IoSide, NameKind};
        let at_path = path.span();
        let (span, message) = match &e {
            E::Io { path: p, source } if source.kind() == std::io::ErrorKind::NotFound => {
                (at_path, format!("model file not found: {}", p.display()))
            }
            E::UnknownName { what, .. } => {
                let span = match what {
                    NameKind::Accelerator => self.target,
                    NameKind::SystemConfig => self.system_config,
                    NameKind::MemoryMode | NameKind::MemoryModeForSystem => self.memory_mode,
                    NameKind::ModuleName => self.name,
                    // From Cargo.toml, not an argument; `optimise` is checked where it is parsed.
                    NameKind::SramLimitMetadata | NameKind::Optimise => None,
                };
                (span.unwrap_or(at_path), e.to_string())
            }
            E::Budget { .. } => (self.sram_limit.unwrap_or(at_path), e.to_string()),
            E::IoNames { which, .. } => {
                let span = match which {
                    IoSide::Inputs => self.inputs,
                    IoSide::Outputs => self.outputs,
                    IoSide::Both => self.outputs.or(self.inputs),
                };
                (span.unwrap_or(at_path), e.to_string())
            }
            // These already name the file.
            E::Io { .. } | E::NotAModel { .. } => (at_path, e.to_string()),
            _ => (at_path, format!("{}: {e}", model.resolved_path().display())),
        };
        syn::Error::new(span, message)
    }
}
