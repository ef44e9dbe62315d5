//! Every weight and scale stream Vela wrote for the fixtures (all six accelerators) decodes, with
//! `npu_rt::ethos_u::weights`, to exactly the weights and biases of the TFLite model, and our
//! encoder re-encodes each of them losslessly in no more bytes than Vela's.
//!
//! The register values each operation uses are read from Vela's annotated `registers.txt`
//! (independently of our register definitions); DMAs from flash to SRAM are followed so weights
//! staged in SRAM are found. Each decoded operation must equal a contiguous OFM-channel slice of
//! one model weight tensor (biases and requantization scales included), and every model weight
//! tensor must be covered completely. Operations with no model counterpart must be Vela's
//! mean-as-depthwise rewrite (all weights 1, bias 0) of a model `Mean`.

use std::collections::HashMap;
use std::path::Path;

use npu_build::ethos_u::weights::encode_weights;
use npu_build::ir::{Graph, OpKind, ReduceOp};
use npu_rt::ethos_u::config::{ALL, AcceleratorConfig};
use npu_rt::fixed::quantize_multiplier;

use npu_rt::ethos_u::weights::{
    self, ScaleEntry, Traversal, WeightGeometry, order::undilated_kernel_size,
};

/// One register write from `registers.txt`.
#[derive(Clone, Debug, Default)]
struct Reg {
    param: u32,
    payload: Option<u64>,
    fields: String,
}

