//! Driver behaviour against a scripted register window (no simulator: the end-to-end tests
//! against the virtual NPU's register model are in `tests/tests/driver.rs`).

extern crate std;

use std::vec::Vec;

use super::*;
use crate::ethos_u::config::{ETHOS_U55_128, ETHOS_U65_256};
use crate::ethos_u::cop::Cop1Writer;
use crate::ethos_u::regs::ctrl::{NUM_PMU_COUNTERS, PMU_CYCLE_COUNTER_BIT};
use crate::ethos_u::regs::u85::ctrl as u85ctrl;
use crate::ethos_u::regs::{ARCH_VERSION, PmuEvent};

/// A register window that records writes and finishes a started queue at once.
struct Scripted {
    config: u32,
    id: u32,
    status: u32,
    /// `STATUS.reset_status` never clears.
    stuck_reset: bool,
    /// A start leaves the NPU running forever.
    hang: bool,
    /// STATUS bits a start ends with (besides stopped).
    end_status: u32,
    /// The PMU answers at the U85 offsets.
    u85: bool,
    writes: Vec<(u32, u32)>,
}

impl Scripted {
    fn new(accel: &crate::ethos_u::config::AcceleratorConfig) -> Self {
        Scripted {
            config: config_word(accel),
            id: Id::new(1, 0, 0, 6, ARCH_VERSION).0,
            status: 0,
            stuck_reset: false,
            hang: false,
            end_status: Status::CMD_END_REACHED | Status::IRQ_RAISED,
            u85: false,
            writes: Vec::new(),
        }
    }

    fn written(&self, off: u32) -> Vec<u32> {
        self.writes
            .iter()
            .filter(|(o, _)| *o == off)
            .map(|(_, v)| *v)
            .collect()
    }
}

impl Mmio for Scripted {
    fn read32(&mut self, off: u32) -> u32 {
        // The U85 PMU is the U55 one 0x1000 higher; nothing answers at the other place.
        let pmu = (0x180..0x400).contains(&off) || (0x1180..0x1400).contains(&off);
        let off = match (self.u85, pmu) {
            (_, false) => off,
            (true, true) => off.wrapping_sub(u85ctrl::offset::PMU_SHIFT),
            (false, true) => off,
        };
        match off {
            offset::ID => self.id,
            offset::CONFIG => self.config,
            offset::STATUS => self.status,
            offset::PMCCNTR => 1234,
            offset::PMCCNTR_HI => 0x1_0001,
            o if (offset::PMEVCNTR0..offset::PMEVCNTR0 + 16).contains(&o) => {
                10 + (o - offset::PMEVCNTR0) / 4
            }
            _ => 0,
        }
    }

    fn write32(&mut self, off: u32, value: u32) {
        self.writes.push((off, value));
        match off {
            offset::RESET => {
                self.status = if self.stuck_reset {
                    Status::RESET_STATUS
                } else {
                    0
                }
            }
            offset::CMD if value & CmdReg::TRANSITION_TO_RUNNING_STATE != 0 => {
                self.status = if self.hang {
                    Status::STATE
                } else {
                    self.end_status
                }
            }
            offset::CMD if value & CmdReg::CLEAR_IRQ != 0 => self.status &= !Status::IRQ_RAISED,
            _ => {}
        }
    }
}

fn config_word(accel: &crate::ethos_u::config::AcceleratorConfig) -> u32 {
    Config::new(
        accel.hw_macs_per_cc(),
        0,
        accel.hw_shram_size_kib(),
        accel.hw_product(),
    )
    .0
}

/// A COP1 payload for `accel` around a one-word stream (NPU_OP_STOP).
fn payload(accel: &crate::ethos_u::config::AcceleratorConfig) -> Vec<u8> {
    cop1(config_word(accel), Id::new(1, 0, 0, 6, ARCH_VERSION).0)
}

fn cop1(config: u32, id: u32) -> Vec<u8> {
    let mut out = std::vec![0u8; Cop1Writer::payload_len(1)];
    Cop1Writer::new(config, id)
        .write(&[0xffff_0001], &mut out)
        .unwrap();
    out
}

/// Maps every buffer into 32-bit NPU space at a fixed offset (the host's pointers are wider).
struct Low;

