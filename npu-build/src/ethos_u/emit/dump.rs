//! A human-readable listing of a [`Program`] (`npu compile --dump-ops`).

use std::fmt::Write;

use super::super::npu_op::{
    Activation, BufferKind, FeatureMap, Io, Layout, NpuOp, NpuOpKind, Operand2, Program,
};

/// Lists the buffers and operations of `program`, one line per buffer and a few per operation.
pub fn dump(program: &Program) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "buffers ({}):", program.buffers.len());
    for (i, b) in program.buffers.iter().enumerate() {
        let kind = match &b.kind {
            BufferKind::Arena => "arena".to_string(),
            BufferKind::Const(bytes) => format!("const {} bytes", bytes.len()),
        };
        let io = match b.io {
            Some(Io::Input(k)) => format!(" input {k}"),
            Some(Io::Output(k)) => format!(" output {k}"),
            Some(Io::State(k)) => format!(" state {k}"),
            None => String::new(),
        };
        let _ = writeln!(s, "  b{i}: '{}' {} bytes, {kind}{io}", b.name, b.size);
    }
    let _ = writeln!(s, "ops ({}):", program.ops.len());
    for (i, op) in program.ops.iter().enumerate() {
        write_op(&mut s, i, op);
    }
    s
}

fn fm(f: &FeatureMap) -> String {
    let layout = match f.layout {
        Layout::Nhwc => "NHWC",
        Layout::Nhcwb16 => "NHCWB16",
    };
    format!(
        "b{}+{} {:?} {:?} {layout} strides {:?} zp {}",
        f.buffer, f.offset, f.shape, f.dtype, f.strides, f.zero_point
    )
}

fn activation(a: &Activation) -> String {
    let lut = a.lut.map_or(String::new(), |b| format!(" LUT b{b}"));
    format!("clip [{}, {}] {}{lut}", a.min, a.max, a.clip_range.name())
}

fn write_op(s: &mut String, i: usize, op: &NpuOp) {
    let kind = match &op.kind {
        NpuOpKind::Conv(w) => format!("CONV weights {:?}", w.shape),
        NpuOpKind::Depthwise(w) => format!("DEPTHWISE weights {:?}", w.shape),
        NpuOpKind::Pool(m) => format!("POOL {}", m.name()),
        NpuOpKind::Elementwise { mode, .. } => format!("ELEMENTWISE {}", mode.name()),
    };
    let _ = writeln!(s, "  #{i} '{}': {kind}", op.name);
    let _ = writeln!(s, "      ifm  {}", fm(&op.ifm));
    if let NpuOpKind::Elementwise {
        ifm2,
        reversed,
        input_scaling,
        ..
    } = &op.kind
    {
        match ifm2 {
            Some(Operand2::Tensor(f)) => {
                let _ = writeln!(
                    s,
                    "      ifm2 {}{}",
                    fm(f),
                    if *reversed { " (operand A)" } else { "" }
                );
            }
            Some(Operand2::Scalar { value, zero_point }) => {
                let _ = writeln!(
                    s,
                    "      ifm2 scalar {value} zp {zero_point}{}",
                    if *reversed { " (operand A)" } else { "" }
                );
            }
            None => {}
        }
        if let Some(sc) = input_scaling {
            let _ = writeln!(
                s,
                "      input scaling {} opa {}>>{} opb {}",
                sc.mode.name(),
                sc.opa.scale,
                sc.opa.shift,
                sc.opb
            );
        }
    }
    let _ = writeln!(s, "      ofm  {}", fm(&op.ofm));
    let k = &op.kernel;
    let p = &op.padding;
    let _ = writeln!(
        s,
        "      kernel {}x{} stride {}x{} dilation {}x{} pad t{} l{} b{} r{} upscale {}",
        k.h,
        k.w,
        k.stride_y,
        k.stride_x,
        k.dilation_y,
        k.dilation_x,
        p.top,
        p.left,
        p.bottom,
        p.right,
        op.upscale.name()
    );
    let scale = op.ofm_scale.map_or("per-channel".to_string(), |sc| {
        format!("{}>>{}", sc.scale, sc.shift)
    });
    let _ = writeln!(
        s,
        "      ofm scale {scale} round ifm {} ofm {}; {}",
        op.ifm_round.name(),
        op.ofm_round.name(),
        activation(&op.activation)
    );
    if let Some(b) = &op.block {
        let _ = writeln!(
            s,
            "      block ofm {:?} ifm {:?} ib_end {} ab_start {} ib2_start {:?} {} {}",
            b.ofm_block,
            b.ifm_block,
            b.ifm_ib_end,
            b.ab_start,
            b.ifm2_ib_start,
            b.acc_format.name(),
            if b.part_kernel_first {
                "part-kernel-first"
            } else {
                "depth-first"
            }
        );
    }
}
