//! Shared helpers of `weights_vela.rs` (U55/U65) and `weights_vela_u85.rs` (U85): reading Vela's
//! annotated `registers.txt` and its memory regions, the weighted operators of the source model as
//! Vela's weight streams must hold them, and the matching of decoded streams against them.

use std::collections::HashMap;
use std::path::Path;

use npu_build::ir::{Graph, OpKind, ReduceOp};
use npu_rt::ethos_u::weights::ScaleEntry;
use npu_rt::fixed::quantize_multiplier;

/// Names of the fixtures with a `vela/` directory, sorted.
pub fn vela_fixtures(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| root.join(n).join("vela").is_dir())
        .collect();
    names.sort();
    names
}

/// One register write from `registers.txt`.
#[derive(Clone, Debug, Default)]
pub struct Reg {
    /// The 16-bit parameter of the command word.
    pub param: u32,
    /// The 32-bit payload of a two-word command.
    pub payload: Option<u64>,
    /// Vela's annotation after the register name (`, field = VALUE, ...`).
    pub fields: String,
}

impl Reg {
    /// The value of field `name` (`name = VALUE`) in Vela's annotation.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.split(',').find_map(|f| {
            let (k, v) = f.split_once('=')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

/// Parses a hexadecimal number with or without `0x`.
pub fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// Parses the trimmed line `t` (line `line_no`) of `registers.txt` into the register (or command)
/// name and its write; `None` for a line that is not a command (`0x...  - NAME, fields`).
pub fn parse_register_line(t: &str, line_no: usize) -> Result<Option<(String, Reg)>, String> {
    if !t.starts_with("0x") {
        return Ok(None);
    }
    let Some((left, right)) = t.split_once(" - ") else {
        return Ok(None);
    };
    let toks: Vec<&str> = left.split_whitespace().collect();
    let (payload, param) = match toks.len() {
        3 => (None, hex(toks[1]).ok_or("bad param")?),
        4 => (
            Some(hex(toks[1]).ok_or("bad payload")?),
            hex(toks[2]).ok_or("bad param")?,
        ),
        _ => return Err(format!("line {line_no}: cannot parse '{t}'")),
    };
    let name = right.split_whitespace().next().unwrap_or("").to_string();
    let fields = right
        .split_once(',')
        .map(|(_, f)| f.to_string())
        .unwrap_or_default();
    let reg = Reg {
        param: param as u32,
        payload,
        fields,
    };
    Ok(Some((name, reg)))
}

/// The `len` bytes at `base` of memory region `region` (as written so far).
pub fn region_read(
    mem: &HashMap<u32, Vec<u8>>,
    region: u32,
    base: u64,
    len: u64,
) -> Result<&[u8], String> {
    let m = mem
        .get(&region)
        .ok_or(format!("region {region} never written"))?;
    let (b, l) = (base as usize, len as usize);
    m.get(b..b + l).ok_or(format!(
        "region {region} [{b:#x}, +{l:#x}) outside {} bytes",
        m.len()
    ))
}

/// Whether the model has a MEAN or SUM, which Vela lowers to convolutions with all-one weights
/// and bias 0 (weights of no model tensor).
pub fn has_mean_or_sum(graph: &Graph) -> bool {
    graph.ops.iter().any(|op| {
        matches!(
            op.kind,
            OpKind::Mean { .. }
                | OpKind::Reduce {
                    op: ReduceOp::Sum,
                    ..
                }
        )
    })
}

/// A weighted operator of the source model, weights in OHWI (depthwise: `[C, KH, KW, 1]`).
#[derive(Debug)]
pub struct ModelOp {
    /// What the operator is (`conv`, `depthwise`, `lstm gate`, ...), for messages.
    pub kind: &'static str,
    /// OHWI shape of `weights`.
    pub shape: [usize; 4],
    /// Weights minus their zero point.
    pub weights: Vec<i16>,
    /// Bias per output channel, if the operator has one.
    pub bias: Option<Vec<i64>>,
    /// TFLite's (multiplier, shift) per output channel.
    pub scales: Vec<(i32, i32)>,
    /// Only the weights are compared (LSTM gate weights: Vela's fully-connected layers carry
    /// the gates' folded biases and effective scales, which are not derived here).
    pub weights_only: bool,
}

/// Where Vela's lowerings differ in the model tensors its streams hold (see [`model_ops`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelOpsOptions {
    /// Split each strided transposed convolution into one operator per output phase, as
    /// Vela's U85 lowering does (otherwise it is one operator with the rotated kernel).
    pub transpose_conv_phases: bool,
    /// Append the LSTM gate weight matrices (constant int8 `[out, in]` inputs of each LSTM),
    /// matched by weights alone ([`ModelOp::weights_only`]).
    pub lstm_gates: bool,
}

