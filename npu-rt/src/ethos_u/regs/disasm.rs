//! One-line rendering of commands, in the layout of Vela's `--verbose-register-command-stream`
//! dump (the fixtures' `registers.txt`), so ours and Vela's can be diffed line by line:
//!
//! ```text
//! 0x000000: 7fff10ed 000c 4025 - NPU_SET_OPA_SCALE                 12, shift = 12, scale = 2147422445
//! ```
//!
//! Byte offset, payload word (blank for `cmd0`), parameter, opcode+control, name, parameter in
//! decimal, then the decoded fields. Undefined field encodings print as `****`.

use core::fmt::{self, Write};

use super::fields::*;
use super::opcode::{CMD1_FLAG, CONTROL_SHIFT, Cmd0, Cmd1, OPCODE_MASK};

/// Writes one line (without newline) for the command whose first word is `word`; `payload` is
/// the second word of a `cmd1` command (None when absent or truncated).
pub fn write_line<W: Write>(
    w: &mut W,
    offset: usize,
    word: u32,
    payload: Option<u32>,
) -> fmt::Result {
    write_head(w, offset, word, payload, opcode_name(word))?;
    write_fields(w, word, payload.unwrap_or(0))
}

/// Writes the part of a line before the fields: byte offset, payload (blank for `cmd0`),
/// parameter, low half-word, command name and parameter in decimal. Shared with the Ethos-U85
/// disassembler, whose dump has the same layout.
pub fn write_head<W: Write>(
    w: &mut W,
    offset: usize,
    word: u32,
    payload: Option<u32>,
    name: &str,
) -> fmt::Result {
    let code = word & 0xffff;
    let param = (word >> 16) as u16;
    let is_cmd1 = (word >> CONTROL_SHIFT) & 3 != 0;
    write!(w, "{offset:#08x}: ")?;
    match (is_cmd1, payload) {
        (true, Some(p)) => write!(w, "{p:08x}")?,
        _ => w.write_str("        ")?,
    }
    write!(w, " {param:04x} {code:04x} - ")?;
    write!(w, "{name:30} {param:5}")
}

/// The command name for a first word, or `****` when the opcode is undefined.
pub fn opcode_name(word: u32) -> &'static str {
    let code = (word & OPCODE_MASK) as u16;
    if word & 0xffff & !(OPCODE_MASK | CMD1_FLAG) != 0 {
        return "****";
    }
    let name = if word & CMD1_FLAG != 0 {
        Cmd1::from_u16(code).map(Cmd1::name)
    } else {
        Cmd0::from_u16(code).map(Cmd0::name)
    };
    name.unwrap_or("****")
}

fn field<W: Write>(w: &mut W, name: &str, value: impl fmt::Display) -> fmt::Result {
    write!(w, ", {name} = {value}")
}

fn enum_field<W: Write>(w: &mut W, name: &str, value: Option<&'static str>) -> fmt::Result {
    field(w, name, value.unwrap_or("****"))
}

