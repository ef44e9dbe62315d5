//! Console output and exit over Arm semihosting (`BKPT 0xAB` on M-profile): `SYS_WRITE0`
//! prints a NUL-terminated string on the host's console, `SYS_EXIT` ends the simulation.

use core::arch::asm;
use core::fmt;

/// Semihosting operation: write a NUL-terminated string.
const SYS_WRITE0: usize = 0x04;
/// Semihosting operation: report an exit to the debugger or model.
const SYS_EXIT: usize = 0x18;
/// `SYS_EXIT` reason: the application exited.
const ADP_STOPPED_APPLICATION_EXIT: usize = 0x2_0026;

/// One semihosting call.
fn call(op: usize, arg: usize) -> usize {
    let ret;
    // SAFETY: BKPT 0xAB is the semihosting trap: the debugger or model reads r0 (operation) and
    // r1 (argument, here a pointer to a NUL-terminated buffer that outlives the call, or an
    // exit code), writes its result to r0 and resumes after the BKPT. It touches no other
    // register and no memory the compiler owns.
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

/// Ends the run (the model or debugger stops); spins if nothing listens.
pub fn exit() -> ! {
    call(SYS_EXIT, ADP_STOPPED_APPLICATION_EXIT);
    loop {
        core::hint::spin_loop();
    }
}