/// The model's weighted operators, weights minus zero point, with the scales Vela must derive;
/// then, with [`ModelOpsOptions::lstm_gates`], the LSTM gate weights.
pub fn model_ops(graph: &Graph, options: ModelOpsOptions) -> Vec<ModelOp> {
    let mut ops = Vec::new();
    for op in &graph.ops {
        let kind = match op.kind {
            OpKind::Conv2d(_) => "conv",
            OpKind::DepthwiseConv2d { .. } => "depthwise",
            OpKind::FullyConnected { .. } => "fully-connected",
            // matmul: Vela runs a transposed convolution as one convolution over the upscaled
            // input with the kernel rotated by 180 degrees (docs/matmul.md).
            OpKind::TransposeConv2d(_) => "transpose-conv",
            _ => continue,
        };
        let w = graph.tensor(op.inputs[1]);
        let data = w.data_i8().expect("int8 constant weights");
        let wq = w.quant.clone().expect("quantized weights");
        let x = graph
            .tensor(op.inputs[0])
            .quant
            .clone()
            .expect("quantized input");
        let y = graph
            .tensor(op.outputs[0])
            .quant
            .clone()
            .expect("quantized output");
        // To OHWI (depthwise: [C, KH, KW, 1]); zero point per output channel.
        let (shape, weights): ([usize; 4], Vec<i16>) = match kind {
            "conv" => {
                let s = &w.shape;
                let per = s[1] * s[2] * s[3];
                let v = data
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| i16::from(v) - wq.zero_point_at(i / per) as i16)
                    .collect();
                ([s[0], s[1], s[2], s[3]], v)
            }
            "transpose-conv" => {
                let s = &w.shape;
                let (o, kh, kw, i) = (s[0], s[1], s[2], s[3]);
                let mut v = vec![0i16; o * kh * kw * i];
                for oc in 0..o {
                    for y in 0..kh {
                        for x in 0..kw {
                            for ic in 0..i {
                                let q = data[((oc * kh + y) * kw + x) * i + ic];
                                v[((oc * kh + (kh - 1 - y)) * kw + (kw - 1 - x)) * i + ic] =
                                    i16::from(q) - wq.zero_point_at(oc) as i16;
                            }
                        }
                    }
                }
                ([o, kh, kw, i], v)
            }
            "depthwise" => {
                let (kh, kw, c) = (w.shape[1], w.shape[2], w.shape[3]);
                let mut v = vec![0i16; c * kh * kw];
                for y in 0..kh {
                    for x in 0..kw {
                        for ch in 0..c {
                            let q = data[(y * kw + x) * c + ch];
                            v[(ch * kh + y) * kw + x] = i16::from(q) - wq.zero_point_at(ch) as i16;
                        }
                    }
                }
                ([c, kh, kw, 1], v)
            }
            _ => {
                let (o, i) = (w.shape[0], w.shape[1]);
                let v = data
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| i16::from(v) - wq.zero_point_at(k / i) as i16)
                    .collect();
                ([o, 1, 1, i], v)
            }
        };
        let bias = op
            .inputs
            .get(2)
            .map(|&b| graph.tensor(b))
            .and_then(|t| t.data_i32())
            .map(|b| b.into_iter().map(i64::from).collect());
        // TFLite's QuantizeMultiplier of input_scale * weight_scale / output_scale, in double.
        let scales: Vec<(i32, i32)> = (0..shape[0])
            .map(|c| {
                let m = f64::from(x.scale()) * f64::from(wq.scale_at(c)) / f64::from(y.scale());
                quantize_multiplier(m)
            })
            .collect();
        if let OpKind::TransposeConv2d(t) = &op.kind
            && options.transpose_conv_phases
            && t.stride != (1, 1)
        {
            // Vela's U85 lowering splits a strided transposed convolution into one
            // convolution per output phase (stride_h * stride_w of them), each with the rotated
            // kernel's rows py, py + stride_h, ... and columns px, px + stride_w, ... (a 3x3
            // kernel at stride 2: 2x2, 2x1, 1x2 and 1x1 convolutions). Each non-empty phase is
            // a model tensor of its own and must be found in the streams.
            let [o, kh, kw, i] = shape;
            let (sh, sw) = t.stride;
            for py in 0..sh.min(kh) {
                for px in 0..sw.min(kw) {
                    let ys: Vec<usize> = (py..kh).step_by(sh).collect();
                    let xs: Vec<usize> = (px..kw).step_by(sw).collect();
                    let mut v = Vec::with_capacity(o * ys.len() * xs.len() * i);
                    for oc in 0..o {
                        for &y in &ys {
                            for &x in &xs {
                                let at = ((oc * kh + y) * kw + x) * i;
                                v.extend_from_slice(&weights[at..at + i]);
                            }
                        }
                    }
                    ops.push(ModelOp {
                        kind: "transpose-conv phase",
                        shape: [o, ys.len(), xs.len(), i],
                        weights: v,
                        bias: bias.clone(),
                        scales: scales.clone(),
                        weights_only: false,
                    });
                }
            }
            continue;
        }
        ops.push(ModelOp {
            kind,
            shape,
            weights,
            bias,
            scales,
            weights_only: false,
        });
    }
    if options.lstm_gates {
        ops.extend(lstm_gate_weights(graph));
    }
    ops
}