impl Platform for Low {
    fn npu_address(&mut self, cpu: usize, _len: usize) -> Option<u64> {
        Some((cpu as u64) & 0x0fff_fff0)
    }
}

fn run(npu: &mut EthosU<&mut Scripted, Low>, cmd: &[u8], arena: &mut [u8]) -> Result<(), Error> {
    let weights = [0u8; 32];
    let needed = arena.len();
    npu.run_job(Job {
        command_stream: cmd,
        weights: &weights,
        arena,
        fast_scratch: &mut [],
        arena_needed: needed,
        fast_scratch_needed: 0,
    })
}

#[test]
fn programs_the_documented_sequence() {
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let cmd = payload(&ETHOS_U55_128);
    let mut arena = [0u8; 64];
    let mut npu = EthosU::with_mmio(&mut hw)
        .with_platform(Low)
        .with_pmu(PmuConfig::DEFAULT);
    run(&mut npu, &cmd, &mut arena).unwrap();
    let report = *npu.pmu_report().unwrap();
    assert_eq!(report.cycles, Some((1 << 32) | 1234));
    assert_eq!(report.counts, [10, 11, 12, 13]);
    assert_eq!(report.count(PmuEvent::MacActive), Some(11));
    assert_eq!(report.count(PmuEvent::NoEvent), None);
    let text = std::format!("{report}");
    assert!(text.starts_with("Ethos-U PMU report:\n  cycles: 4294968530\n"));
    assert!(text.contains("PMU_EVENT_NPU_ACTIVE: 10"));

    let order: Vec<u32> = hw.writes.iter().map(|w| w.0).collect();
    let pos = |o: u32| order.iter().position(|&x| x == o).unwrap();
    assert_eq!(order[0], offset::RESET, "reset first");
    assert_eq!(
        hw.written(offset::RESET),
        [Reset::new(PrivilegeLevel::Privileged, SecurityLevel::Secure).0]
    );
    assert_eq!(hw.written(offset::QCONFIG), [2]);
    assert_eq!(hw.written(offset::REGIONCFG), [0x5553]);
    assert_eq!(hw.written(offset::AXI_LIMIT3), [0x0f1f_0000]);
    // The queue is the stream inside the payload (32 bytes of header), 4 bytes long.
    let q = (cmd.as_ptr() as u64 + 32) & 0x0fff_fff0;
    assert_eq!(hw.written(offset::QBASE), [q as u32]);
    assert_eq!(hw.written(offset::QSIZE), [4]);
    let arena_at = (arena.as_ptr() as u64) & 0x0fff_fff0;
    assert_eq!(hw.written(basep_offset(1)), [arena_at as u32]);
    assert_eq!(hw.written(basep_offset(2)), [0], "empty fast scratch");
    assert_eq!(
        hw.written(offset::PMCNTENSET),
        [PMU_CYCLE_COUNTER_BIT | ((1 << NUM_PMU_COUNTERS) - 1)]
    );
    let start = order
        .iter()
        .zip(&hw.writes)
        .position(|(_, w)| w.0 == offset::CMD && w.1 & CmdReg::TRANSITION_TO_RUNNING_STATE != 0)
        .unwrap();
    for o in [
        offset::QBASE,
        offset::QSIZE,
        basep_offset(0),
        basep_offset(1),
        offset::PMCNTENSET,
    ] {
        assert!(pos(o) < start, "{o:#x} before start");
    }
    assert!(
        hw.written(offset::CMD)
            .iter()
            .any(|v| v & CmdReg::CLEAR_IRQ != 0),
        "polling mode acknowledges the interrupt"
    );
}

#[test]
fn reset_that_never_finishes_times_out() {
    let mut hw = Scripted::new(&ETHOS_U55_128);
    hw.stuck_reset = true;
    let cmd = payload(&ETHOS_U55_128);
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    let err = run(&mut npu, &cmd, &mut [0u8; 16]).unwrap_err();
    assert_eq!(
        err,
        Error::Timeout {
            status: Status::RESET_STATUS
        }
    );
    assert!(
        !hw.writes.iter().any(|w| w.0 == offset::CMD),
        "never started"
    );
}

/// What an absent device returns: every read the same word (0 where the bus reads as zero,
/// as QEMU's mps3-an547 does at the NPU's address; all ones on buses that float high).
struct Absent(u32, Vec<(u32, u32)>);

