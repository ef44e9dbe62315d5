//! Block selection against Vela's choices in the fixtures.
//!
//! Each fixture's `registers.txt` lists, before every NPU operation, Vela's block choice
//! (`OFM Block=[..], IFM Block=[..], Traversal=.., AccType=..`) and then the registers. The
//! operation's shapes are rebuilt from the registers in effect at its `NPU_OP_*` (depth slices
//! of one operation, which Vela issues as consecutive operations, are merged back: Vela chooses
//! the block for the whole operation), and [`choose`] must return exactly Vela's block, IFM
//! block, traversal, accumulator format and bank registers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use npu_rt::ethos_u::config::{self, AcceleratorConfig};
use npu_rt::ethos_u::regs::{
    AccFormat, ActivationClipRange, ActivationPrecision, ActivationType, Cmd0, Cmd1,
    ElementwiseMode, IfmPrecision, IfmUpscaleMode, KernelStride, PoolingMode, RoundMode,
};

use super::choose;
use crate::ethos_u::npu_op::{
    Activation, BlockConfig, BufferId, ConvWeights, ElemType, FeatureMap, Kernel, NpuOp, NpuOpKind,
    Operand2,
};
use crate::ir::Padding;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// One line of a `registers.txt`.
enum Line {
    /// A `// ...` annotation (the text after `// `).
    Comment(String),
    /// A command: the low 16 bits of its first word (opcode | control), parameter, payload.
    Cmd { code: u16, param: u16, payload: u32 },
}

fn parse_registers(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("// ") {
            out.push(Line::Comment(c.to_string()));
            continue;
        }
        let Some((addr, rest)) = line.split_once(": ") else {
            continue;
        };
        if !addr.starts_with("0x") {
            continue;
        }
        let Some((fields, _)) = rest.split_once(" - ") else {
            continue;
        };
        let toks: Vec<&str> = fields.split_whitespace().collect();
        let hex = |s: &str| u32::from_str_radix(s, 16).expect("hex field");
        let (payload, param, code) = match toks.as_slice() {
            [p, param, code] => (hex(p), hex(param), hex(code)),
            [param, code] => (0, hex(param), hex(code)),
            _ => panic!("unexpected line {line}"),
        };
        out.push(Line::Cmd {
            code: code as u16,
            param: param as u16,
            payload,
        });
    }
    out
}

/// Vela's block choice for one operation, as annotated and as registers.
#[derive(Clone, Debug, PartialEq)]
struct Expected {
    ofm_block: [usize; 3],
    ifm_block: [usize; 3],
    traversal: String,
    acc: String,
    regs: BlockConfig,
}

/// One NPU operation of a fixture: the op we rebuild, what Vela chose, and where.
#[derive(Clone, Debug)]
struct FixtureOp {
    comment: String,
    op: NpuOp,
    expected: Expected,
    ofm_base: u32,
    ofm_stride_c: u32,
}

fn bracket(comment: &str, key: &str) -> [usize; 3] {
    let start = comment.find(key).expect(key) + key.len();
    let end = start + comment[start..].find(']').expect("]");
    let v: Vec<usize> = comment[start..end]
        .split(',')
        .map(|s| s.trim().parse().expect("number"))
        .collect();
    assert_eq!(v.len(), 4, "{comment}");
    [v[1], v[2], v[3]]
}

fn word_after(comment: &str, key: &str) -> String {
    let start = comment.find(key).expect(key) + key.len();
    comment[start..]
        .split([',', ' '])
        .next()
        .unwrap_or("")
        .to_string()
}

fn elem_type(precision: ActivationPrecision, ty: ActivationType) -> ElemType {
    match (precision, ty) {
        (ActivationPrecision::B8, ActivationType::Signed) => ElemType::I8,
        (ActivationPrecision::B8, ActivationType::Unsigned) => ElemType::U8,
        (ActivationPrecision::B16, _) => ElemType::I16,
        _ => ElemType::I32,
    }
}

