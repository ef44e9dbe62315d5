//! Unit tests of the emitter: ordering, elision, field checks, LUT DMAs, waits.

use npu_rt::ethos_u::config::{ETHOS_U55_32, ETHOS_U55_128, ETHOS_U65_512};
use npu_rt::ethos_u::regs::opcode::Commands;
use npu_rt::ethos_u::regs::{
    ActivationClipRange, Cmd0, Cmd1, Command, IfmUpscaleMode, PoolingMode, RoundMode,
};

use super::emit;
use crate::error::Error;
use crate::ethos_u::block;
use crate::ethos_u::npu_op::{
    Activation, Buffer, BufferId, BufferKind, ElemType, FeatureMap, Kernel, NpuOp, NpuOpKind,
    Placement, Program, Scale,
};
use crate::ir::Padding;

fn arena(name: &str, size: usize) -> Buffer {
    Buffer {
        name: name.into(),
        size,
        kind: BufferKind::Arena,
        io: None,
    }
}

/// A 1x1 average-pool copy of an 8x8x16 int8 map from buffer `src` to buffer `dst`.
fn copy(src: usize, dst: usize) -> NpuOp {
    NpuOp {
        name: format!("copy{src}"),
        kind: NpuOpKind::Pool(PoolingMode::Average),
        ifm: FeatureMap::nhwc(BufferId(src), [8, 8, 16], ElemType::I8, 0),
        ofm: FeatureMap::nhwc(BufferId(dst), [8, 8, 16], ElemType::I8, 0),
        kernel: Kernel::UNIT,
        padding: Padding::default(),
        upscale: IfmUpscaleMode::None,
        ofm_scale: Some(Scale::UNIT),
        ifm_round: RoundMode::Dbl,
        ofm_round: RoundMode::Natural,
        activation: Activation::none(ElemType::I8),
        block: None,
    }
}

fn program(ops: Vec<NpuOp>, buffers: Vec<Buffer>) -> (Program, Placement) {
    let placement = Placement {
        buffers: (0..buffers.len()).map(|i| (1u8, i as u64 * 1024)).collect(),
        weights: vec![None; ops.len()],
    };
    (
        Program {
            buffers,
            ops,
            ..Program::default()
        },
        placement,
    )
}

fn with_blocks(p: &mut Program, accel: &npu_rt::ethos_u::config::AcceleratorConfig) {
    for op in &mut p.ops {
        op.block = Some(block::choose(op, accel).unwrap());
    }
}

fn commands(words: &[u32]) -> Vec<Command> {
    Commands::new(words, 0).map(|c| c.unwrap().1).collect()
}

