//! The Cortex-M SysTick counter as a stopwatch: 24 bits counting down at the processor clock.
//!
//! Under QEMU with `-icount shift=0` every instruction advances virtual time by 1 ns, so ticks
//! convert to executed instructions; [`calibrate`] measures the factor on a loop of known
//! length instead of trusting the board's clock setting.
//!
//! Registers: Armv8-M Architecture Reference Manual, SysTick (`SYST_CSR` 0xE000_E010,
//! `SYST_RVR` 0xE000_E014, `SYST_CVR` 0xE000_E018; CSR bit 0 ENABLE, bit 2 CLKSOURCE).

const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
/// The counter's width.
const MASK: u32 = 0x00FF_FFFF;

/// Starts SysTick free-running from its largest reload, on the processor clock, without its
/// interrupt.
pub fn start() {
    // SAFETY: the SysTick registers are architecturally present on every Armv8-M core at these
    // addresses (System Control Space, always mapped); this firmware uses SysTick for nothing
    // else, and the writes enable no exception.
    unsafe {
        SYST_RVR.write_volatile(MASK);
        SYST_CVR.write_volatile(0);
        SYST_CSR.write_volatile(0b101);
    }
}

/// The current count (counts down).
pub fn now() -> u32 {
    // SAFETY: as in `start`: a read of an always-mapped System Control Space register.
    unsafe { SYST_CVR.read_volatile() & MASK }
}

/// Ticks from `earlier` to `later` (two [`now`] readings), across at most one wrap.
pub fn elapsed(earlier: u32, later: u32) -> u32 {
    earlier.wrapping_sub(later) & MASK
}

/// Ticks of `f`, which must take fewer than 2^24 ticks.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, u32) {
    let t0 = now();
    let r = f();
    (r, elapsed(t0, now()))
}

/// Executed instructions per 1000 ticks, measured on a loop of two instructions per turn
/// (`subs`, `bne`) run `turns` times.
pub fn calibrate(turns: u32) -> u64 {
    let ((), ticks) = measure(|| spin(turns));
    (2 * u64::from(turns) * 1000) / u64::from(ticks.max(1))
}

#[inline(never)]
fn spin(turns: u32) {
    // SAFETY: a register-only countdown loop: it touches no memory and no flags the compiler
    // relies on across the block (`cc` is declared clobbered by default in Rust's asm!).
    unsafe {
        core::arch::asm!(
            "2:",
            "subs {n}, {n}, #1",
            "bne 2b",
            n = inout(reg) turns.max(1) => _,
            options(nomem, nostack),
        );
    }
}