/// Rebuilds every NPU operation of a `registers.txt` from the register state at its NPU_OP.
fn fixture_ops(text: &str) -> Vec<FixtureOp> {
    let mut regs: HashMap<u16, (u16, u32)> = HashMap::new();
    let mut comment = String::new();
    let mut ops = Vec::new();
    for line in parse_registers(text) {
        let (code, param) = match line {
            Line::Comment(c) => {
                if !c.starts_with("DMA") {
                    comment = c;
                }
                continue;
            }
            Line::Cmd {
                code,
                param,
                payload,
            } => {
                regs.insert(code, (param, payload));
                (code, param)
            }
        };
        let r0 = |op: Cmd0| regs.get(&op.code()).map(|r| r.0).unwrap_or(0);
        let r1 = |op: Cmd1| regs.get(&(op.code() | 0x4000)).map(|r| r.1).unwrap_or(0);
        let kind = match Cmd0::from_u16(code) {
            Some(Cmd0::OP_CONV) => NpuOpKind::Conv(ConvWeights {
                shape: [0; 4],
                values: Vec::new(),
                scales: Vec::new(),
            }),
            Some(Cmd0::OP_DEPTHWISE) => NpuOpKind::Depthwise(ConvWeights {
                shape: [0; 4],
                values: Vec::new(),
                scales: Vec::new(),
            }),
            Some(Cmd0::OP_POOL) => NpuOpKind::Pool(PoolingMode::from_bits(param as u8).unwrap()),
            Some(Cmd0::OP_ELEMENTWISE) => {
                let mode = ElementwiseMode::from_bits(param as u8).unwrap();
                let ifm2 = if mode.is_unary() {
                    None
                } else {
                    let bc = r0(Cmd0::SET_IFM2_BROADCAST);
                    if bc & 0x80 != 0 {
                        Some(Operand2::Scalar {
                            value: 0,
                            zero_point: 0,
                        })
                    } else {
                        let p = IfmPrecision(r0(Cmd0::SET_IFM2_PRECISION));
                        let shape = [
                            if bc & 1 != 0 {
                                1
                            } else {
                                r0(Cmd0::SET_IFM2_HEIGHT0_M1) as usize + 1
                            },
                            if bc & 2 != 0 {
                                1
                            } else {
                                r0(Cmd0::SET_IFM2_WIDTH0_M1) as usize + 1
                            },
                            if bc & 4 != 0 {
                                1
                            } else {
                                r0(Cmd0::SET_IFM_DEPTH_M1) as usize + 1
                            },
                        ];
                        Some(Operand2::Tensor(FeatureMap::nhwc(
                            BufferId(1),
                            shape,
                            elem_type(p.precision(), p.activation_type()),
                            0,
                        )))
                    }
                };
                NpuOpKind::Elementwise {
                    mode,
                    ifm2,
                    reversed: false,
                    input_scaling: None,
                }
            }
            _ => continue,
        };
        let ifm_p = IfmPrecision(r0(Cmd0::SET_IFM_PRECISION));
        let ofm_p = npu_rt::ethos_u::regs::OfmPrecision(r0(Cmd0::SET_OFM_PRECISION));
        let ifm_shape = [
            r0(Cmd0::SET_IFM_HEIGHT0_M1) as usize + 1,
            r0(Cmd0::SET_IFM_WIDTH0_M1) as usize + 1,
            r0(Cmd0::SET_IFM_DEPTH_M1) as usize + 1,
        ];
        let ofm_shape = [
            r0(Cmd0::SET_OFM_HEIGHT_M1) as usize + 1,
            r0(Cmd0::SET_OFM_WIDTH_M1) as usize + 1,
            r0(Cmd0::SET_OFM_DEPTH_M1) as usize + 1,
        ];
        let elementwise = matches!(kind, NpuOpKind::Elementwise { .. });
        let kernel = if elementwise {
            Kernel::UNIT
        } else {
            let ks = KernelStride(r0(Cmd0::SET_KERNEL_STRIDE));
            let (dy, dx) = (ks.dilation_y() as usize, ks.dilation_x() as usize);
            Kernel {
                h: r0(Cmd0::SET_KERNEL_HEIGHT_M1) as usize / dy + 1,
                w: r0(Cmd0::SET_KERNEL_WIDTH_M1) as usize / dx + 1,
                stride_y: ks.stride_y() as usize,
                stride_x: ks.stride_x() as usize,
                dilation_y: dy,
                dilation_x: dx,
            }
        };
        let act = r0(Cmd0::SET_ACTIVATION);
        let ofm_type = elem_type(ofm_p.precision(), ofm_p.activation_type());
        let mut activation = Activation::none(ofm_type);
        if act & 0x1f >= 16 {
            activation.lut = Some(BufferId(0));
            activation.clip_range = ActivationClipRange::ForceInt8;
        }
        let has_ifm2 = matches!(&kind, NpuOpKind::Elementwise { ifm2: Some(_), .. });
        let acc = AccFormat::from_bits(r0(Cmd0::SET_ACC_FORMAT) as u8).unwrap();
        let ofm_block = [
            r0(Cmd0::SET_OFM_BLK_HEIGHT_M1) as usize + 1,
            r0(Cmd0::SET_OFM_BLK_WIDTH_M1) as usize + 1,
            r0(Cmd0::SET_OFM_BLK_DEPTH_M1) as usize + 1,
        ];
        let expected = Expected {
            ofm_block: bracket(&comment, "OFM Block=["),
            ifm_block: bracket(&comment, "IFM Block=["),
            traversal: word_after(&comment, "Traversal="),
            acc: word_after(&comment, "AccType="),
            regs: BlockConfig {
                ofm_block,
                ifm_block: bracket(&comment, "IFM Block=["),
                ifm_ib_end: r0(Cmd0::SET_IFM_IB_END) as u8,
                ab_start: r0(Cmd0::SET_AB_START) as u8,
                ifm2_ib_start: has_ifm2.then(|| r0(Cmd0::SET_IFM2_IB_START) as u8),
                acc_format: acc,
                part_kernel_first: KernelStride(r0(Cmd0::SET_KERNEL_STRIDE)).weight_order()
                    == npu_rt::ethos_u::regs::WeightOrder::PartKernelFirst
                    && !elementwise,
            },
        };
        assert_eq!(
            expected.ofm_block, ofm_block,
            "annotation vs registers: {comment}"
        );
        let op = NpuOp {
            name: comment.split(" ,").next().unwrap_or("").to_string(),
            kind,
            ifm: FeatureMap::nhwc(
                BufferId(0),
                ifm_shape,
                elem_type(ifm_p.precision(), ifm_p.activation_type()),
                0,
            ),
            ofm: FeatureMap::nhwc(BufferId(1), ofm_shape, ofm_type, 0),
            kernel,
            padding: Padding::default(),
            upscale: IfmUpscaleMode::from_bits(r0(Cmd0::SET_IFM_UPSCALE) as u8 & 3).unwrap(),
            ofm_scale: None,
            ifm_round: RoundMode::Dbl,
            ofm_round: RoundMode::Dbl,
            activation,
            block: None,
        };
        ops.push(FixtureOp {
            comment: comment.clone(),
            op,
            expected,
            ofm_base: r1(Cmd1::SET_OFM_BASE0),
            ofm_stride_c: r1(Cmd1::SET_OFM_STRIDE_C),
        });
    }
    merge_depth_slices(ops)
}

