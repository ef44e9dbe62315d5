//! Console output and exit over Arm semihosting (`BKPT 0xAB` on M-profile): `SYS_WRITE0`
//! prints a NUL-terminated string on the host's console, `SYS_EXIT_EXTENDED` ends the
//! simulation with an exit status (QEMU exits with it; a failed run must not look like a
//! passed one to CI).
//!
//! Source: Arm's "Semihosting for AArch32 and AArch64" specification (operation numbers,
//! `ADP_Stopped_ApplicationExit`, the two-word parameter block of `SYS_EXIT_EXTENDED`).

use core::arch::asm;
use core::fmt;

/// Semihosting operation: write a NUL-terminated string.
const SYS_WRITE0: usize = 0x04;
/// Semihosting operation: report an exit to the debugger or model (AArch32: the reason only).
const SYS_EXIT: usize = 0x18;
/// Semihosting operation: report an exit with a status (parameter block: reason, status).
const SYS_EXIT_EXTENDED: usize = 0x20;
/// `SYS_EXIT` reason: the application exited.
const ADP_STOPPED_APPLICATION_EXIT: usize = 0x2_0026;
/// `SYS_EXIT` reason for a failure when `SYS_EXIT_EXTENDED` is not implemented: any reason
/// but `ApplicationExit` makes QEMU exit with status 1.
const ADP_STOPPED_RUN_TIME_ERROR_UNKNOWN: usize = 0x2_0023;

/// One semihosting call.
fn call(op: usize, arg: usize) -> usize {
    let ret;
    // SAFETY: BKPT 0xAB is the semihosting trap: the debugger or model reads r0 (operation) and
    // r1 (argument: a pointer to a NUL-terminated buffer or to SYS_EXIT_EXTENDED's two-word
    // block, both outliving the call, or an exit reason), writes its result to r0 and resumes
    // after the BKPT. It reads that memory and writes no memory the compiler owns.
    unsafe {
        asm!("bkpt #0xab", inout("r0") op => ret, in("r1") arg, options(nostack, readonly));
    }
    ret
}

/// A `fmt::Write` to the host console, line-buffered in a small stack buffer.
pub struct Console {
    buf: [u8; 128],
    len: usize,
}

impl Console {
    /// An empty console buffer.
    pub const fn new() -> Self {
        Console {
            buf: [0; 128],
            len: 0,
        }
    }

    /// Sends what is buffered.
    pub fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        if let Some(end) = self.buf.get_mut(self.len) {
            *end = 0;
        }
        call(SYS_WRITE0, self.buf.as_ptr() as usize);
        self.len = 0;
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            // A NUL would end SYS_WRITE0's string early.
            let b = if b == 0 { b'?' } else { b };
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
            // Keep one byte for the terminator.
            if b == b'\n' || self.len + 1 >= self.buf.len() {
                self.flush();
            }
        }
        Ok(())
    }
}

/// Ends the run with exit status `status` (0: success); spins if nothing listens.
pub fn exit(status: u32) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, status as usize];
    call(SYS_EXIT_EXTENDED, block.as_ptr() as usize);
    // Only reached where SYS_EXIT_EXTENDED is not implemented: keep at least success/failure.
    let reason = if status == 0 {
        ADP_STOPPED_APPLICATION_EXIT
    } else {
        ADP_STOPPED_RUN_TIME_ERROR_UNKNOWN
    };
    call(SYS_EXIT, reason);
    loop {
        core::hint::spin_loop();
    }
}
