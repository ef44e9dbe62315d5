//! Every weight and scale stream Vela 5.2 wrote for the Ethos-U85 fixtures (ethos-u85-128, -256,
//! -512, -2048) decodes, with `npu_rt::ethos_u::weights::u85`, to exactly the weights, biases and
//! requantization scales of the TFLite model.
//!
//! The register values each operation uses are read from Vela's annotated `registers.txt` (the
//! U85 register definitions are written separately; this test stays independent of them), and
//! DMAs from flash to SRAM are followed so weights staged in SRAM are found. Besides matching the
//! model, every byte of every stream is accounted for: SWD streams must decode to exactly the
//! values the order needs (their tail is end-of-stream markers), FWD streams must be exactly
//! Vela's length with zero tail bits, padding positions must hold zeros, scale records must
//! re-encode to the same bytes, and the records past the OFM depth and the alignment tail must be
//! zero. Register-derived layout parameters (OFM ublock, IFM block) are checked against Vela's
//! `// Conv2D ... OFM UBlock=..., IFM Block=...` comments.
//!
//! LSTM gate layers (op_lstm) are matched by their weights only: Vela's fully-connected layers
//! carry the gates' folded biases and effective scales, which this test does not derive (their
//! records are still checked byte for byte against their own decoding). ARG_MAX would not be
//! matched (its decomposition synthesizes weights of its own), but no U85 compilation of it has
//! a weighted operation. Strided transposed convolutions are matched phase by phase (see
//! `model_ops`). `NPU_OP_CONV` with `weights_ifm2 = 1` (dynamic weights from IFM2, e.g.
//! BatchMatMul) has no weight stream.

use std::collections::HashMap;
use std::path::Path;

use npu_build::ir::{Graph, OpKind, ReduceOp};
use npu_rt::ethos_u::weights::u85::{
    self, AccFormat, U85Geometry, WeightFormat, decode_scales_u85, decode_weights_u85,
};
use npu_rt::ethos_u::weights::{SCALE_ENTRY_BYTES, ScaleEntry, Traversal};
use npu_rt::fixed::quantize_multiplier;

/// The U85 configurations Vela compiled the fixtures for: (name, MACs, weight decoders).
const U85: [(&str, u32, u32); 4] = [
    ("ethos-u85-128", 128, 1),
    ("ethos-u85-256", 256, 1),
    ("ethos-u85-512", 512, 2),
    ("ethos-u85-2048", 2048, 4),
];

/// One register write from `registers.txt`.
#[derive(Clone, Debug, Default)]
struct Reg {
    param: u32,
    payload: Option<u64>,
    fields: String,
}

