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
//! `npu_tests::vela_weights::model_ops`). `NPU_OP_CONV` with `weights_ifm2 = 1` (dynamic weights
//! from IFM2, e.g. BatchMatMul) has no weight stream.

use std::collections::HashMap;
use std::path::Path;

use npu_build::ir::OpKind;
use npu_rt::ethos_u::weights::u85::{
    self, AccFormat, U85Geometry, WeightFormat, decode_scales_u85, decode_weights_u85,
};
use npu_rt::ethos_u::weights::{SCALE_ENTRY_BYTES, ScaleEntry, Traversal};
use npu_tests::vela_weights::{
    DecodedWeights, ModelOpsOptions, Reg, has_mean_or_sum, match_ops, model_ops,
    parse_register_line, region_read, vela_fixtures,
};

/// The U85 configurations Vela compiled the fixtures for: (name, MACs, weight decoders).
const U85: [(&str, u32, u32); 4] = [
    ("ethos-u85-128", 128, 1),
    ("ethos-u85-256", 256, 1),
    ("ethos-u85-512", 512, 2),
    ("ethos-u85-2048", 2048, 4),
];

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

impl DecodedOp {
    /// The weights and scales `match_ops` compares.
    fn view(&self) -> DecodedWeights<'_> {
        let g = &self.geom;
        DecodedWeights {
            line: self.line,
            comment: &self.comment,
            shape: [
                g.ofm_depth as usize,
                g.kernel_height as usize,
                g.kernel_width as usize,
                g.weight_ifm_depth() as usize,
            ],
            weights: &self.weights,
            scales: &self.scales,
        }
    }
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
        let Some((name, reg)) = parse_register_line(t, line_no)? else {
            continue;
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

#[test]
fn vela_u85_streams_decode_to_model_weights() {
    let root = npu_tests::fixtures_dir();
    let names = vela_fixtures(&root);
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
        // Vela's U85 lowering splits strided transposed convolutions into phases; LSTM gate
        // layers are matched by weights alone (see the module comment).
        let options = ModelOpsOptions {
            transpose_conv_phases: true,
            lstm_gates: true,
        };
        let model = graph
            .as_ref()
            .map(|g| model_ops(g, options))
            .unwrap_or_default();
        // See the module comment: decoded and checked, but not matched to the model.
        let skip_match = graph.as_ref().is_none_or(|g| {
            g.ops
                .iter()
                .any(|op| matches!(op.kind, OpKind::ArgMinMax { .. }))
        });
        // MEAN and SUM become convolutions with all-one weights and bias 0.
        let has_mean = graph.as_ref().is_some_and(has_mean_or_sum);
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
            let m = match_ops(ops.iter().map(DecodedOp::view), &model, has_mean, &what);
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
