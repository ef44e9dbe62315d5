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
}

/// An Ethos-U NPU that runs compiled command streams: [`crate::ethos_u::EthosU`] on hardware,
/// `npu_rt::sim::VirtualNpu` (feature `sim`) on a host.
pub trait Npu {
    /// Runs `job` to completion.
    fn run(&mut self, job: Job<'_>) -> Result<(), Error>;
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