impl Reg {
    /// The value of field `name` (`name = VALUE`) in Vela's annotation.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.split(',').find_map(|f| {
            let (k, v) = f.split_once('=')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

/// A weighted NPU operation with its decoded weights and scales.
#[derive(Debug)]
struct DecodedOp {
    /// Line number of the `NPU_OP_*` command in registers.txt.
    line: usize,
    /// The `// ...` comment Vela wrote before the operation.
    comment: String,
    geom: U85Geometry,
    /// OHWI weights, `geom.ohwi_len()` elements.
    weights: Vec<i16>,
    /// One entry per OFM channel.
    scales: Vec<ScaleEntry>,
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

/// The last number of `key=[a, b, c]` in Vela's operation comment.
fn comment_depth(comment: &str, key: &str) -> Option<u32> {
    let rest = &comment[comment.find(key)? + key.len()..];
    let list = &rest[..rest.find(']')?];
    list.rsplit(',').next()?.trim().parse().ok()
}

/// Statistics of one compilation's streams.
#[derive(Default)]
struct Stats {
    swd_ops: usize,
    fwd_ops: usize,
    weight_bytes: usize,
    scale_bytes: usize,
}

/// Decodes every weighted operation of one Vela U85 compilation (`vela/<accel>/`).
fn decode_vela_dir(
    dir: &Path,
    macs: u32,
    cores: u32,
    stats: &mut Stats,
) -> Result<Vec<DecodedOp>, String> {
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
        let field = |regs: &HashMap<String, Reg>, n: &str, f: &str| -> Result<String, String> {
            get(regs, n)?
                .field(f)
                .map(str::to_string)
                .ok_or(format!("line {line_no}: {n} has no field {f}"))
        };
        match name.as_str() {
            "NPU_OP_DMA_START" => {
                let src_r = get(&regs, "NPU_SET_DMA0_SRC_REGION")?;
                let dst_r = get(&regs, "NPU_SET_DMA0_DST_REGION")?;
                if dst_r.fields.contains("DMA_REGION_MODE_INTERNAL") {
                    continue; // LUT load into the shared buffer
                }
                // Only plain 1-D copies are followed (all Vela emits for weights).
                if src_r.field("stride_mode") != Some("DMA_STRIDE_MODE_D1") {
                    return Err(format!("line {line_no}: DMA {}", src_r.fields));
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
                if reg.field("weights_ifm2") == Some("1") {
                    continue; // dynamic weights: no weight stream
                }
                let depthwise = name == "NPU_OP_DEPTHWISE";
                let p = |n: &str| get(&regs, n).map(|r| r.param);
                let ks = get(&regs, "NPU_SET_KERNEL_STRIDE")?;
                let kf = |f: &str| {
                    ks.field(f)
                        .map(str::to_string)
                        .ok_or(format!("line {line_no}: KERNEL_STRIDE has no {f}"))
                };
                let traversal = if depthwise {
                    Traversal::Depthwise
                } else if kf("weight_order")? == "WEIGHT_ORDER_PART_KERNEL_FIRST" {
                    Traversal::PartKernelFirst
                } else {
                    Traversal::DepthFirst
                };
                if kf("decomposition")? != "KERNEL_DECOMPOSITION_D8X8" {
                    return Err(format!("line {line_no}: decomposition {}", ks.fields));
                }
                let bit = |f: &str| -> Result<u32, String> {
                    kf(f)?.parse().map_err(|e| format!("{f}: {e}"))
                };
                let stride_x = (bit("stride_x_msb")? << 1 | bit("stride_x_lsb")?) + 1;
                let stride_y = (bit("stride_y_msb")? << 1 | bit("stride_y_lsb")?) + 1;
                let dil = |f: &str| -> Result<u32, String> {
                    Ok(if kf(f)? == "KERNEL_DILATION_X2" { 2 } else { 1 })
                };
                let (dil_x, dil_y) = (dil("dilation_x")?, dil("dilation_y")?);
                let ifm_bits =
                    match field(&regs, "NPU_SET_IFM_PRECISION", "activation_precision")?.as_str() {
                        "ACTIVATION_PRECISION_B8" => 8,
                        "ACTIVATION_PRECISION_B16" => 16,
                        "ACTIVATION_PRECISION_B32" => 32,
                        other => return Err(format!("line {line_no}: IFM precision {other}")),
                    };
                // Registers never written keep their reset value, 0 = SWD, no sparsity.
                let (format, sparsity) = match regs.get("NPU_SET_WEIGHT_FORMAT") {
                    None => (
                        "WEIGHT_FORMAT_SWD".to_string(),
                        "WEIGHT_SPARSITY_NONE".to_string(),
                    ),
                    Some(r) => (
                        r.field("weight_format").unwrap_or("").to_string(),
                        r.field("weight_sparsity").unwrap_or("").to_string(),
                    ),
                };
                if sparsity != "WEIGHT_SPARSITY_NONE" {
                    return Err(format!("line {line_no}: sparsity {sparsity}"));
                }
                let format = match format.as_str() {
                    "WEIGHT_FORMAT_SWD" => WeightFormat::Swd,
                    "WEIGHT_FORMAT_FWD" => WeightFormat::Fwd,
                    other => return Err(format!("line {line_no}: weight format {other}")),
                };
                let acc = match field(&regs, "NPU_SET_ACC_FORMAT", "acc_format")?.as_str() {
                    "ACC_FORMAT_I32" => AccFormat::I32,
                    "ACC_FORMAT_I48" => AccFormat::I48,
                    other => return Err(format!("line {line_no}: acc format {other}")),
                };
                let microblock = match field(&regs, "NPU_SET_ACC_FORMAT", "microblock")?.as_str() {
                    "MICROBLOCK_U1X1" => 0,
                    "MICROBLOCK_U1X2" => 1,
                    "MICROBLOCK_U1X4" => 2,
                    "MICROBLOCK_U2X2" => 3,
                    "MICROBLOCK_U2X4" => 4,
                    "MICROBLOCK_U4X4" => 5,
                    other => return Err(format!("line {line_no}: microblock {other}")),
                };
                let ublock = u85::ofm_ublock_depth(macs, microblock).ok_or("microblock")?;
                let ctx = format!("line {line_no} ({comment})");
                // The rules deriving Vela's layout parameters from the registers, checked
                // against what Vela says it chose.
                if comment_depth(&comment, "OFM UBlock=[") != Some(ublock) {
                    return Err(format!("{ctx}: OFM ublock depth {ublock}"));
                }
                let ifm_block = u85::ifm_block_depth(traversal, ifm_bits, macs, ublock);
                if !depthwise && comment_depth(&comment, "IFM Block=[") != Some(ifm_block) {
                    return Err(format!("{ctx}: IFM block depth {ifm_block}"));
                }
                let kernel = |m1: u32, d: u32| {
                    npu_rt::ethos_u::weights::order::undilated_kernel_size(m1, d)
                        .ok_or(format!("{ctx}: kernel size"))
                };
                let geom = U85Geometry {
                    traversal,
                    format,
                    ofm_depth: p("NPU_SET_OFM_DEPTH_M1")? + 1,
                    ofm_block_depth: p("NPU_SET_OFM_BLK_DEPTH_M1")? + 1,
                    ofm_ublock_depth: ublock,
                    ifm_depth: p("NPU_SET_IFM_DEPTH_M1")? + 1,
                    ifm_block_depth: ifm_block,
                    kernel_height: kernel(p("NPU_SET_KERNEL_HEIGHT_M1")?, dil_y)?,
                    kernel_width: kernel(p("NPU_SET_KERNEL_WIDTH_M1")?, dil_x)?,
                    stride_x,
                    stride_y,
                    dilation_x: dil_x,
                    dilation_y: dil_y,
                    ifm_bits,
                    macs,
                    cores,
                };
                let core_len = geom.core_len().map_err(|e| format!("{ctx}: {e}"))?;
                let wregion = p("NPU_SET_WEIGHT_REGION")? & 7;
                let mut streams = Vec::new();
                for core in 0..cores {
                    let sfx = if core == 0 {
                        String::new()
                    } else {
                        core.to_string()
                    };
                    let wlen = get(&regs, &format!("NPU_SET_WEIGHT{sfx}_LENGTH"))?
                        .payload
                        .unwrap_or(0);
                    if core >= geom.streams() {
                        // FWD: one stream for all cores.
                        if wlen != 0 {
                            return Err(format!("{ctx}: FWD but WEIGHT{sfx}_LENGTH {wlen}"));
                        }
                        continue;
                    }
                    let wbase = get(&regs, &format!("NPU_SET_WEIGHT{sfx}_BASE"))?
                        .payload
                        .unwrap_or(0);
                    if wbase % 16 != 0 || wlen % 16 != 0 {
                        return Err(format!("{ctx}: core {core} stream {wbase:#x}+{wlen}"));
                    }
                    streams.push(region_read(&mem, wregion, wbase, wlen)?);
                }
                let mut out = vec![0i16; geom.ohwi_len().map_err(|e| e.to_string())?];
                let st = decode_weights_u85(&streams, &geom, &mut out)
                    .map_err(|e| format!("{ctx}: {e} {geom:?}"))?;
                if st.nonzero_padding != 0 {
                    return Err(format!(
                        "{ctx}: {} non-zero padding values",
                        st.nonzero_padding
                    ));
                }
                if st.values != core_len * cores as usize {
                    return Err(format!("{ctx}: {} values", st.values));
                }
                match format {
                    WeightFormat::Swd => stats.swd_ops += 1,
                    WeightFormat::Fwd => {
                        // Vela's stream is header + codes padded to 32 bytes, zero bits after
                        // the last code, and WEIGHT_LENGTH that rounded up to 16.
                        let s = streams[0];
                        let total = core_len * cores as usize;
                        let bytes = u85::fwd_stream_bytes(s, total).ok_or("FWD header")?;
                        if s.len() != bytes.div_ceil(16) * 16 {
                            return Err(format!("{ctx}: FWD length {} vs {bytes}", s.len()));
                        }
                        let used_bits = u85::fwd_code_bits(s).ok_or("FWD header")? * total
                            + u85::FWD_HEADER_BITS;
                        for bit in used_bits..s.len() * 8 {
                            if s[bit / 8] >> (bit % 8) & 1 != 0 {
                                return Err(format!("{ctx}: FWD tail bit {bit} set"));
                            }
                        }
                        // Header bits 2..104 are written as zero.
                        for bit in 2..104 {
                            if s[bit / 8] >> (bit % 8) & 1 != 0 {
                                return Err(format!("{ctx}: FWD header bit {bit} set"));
                            }
                        }
                        stats.fwd_ops += 1;
                    }
                }
                stats.weight_bytes += streams.iter().map(|s| s.len()).sum::<usize>();

                // Scales: one stream for all cores, records past the OFM depth zero.
                let slen = get(&regs, "NPU_SET_SCALE_LENGTH")?.payload.unwrap_or(0) as usize;
                let sbase = get(&regs, "NPU_SET_SCALE_BASE")?.payload.unwrap_or(0);
                let sregion = p("NPU_SET_SCALE_REGION")? & 7;
                let entries = u85::scale_entries(geom.ofm_depth, ublock) as usize;
                if slen != (entries * SCALE_ENTRY_BYTES).div_ceil(16) * 16 {
                    return Err(format!("{ctx}: scale length {slen}, {entries} entries"));
                }
                let sstream = region_read(&mem, sregion, sbase, slen as u64)?;
                let mut scales = vec![ScaleEntry::default(); geom.ofm_depth as usize];
                decode_scales_u85(sstream, acc, &mut scales).map_err(|e| format!("{ctx}: {e}"))?;
                for (c, e) in scales.iter().enumerate() {
                    let raw = &sstream[c * SCALE_ENTRY_BYTES..(c + 1) * SCALE_ENTRY_BYTES];
                    if u85::scale_to_bytes(e, acc).as_ref().map(|b| &b[..]) != Some(raw) {
                        return Err(format!("{ctx}: scale record {c} {raw:?} -> {e:?}"));
                    }
                }
                if sstream[scales.len() * SCALE_ENTRY_BYTES..]
                    .iter()
                    .any(|&b| b != 0)
                {
                    return Err(format!("{ctx}: non-zero scale records past the OFM depth"));
                }
                stats.scale_bytes += slen;
                ops.push(DecodedOp {
                    line: line_no,
                    comment: comment.clone(),
                    geom,
                    weights: out,
                    scales,
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
    /// Only the weights are compared (LSTM gate weights: Vela's fully-connected layers carry
    /// the gates' folded biases and effective scales, which are not derived here).
    weights_only: bool,
}

/// The model's weighted operators, weights minus zero point, with the scales Vela must derive.
fn model_ops(graph: &Graph) -> Vec<ModelOp> {
    let mut ops = Vec::new();
    for op in &graph.ops {
        let kind = match op.kind {
            OpKind::Conv2d(_) => "conv",
            OpKind::DepthwiseConv2d { .. } => "depthwise",
            OpKind::FullyConnected { .. } => "fully-connected",
            // Vela runs a transposed convolution as one convolution over the upscaled input
            // with the kernel rotated by 180 degrees (docs/matmul.md).
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

/// Outcome of matching one compilation's operations against the model.
#[derive(Default)]
struct Matched {
    /// Operations matched to a model tensor slice.
    ops: usize,
    /// Of `ops`, those matched by weights alone (LSTM gates).
    weights_only: usize,
    /// Mean/sum-as-convolution operations (all weights 1, bias 0).
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

#[test]
fn vela_u85_streams_decode_to_model_weights() {
    let root = npu_tests::fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| root.join(n).join("vela").is_dir())
        .collect();
    names.sort();
    let mut stats = Stats::default();
    let (mut dirs, mut weighted_dirs, mut decoded_ops, mut matched_ops, mut means) =
        (0, 0, 0, 0, 0);
    let (mut unmatched_ops, mut weights_only_ops) = (0, 0);
    for name in &names {
        let tflite = root.join(name).join(format!("{name}.tflite"));
        let graph = if tflite.is_file() {
            Some(npu_build::import::load(&tflite).unwrap_or_else(|e| panic!("{name}: {e}")))
        } else {
            None
        };
        let mut model = graph.as_ref().map(model_ops).unwrap_or_default();
        model.extend(graph.as_ref().map(lstm_gate_weights).unwrap_or_default());
        // See the module comment: decoded and checked, but not matched to the model.
        let skip_match = graph.as_ref().is_none_or(|g| {
            g.ops
                .iter()
                .any(|op| matches!(op.kind, OpKind::ArgMinMax { .. }))
        });
        // MEAN and SUM become convolutions with all-one weights and bias 0.
        let has_mean = graph.as_ref().is_some_and(|g| {
            g.ops.iter().any(|op| {
                matches!(
                    op.kind,
                    OpKind::Mean { .. }
                        | OpKind::Reduce {
                            op: ReduceOp::Sum,
                            ..
                        }
                )
            })
        });
        for (accel, macs, cores) in U85 {
            let what = format!("{name} {accel}");
            let dir = root.join(name).join("vela").join(accel);
            if !npu_tests::vela_compiled(&dir) {
                continue;
            }
            dirs += 1;
            let ops = decode_vela_dir(&dir, macs, cores, &mut stats)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            decoded_ops += ops.len();
            weighted_dirs += usize::from(!ops.is_empty());
            if skip_match {
                unmatched_ops += ops.len();
                continue;
            }
            let m = match_ops(&ops, &model, has_mean, &what);
            assert_eq!(m.ops + m.means, ops.len());
            if !model.is_empty() {
                assert!(m.ops > 0, "{what}: no weighted operation found");
            }
            matched_ops += m.ops - m.weights_only;
            weights_only_ops += m.weights_only;
            means += m.means;
        }
    }
    println!(
        "U85: {dirs} compilations, {weighted_dirs} with weights; {decoded_ops} operations \
         decoded ({} SWD, {} FWD; {} weight bytes, {} scale bytes); {matched_ops} matched to \
         model weights, biases and scales, {weights_only_ops} LSTM gate layers to model weights \
         only, {means} mean/sum, {unmatched_ops} not matched (ARG_MAX)",
        stats.swd_ops, stats.fwd_ops, stats.weight_bytes, stats.scale_bytes
    );
    assert!(
        weighted_dirs >= 40,
        "U85 compilations with weights: {weighted_dirs}"
    );
    assert!(stats.fwd_ops > 0, "no FWD stream checked");
    assert!(matched_ops >= 500, "matched operations: {matched_ops}");
    assert!(
        weights_only_ops >= 200,
        "LSTM gate layers: {weights_only_ops}"
    );
}
