//! What the driver needs from the system around the NPU: address translation, data-cache
//! maintenance and a way to idle while waiting.

/// System integration hooks. Every method has a default that fits a system without data
/// cache, where the NPU sees memory at the CPU's addresses, and that busy-polls.
pub trait Platform {
    /// The NPU bus address of the `len` bytes at CPU address `cpu`, or `None` when the NPU
    /// cannot reach them (e.g. a CPU-private TCM). Called for the command stream and for each
    /// non-empty region.
    fn npu_address(&mut self, cpu: usize, len: usize) -> Option<u64> {
        let _ = len;
        Some(cpu as u64)
    }

    /// Before a run: make what the CPU wrote to `data` visible to the NPU (clean the data-cache
    /// lines covering it). Called for the command stream, the weights, the arena and the fast
    /// scratch; a platform may skip buffers it knows the CPU never writes (flash).
    fn clean(&mut self, data: &[u8]) {
        let _ = data;
    }

    /// After a run (also a failed one): make what the NPU wrote to `data` visible to the CPU
    /// (invalidate the data-cache lines covering it). Called for the arena and the fast scratch.
    fn invalidate(&mut self, data: &mut [u8]) {
        let _ = data;
    }

    /// Called between two looks at the NPU's status while it runs, e.g. `wfi` when its
    /// interrupt is enabled (each call counts against the wait bound).
    fn idle(&mut self) {}
}

/// A system without data cache whose NPU sees memory at the CPU's addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coherent;

impl Platform for Coherent {}