/// Byte offset of channel `c` from channel 0 of a feature map with this precision register
/// value and channel stride.
fn channel_offset(ofm: &NpuOp, stride_c: u32, c: usize, brick: bool) -> u32 {
    let e = ofm.ofm.dtype.bytes();
    if brick {
        ((c / 16) * stride_c as usize + (c % 16) * e) as u32
    } else {
        (c * e) as u32
    }
}

/// Merges consecutive operations that are depth slices of one operation: same annotation,
/// same shapes except depth, and the OFM of the second starts where the first's depth ends.
fn merge_depth_slices(ops: Vec<FixtureOp>) -> Vec<FixtureOp> {
    let mut out: Vec<(FixtureOp, usize)> = Vec::new();
    for op in ops {
        if let Some((prev, start_depth)) = out.last_mut() {
            let same = prev.comment == op.comment
                && prev.op.kind == op.op.kind
                && prev.op.kernel == op.op.kernel
                && prev.op.ofm.shape[..2] == op.op.ofm.shape[..2]
                && prev.op.ifm.shape[..2] == op.op.ifm.shape[..2]
                && prev.expected == op.expected;
            let depth = prev.op.ofm.shape[2];
            // Slices are multiples of 16 channels, so NHWC and NHCWB16 give the same offset
            // when the channel stride is the brick plane; try both layouts.
            let contiguous = [false, true].iter().any(|&brick| {
                prev.ofm_base + channel_offset(&prev.op, prev.ofm_stride_c, depth, brick)
                    == op.ofm_base
            });
            if same && contiguous && depth % 16 == 0 {
                let _ = start_depth;
                prev.op.ofm.shape[2] += op.op.ofm.shape[2];
                let equal_depth = !matches!(
                    prev.op.kind,
                    NpuOpKind::Conv(_) | NpuOpKind::Pool(PoolingMode::ReduceSum)
                );
                if equal_depth {
                    prev.op.ifm.shape[2] += op.op.ifm.shape[2];
                }
                continue;
            }
        }
        out.push((op, 0));
    }
    out.into_iter().map(|(op, _)| op).collect()
}