/// A convolution-like NPU operation with its decoded weights and scales.
#[derive(Debug)]
struct DecodedOp {
    /// Line number of the `NPU_OP_*` command in registers.txt.
    line: usize,
    /// The `// ...` comment Vela wrote before the operation.
    comment: String,
    geom: WeightGeometry,
    /// OHWI weights, `geom.ohwi_len()` elements.
    weights: Vec<i16>,
    /// One entry per OFM channel.
    scales: Vec<ScaleEntry>,
    /// Stream bytes per core (weights), for statistics.
    weight_bytes: Vec<usize>,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

fn region_read(
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

/// Decodes every weighted operation of one Vela compilation (`vela/<accel>/`).
fn decode_vela_dir(dir: &Path, cfg: &'static AcceleratorConfig) -> Result<Vec<DecodedOp>, String> {
    let text = std::fs::read_to_string(dir.join("registers.txt")).map_err(|e| e.to_string())?;
    let flash = std::fs::read(dir.join("weights.bin")).map_err(|e| e.to_string())?;
    let mut mem: HashMap<u32, Vec<u8>> = HashMap::new();
    mem.insert(0, flash);
    let mut regs: HashMap<String, Reg> = HashMap::new();
    let mut comment = String::new();
    let mut ops = Vec::new();

    for (lineno, line) in text.lines().enumerate() {
        let line_no = lineno + 1;
        let t = line.trim();
        if let Some(c) = t.strip_prefix("//") {
            comment = c.trim().to_string();
            continue;
        }
        if !t.starts_with("0x") {
            continue;
        }
        let Some((left, right)) = t.split_once(" - ") else {
            continue;
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
        let get = |regs: &HashMap<String, Reg>, n: &str| -> Result<Reg, String> {
            regs.get(n)
                .cloned()
                .ok_or(format!("line {line_no}: {n} not set"))
        };
        match name.as_str() {
            "NPU_OP_DMA_START" => {
                let src_r = get(&regs, "NPU_SET_DMA0_SRC_REGION")?;
                let dst_r = get(&regs, "NPU_SET_DMA0_DST_REGION")?;
                if src_r.fields.contains("INTERNAL") || dst_r.fields.contains("INTERNAL") {
                    continue; // LUT load into the shared buffer
                }
                let src = get(&regs, "NPU_SET_DMA0_SRC")?.payload.unwrap_or(0);
                let dst = get(&regs, "NPU_SET_DMA0_DST")?.payload.unwrap_or(0);
                let len = get(&regs, "NPU_SET_DMA0_LEN")?.payload.unwrap_or(0);
                let data = region_read(&mem, src_r.param & 7, src, len)?.to_vec();
                let d = mem.entry(dst_r.param & 7).or_default();
                let end = (dst + len) as usize;
                if d.len() < end {
                    d.resize(end, 0);
                }
                d[dst as usize..end].copy_from_slice(&data);
            }
            "NPU_OP_CONV" | "NPU_OP_DEPTHWISE" => {
                let depthwise = name == "NPU_OP_DEPTHWISE";
                let p = |n: &str| get(&regs, n).map(|r| r.param);
                let ks = get(&regs, "NPU_SET_KERNEL_STRIDE")?;
                let traversal = if depthwise {
                    Traversal::Depthwise
                } else if ks.fields.contains("WEIGHT_ORDER_PART_KERNEL_FIRST") {
                    Traversal::PartKernelFirst
                } else {
                    Traversal::DepthFirst
                };
                let dil_x = if ks.fields.contains("dilation_x = KERNEL_DILATION_X2") {
                    2
                } else {
                    1
                };
                let dil_y = if ks.fields.contains("dilation_y = KERNEL_DILATION_X2") {
                    2
                } else {
                    1
                };
                let prec = get(&regs, "NPU_SET_IFM_PRECISION")?;
                let ifm_bits = if prec.fields.contains("ACTIVATION_PRECISION_B16") {
                    16
                } else if prec.fields.contains("ACTIVATION_PRECISION_B8") {
                    8
                } else {
                    return Err(format!("line {line_no}: IFM precision {}", prec.fields));
                };
                let geom = WeightGeometry {
                    ofm_depth: p("NPU_SET_OFM_DEPTH_M1")? + 1,
                    ofm_block_depth: p("NPU_SET_OFM_BLK_DEPTH_M1")? + 1,
                    ifm_depth: p("NPU_SET_IFM_DEPTH_M1")? + 1,
                    kernel_height: undilated_kernel_size(p("NPU_SET_KERNEL_HEIGHT_M1")?, dil_y)
                        .ok_or("kernel height")?,
                    kernel_width: undilated_kernel_size(p("NPU_SET_KERNEL_WIDTH_M1")?, dil_x)
                        .ok_or("kernel width")?,
                    dilation_x: dil_x,
                    dilation_y: dil_y,
                    ifm_bits,
                    ..WeightGeometry::new(cfg, traversal)
                };
                let mut out = vec![0i16; geom.ohwi_len().map_err(|e| e.to_string())?];
                let mut scales = vec![ScaleEntry::default(); geom.ofm_depth as usize];
                let mut weight_bytes = Vec::new();
                for core in 0..cfg.cores {
                    let g = geom.for_core(core);
                    let sfx = if core == 0 { "" } else { "1" };
                    let wlen = get(&regs, &format!("NPU_SET_WEIGHT{sfx}_LENGTH"))?
                        .payload
                        .unwrap_or(0);
                    if g.split().channels() == 0 {
                        if wlen != 0 {
                            return Err(format!(
                                "line {line_no}: core {core} has no channels but a stream"
                            ));
                        }
                        continue;
                    }
                    let wbase = get(&regs, &format!("NPU_SET_WEIGHT{sfx}_BASE"))?
                        .payload
                        .unwrap_or(0);
                    let wregion = p("NPU_SET_WEIGHT_REGION")? & 7;
                    let stream = region_read(&mem, wregion, wbase, wlen)?;
                    weights::decode_weights(stream, &g, &mut out).map_err(|e| {
                        format!("line {line_no} ({comment}) core {core}: {e} {g:?}")
                    })?;
                    weight_bytes.push(stream.len());
                    let slen = get(&regs, &format!("NPU_SET_SCALE{sfx}_LENGTH"))?
                        .payload
                        .unwrap_or(0);
                    let sbase = get(&regs, &format!("NPU_SET_SCALE{sfx}_BASE"))?
                        .payload
                        .unwrap_or(0);
                    let sregion = p("NPU_SET_SCALE_REGION")? & 7;
                    let sstream = region_read(&mem, sregion, sbase, slen)?;
                    if slen as usize
                        != (g.split().channels() as usize * weights::SCALE_ENTRY_BYTES).div_ceil(16)
                            * 16
                    {
                        return Err(format!("line {line_no}: scale length {slen}"));
                    }
                    weights::decode_scales(sstream, g.split(), &mut scales)
                        .map_err(|e| format!("line {line_no}: {e}"))?;
                }
                ops.push(DecodedOp {
                    line: line_no,
                    comment: comment.clone(),
                    geom,
                    weights: out,
                    scales,
                    weight_bytes,
                });
            }
            _ => {}
        }
        regs.insert(name, reg);
    }
    Ok(ops)
}

/// A weighted operator of the source model, weights in OHWI (depthwise: `[C, KH, KW, 1]`).
#[derive(Debug)]
struct ModelOp {
    kind: &'static str,
    shape: [usize; 4],
    /// Weights minus their zero point.
    weights: Vec<i16>,
    bias: Option<Vec<i64>>,
    /// TFLite's (multiplier, shift) per output channel.
    scales: Vec<(i32, i32)>,
}

/// The model's weighted operators, weights minus zero point, with the scales Vela must derive.
fn model_ops(graph: &Graph) -> Vec<ModelOp> {
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
        let scales = (0..shape[0])
            .map(|c| {
                let m = f64::from(x.scale()) * f64::from(wq.scale_at(c)) / f64::from(y.scale());
                quantize_multiplier(m)
            })
            .collect();
        ops.push(ModelOp {
            kind,
            shape,
            weights,
            bias,
            scales,
        });
    }
    ops
}

/// Outcome of matching one compilation's operations against the model.
#[derive(Default)]
struct Matched {
    /// Operations matched to a model tensor slice.
    ops: usize,
    /// Mean-as-depthwise operations.
    means: usize,
}

fn match_ops(decoded: &[DecodedOp], model: &[ModelOp], has_mean: bool, what: &str) -> Matched {
    let mut covered: Vec<Vec<bool>> = model.iter().map(|m| vec![false; m.shape[0]]).collect();
    let mut result = Matched::default();
    for op in decoded {
        let g = &op.geom;
        let (o, kh, kw, i) = (
            g.ofm_depth as usize,
            g.kernel_height as usize,
            g.kernel_width as usize,
            g.weight_ifm_depth() as usize,
        );
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
                for c in 0..o {
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
    if has_mean {
        assert!(result.means > 0, "{what}: the model's Mean has no stream");
    }
    result
}

#[test]
fn vela_streams_decode_to_model_weights_and_reencode_smaller() {
    let root = npu_tests::fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| root.join(n).join("vela").is_dir())
        .collect();
    names.sort();
    let mut checked_ops = 0;
    let mut weighted_models = 0;
    for name in &names {
        let graph = npu_build::import::load(&root.join(name).join(format!("{name}.tflite")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = model_ops(&graph);
        // reduce: Vela's ARG_MAX decomposition synthesizes weights of its own (not a model
        // tensor, not a mean); its streams are not checked here.
        // Nor is its LSTM decomposition: its fully-connected layers carry the gates' effective
        // scales and folded biases (the streams are checked end to end in sim_vela.rs).
        if graph
            .ops
            .iter()
            .any(|op| matches!(op.kind, OpKind::ArgMinMax { .. } | OpKind::Lstm(_)))
        {
            continue;
        }
        // SUM, like MEAN, becomes convolutions with all-one weights and bias 0.
        let has_mean = graph.ops.iter().any(|op| {
            matches!(
                op.kind,
                OpKind::Mean { .. }
                    | OpKind::Reduce {
                        op: ReduceOp::Sum,
                        ..
                    }
            )
        });
        weighted_models += usize::from(!model.is_empty());
        for cfg in ALL {
            let what = format!("{name} {}", cfg.name);
            let dir = root.join(name).join("vela").join(cfg.name);
            if !npu_tests::vela_compiled(&dir) {
                continue;
            }
            let ops = decode_vela_dir(&dir, cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
            let m = match_ops(&ops, &model, has_mean, &what);
            assert_eq!(m.ops + m.means, ops.len());
            if !model.is_empty() {
                assert!(m.ops > 0, "{what}: no weighted operation found");
            }
            checked_ops += ops.len();

            // Re-encode each stream: lossless and never larger than Vela's in total.
            let mut vela = 0;
            let mut ours = 0;
            for op in &ops {
                vela += op.weight_bytes.iter().sum::<usize>();
                let mut back = vec![i16::MIN; op.weights.len()];
                for core in 0..cfg.cores {
                    let g = op.geom.for_core(core);
                    if g.split().channels() == 0 {
                        continue;
                    }
                    let stream = encode_weights(&op.weights, &g).unwrap();
                    weights::decode_weights(&stream, &g, &mut back).unwrap();
                    ours += stream.len();
                }
                assert!(
                    back == op.weights,
                    "{what} line {}: re-encoded stream differs",
                    op.line
                );
            }
            assert!(
                ours <= vela,
                "{what}: our streams {ours} bytes, Vela's {vela}"
            );
            if vela > 0 {
                println!("{what}: encoded weights ours {ours} bytes, Vela {vela} bytes");
            }
        }
    }
    assert!(
        weighted_models >= 9,
        "fixtures with weights: {weighted_models}"
    );
    assert!(checked_ops >= 500, "decoded operations: {checked_ops}");
}