impl Mmio for Absent {
    fn read32(&mut self, _: u32) -> u32 {
        self.0
    }
    fn write32(&mut self, off: u32, value: u32) {
        self.1.push((off, value));
    }
    fn base_address(&self) -> usize {
        0x5810_2000
    }
}

#[test]
fn no_device_is_its_own_error_and_nothing_is_written() {
    for word in [0, u32::MAX] {
        let mut hw = Absent(word, Vec::new());
        let cmd = payload(&ETHOS_U55_128);
        let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
        let job = Job {
            command_stream: &cmd,
            weights: &[],
            arena: &mut [0u8; 16],
            fast_scratch: &mut [],
            arena_needed: 16,
            fast_scratch_needed: 0,
        };
        let err = npu.run_job(job).unwrap_err();
        assert_eq!(
            err,
            Error::NoDevice {
                base: 0x5810_2000,
                id: word
            }
        );
        let text = std::format!("{err}");
        assert!(
            text.starts_with("no Ethos-U answered at 0x58102000"),
            "{text}"
        );
        assert!(hw.1.is_empty(), "wrote {:?} to an absent device", hw.1);
    }
}

#[test]
fn hardware_mismatches_are_errors() {
    // A U65 stream on a U55.
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let cmd = payload(&ETHOS_U65_256);
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    assert!(matches!(
        run(&mut npu, &cmd, &mut [0u8; 16]),
        Err(Error::ConfigMismatch { .. })
    ));
    // An NPU of an older architecture minor version than the stream's.
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let cmd = cop1(
        config_word(&ETHOS_U55_128),
        Id::new(1, 0, 0, 6, (1, 1, 0)).0,
    );
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    assert!(matches!(
        run(&mut npu, &cmd, &mut [0u8; 16]),
        Err(Error::ArchMismatch { .. })
    ));
    assert!(!hw.writes.iter().any(|w| w.0 == offset::CMD));
}