/// Writes the `, name = value` fields of a command (nothing for undefined opcodes).
pub fn write_fields<W: Write>(w: &mut W, word: u32, payload: u32) -> fmt::Result {
    let p = word >> 16;
    let code = (word & OPCODE_MASK) as u16;
    if word & 0xffff & !(OPCODE_MASK | CMD1_FLAG) != 0 {
        return Ok(());
    }
    if word & CMD1_FLAG != 0 {
        let Some(op) = Cmd1::from_u16(code) else {
            return Ok(());
        };
        let addr = ((bits(p, 0, 8) as u64) << 32) | payload as u64;
        return match op {
            Cmd1::SET_WEIGHT_LENGTH | Cmd1::SET_WEIGHT1_LENGTH => field(w, "length", payload),
            Cmd1::SET_SCALE_LENGTH | Cmd1::SET_SCALE1_LENGTH => {
                field(w, "length", bits(payload, 0, 20))
            }
            Cmd1::SET_OFM_SCALE | Cmd1::SET_OPA_SCALE => {
                field(w, "shift", bits(p, 0, 6))?;
                field(w, "scale", payload)
            }
            Cmd1::SET_OPB_SCALE => field(w, "scale", bits(payload, 0, 16)),
            _ => field(w, "addr", format_args!("{addr:#x}")),
        };
    }
    let Some(op) = Cmd0::from_u16(code) else {
        return Ok(());
    };
    match op {
        Cmd0::OP_STOP | Cmd0::OP_IRQ => field(w, "mask", p),
        Cmd0::OP_CONV | Cmd0::OP_DEPTHWISE | Cmd0::OP_DMA_START => Ok(()),
        Cmd0::OP_POOL => enum_field(
            w,
            "pooling_mode",
            PoolingMode::from_bits(bits(p, 0, 3) as u8).map(PoolingMode::name),
        ),
        Cmd0::OP_ELEMENTWISE => enum_field(
            w,
            "elementwise_mode",
            ElementwiseMode::from_bits(bits(p, 0, 6) as u8).map(ElementwiseMode::name),
        ),
        Cmd0::OP_DMA_WAIT => field(w, "k", bits(p, 0, 1)),
        Cmd0::OP_KERNEL_WAIT => field(w, "n", bits(p, 0, 2)),
        Cmd0::OP_PMU_MASK => field(w, "enable", bits(p, 0, 1)),
        Cmd0::SET_IFM_PAD_TOP | Cmd0::SET_IFM_PAD_LEFT => field(w, "pad", bits(p, 0, 7)),
        Cmd0::SET_IFM_PAD_RIGHT | Cmd0::SET_IFM_PAD_BOTTOM => field(w, "pad", bits(p, 0, 8)),
        Cmd0::SET_IFM_DEPTH_M1 | Cmd0::SET_OFM_DEPTH_M1 => field(w, "depth_m1", p),
        Cmd0::SET_IFM_WIDTH0_M1
        | Cmd0::SET_OFM_WIDTH_M1
        | Cmd0::SET_OFM_WIDTH0_M1
        | Cmd0::SET_KERNEL_WIDTH_M1
        | Cmd0::SET_IFM2_WIDTH0_M1 => field(w, "width_m1", p),
        Cmd0::SET_IFM_HEIGHT0_M1
        | Cmd0::SET_IFM_HEIGHT1_M1
        | Cmd0::SET_OFM_HEIGHT_M1
        | Cmd0::SET_OFM_HEIGHT0_M1
        | Cmd0::SET_OFM_HEIGHT1_M1
        | Cmd0::SET_KERNEL_HEIGHT_M1
        | Cmd0::SET_IFM2_HEIGHT0_M1
        | Cmd0::SET_IFM2_HEIGHT1_M1 => field(w, "height_m1", p),
        Cmd0::SET_OFM_BLK_WIDTH_M1 => field(w, "width_m1", bits(p, 0, 6)),
        Cmd0::SET_OFM_BLK_HEIGHT_M1 => field(w, "height_m1", bits(p, 0, 5)),
        Cmd0::SET_OFM_BLK_DEPTH_M1 => field(w, "depth_m1", bits(p, 0, 7)),
        Cmd0::SET_IFM_PRECISION => {
            let v = IfmPrecision(p as u16);
            enum_field(w, "activation_type", Some(v.activation_type().name()))?;
            enum_field(w, "activation_precision", Some(v.precision().name()))?;
            enum_field(
                w,
                "activation_format",
                v.format().map(ActivationFormat::name),
            )?;
            enum_field(w, "scale_mode", v.scale_mode().map(IfmScaleMode::name))?;
            enum_field(w, "round_mode", v.round_mode().map(RoundMode::name))
        }
        Cmd0::SET_OFM_PRECISION => {
            let v = OfmPrecision(p as u16);
            enum_field(w, "activation_type", Some(v.activation_type().name()))?;
            enum_field(w, "activation_precision", Some(v.precision().name()))?;
            enum_field(
                w,
                "activation_format",
                v.format().map(ActivationFormat::name),
            )?;
            enum_field(w, "scale_mode", Some(v.scale_mode().name()))?;
            enum_field(w, "round_mode", v.round_mode().map(RoundMode::name))
        }
        Cmd0::SET_IFM2_PRECISION => {
            let v = Ifm2Precision(p as u16);
            enum_field(w, "activation_type", Some(v.activation_type().name()))?;
            enum_field(w, "activation_precision", Some(v.precision().name()))?;
            enum_field(
                w,
                "activation_format",
                v.format().map(ActivationFormat::name),
            )
        }
        Cmd0::SET_IFM_UPSCALE => enum_field(
            w,
            "mode",
            IfmUpscaleMode::from_bits(bits(p, 0, 2) as u8).map(IfmUpscaleMode::name),
        ),
        Cmd0::SET_IFM_ZERO_POINT | Cmd0::SET_OFM_ZERO_POINT | Cmd0::SET_IFM2_ZERO_POINT => {
            field(w, "zero_point", p)
        }
        Cmd0::SET_IFM_IB_END => field(w, "ib_end", bits(p, 0, 6)),
        Cmd0::SET_IFM2_IB_START => field(w, "ib_start", bits(p, 0, 6)),
        Cmd0::SET_AB_START => field(w, "ab_start", bits(p, 0, 6)),
        Cmd0::SET_IFM_REGION
        | Cmd0::SET_OFM_REGION
        | Cmd0::SET_WEIGHT_REGION
        | Cmd0::SET_SCALE_REGION
        | Cmd0::SET_IFM2_REGION => field(w, "region", bits(p, 0, 3)),
        Cmd0::SET_KERNEL_STRIDE => {
            let dil = |v: u32| KernelDilation::from_bits(v as u8).map(KernelDilation::name);
            field(w, "stride_x_lsb", bits(p, 0, 1))?;
            field(w, "stride_y_lsb", bits(p, 1, 1))?;
            enum_field(
                w,
                "weight_order",
                WeightOrder::from_bits(bits(p, 2, 1) as u8).map(WeightOrder::name),
            )?;
            enum_field(w, "dilation_x", dil(bits(p, 3, 1)))?;
            enum_field(w, "dilation_y", dil(bits(p, 4, 1)))?;
            enum_field(
                w,
                "decomposition",
                KernelDecomposition::from_bits(bits(p, 5, 1) as u8).map(KernelDecomposition::name),
            )?;
            field(w, "stride_x_msb", bits(p, 6, 1))?;
            field(w, "stride_y_msb", bits(p, 9, 1))
        }
        Cmd0::SET_PARALLEL_MODE => enum_field(
            w,
            "parallel_mode",
            ParallelMode::from_bits(bits(p, 0, 1) as u8).map(ParallelMode::name),
        ),
        Cmd0::SET_ACC_FORMAT => enum_field(
            w,
            "acc_format",
            AccFormat::from_bits(bits(p, 0, 2) as u8).map(AccFormat::name),
        ),
        Cmd0::SET_ACTIVATION => {
            let v = Activation(p as u16);
            enum_field(
                w,
                "activation_function",
                v.function().map(ActivationFunction::name),
            )?;
            enum_field(
                w,
                "activation_clip_range",
                v.clip_range().map(ActivationClipRange::name),
            )
        }
        Cmd0::SET_ACTIVATION_MIN | Cmd0::SET_ACTIVATION_MAX => field(w, "clip_boundary", p),
        Cmd0::SET_BLOCKDEP => field(w, "blockdep", bits(p, 0, 2)),
        Cmd0::SET_DMA0_SRC_REGION | Cmd0::SET_DMA0_DST_REGION => {
            let v = DmaRegion(p as u16);
            field(w, "region", v.region())?;
            enum_field(w, "region_mode", Some(v.mode().name()))?;
            enum_field(w, "stride_mode", v.stride_mode().map(DmaStrideMode::name))
        }
        Cmd0::SET_DMA0_SIZE0 | Cmd0::SET_DMA0_SIZE1 => field(w, "size", p),
        Cmd0::SET_IFM2_BROADCAST => {
            let v = Ifm2Broadcast(p as u16);
            let b = |on: bool| {
                Some(
                    if on {
                        BroadcastMode::Enable
                    } else {
                        BroadcastMode::Disable
                    }
                    .name(),
                )
            };
            enum_field(w, "broadcast_h", b(v.broadcast_h()))?;
            enum_field(w, "broadcast_w", b(v.broadcast_w()))?;
            enum_field(w, "broadcast_c", b(v.broadcast_c()))?;
            enum_field(w, "operand_order", Some(v.operand_order().name()))?;
            enum_field(w, "broadcast_constant", b(v.broadcast_constant()))
        }
        Cmd0::SET_IFM2_SCALAR => field(w, "scalar", p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Buf {
        data: [u8; 256],
        len: usize,
    }

    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.data
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    fn line(offset: usize, word: u32, payload: Option<u32>) -> Buf {
        let mut b = Buf {
            data: [0; 256],
            len: 0,
        };
        write_line(&mut b, offset, word, payload).unwrap();
        b
    }

    #[test]
    fn matches_vela_layout() {
        let b = line(0, 0x000c_4025, Some(0x7fff_10ed));
        assert_eq!(
            core::str::from_utf8(&b.data[..b.len]).unwrap(),
            "0x000000: 7fff10ed 000c 4025 - NPU_SET_OPA_SCALE                 12, shift = 12, scale = 2147422445"
        );
        let b = line(0x150, 0xffff_0000, None);
        assert_eq!(
            core::str::from_utf8(&b.data[..b.len]).unwrap(),
            "0x000150:          ffff 0000 - NPU_OP_STOP                    65535, mask = 65535"
        );
    }
}