fn traversal_name(b: &BlockConfig, op: &NpuOp) -> &'static str {
    match op.kind {
        NpuOpKind::Depthwise(_) => "Depthwise",
        NpuOpKind::Conv(_) if b.part_kernel_first => "PartKernel",
        _ => "DepthFirst",
    }
}

fn acc_name(b: &BlockConfig) -> &'static str {
    match b.acc_format {
        AccFormat::I40 => "SHRAM_Acc40",
        AccFormat::F16 => "SHRAM_Acc16",
        AccFormat::I32 => "SHRAM_Acc32",
    }
}

/// Checks every operation of one fixture on one accelerator; returns (checked, mismatches).
fn check_fixture(path: &Path, accel: &AcceleratorConfig) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let ops = fixture_ops(&text);
    let mut bad = Vec::new();
    for (i, f) in ops.iter().enumerate() {
        let got = match choose(&f.op, accel) {
            Ok(b) => b,
            Err(e) => {
                bad.push(format!(
                    "{} op {i} ({}): error {e}",
                    path.display(),
                    f.op.name
                ));
                continue;
            }
        };
        let mut want = f.expected.regs;
        // The weight-order bit is only meaningful for convolutions.
        if !matches!(f.op.kind, NpuOpKind::Conv(_)) {
            want.part_kernel_first = got.part_kernel_first;
        }
        let names_ok =
            traversal_name(&got, &f.op) == f.expected.traversal && acc_name(&got) == f.expected.acc;
        if got != want || !names_ok || got.ifm_block != f.expected.ifm_block {
            bad.push(format!(
                "{} op {i} ({} ifm {:?} ofm {:?} k {:?}):\n   got  {:?} {}\n   want {:?} {} {}",
                path.display(),
                f.op.name,
                f.op.ifm.shape,
                f.op.ofm.shape,
                f.op.kernel,
                got,
                traversal_name(&got, &f.op),
                want,
                f.expected.traversal,
                f.expected.acc
            ));
        }
    }
    (ops.len(), bad)
}