#[test]
fn second_op_only_rewrites_changed_registers() {
    let (mut p, pl) = program(
        vec![copy(0, 1), copy(1, 2)],
        vec![arena("a", 1024), arena("b", 1024), arena("c", 1024)],
    );
    with_blocks(&mut p, &ETHOS_U55_128);
    let words = emit(&p, &pl, &ETHOS_U55_128).unwrap();
    let cmds = commands(&words);
    assert_eq!(*words.last().unwrap(), Cmd0::OP_STOP.encode(0xffff));
    let pools: Vec<usize> = cmds
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(
                c,
                Command::Cmd0 {
                    op: Cmd0::OP_POOL,
                    ..
                }
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(pools.len(), 2);
    let second: Vec<_> = cmds[pools[0] + 1..pools[1]]
        .iter()
        .map(|c| c.opcode().name())
        .collect();
    // Only the addresses and the block dependency change (the second reads what the first
    // wrote: a direct producer -> consumer dependency).
    assert_eq!(
        second,
        ["NPU_SET_IFM_BASE0", "NPU_SET_OFM_BASE0", "NPU_SET_BLOCKDEP"],
        "{second:?}"
    );
    let dep = cmds[pools[1] - 1];
    assert!(matches!(dep, Command::Cmd0 { op: Cmd0::SET_BLOCKDEP, param } if param <= 3));
    // No U65 parallel-mode register on a U55.
    assert!(!cmds.iter().any(|c| matches!(
        c,
        Command::Cmd0 {
            op: Cmd0::SET_PARALLEL_MODE,
            ..
        }
    )));
}

#[test]
fn u65_starts_with_parallel_mode() {
    let (mut p, pl) = program(vec![copy(0, 1)], vec![arena("a", 1024), arena("b", 1024)]);
    with_blocks(&mut p, &ETHOS_U65_512);
    let words = emit(&p, &pl, &ETHOS_U65_512).unwrap();
    assert_eq!(words[0], Cmd0::SET_PARALLEL_MODE.encode(1));
}

#[test]
fn out_of_range_fields_are_errors_naming_the_op() {
    let bufs = || vec![arena("a", 4096), arena("b", 4096)];
    let check = |op: NpuOp, pl: Option<Placement>, needle: &str| {
        let (mut p, mut placement) = program(vec![op], bufs());
        if let Some(pl) = pl {
            placement = pl;
        }
        with_blocks(&mut p, &ETHOS_U55_128);
        match emit(&p, &placement, &ETHOS_U55_128) {
            Err(Error::HardwareLimit {
                node,
                limit,
                target,
                ..
            }) => {
                assert!(node.contains("copy0"), "{node}");
                assert_eq!(target, "ethos-u55-128");
                assert!(limit.contains(needle), "{limit}");
            }
            other => panic!("expected a hardware-limit error, got {other:?}"),
        }
    };
    let mut op = copy(0, 1);
    op.padding.top = 128;
    op.kernel.h = 3;
    check(op, None, "top padding");
    let mut op = copy(0, 1);
    op.kernel.stride_x = 4;
    check(op, None, "stride x");
    let mut op = copy(0, 1);
    op.ifm.zero_point = 70000;
    check(op, None, "IFM zero point");
    let op = copy(0, 1);
    let pl = Placement {
        buffers: vec![(1, 0xffff_ff00), (1, 0)],
        weights: vec![None],
    };
    check(op, Some(pl), "address range");
    let mut op = copy(0, 1);
    op.ofm_scale = Some(Scale {
        scale: 1,
        shift: 64,
    });
    check(op, None, "OFM_SCALE shift");
}

#[test]
fn lut_is_dmaed_once_into_a_slot() {
    let mut bufs = vec![arena("a", 1024), arena("b", 1024), arena("c", 1024)];
    bufs.push(Buffer {
        name: "lut".into(),
        size: 256,
        kind: BufferKind::Const(vec![0; 256]),
        io: None,
    });
    let mut a = copy(0, 1);
    a.activation.lut = Some(BufferId(3));
    a.activation.clip_range = ActivationClipRange::OfmPrecision;
    let mut b = copy(1, 2);
    b.activation.lut = Some(BufferId(3));
    for accel in [&ETHOS_U55_128, &ETHOS_U55_32] {
        let (mut p, mut pl) = program(vec![a.clone(), b.clone()], bufs.clone());
        pl.buffers[3] = (0, 0x40);
        with_blocks(&mut p, accel);
        let cmds = commands(&emit(&p, &pl, accel).unwrap());
        let starts = cmds
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Command::Cmd0 {
                        op: Cmd0::OP_DMA_START,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(starts, 1, "{}", accel.name);
        let dst = cmds.iter().find_map(|c| match c {
            Command::Cmd1 {
                op: Cmd1::SET_DMA0_DST,
                payload,
                ..
            } => Some(*payload),
            _ => None,
        });
        assert_eq!(dst, Some(accel.shram_lut_address()), "{}", accel.name);
        // The first op waits for the DMA; the second finds the table resident.
        let waits = cmds
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Command::Cmd0 {
                        op: Cmd0::OP_DMA_WAIT,
                        param: 0
                    }
                )
            })
            .count();
        assert_eq!(waits, 1, "{}", accel.name);
        let act = cmds.iter().find_map(|c| match c {
            Command::Cmd0 {
                op: Cmd0::SET_ACTIVATION,
                param,
            } => Some(*param),
            _ => None,
        });
        assert_eq!(act, Some(16), "TABLE_0");
    }
}

#[test]
fn missing_block_or_placement_is_an_error() {
    let (p, pl) = program(vec![copy(0, 1)], vec![arena("a", 1024), arena("b", 1024)]);
    assert!(emit(&p, &pl, &ETHOS_U55_128).is_err());
    let (mut p, mut pl) = program(vec![copy(0, 1)], vec![arena("a", 1024), arena("b", 1024)]);
    with_blocks(&mut p, &ETHOS_U55_128);
    pl.buffers.pop();
    assert!(emit(&p, &pl, &ETHOS_U55_128).is_err());
}

#[test]
fn dump_lists_ops() {
    let (mut p, _) = program(vec![copy(0, 1)], vec![arena("a", 1024), arena("b", 1024)]);
    with_blocks(&mut p, &ETHOS_U55_128);
    let d = super::dump(&p);
    assert!(d.contains("#0 'copy0': POOL POOLING_MODE_AVERAGE"), "{d}");
    assert!(d.contains("block ofm"), "{d}");
}