#[test]
fn payload_and_size_errors_come_before_touching_the_npu() {
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    let mut arena = [0u8; 16];
    // Not COP1.
    assert_eq!(
        run(&mut npu, &[0u8; 8], &mut arena),
        Err(Error::Payload { offset: 0 })
    );
    // COP1 without OPTIMIZER_CONFIG: nothing to check the hardware against.
    let mut bare = Vec::from(*b"COP1");
    bare.extend_from_slice(&(2u32 | 1 << 16).to_le_bytes());
    bare.extend_from_slice(&0xffff_0001u32.to_le_bytes());
    assert_eq!(
        run(&mut npu, &bare, &mut arena),
        Err(Error::Payload { offset: 12 })
    );
    let cmd = payload(&ETHOS_U55_128);
    let err = npu
        .run_job(Job {
            command_stream: &cmd,
            weights: &[],
            arena: &mut arena,
            fast_scratch: &mut [],
            arena_needed: 17,
            fast_scratch_needed: 0,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::ArenaTooSmall {
            needed: 17,
            given: 16
        }
    );
    let err = npu
        .run_job(Job {
            command_stream: &cmd,
            weights: &[],
            arena: &mut arena,
            fast_scratch: &mut [],
            arena_needed: 16,
            fast_scratch_needed: 64,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::ArenaTooSmall {
            needed: 64,
            given: 0
        }
    );
    assert!(hw.writes.is_empty());
}

#[test]
fn unreachable_buffers_are_errors() {
    struct Refuse;
    impl Platform for Refuse {
        fn npu_address(&mut self, _: usize, _: usize) -> Option<u64> {
            None
        }
    }
    /// Puts the 4-byte queue across the 4 GiB limit of the U55's 32 address bits.
    struct High;
    impl Platform for High {
        fn npu_address(&mut self, _: usize, len: usize) -> Option<u64> {
            Some(if len == 4 { 0xffff_fffe } else { 0x1000 })
        }
    }
    let cmd = payload(&ETHOS_U55_128);
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Refuse);
    let weights = [0u8; 4];
    let mut arena = [0u8; 16];
    let err = npu
        .run_job(Job {
            command_stream: &cmd,
            weights: &weights,
            arena: &mut arena,
            fast_scratch: &mut [],
            arena_needed: 16,
            fast_scratch_needed: 0,
        })
        .unwrap_err();
    assert!(matches!(err, Error::NotNpuAddressable { region: 0, .. }));
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(High);
    let err = npu
        .run_job(Job {
            command_stream: &cmd,
            weights: &[],
            arena: &mut arena,
            fast_scratch: &mut [],
            arena_needed: 16,
            fast_scratch_needed: 0,
        })
        .unwrap_err();
    assert_eq!(
        err,
        Error::NotNpuAddressable {
            region: QUEUE_REGION,
            cpu_address: cmd.as_ptr() as usize + 32
        }
    );
}

#[test]
fn status_errors_and_hangs() {
    let cmd = payload(&ETHOS_U55_128);
    let cases = [
        (
            Status::BUS_STATUS | Status::IRQ_RAISED,
            Error::BusError {
                status: Status::BUS_STATUS | Status::IRQ_RAISED,
            },
        ),
        (
            Status::CMD_PARSE_ERROR | Status::IRQ_RAISED,
            Error::CommandError {
                status: Status::CMD_PARSE_ERROR | Status::IRQ_RAISED,
            },
        ),
        (
            Status::WD_FAULT | Status::IRQ_RAISED,
            Error::Fault {
                status: Status::WD_FAULT | Status::IRQ_RAISED,
            },
        ),
    ];
    for (end, want) in cases {
        let mut hw = Scripted::new(&ETHOS_U55_128);
        hw.end_status = end;
        let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
        assert_eq!(run(&mut npu, &cmd, &mut [0u8; 16]), Err(want));
        assert_eq!(
            hw.writes.last().map(|w| w.0),
            Some(offset::RESET),
            "a failed NPU is reset"
        );
    }
    let mut hw = Scripted::new(&ETHOS_U55_128);
    hw.hang = true;
    let settings = Settings {
        max_polls: 1000,
        ..Settings::DEFAULT
    };
    let mut npu = EthosU::with_mmio(&mut hw)
        .with_platform(Low)
        .with_settings(settings);
    assert_eq!(
        run(&mut npu, &cmd, &mut [0u8; 16]),
        Err(Error::Timeout {
            status: Status::STATE
        })
    );
    assert_eq!(hw.writes.last().map(|w| w.0), Some(offset::RESET));
}

#[test]
fn volatile_window_stays_inside_the_u85_window() {
    let mut window = [0u32; 0x1400 / 4];
    // SAFETY: `window` is a live, aligned buffer of the U85 window's size standing in for the
    // register window, used only through `regs` while `regs` lives.
    let mut regs = unsafe { VolatileMmio::new(window.as_mut_ptr()) };
    regs.write32(offset::QSIZE, 0x1234);
    regs.write32(0x13fc, 7);
    regs.write32(0x1400, 9);
    regs.write32(0x0002, 9);
    assert_eq!(regs.read32(offset::QSIZE), 0x1234);
    assert_eq!(regs.read32(0x1400), 0);
    assert_eq!(regs.read32(0x0002), 0);
    assert_eq!(window[offset::QSIZE as usize / 4], 0x1234);
    assert_eq!(window[0x13fc / 4], 7);
    assert_eq!(window.iter().filter(|&&w| w != 0).count(), 2);
}

/// A U85 window: the U85 `CONFIG`/`ID` of ethos-u85-256 (Vela's payload words), the PMU at the
/// U85 offsets.
fn scripted_u85() -> Scripted {
    let mut hw = Scripted::new(&ETHOS_U55_128);
    hw.config = U85_256_CONFIG;
    hw.id = u85ctrl::ID;
    hw.u85 = true;
    hw
}

/// `CONFIG` of ethos-u85-256 as Vela writes it into the payload.
const U85_256_CONFIG: u32 = 0x2000_0118;

#[test]
fn u85_programs_its_own_register_map() {
    let mut hw = scripted_u85();
    let cmd = cop1(U85_256_CONFIG, u85ctrl::ID);
    let mut arena = [0u8; 64];
    let mut npu = EthosU::with_mmio(&mut hw)
        .with_platform(Low)
        .with_pmu(PmuConfig::DEFAULT);
    run(&mut npu, &cmd, &mut arena).unwrap();
    let report = *npu.pmu_report().unwrap();
    assert_eq!(report.cycles, Some((1 << 32) | 1234));
    assert_eq!(report.counts, [10, 11, 12, 13]);
    use u85ctrl::offset as o;
    assert_eq!(hw.written(o::MEM_ATTR0), [0]);
    assert_eq!(
        hw.written(o::MEM_ATTR0 + 8),
        [4],
        "MEM_ATTR2 on the external port"
    );
    assert_eq!(hw.written(offset::QCONFIG), [2]);
    assert_eq!(hw.written(offset::REGIONCFG), [0x5553]);
    assert_eq!(hw.written(o::AXI_SRAM), [0x0002_1f3f]);
    assert_eq!(hw.written(o::AXI_EXT), [0x0002_1f3f]);
    assert_eq!(hw.written(o::PMCNTENSET), [PMU_CYCLE_COUNTER_BIT | 0xf]);
    assert_eq!(
        hw.written(o::PMEVTYPER0 + 4),
        [PmuEvent::MacActive.bits() as u32]
    );
    // Nothing at the U55/U65 places of AXI_LIMIT1..3 (MEM_ATTR1..3 there) beyond MEM_ATTR,
    // nor at the U55/U65 PMU.
    assert!(hw.written(offset::PMCNTENSET).is_empty());
    assert!(hw.written(offset::PMEVTYPER0).is_empty());
    assert_eq!(
        hw.written(offset::AXI_LIMIT3),
        [4],
        "MEM_ATTR3, not an AXI limit"
    );
    let q = (cmd.as_ptr() as u64 + 32) & 0x0fff_fff0;
    assert_eq!(hw.written(offset::QBASE), [q as u32]);
    assert_eq!(hw.written(offset::QSIZE), [4]);
}

#[test]
fn u85_hardware_mismatches_are_errors() {
    // A U55 stream on a U85, a U85 stream on a U55.
    let mut hw = scripted_u85();
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    assert_eq!(
        run(&mut npu, &payload(&ETHOS_U55_128), &mut [0u8; 16]),
        Err(Error::ConfigMismatch {
            expected: config_word(&ETHOS_U55_128),
            found: U85_256_CONFIG
        })
    );
    let mut hw = Scripted::new(&ETHOS_U55_128);
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    assert_eq!(
        run(&mut npu, &cop1(U85_256_CONFIG, u85ctrl::ID), &mut [0u8; 16]),
        Err(Error::ConfigMismatch {
            expected: U85_256_CONFIG,
            found: config_word(&ETHOS_U55_128)
        })
    );
    // Other MACs (ethos-u85-128), other AXI SRAM port count, other command stream version.
    for want in [0x2000_0117, 0x2000_0218, 0x2000_0128] {
        let mut hw = scripted_u85();
        let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
        assert_eq!(
            run(&mut npu, &cop1(want, u85ctrl::ID), &mut [0u8; 16]),
            Err(Error::ConfigMismatch {
                expected: want,
                found: U85_256_CONFIG
            }),
            "{want:#x}"
        );
        assert!(!hw.writes.iter().any(|w| w.0 == offset::CMD));
    }
    // The weight decoder count is not checked (the core driver does not either).
    let mut hw = scripted_u85();
    let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
    assert_eq!(
        run(&mut npu, &cop1(0x2000_1118, u85ctrl::ID), &mut [0u8; 16]),
        Ok(())
    );
}

#[test]
fn u85_status_errors() {
    let cmd = cop1(U85_256_CONFIG, u85ctrl::ID);
    let irq = Status::IRQ_RAISED;
    for (end, want) in [
        (
            u85ctrl::STATUS_BRANCH_FAULT | irq,
            Error::Fault {
                status: u85ctrl::STATUS_BRANCH_FAULT | irq,
            },
        ),
        (
            Status::ECC_FAULT | irq,
            Error::Fault {
                status: Status::ECC_FAULT | irq,
            },
        ),
        (
            Status::BUS_STATUS | irq,
            Error::BusError {
                status: Status::BUS_STATUS | irq,
            },
        ),
    ] {
        let mut hw = scripted_u85();
        hw.end_status = end;
        let mut npu = EthosU::with_mmio(&mut hw).with_platform(Low);
        assert_eq!(run(&mut npu, &cmd, &mut [0u8; 16]), Err(want));
        assert_eq!(hw.writes.last().map(|w| w.0), Some(offset::RESET));
    }
}
