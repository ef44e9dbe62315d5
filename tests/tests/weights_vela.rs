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
use npu_build::ir::OpKind;
use npu_rt::ethos_u::config::{ALL, AcceleratorConfig};

use npu_rt::ethos_u::weights::{
    self, ScaleEntry, Traversal, WeightGeometry, order::undilated_kernel_size,
};
use npu_tests::vela_weights::{
    DecodedWeights, ModelOpsOptions, Reg, has_mean_or_sum, match_ops, model_ops,
    parse_register_line, region_read, vela_fixtures,
};

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
        let Some((name, reg)) = parse_register_line(t, line_no)? else {
            continue;
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

#[test]
fn vela_streams_decode_to_model_weights_and_reencode_smaller() {
    let root = npu_tests::fixtures_dir();
    let names = vela_fixtures(&root);
    let mut checked_ops = 0;
    let mut weighted_models = 0;
    for name in &names {
        let graph = npu_build::import::load(&root.join(name).join(format!("{name}.tflite")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = model_ops(&graph, ModelOpsOptions::default());
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
        let has_mean = has_mean_or_sum(&graph);
        weighted_models += usize::from(!model.is_empty());
        for cfg in ALL {
            let what = format!("{name} {}", cfg.name);
            let dir = root.join(name).join("vela").join(cfg.name);
            if !npu_tests::vela_compiled(&dir) {
                continue;
            }
            let ops = decode_vela_dir(&dir, cfg).unwrap_or_else(|e| panic!("{what}: {e}"));
            let m = match_ops(ops.iter().map(DecodedOp::view), &model, has_mean, &what);
            if has_mean {
                assert!(m.means > 0, "{what}: the model's Mean has no stream");
            }
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