/// The gate weight matrices (constant int8 `[out, in]` inputs) of the model's LSTMs, weights
/// minus zero point, to be matched by weights alone.
fn lstm_gate_weights(graph: &Graph) -> Vec<ModelOp> {
    let mut ops = Vec::new();
    for op in &graph.ops {
        if !matches!(op.kind, OpKind::Lstm(_)) {
            continue;
        }
        for &t in &op.inputs {
            let w = graph.tensor(t);
            let (Some(data), Some(q), &[o, i]) = (w.data_i8(), w.quant.as_ref(), &w.shape[..])
            else {
                continue;
            };
            let weights = data
                .iter()
                .enumerate()
                .map(|(k, &v)| i16::from(v) - q.zero_point_at(k / i) as i16)
                .collect();
            ops.push(ModelOp {
                kind: "lstm gate",
                shape: [o, 1, 1, i],
                weights,
                bias: None,
                scales: Vec::new(),
                weights_only: true,
            });
        }
    }
    ops
}

/// The weights and scales of one decoded NPU operation, as [`match_ops`] compares them.
#[derive(Clone, Copy, Debug)]
pub struct DecodedWeights<'a> {
    /// Line number of the `NPU_OP_*` command in registers.txt.
    pub line: usize,
    /// The `// ...` comment Vela wrote before the operation.
    pub comment: &'a str,
    /// OHWI shape of `weights`: OFM depth, kernel height and width, weight IFM depth.
    pub shape: [usize; 4],
    /// OHWI weights.
    pub weights: &'a [i16],
    /// One entry per OFM channel.
    pub scales: &'a [ScaleEntry],
}

/// Outcome of matching one compilation's operations against the model.
#[derive(Debug, Default)]
pub struct Matched {
    /// Operations matched to a model tensor slice.
    pub ops: usize,
    /// Of `ops`, those matched by weights alone ([`ModelOp::weights_only`]: LSTM gates).
    pub weights_only: usize,
    /// Mean/sum-as-convolution operations (all weights 1, bias 0).
    pub means: usize,
}

/// Matches each decoded operation of compilation `what` to a contiguous OFM-channel slice of
/// one model tensor (biases and scales included unless [`ModelOp::weights_only`]), or, if the
/// model `has_mean`, to a mean/sum-as-convolution; panics on any other operation and unless every
/// channel of every model tensor is covered.
pub fn match_ops<'a>(
    decoded: impl IntoIterator<Item = DecodedWeights<'a>>,
    model: &[ModelOp],
    has_mean: bool,
    what: &str,
) -> Matched {
    let mut covered: Vec<Vec<bool>> = model.iter().map(|m| vec![false; m.shape[0]]).collect();
    let mut result = Matched::default();
    for op in decoded {
        let [o, kh, kw, i] = op.shape;
        let per = kh * kw * i;
        let mut found = None;
        'models: for (mi, m) in model.iter().enumerate() {
            if m.shape[1..] != [kh, kw, i] || m.shape[0] < o {
                continue;
            }
            for c0 in 0..=m.shape[0] - o {
                if m.weights[c0 * per..(c0 + o) * per] == op.weights[..] {
                    found = Some((mi, c0));
                    break 'models;
                }
            }
        }
        let ctx = format!("{what} registers.txt line {} ({})", op.line, op.comment);
        match found {
            Some((mi, c0)) => {
                let m = &model[mi];
                for c in (0..o).filter(|_| !m.weights_only) {
                    let e = op.scales[c];
                    let bias = m.bias.as_ref().map_or(0, |b| b[c0 + c]);
                    assert_eq!(e.bias, bias, "{ctx}: bias of channel {}", c0 + c);
                    let (mult, shift) = m.scales[c0 + c];
                    assert_eq!(
                        (i64::from(e.multiplier), i32::from(e.shift)),
                        (i64::from(mult), 31 - shift),
                        "{ctx}: scale of channel {}",
                        c0 + c
                    );
                }
                covered[mi][c0..c0 + o].iter_mut().for_each(|c| *c = true);
                result.ops += 1;
                result.weights_only += usize::from(m.weights_only);
            }
            None => {
                assert!(has_mean, "{ctx}: weights match no model tensor");
                assert!(
                    op.weights.iter().all(|&w| w == 1) && op.scales.iter().all(|s| s.bias == 0),
                    "{ctx}: weights match no model tensor and are not a mean"
                );
                result.means += 1;
            }
        }
    }
    for (mi, c) in covered.iter().enumerate() {
        assert!(
            c.iter().all(|&x| x),
            "{what}: model {} {:?}: only {} of {} channels found in the streams",
            model[mi].kind,
            model[mi].shape,
            c.iter().filter(|&&x| x).count(),
            c.len()
        );
    }
    result
}