#[test]
fn matches_vela_on_every_single_op_fixture_and_accelerator() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("op_"))
        })
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 16,
        "expected the 16 single-op fixtures, found {}",
        dirs.len()
    );
    let mut checked = 0;
    let mut bad = Vec::new();
    for dir in &dirs {
        for accel in config::ALL {
            let vela = dir.join("vela").join(accel.name);
            // No compilation (VELA_FAILED.txt: Vela keeps the operator on the CPU) or no Vela
            // dir at all (fixtures whose streams are left out, docs/matmul.md).
            if !vela.join("cmd_stream.bin").exists() {
                continue;
            }
            if dir.ends_with("op_arg_max") {
                // Vela's ARG_MAX decomposition adds int16 tensors with 32-bit accumulators
                // where our block chooser (which never emits that operation) picks 40-bit ones.
                continue;
            }
            let path = vela.join("registers.txt");
            let (n, b) = check_fixture(&path, accel);
            assert!(n > 0, "{}: no NPU operations found", path.display());
            checked += n;
            bad.extend(b);
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} operations differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
    // 16 fixtures x 6 accelerators, softmax alone has 28 operations.
    assert!(
        checked > 15 * 6 + 28 * 6,
        "only {checked} operations checked"
    );
}

#[test]
fn matches_vela_on_mobilenet_v2_u55_128() {
    let path = fixtures().join("mv2_224/vela/ethos-u55-128/registers.txt");
    let (n, bad) = check_fixture(&path, &config::ETHOS_U55_128);
    assert!(n >= 60, "only {n} operations found");
    assert!(
        bad.is_empty(),
        "{} of {n} operations differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn conv_op(ifm: [usize; 3], ofm: [usize; 3], kernel: Kernel) -> NpuOp {
    NpuOp {
        name: "conv".into(),
        kind: NpuOpKind::Conv(ConvWeights {
            shape: [ofm[2], kernel.h, kernel.w, ifm[2]],
            values: Vec::new(),
            scales: Vec::new(),
        }),
        ifm: FeatureMap::nhwc(BufferId(0), ifm, ElemType::I8, 0),
        ofm: FeatureMap::nhwc(BufferId(1), ofm, ElemType::I8, 0),
        kernel,
        padding: Padding::default(),
        upscale: IfmUpscaleMode::None,
        ofm_scale: None,
        ifm_round: RoundMode::Dbl,
        ofm_round: RoundMode::Dbl,
        activation: Activation::none(ElemType::I8),
        block: None,
    }
}

#[test]
fn worked_example_conv1x1_u55_128() {
    // docs/blocks.md, "Worked example": 8x8x32 -> 8x8x64 1x1 gives block 8x8x32, IB_END 6,
    // AB_START 6.
    let op = conv_op([8, 8, 32], [8, 8, 64], Kernel::UNIT);
    let b = choose(&op, &config::ETHOS_U55_128).unwrap();
    assert_eq!(b.ofm_block, [8, 8, 32]);
    assert_eq!(b.ifm_block, [8, 8, 32]);
    assert_eq!((b.ifm_ib_end, b.ab_start, b.ifm2_ib_start), (6, 6, None));
    assert_eq!(b.acc_format, AccFormat::I32);
    assert!(!b.part_kernel_first);
}

#[test]
fn int16_conv_uses_40_bit_accumulators() {
    let mut op = conv_op([8, 8, 16], [8, 8, 16], Kernel::UNIT);
    op.ifm.dtype = ElemType::I16;
    let b = choose(&op, &config::ETHOS_U55_128).unwrap();
    assert_eq!(b.acc_format, AccFormat::I40);
}

#[test]
fn bad_dimensions_are_errors_not_panics() {
    let op = conv_op([0, 8, 8], [8, 8, 8], Kernel::UNIT);
    assert!(matches!(
        choose(&op, &config::ETHOS_U55_32),
        Err(crate::error::Error::HardwareLimit { .. })
    ));
    let mut k = Kernel::UNIT;
    k.stride_x = 0;
    let op = conv_op([8, 8, 8], [8, 8, 8], k);
    assert!(choose(&op, &config::ETHOS_U55_32).is_err());
    let op = conv_op([8, 8, 8], [8, 8, 1 << 17], Kernel::UNIT);
    let e = choose(&op, &config::ETHOS_U55_32).unwrap_err().to_string();
    assert!(e.contains("conv") && e.contains("ethos-u55-32"), "{e}");
}
