//! The [`Npu`] trait: what generated `run` functions need from an NPU, real or virtual.

use crate::error::Error;

/// One command stream and the memory its base pointers address.
///
/// Region numbers follow Vela's convention: 0 = read-only data (weights, scales, LUTs; normally
/// in flash), 1 = the arena (feature maps, inputs, outputs), 2 = fast scratch.
#[derive(Debug)]
pub struct Job<'a> {
    /// The COP1 driver payload (it carries the CONFIG word the stream was compiled for).
    pub command_stream: &'a [u8],
    /// Region 0.
    pub weights: &'a [u8],
    /// Region 1.
    pub arena: &'a mut [u8],
    /// Region 2 (empty when the model does not use it).
    pub fast_scratch: &'a mut [u8],
    /// Bytes of region 1 the command stream addresses (the compiler's arena size, Vela's
    /// `scratch_size`); a shorter `arena` is [`Error::ArenaTooSmall`].
    pub arena_needed: usize,
    /// Bytes of region 2 the command stream addresses (0 when unused).
    pub fast_scratch_needed: usize,
}

impl Job<'_> {
    /// [`Error::ArenaTooSmall`] when the arena or the fast scratch is shorter than the command
    /// stream needs: the NPU has no bounds checks and would write past the buffer.
    pub fn check_sizes(&self) -> Result<(), Error> {
        for (given, needed) in [
            (self.arena.len(), self.arena_needed),
            (self.fast_scratch.len(), self.fast_scratch_needed),
        ] {
            if given < needed {
                return Err(Error::ArenaTooSmall { needed, given });
            }
        }
        Ok(())
    }
}

/// An Ethos-U NPU that runs compiled command streams: [`crate::ethos_u::EthosU`] on hardware,
/// `npu_rt::sim::VirtualNpu` (feature `sim`) on a host.
pub trait Npu {
    /// Runs `job` to completion.
    fn run(&mut self, job: Job<'_>) -> Result<(), Error>;

    /// Runs step `step` of a model's `run`, an operator (`op`, e.g. `"Conv2D"`) on the CPU
    /// kernels: `kernel` does the work. The default just calls it; an implementation may
    /// wrap it to time or trace the CPU operators (the firmware example counts instructions
    /// per operator this way).
    ///
    /// ```
    /// use npu_rt::{Error, Job, Npu};
    /// struct Counting(usize);
    /// impl Npu for Counting {
    ///     fn run(&mut self, _: Job<'_>) -> Result<(), Error> { Ok(()) }
    ///     fn cpu_op(&mut self, _step: usize, _op: &'static str,
    ///               kernel: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error> {
    ///         self.0 += 1;
    ///         kernel()
    ///     }
    /// }
    /// let mut npu = Counting(0);
    /// npu.cpu_op(0, "Softmax", &mut || Ok(())).unwrap();
    /// assert_eq!(npu.0, 1);
    /// ```
    fn cpu_op(
        &mut self,
        step: usize,
        op: &'static str,
        kernel: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let _ = (step, op);
        kernel()
    }
}

/// A 16-byte aligned wrapper for command streams, weights and arenas (the NPU's addressing
/// granule). Generated code places its statics in it.
///
/// ```
/// static DATA: npu_rt::Aligned16<[u8; 4]> = npu_rt::Aligned16([1, 2, 3, 4]);
/// assert_eq!(DATA.0.as_ptr() as usize % 16, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Aligned16<T: ?Sized>(pub T);

#[cfg(feature = "sim")]
impl Npu for crate::sim::VirtualNpu {
    fn run(&mut self, job: Job<'_>) -> Result<(), Error> {
        let mut regions = crate::sim::Regions::new();
        regions.set(0, job.weights).set_mut(1, job.arena);
        if !job.fast_scratch.is_empty() {
            regions.set_mut(2, job.fast_scratch);
        }
        crate::sim::VirtualNpu::run(self, job.command_stream, &mut regions)
            .map(|_| ())
            .map_err(|e| Error::Simulator { offset: e.offset })
    }
}
