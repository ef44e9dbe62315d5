//! The stack's high-water mark: the free stack is painted with a pattern before the work,
//! and the lowest word no longer holding it afterwards is as deep as the stack went.
//!
//! cortex-m-rt places the stack at the top of RAM (`_stack_start`, growing down) and ends it
//! at the end of `.bss`/`.uninit` (`_stack_end`).

const PAINT: u32 = 0xC0DE_57AC;

unsafe extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
}

/// The symbols' addresses (never their values): the stack's lowest and highest address.
fn bounds() -> (usize, usize) {
    (
        core::ptr::addr_of!(_stack_end) as usize,
        core::ptr::addr_of!(_stack_start) as usize,
    )
}

/// Paints the stack below the current frame (keeping a 256-byte margin below the stack
/// pointer for this function's own frame).
#[inline(never)]
pub fn paint() {
    let (bottom, _) = bounds();
    let here = core::ptr::addr_of!(bottom) as usize;
    let mut p = bottom.next_multiple_of(4);
    while p + 4 <= here.saturating_sub(256) {
        // SAFETY: [bottom, sp - 256) is the unused part of the stack: nothing lives there (no
        // frame of a caller, no static: cortex-m-rt's linker script puts the statics below
        // `_stack_end`), and it is RAM, word aligned.
        unsafe { (p as *mut u32).write_volatile(PAINT) };
        p += 4;
    }
}

/// Bytes of stack used at the deepest since [`paint`] (all of it if it was never painted).
pub fn high_water() -> usize {
    let (bottom, top) = bounds();
    let mut p = bottom.next_multiple_of(4);
    while p + 4 <= top {
        // SAFETY: a word-aligned read inside the stack region, which is RAM.
        if unsafe { (p as *const u32).read_volatile() } != PAINT {
            break;
        }
        p += 4;
    }
    top - p
}
