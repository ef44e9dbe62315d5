//! The backend driver: lower, choose blocks, encode weights, place, emit, wrap in COP1.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

use npu_rt::ethos_u::config::AcceleratorConfig;
use npu_rt::ethos_u::cop::Cop1Writer;
use npu_rt::ethos_u::regs::ARCH_VERSION;
use npu_rt::ethos_u::regs::ctrl::{Config, Id};
use npu_rt::ethos_u::weights::{ScaleEntry, Traversal};

use super::alloc;
use super::artifact::{Compiled, IoTensor, Step};
use super::depth_slice::{Cut, Cuts};
use super::npu_op::{
    BufferId, BufferKind, CoreStreams, Io, Layout, NpuOp, NpuOpKind, Placement, Program, WeightDma,
    WeightStreams,
};
use super::partition::{self, CpuStep, OpAssignment};
use super::weights::{WeightLayout, encode_op};
use super::{block, emit, lower};
use crate::error::{Error, Result};
use crate::ir::{Graph, TensorId};

/// Alignment of every buffer and stream in every region (the NPU's addressing granule).
pub const ALIGN: usize = 16;

/// Region numbers (base pointer indices), as Vela's raw output uses them.
pub const REGION_CONST: u8 = 0;
pub const REGION_ARENA: u8 = 1;
/// The fast scratch: the SRAM of a memory mode whose arena is in DRAM (`Dedicated_Sram`).
pub const REGION_FAST: u8 = 2;

/// Options of [`compile_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    /// Give every arena buffer its own bytes for the whole run (no reuse), so that every
    /// intermediate tensor can be read back after a run ([`Compiled::tensor_bytes`]). For tests
    /// and debugging: the arena grows to the sum of all feature maps.
    pub keep_intermediates: bool,
    /// Let operators the NPU cannot run (and float conversions) run on the CPU (default true).
    /// When false, any such operator is an error listing each one with its reason.
    pub cpu_fallback: bool,
    /// Node names or operator names (`Softmax`, case-insensitive) to run on the CPU even where
    /// the NPU could run them.
    pub force_cpu: Vec<String>,
    /// Copy weight streams that are read more than once into the arena by DMA where that does
    /// not grow the arena (default true; worthwhile when the read-only region is slower than
    /// the arena, as in the Shared_Sram memory mode). Off with `keep_intermediates`.
    pub weight_dma: bool,
    /// Bytes of fast scratch (region 2) the intermediate feature maps may use; `None` for a
    /// memory mode without one (the arena is the SRAM). Off with `keep_intermediates`.
    pub fast_scratch: Option<usize>,
    /// The largest arena allowed: chains of operations are striped (see `stripe`) until the
    /// arena fits; one that cannot fit is an [`Error::Budget`] naming the smallest arena
    /// reached. `None`: no limit.
    pub arena_budget: Option<usize>,
    /// Vela's `--optimise Size`: stripe for the smallest arena, at some cost in cycles.
    pub optimise_size: bool,
    /// Activations read by several operators whose depth is not a multiple of 16 stay dense
    /// NHWC (`lower::Bricks::WholeWhereShared`); size mode implies it, and keeps it for its
    /// second compilation at the arena it reached.
    pub dense_shared_partial: bool,
    /// The system whose memories time the schedule (set by [`CompileOptions::for_target`]).
    /// With it the estimator judges the schedule: weight copies that would keep the NPU
    /// waiting start further ahead (`copy_lead`), copies nothing can hide are made where that
    /// is faster, and a convolution still waiting for its copy is split in depth
    /// (`depth_slice`). `None`: each copy runs during the previous operation only.
    pub timing: Option<crate::target::Target>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            keep_intermediates: false,
            cpu_fallback: true,
            force_cpu: Vec::new(),
            weight_dma: true,
            fast_scratch: None,
            arena_budget: None,
            optimise_size: false,
            dense_shared_partial: false,
            timing: None,
        }
    }
}

impl CompileOptions {
    /// The defaults for `target`: weight copies only where they pay
    /// ([`Target::weight_copies_pay`](crate::target::Target::weight_copies_pay)).
    pub fn for_target(target: &crate::target::Target) -> CompileOptions {
        CompileOptions {
            weight_dma: target.weight_copies_pay(),
            fast_scratch: target
                .uses_cache()
                .then(|| usize::try_from(target.arena_cache_size()).unwrap_or(usize::MAX)),
            timing: Some(*target),
            ..Default::default()
        }
    }

    /// Applies an SRAM budget: the arena's where the arena is SRAM (striping fits it), the
    /// fast scratch's where the arena is elsewhere.
    pub fn with_sram_limit(mut self, target: &crate::target::Target, limit: Option<usize>) -> Self {
        let Some(limit) = limit else { return self };
        if target.arena_area() == crate::target::MemArea::Sram {
            self.arena_budget = Some(limit);
        } else {
            self.fast_scratch = self.fast_scratch.map(|f| f.min(limit));
        }
        self
    }

    /// `self` after `f` (for setting a few fields on top of the target's defaults).
    pub fn with(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

/// Compiles `graph` for `accel`: the whole pipeline of the native backend, with CPU fallback.
pub fn compile(graph: &Graph, accel: &'static AcceleratorConfig) -> Result<Compiled> {
    compile_with(graph, accel, &CompileOptions::default())
}

/// Assigns every operator to the NPU or the CPU and lowers the NPU ones (see
/// [`partition`](super::partition)). Returns the program, the NPU-operation range of each IR
/// operator and the assignment.
fn partition_and_lower(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    options: &CompileOptions,
) -> Result<(Program, Vec<Range<usize>>, Vec<OpAssignment>)> {
    let mut reasons: Vec<Option<String>> = graph
        .ops
        .iter()
        .map(|op| {
            if options.force_cpu.iter().any(|p| partition::matches(op, p)) {
                Some(partition::FORCED_REASON.to_string())
            } else if partition::is_float_boundary(graph, op) {
                Some(partition::FLOAT_REASON.to_string())
            } else {
                None
            }
        })
        .collect();
    // The lowering's refusals, one operator at a time (each refusal re-lowers the graph with
    // that operator's tensors placed for the CPU).
    let (program, ranges) = loop {
        let on_npu: Vec<bool> = reasons.iter().map(Option::is_none).collect();
        // Size mode keeps shared partial-depth activations dense (see `lower::Bricks`).
        let bricks = if options.optimise_size || options.dense_shared_partial {
            lower::Bricks::WholeWhereShared
        } else {
            lower::Bricks::Wherever
        };
        match lower::lower_partition(graph, accel, &on_npu, bricks) {
            Ok(r) => break r,
            Err((i, e)) if partition::is_npu_refusal(&e) && reasons[i].is_none() => {
                if !options.cpu_fallback {
                    // Report this one with the others known so far.
                    reasons[i] = Some(e.to_string());
                    continue;
                }
                // Without a CPU kernel the NPU's refusal is the error to report.
                if let Err(k) =
                    partition::cpu_kernels(graph, &graph.ops[i], &mut partition::NoOperands)
                {
                    return Err(match e {
                        Error::HardwareLimit {
                            node,
                            op,
                            target,
                            limit,
                        } => Error::HardwareLimit {
                            node,
                            op,
                            target,
                            limit: format!("{limit} (and no CPU fallback: {k})"),
                        },
                        other => other,
                    });
                }
                reasons[i] = Some(e.to_string());
            }
            Err((_, e)) => return Err(e),
        }
    };
    let assignment: Vec<OpAssignment> = graph
        .ops
        .iter()
        .zip(reasons)
        .map(|(op, cpu_reason)| OpAssignment {
            node: op.name.clone(),
            op: op.kind.name().into(),
            cpu_reason,
        })
        .collect();
    if !options.cpu_fallback && assignment.iter().any(|a| a.cpu_reason.is_some()) {
        return Err(partition::fallback_disabled_error(accel.name, &assignment));
    }
    Ok((program, ranges, assignment))
}

/// [`compile`] with options.
pub fn compile_with(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    options: &CompileOptions,
) -> Result<Compiled> {
    let start = Instant::now();
    if let Some(budget) = options.arena_budget.filter(|_| !options.optimise_size) {
        // Striping stops at a budget by its estimate of the arena; the placed buffers can end
        // a little above it (see below). Then, and when striping cannot reach the budget, the
        // smallest arena size mode reaches decides: it is the result if it fits, else the
        // error states it (a budget that compiles).
        return match compile_once(graph, accel, options) {
            Ok(c) if c.arena_size <= budget => Ok(c),
            Ok(_) | Err(Error::Budget { .. }) => {
                let size = CompileOptions {
                    optimise_size: true,
                    arena_budget: None,
                    ..options.clone()
                };
                let mut smallest = compile_with(graph, accel, &size)?;
                if smallest.arena_size <= budget {
                    smallest.compile_time = start.elapsed();
                    return Ok(smallest);
                }
                Err(Error::Budget {
                    what: striped_floor(graph),
                    needed: smallest.arena_size as u64,
                    limit: budget as u64,
                })
            }
            Err(e) => Err(e),
        };
    }
    let smallest = compile_once(graph, accel, options)?;
    let Some(target) = options
        .timing
        .as_ref()
        .filter(|_| options.optimise_size && !options.keep_intermediates)
    else {
        return Ok(smallest);
    };
    // Striping estimates the arena on the lowered program; placing the buffers of the
    // scheduled one (in-place outputs, weight copies, depth slices) can end above that floor,
    // making the last stretches striped for it useless. Compiled for the arena actually
    // reached as a budget, the program stripes only what that needs and spends the rest on
    // weight copies: kept where that is faster in the same arena (mv2_224, ethos-u55-128:
    // 8,372,235 -> 8,162,531 cycles at 364,672 bytes).
    let budget = CompileOptions {
        optimise_size: false,
        dense_shared_partial: true,
        arena_budget: Some(smallest.arena_size),
        ..options.clone()
    };
    let mut best = smallest;
    if let Ok(other) = compile_once(graph, accel, &budget)
        && other.arena_size <= best.arena_size
        && super::perf::npu_cycles(&other, target)? < super::perf::npu_cycles(&best, target)?
    {
        best = other;
    }
    best.compile_time = start.elapsed();
    Ok(best)
}

/// The subject of the error for a budget below the smallest arena striping reaches.
fn striped_floor(graph: &Graph) -> String {
    format!(
        "model '{}', with its operations striped as far as that shrinks the arena,",
        graph.name
    )
}

/// One compilation with `options` (see [`compile_with`]).
fn compile_once(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    options: &CompileOptions,
) -> Result<Compiled> {
    let start = Instant::now();
    graph.validate()?;
    let (mut program, mut ranges, assignment) = partition_and_lower(graph, accel, options)?;
    if !options.keep_intermediates {
        let pinned = timeline_of(graph, &assignment, &program, &ranges).pinned;
        super::fuse_lut::fuse(&mut program, &mut ranges, &pinned);
        super::fuse_concat::fuse(&mut program, &mut ranges, &pinned);
    }
    if (options.arena_budget.is_some() || options.optimise_size) && !options.keep_intermediates {
        fit_arena(graph, &assignment, &mut program, &mut ranges, options)?;
    }
    // With the estimator at hand, an operation still waiting for its weight copy is split in
    // depth and the program scheduled again (kept if faster).
    let unsliced = (options.timing.is_some() && options.weight_dma && !options.keep_intermediates)
        .then(|| (program.clone(), ranges.clone()));
    let mut done = schedule_program(graph, accel, &assignment, options, program, &ranges)?;
    if let (Some((unsliced, unsliced_ranges)), Some(target)) = (unsliced, &options.timing) {
        // First the convolutions waiting for their copies; then, on the better of the two
        // schedules, also those re-reading weights no copy could be made for.
        let Cuts { waiting, uncopied } =
            super::depth_slice::cuts(&done.program, &done.laid, target)?;
        let mut tried: Vec<Cut> = Vec::new();
        for cuts in [waiting, uncopied] {
            if cuts.is_empty() {
                continue;
            }
            tried.extend(cuts);
            tried.sort_by_key(|c| c.0);
            let (mut sliced, mut sliced_ranges) = (unsliced.clone(), unsliced_ranges.clone());
            let mut any = false;
            for &cut in tried.iter().rev() {
                any |= super::depth_slice::split(&mut sliced, &mut sliced_ranges, cut);
            }
            if any {
                let other =
                    schedule_program(graph, accel, &assignment, options, sliced, &sliced_ranges)?;
                // The smallest arena stays the smallest: slices only pay in cycles.
                let arena = |s: &Scheduled| s.laid.places.arena_size;
                if other.cycles < done.cycles
                    && (!options.optimise_size || arena(&other) <= arena(&done))
                {
                    done = other;
                } else {
                    // Keep only what paid.
                    tried.clear();
                }
            }
        }
    }
    let Scheduled { program, laid, .. } = done;
    let Laid {
        places:
            Places {
                mut arena_size,
                fast_scratch_size,
                ..
            },
        placement,
        steps,
        ro,
    } = laid;
    // Variable tensors are initialised on a model's first run: one byte after the arena says
    // whether that happened (a zeroed arena has not).
    let state_flag = (!graph.variables.is_empty()).then(|| {
        let flag = arena_size;
        arena_size = (arena_size + 1).div_ceil(16) * 16;
        flag
    });
    let command_stream = match steps.as_slice() {
        [Step::Npu { command_stream, .. }] => command_stream.clone(),
        _ => Vec::new(),
    };

    let (inputs, outputs, variables) = io_tensors(graph, &program, &placement)?;
    Ok(Compiled {
        name: graph.name.clone(),
        accelerator: accel,
        command_stream,
        weights: ro.bytes,
        arena_size,
        fast_scratch_size,
        inputs,
        outputs,
        variables,
        state_flag,
        npu_ops: program.ops.len(),
        ir_ops: graph.ops.len(),
        encoded_weight_bytes: ro.weight_bytes,
        compile_time: start.elapsed(),
        buffer_addrs: placement.buffers.clone(),
        program,
        steps,
        assignment,
    })
}

/// A program with blocks, weight streams, copies, placement and command streams.
struct Scheduled {
    program: Program,
    laid: Laid,
    /// Estimated cycles (`u64::MAX` without [`CompileOptions::timing`]).
    cycles: u64,
}

/// Everything after lowering: block configurations, weight encoding, weight copies (planned
/// both with and without the ones nothing hides, where the estimator can judge), buffer
/// placement and emission.
fn schedule_program(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    assignment: &[OpAssignment],
    options: &CompileOptions,
    mut program: Program,
    ranges: &[Range<usize>],
) -> Result<Scheduled> {
    // Depth slices come with their convolution's block configuration.
    for op in program.ops.iter_mut().filter(|op| op.block.is_none()) {
        op.block = Some(block::choose(op, accel)?);
    }
    let mut ro = ReadOnly::default();
    let (weights, pieces) = encode_weights(&program, accel, &mut ro)?;
    let Timeline {
        mut timeline,
        npu_pos,
        pinned,
    } = timeline_of(graph, assignment, &program, ranges);
    let fixed = Fixed {
        graph,
        accel,
        assignment,
        ranges,
        npu_pos: &npu_pos,
        pinned: &pinned,
        weights: &weights,
        pieces: &pieces,
        ro: &ro,
        options,
    };
    let weight_dma = options.weight_dma && !options.keep_intermediates;
    // Copies that nothing hides (the first operation of a stream with few OFM blocks), and
    // copies for operations reading their weights once, are made only if the estimator finds
    // the schedule with them faster.
    let timed = weight_dma && options.timing.is_some();
    let any = |single: bool, f: &dyn Fn(&CopyCandidate) -> bool| {
        (0..program.ops.len())
            .any(|j| copy_candidate(&program, &npu_pos, &pieces, j, single).is_some_and(|c| f(&c)))
    };
    let unhidden = timed
        && any(false, &|c| {
            !c.overlapped && c.blocks <= UNHIDDEN_COPY_MIN_BLOCKS
        });
    let single = timed && single_block_copies(options) && any(true, &|c| c.blocks == 1);
    let base = (program.clone(), timeline.clone());
    let copies = if weight_dma {
        Copies::Reread
    } else {
        Copies::None
    };
    let (mut laid, mut cycles) = fixed.schedule(&mut program, &mut timeline, copies, &[])?;
    let mut trials: Vec<(Copies, Vec<bool>)> = Vec::new();
    if unhidden {
        trials.push((Copies::Unhidden, Vec::new()));
    }
    if single && let Some(target) = &options.timing {
        // Every single read copied, and only those whose DMA the operation before hides: the
        // first wins where led copies hide the rest (digits), the second where a large copy
        // would make its reader wait (net_resnet8's 3x3 convolutions).
        trials.push((Copies::Every, vec![true; pieces.len()]));
        trials.push((
            Copies::Every,
            hidden_copies(&laid, target, &pieces, &npu_pos)?,
        ));
    }
    for (kind, mask) in trials {
        let (mut other, mut other_timeline) = base.clone();
        let (with, with_cycles) = fixed.schedule(&mut other, &mut other_timeline, kind, &mask)?;
        if with_cycles < cycles {
            program = other;
            laid = with;
            cycles = with_cycles;
        }
    }
    Ok(Scheduled {
        program,
        laid,
        cycles,
    })
}

/// What the weight copies are planned from: everything but the program, to which they add
/// buffers.
struct Fixed<'a> {
    graph: &'a Graph,
    accel: &'static AcceleratorConfig,
    assignment: &'a [OpAssignment],
    ranges: &'a [Range<usize>],
    npu_pos: &'a [usize],
    pinned: &'a std::collections::HashSet<BufferId>,
    weights: &'a [Option<WeightStreams>],
    pieces: &'a [Option<(u64, u64)>],
    ro: &'a ReadOnly,
    options: &'a CompileOptions,
}

impl Fixed<'_> {
    /// Plans weight copies into `program` and `timeline` (if `weight_dma`; with `unhidden`
    /// also those nothing hides), places the buffers, emits the steps with each copy issued
    /// as far ahead as it needs, and returns them with their estimated cycles (`u64::MAX`
    /// without [`CompileOptions::timing`]).
    fn schedule(
        &self,
        program: &mut Program,
        timeline: &mut [Vec<BufferId>],
        kind: Copies,
        single: &[bool],
    ) -> Result<(Laid, u64)> {
        let options = self.options;
        let weight_dma = kind != Copies::None;
        let (copies, copy_limit) = if weight_dma {
            plan_weight_copies(
                program,
                timeline,
                self.npu_pos,
                self.pieces,
                options,
                kind,
                single,
            )?
        } else {
            (vec![None; program.ops.len()], 0)
        };
        let first_new = program.buffers.len();
        let layout = self.layout(program, &copies);
        let ro = self.ro;
        let n = program.ops.len();
        let mut laid = layout.run(timeline, &vec![1; n], &[], ro.clone())?;
        let Some(target) = &options.timing else {
            return Ok((laid, u64::MAX));
        };
        let mut led_timeline = timeline.to_vec();
        let mut leads = vec![1; n];
        if copies.iter().any(Option::is_some)
            && let Some((better, t, l)) =
                super::copy_lead::lead_copies(&layout, timeline, &laid, target, copy_limit, ro)?
        {
            laid = better;
            led_timeline = t;
            leads = l;
        }
        let mut cycles = super::copy_lead::total_cycles(&laid, target)?;
        if !weight_dma {
            return Ok((laid, cycles));
        }
        // Weights of memory-bound readers prefetched during earlier operations, in rounds
        // (each plans on the estimate of the last), while the estimate drops.
        let mut copies = copies;
        let mut split: Vec<Vec<(usize, u64)>> = vec![Vec::new(); n];
        for _ in 0..PREFETCH_ROUNDS {
            let layout = self.layout(program, &copies);
            let plan = super::prefetch::plan(&layout, &led_timeline, &laid, target, copy_limit)?;
            if plan.is_empty() {
                break;
            }
            let (mut p2, mut c2, mut t2, mut s2) = (
                program.clone(),
                copies.clone(),
                led_timeline.clone(),
                split.clone(),
            );
            for f in plan {
                let id = BufferId(p2.buffers.len());
                p2.buffers.push(super::npu_op::Buffer {
                    name: format!("weights of {}", p2.ops[f.reader].name),
                    size: f.len as usize,
                    kind: BufferKind::Arena,
                    io: None,
                });
                c2[f.reader] = Some(id);
                s2[f.reader] = f.pieces;
                for p in f.live {
                    t2[p].push(id);
                }
            }
            let trial = self.layout(&p2, &c2).run(&t2, &leads, &s2, ro.clone())?;
            let trial_cycles = super::copy_lead::total_cycles(&trial, target)?;
            // The plan checks the arena on the buffers' lives; placement (in-place outputs,
            // rolling buffers) can end higher: the arena may not grow past the allowance.
            let arena = |l: &Laid| l.places.arena_size;
            if trial_cycles >= cycles || arena(&trial) > arena(&laid).max(copy_limit) {
                break;
            }
            *program = p2;
            copies = c2;
            led_timeline = t2;
            split = s2;
            laid = trial;
            cycles = trial_cycles;
        }
        // The caller's timeline gets the prefetched copies' uses (the program has their
        // buffers now).
        for (mine, led) in timeline.iter_mut().zip(&led_timeline) {
            for &b in led {
                if b.index() >= first_new && !mine.contains(&b) {
                    mine.push(b);
                }
            }
        }
        Ok((laid, cycles))
    }

    fn layout<'p>(&'p self, program: &'p Program, copies: &'p [Option<BufferId>]) -> Schedule<'p> {
        let options = self.options;
        Schedule {
            graph: self.graph,
            accel: self.accel,
            assignment: self.assignment,
            program,
            ranges: self.ranges,
            npu_pos: self.npu_pos,
            keep_all: options.keep_intermediates,
            fast_budget: options.fast_scratch.filter(|_| !options.keep_intermediates),
            pinned: self.pinned,
            weights: self.weights,
            copies,
            pieces: self.pieces,
        }
    }
}

/// `program`'s buffer table without constant bytes or operations: all the arena planner
/// looks at, cheap to clone for trial plans.
pub(super) fn light_program(program: &Program) -> Program {
    Program {
        buffers: program
            .buffers
            .iter()
            .map(|b| super::npu_op::Buffer {
                kind: match b.kind {
                    BufferKind::Arena => BufferKind::Arena,
                    BufferKind::Const(_) => BufferKind::Const(Vec::new()),
                },
                name: String::new(),
                ..b.clone()
            })
            .collect(),
        ops: Vec::new(),
        tensor_places: Vec::new(),
    }
}

/// Rounds of weight prefetch planning (each on the estimate of the schedule the last made).
const PREFETCH_ROUNDS: usize = 3;

/// What stays fixed while buffers are placed and streams emitted: the lowered program, its
/// weight streams and which of them are copied into the arena.
pub(super) struct Schedule<'a> {
    graph: &'a Graph,
    accel: &'static AcceleratorConfig,
    assignment: &'a [OpAssignment],
    pub program: &'a Program,
    ranges: &'a [Range<usize>],
    pub npu_pos: &'a [usize],
    keep_all: bool,
    fast_budget: Option<usize>,
    pinned: &'a std::collections::HashSet<BufferId>,
    weights: &'a [Option<WeightStreams>],
    pub copies: &'a [Option<BufferId>],
    /// Per operation: its weight streams' (read-only address, bytes).
    pub pieces: &'a [Option<(u64, u64)>],
}

/// Buffers placed and the model's steps emitted.
pub(super) struct Laid {
    places: Places,
    pub placement: Placement,
    pub steps: Vec<Step>,
    ro: ReadOnly,
}

impl Schedule<'_> {
    /// Places the buffers by their uses in `timeline` and emits the steps, each weight copy
    /// issued `leads[op]` operations ahead of the operation that reads it.
    pub fn run(
        &self,
        timeline: &[Vec<BufferId>],
        leads: &[usize],
        split: &[Vec<(usize, u64)>],
        mut ro: ReadOnly,
    ) -> Result<Laid> {
        let places = place_buffers(
            self.program,
            timeline,
            self.npu_pos,
            &mut ro,
            self.keep_all,
            self.fast_budget,
            self.pinned,
        )?;
        let mut weights = self.weights.to_vec();
        redirect_to_copies(
            &mut weights,
            self.copies,
            self.pieces,
            leads,
            split,
            &places.buffers,
        );
        let placement = Placement {
            buffers: places.buffers.clone(),
            weights,
        };
        let steps = command_streams_and_cpu_steps(
            self.graph,
            self.accel,
            self.assignment,
            self.program,
            self.ranges,
            &placement,
            &mut ro,
        )?;
        Ok(Laid {
            places,
            placement,
            steps,
            ro,
        })
    }
}

/// Points the weight streams of operations whose weight streams are copied into the arena (or
/// the fast scratch) at the copy, and records the DMAs that make it: one issued `leads[op]`
/// operations ahead, or the pieces `split[op]` lists (lead, bytes), in byte order.
fn redirect_to_copies(
    weights: &mut [Option<WeightStreams>],
    copies: &[Option<BufferId>],
    pieces: &[Option<(u64, u64)>],
    leads: &[usize],
    split: &[Vec<(usize, u64)>],
    buffers: &[(u8, u64)],
) {
    for (j, w) in weights.iter_mut().enumerate() {
        let (Some(w), Some(Some(b)), Some(Some((src, len)))) =
            (w.as_mut(), copies.get(j), pieces.get(j))
        else {
            continue;
        };
        let (region, dst) = buffers[b.index()];
        for c in &mut w.cores {
            c.weight_addr = c.weight_addr - src + dst;
            c.scale_addr = c.scale_addr - src + dst;
        }
        // The arena, or the fast scratch (the SRAM) where the arena is DRAM.
        w.region = region;
        let whole = [(leads.get(j).copied().unwrap_or(1), *len)];
        // Pieces that do not add up to the stream would leave weights uncopied: one DMA then.
        let parts = match split.get(j) {
            Some(p) if !p.is_empty() && p.iter().map(|&(_, b)| b).sum::<u64>() == *len => {
                p.as_slice()
            }
            _ => &whole,
        };
        let mut at = 0;
        w.dma = parts
            .iter()
            .map(|&(lead, bytes)| {
                let piece = WeightDma {
                    src: src + at,
                    dst: dst + at,
                    len: bytes,
                    lead,
                };
                at += bytes;
                piece
            })
            .collect();
    }
}

/// The model's steps in graph order: maximal runs of NPU operators become one command stream
/// each, every CPU operator its kernels.
fn command_streams_and_cpu_steps(
    graph: &Graph,
    accel: &'static AcceleratorConfig,
    assignment: &[OpAssignment],
    program: &Program,
    ranges: &[std::ops::Range<usize>],
    placement: &Placement,
    ro: &mut ReadOnly,
) -> Result<Vec<Step>> {
    let any_cpu = assignment.iter().any(|a| a.cpu_reason.is_some());
    let mut steps = Vec::new();
    let mut i = 0;
    while i < graph.ops.len() || (!any_cpu && steps.is_empty()) {
        if i < graph.ops.len() && assignment[i].cpu_reason.is_some() {
            let op = &graph.ops[i];
            let mut at = CpuOperands {
                graph,
                op,
                program,
                addrs: &placement.buffers,
                ro,
            };
            for kernel in partition::cpu_kernels(graph, op, &mut at)? {
                steps.push(Step::Cpu(CpuStep {
                    node: op.name.clone(),
                    op: op.kind.name().into(),
                    reason: assignment[i].cpu_reason.clone().unwrap_or_default(),
                    kernel,
                }));
            }
            i += 1;
            continue;
        }
        let first = i;
        while i < graph.ops.len() && assignment[i].cpu_reason.is_none() {
            i += 1;
        }
        let range = if first < graph.ops.len() {
            ranges[first].start..ranges[i - 1].end
        } else {
            0..0
        };
        // A segment of views only (reshapes) has nothing to run; a graph without CPU operators
        // always gets its one stream.
        if range.is_empty() && any_cpu {
            continue;
        }
        let segment = Program {
            buffers: program.buffers.clone(),
            ops: program.ops[range.clone()].to_vec(),
            tensor_places: Vec::new(),
        };
        let segment_placement = Placement {
            buffers: placement.buffers.clone(),
            weights: placement.weights[range.clone()].to_vec(),
        };
        let words = emit::emit(&segment, &segment_placement, accel)?;
        let command_stream = cop1_writer(accel)
            .to_vec(&words)
            .map_err(|e| Error::Internal(format!("COP1 payload: {e}")))?;
        steps.push(Step::Npu {
            command_stream,
            ops: range,
        });
    }
    Ok(steps)
}

/// The graph's inputs, outputs and variable tensors, in that order.
type IoLists = (Vec<IoTensor>, Vec<IoTensor>, Vec<IoTensor>);

/// The graph's inputs, outputs and variable tensors with their places.
fn io_tensors(graph: &Graph, program: &Program, placement: &Placement) -> Result<IoLists> {
    let io = |k: Io, t: TensorId| -> IoTensor {
        let tensor = &graph.tensors[t];
        let buffer = program
            .buffers
            .iter()
            .position(|b| b.io == Some(k))
            .expect("every graph input/output has a buffer");
        let (scale, zero_point) = tensor
            .quant
            .as_ref()
            .map_or((1.0, 0), |q| (q.scale(), q.zero_point()));
        IoTensor {
            name: tensor.name.clone(),
            shape: tensor.shape.clone(),
            dtype: tensor.dtype,
            scale,
            zero_point,
            region: placement.buffers[buffer].0,
            offset: placement.buffers[buffer].1 as usize,
        }
    };
    let inputs = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(k, &t)| io(Io::Input(k), t))
        .collect();
    let outputs = graph
        .outputs
        .iter()
        .enumerate()
        .map(|(k, &t)| io(Io::Output(k), t))
        .collect();
    let variables: Vec<IoTensor> = graph
        .variables
        .iter()
        .enumerate()
        .map(|(k, &t)| io(Io::State(k), t))
        .collect();
    if let Some(v) = variables.iter().find(|v| v.region != 1) {
        return Err(Error::Internal(format!(
            "variable tensor '{}' was placed outside the arena",
            v.name
        )));
    }
    Ok((inputs, outputs, variables))
}

/// The operands of one operator's CPU kernels: arena places and read-only bytes.
struct CpuOperands<'a> {
    graph: &'a Graph,
    op: &'a crate::ir::Op,
    program: &'a Program,
    addrs: &'a [(u8, u64)],
    ro: &'a mut ReadOnly,
}

impl partition::Operands for CpuOperands<'_> {
    fn tensor(&mut self, t: TensorId) -> Result<npu_rt::cpu::Buf> {
        cpu_operand(self.graph, self.op, t, self.program, self.addrs, self.ro)
    }

    fn constant(&mut self, bytes: &[u8]) -> Result<npu_rt::cpu::Buf> {
        let at = u32::try_from(self.ro.add(bytes)).map_err(|_| Error::InvalidNode {
            node: self.op.name.clone(),
            op: self.op.kind.name().into(),
            detail: "read-only data beyond 4 GiB".into(),
        })?;
        Ok(npu_rt::cpu::Buf::weights(at))
    }
}

/// The operand of tensor `t` for a CPU kernel: its dense NHWC place in the arena, or (for a
/// constant) its bytes in the read-only region.
fn cpu_operand(
    graph: &Graph,
    op: &crate::ir::Op,
    t: TensorId,
    program: &Program,
    addrs: &[(u8, u64)],
    ro: &mut ReadOnly,
) -> Result<npu_rt::cpu::Buf> {
    let tensor = &graph.tensors[t];
    let bad = |detail: &str| Error::InvalidNode {
        node: op.name.clone(),
        op: op.kind.name().into(),
        detail: format!("internal: tensor '{}' {detail}", tensor.name),
    };
    let offset = |v: u64| u32::try_from(v).map_err(|_| bad("lies beyond 4 GiB"));
    if let Some(bytes) = &tensor.data {
        return Ok(npu_rt::cpu::Buf::weights(offset(ro.add(bytes) as u64)?));
    }
    let place = program
        .tensor_places
        .get(t.index())
        .copied()
        .flatten()
        .ok_or_else(|| bad("has no arena place"))?;
    let e = tensor.dtype.size();
    let s = &tensor.shape;
    let c = s.last().copied().unwrap_or(1);
    let w = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
    if place.layout != Layout::Nhwc || place.strides != [w * c * e, c * e, e] {
        return Err(bad("is not dense NHWC"));
    }
    let &(region, addr) = addrs
        .get(place.buffer.index())
        .ok_or_else(|| bad("has no buffer"))?;
    if region != REGION_ARENA {
        return Err(bad("is not in the arena"));
    }
    Ok(npu_rt::cpu::Buf::arena(offset(addr + place.offset as u64)?))
}

/// The COP1 writer for `accel`: the CONFIG and ID words the driver checks against the hardware,
/// as Vela writes them (ID: architecture 1.0.6, version_status 1, product_major 6).
pub fn cop1_writer(accel: &AcceleratorConfig) -> Cop1Writer {
    let config = Config::new(
        accel.hw_macs_per_cc(),
        0,
        accel.hw_shram_size_kib(),
        accel.hw_product(),
    );
    let id = Id::new(1, 0, 0, 6, ARCH_VERSION);
    Cop1Writer::new(config.0, id.0)
}

/// The read-only region being built: 16-aligned pieces, identical pieces stored once.
#[derive(Clone, Default)]
pub(super) struct ReadOnly {
    bytes: Vec<u8>,
    seen: HashMap<Vec<u8>, usize>,
    /// Compressed weight stream bytes (for reports).
    weight_bytes: usize,
}

impl ReadOnly {
    /// Appends `data` (or finds an identical earlier copy) and returns its offset.
    fn add(&mut self, data: &[u8]) -> usize {
        if let Some(&at) = self.seen.get(data) {
            return at;
        }
        let at = self.bytes.len().div_ceil(ALIGN) * ALIGN;
        self.bytes.resize(at, 0);
        self.bytes.extend_from_slice(data);
        let end = self.bytes.len().div_ceil(ALIGN) * ALIGN;
        self.bytes.resize(end, 0);
        self.seen.insert(data.to_vec(), at);
        at
    }
}

/// Encodes every operation's weights into `ro`. Returns the streams per operation and where
/// each operation's streams lie in `ro` (`(address, length)`: one contiguous piece).
fn encode_weights(
    program: &Program,
    accel: &'static AcceleratorConfig,
    ro: &mut ReadOnly,
) -> Result<WeightPieces> {
    // Encoding dominates compile time and each operation's weights are independent: encode on
    // every core, then place the streams in operation order (the output does not depend on
    // the thread count).
    let encoded = parallel_map(&program.ops, |op| encode_op_weights(op, accel));
    let mut out = Vec::with_capacity(program.ops.len());
    let mut pieces = Vec::with_capacity(program.ops.len());
    for (op, encoded) in program.ops.iter().zip(encoded) {
        let Some(encoded) = encoded? else {
            out.push(None);
            pieces.push(None);
            continue;
        };
        let base = ro.add(&encoded.data) as u64;
        pieces.push(Some((base, encoded.data.len() as u64)));
        ro.weight_bytes += encoded.weight_bytes;
        let stripe = encoded
            .stripes
            .first()
            .ok_or_else(|| op_error(op, "weight encoding produced no stream"))?;
        out.push(Some(WeightStreams {
            region: REGION_CONST,
            dma: Vec::new(),
            cores: stripe
                .cores
                .iter()
                .map(|c| CoreStreams {
                    weight_addr: base + c.weight_offset as u64,
                    weight_len: c.weight_len as u64,
                    scale_addr: base + c.scale_offset as u64,
                    scale_len: c.scale_len as u64,
                })
                .collect(),
        }));
    }
    Ok((out, pieces))
}

/// Per operation: its weight streams, and their `(address, length)` in the read-only region.
type WeightPieces = (Vec<Option<WeightStreams>>, Vec<Option<(u64, u64)>>);

/// The encoded weight and scale streams of a convolution-like operation (`None` for others).
fn encode_op_weights(
    op: &NpuOp,
    accel: &'static AcceleratorConfig,
) -> Result<Option<super::weights::EncodedOp>> {
    let (w, depthwise) = match &op.kind {
        NpuOpKind::Conv(w) => (w, false),
        NpuOpKind::Depthwise(w) => (w, true),
        _ => return Ok(None),
    };
    let block = op.block.as_ref().ok_or_else(|| {
        Error::Internal(format!(
            "{}: weights encoded before block selection",
            op.name
        ))
    })?;
    let traversal = if depthwise {
        Traversal::Depthwise
    } else if block.part_kernel_first {
        Traversal::PartKernelFirst
    } else {
        Traversal::DepthFirst
    };
    let [o, kh, kw, i] = w.shape;
    let layout = WeightLayout {
        config: accel,
        traversal,
        ofm_block_depth: block.ofm_block[2] as u32,
        ifm_depth: i as u32,
        kernel_height: kh as u32,
        kernel_width: kw as u32,
        dilation_x: op.kernel.dilation_x as u32,
        dilation_y: op.kernel.dilation_y as u32,
        ifm_bits: op.ifm.dtype.bits() as u32,
    };
    let scales: Vec<ScaleEntry> = w
        .scales
        .iter()
        .map(|s| ScaleEntry {
            bias: s.bias,
            multiplier: s.scale,
            shift: s.shift,
        })
        .collect();
    encode_op(&w.values, &scales, &layout, &[0, o as u32])
        .map(Some)
        .map_err(|e| op_error(op, format!("weight encoding: {e}")))
}

/// `f` over `items` on up to `available_parallelism` threads; results in item order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    // Work stealing by index: operations differ in cost by orders of magnitude.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            // A panicking worker re-raises its panic here, as the sequential loop would.
            let done = worker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            for (i, r) in done {
                slots[i] = Some(r);
            }
        }
    });
    slots
        .into_iter()
        .map(|r| r.expect("every index is taken by exactly one worker"))
        .collect()
}

fn op_error(op: &NpuOp, detail: impl Into<String>) -> Error {
    Error::Internal(format!("{}: {}", op.name, detail.into()))
}

/// An operation with no earlier operation to hide its weight copy's DMA behind gets a copy
/// only with more OFM blocks (weight stream re-reads) than this.
const UNHIDDEN_COPY_MIN_BLOCKS: usize = 8;

/// Which weight streams [`plan_weight_copies`] considers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Copies {
    /// None: the weights stay in the read-only region.
    None,
    /// Streams read more than once, hidden behind an earlier operation or with many re-reads.
    Reread,
    /// Also those no earlier operation hides.
    Unhidden,
    /// Also those of operations reading them once ([`single_block_copies`]) where the
    /// operation before hides the DMA ([`hidden_copies`]).
    Every,
}

/// Per operation, whether a copy of its weight streams would arrive while the operation
/// before it (in the same command stream) runs, in the schedule `laid`: the copy's DMA time
/// against that operation's estimate.
fn hidden_copies(
    laid: &Laid,
    target: &crate::target::Target,
    pieces: &[Option<(u64, u64)>],
    npu_pos: &[usize],
) -> Result<Vec<bool>> {
    let mems = super::perf::model::Memories::new(target);
    let mut hidden = vec![false; pieces.len()];
    for step in super::copy_lead::step_estimates(laid, target) {
        let (ops, est) = step?;
        if est.ops.len() != ops.len() {
            continue;
        }
        for (k, j) in ops.enumerate().skip(1) {
            let (Some(Some((_, len))), Some(prev)) = (pieces.get(j), est.ops.get(k - 1)) else {
                continue;
            };
            let transfer = super::perf::model::weight_copy_cycles(&mems, REGION_FAST, *len);
            hidden[j] = npu_pos[j - 1] + 1 == npu_pos[j] && transfer <= prev.end - prev.start;
        }
    }
    Ok(hidden)
}

/// Whether operations reading their weights once get copies too (in the schedule tried with
/// the copies nothing hides): where the feature maps live in the fast scratch (the
/// Ethos-U65's Dedicated_Sram), the weights and scales stay in DRAM, whose latency every OFM
/// block's scale fetch pays (Vela's estimate; net_resnet8's 1x1 shortcut convolution on
/// ethos-u65-512: 2,160 cycles from DRAM, 1,330 with Vela's copy).
fn single_block_copies(options: &CompileOptions) -> bool {
    options.fast_scratch.is_some()
}

/// An operation whose weight stream could be copied: it has one, and reads it more than once
/// (or, with `single_block`, at all).
struct CopyCandidate {
    /// Bytes of the stream.
    len: u64,
    /// Spatial OFM blocks: how often the operation reads the stream.
    blocks: usize,
    /// An operation of the same command stream runs before it (the copy's DMA can hide behind
    /// it).
    overlapped: bool,
}

fn copy_candidate(
    program: &Program,
    npu_pos: &[usize],
    pieces: &[Option<(u64, u64)>],
    j: usize,
    single_block: bool,
) -> Option<CopyCandidate> {
    let op = program.ops.get(j)?;
    let ((_, len), block) = (pieces.get(j).copied().flatten()?, op.block?);
    let [h, w, _] = op.ofm.shape;
    let blocks = h.div_ceil(block.ofm_block[0].max(1)) * w.div_ceil(block.ofm_block[1].max(1));
    let overlapped = j > 0 && npu_pos[j - 1] + 1 == npu_pos[j];
    (blocks > 1 || single_block).then_some(CopyCandidate {
        len,
        blocks,
        overlapped,
    })
}

/// Chooses the operations whose weight streams are copied into the arena by DMA, adds a buffer
/// for each copy to `program` and its uses to `timeline`, and returns the copy buffer of each
/// operation.
///
/// An operation reads its whole weight stream once per spatial OFM block; from flash that is
/// the bottleneck of most convolutions (MobileNetV2 on ethos-u55-128 read 9.7 MB of flash for
/// 3.7 MB of weights). A copy is read from SRAM instead. It lives from the previous NPU
/// operation of the same command stream (its DMA runs while that operation computes) through
/// the next, and is only made where it does not raise the arena's peak: candidates in order of
/// flash bytes saved, each kept if the arena plan does not grow.
fn plan_weight_copies(
    program: &mut Program,
    timeline: &mut [Vec<BufferId>],
    npu_pos: &[usize],
    pieces: &[Option<(u64, u64)>],
    options: &CompileOptions,
    kind: Copies,
    single: &[bool],
) -> Result<(Vec<Option<BufferId>>, usize)> {
    let unhidden = matches!(kind, Copies::Unhidden | Copies::Every);
    let mut copies = vec![None; program.ops.len()];
    let mut candidates: Vec<(u64, usize)> = Vec::new();
    for j in 0..program.ops.len() {
        let single = kind == Copies::Every && single.get(j).copied().unwrap_or(false);
        let Some(c) = copy_candidate(program, npu_pos, pieces, j, single) else {
            continue;
        };
        // A copy's DMA runs while the previous operation of the same command stream computes.
        // With none before it, the operation waits for the whole copy first, while its flash
        // re-reads mostly hide behind its computation: keep such a copy only when it saves
        // many re-reads (a heuristic, measured: mv2's first convolution, 266 OFM blocks on
        // ethos-u55-128, is 100 k cycles faster with its copy; the single-convolution fixtures,
        // 2-4 blocks, were 150-1,440 cycles slower with theirs), or when `unhidden` asks for
        // every such copy (the estimator then judges the two schedules).
        if c.overlapped || unhidden || c.blocks > UNHIDDEN_COPY_MIN_BLOCKS {
            candidates.push(((c.blocks as u64 - 1) * c.len, j));
        }
    }
    if candidates.is_empty() {
        return Ok((copies, 0));
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut peak = arena_plan(program, timeline, false)?.1.size;
    // How far copies may grow the arena: not at all for the smallest arena; up to the budget
    // when there is one (performance mode spends the SRAM it is allowed); else by 1% or 24 KiB,
    // whichever is more: what buffering the weights of the layers at the peak costs (mv2_224:
    // Vela's arena is 4,544 bytes larger than ours for that, and those two layers were 314 k
    // cycles slower; a DS-CNN-sized network needs a few KiB more than 1%; net_unet's 18 KiB
    // convolution after its first concatenation sits at the peak: 894 k -> 744 k cycles).
    let limit = if options.optimise_size {
        peak
    } else {
        match options.arena_budget {
            Some(budget) => peak.max(budget),
            None => peak + (peak / 100).max(24 * 1024),
        }
    };
    for (_, j) in candidates {
        let Some((_, len)) = pieces[j] else { continue };
        let id = BufferId(program.buffers.len());
        program.buffers.push(super::npu_op::Buffer {
            name: format!("weights of {}", program.ops[j].name),
            size: len as usize,
            kind: BufferKind::Arena,
            io: None,
        });
        let pos = npu_pos[j];
        // Live from the previous operation of the same command stream (the DMA runs during it)
        // through the next one (whose first blocks may start, and write their OFM, while this
        // operation's last blocks still read weights: NPU_SET_BLOCKDEP).
        let mut uses = vec![pos];
        if let Some(p) = j.checked_sub(1).map(|p| npu_pos[p])
            && p + 1 == pos
        {
            uses.insert(0, p);
        }
        if let Some(&n) = npu_pos.get(j + 1)
            && n == pos + 1
        {
            uses.push(n);
        }
        for &u in &uses {
            timeline[u].push(id);
        }
        let size = arena_plan(program, timeline, false)?.1.size;
        if size <= peak.max(limit) {
            peak = peak.max(size);
            copies[j] = Some(id);
        } else {
            for &u in &uses {
                timeline[u].pop();
            }
            program.buffers.pop();
        }
    }
    Ok((copies, limit))
}

/// The buffers each step uses, in execution order: NPU operations and CPU operators in graph
/// order.
struct Timeline {
    timeline: Vec<Vec<BufferId>>,
    /// The timeline index of each NPU operation.
    npu_pos: Vec<usize>,
    /// What the CPU kernels touch: it stays in the arena (they see no other region).
    pinned: std::collections::HashSet<BufferId>,
}

fn timeline_of(
    graph: &Graph,
    assignment: &[OpAssignment],
    program: &Program,
    ranges: &[Range<usize>],
) -> Timeline {
    let mut timeline: Vec<Vec<BufferId>> = Vec::new();
    let mut pinned = std::collections::HashSet::new();
    let mut npu_pos = Vec::with_capacity(program.ops.len());
    for (i, op) in graph.ops.iter().enumerate() {
        if assignment[i].cpu_reason.is_some() {
            let mut uses = Vec::new();
            for &t in op.inputs.iter().chain(&op.outputs) {
                if let Some(Some(p)) = program.tensor_places.get(t.index()) {
                    uses.push(p.buffer);
                    pinned.insert(p.buffer);
                }
            }
            timeline.push(uses);
        } else {
            for npu_op in &program.ops[ranges[i].clone()] {
                npu_pos.push(timeline.len());
                timeline.push(npu_op.buffers().collect());
            }
        }
    }
    Timeline {
        timeline,
        npu_pos,
        pinned,
    }
}

/// Striping decisions: a stretch of operations (program indices) and its stripe count.
type Decisions = Vec<(Range<usize>, usize)>;

/// Stripes chains of operations (see [`super::stripe`]) until the arena fits
/// `options.arena_budget`, or, with `optimise_size`, while that shrinks it.
///
/// Greedy over *decisions* (a stretch of a chain, a stripe count), always evaluated together
/// on the unstriped program: each round tries every new stretch of up to 8 operations at a few
/// stripe counts, and more stripes for each stretch already decided, and keeps the candidate
/// that lowers the arena most (among equals: the longer stretches); then each stretch gets the
/// fewest stripes that keep the arena. The arena of a candidate is planned on the step list
/// with the stretches' steps replaced by their stripes' steps, so no operation is copied until
/// the decisions are applied.
fn fit_arena(
    graph: &Graph,
    assignment: &[OpAssignment],
    program: &mut Program,
    ranges: &mut [Range<usize>],
    options: &CompileOptions,
) -> Result<()> {
    const STRIPES: [usize; 9] = [2, 3, 4, 6, 8, 12, 16, 24, 32];
    let t = timeline_of(graph, assignment, program, ranges);
    let light = light_program(program);
    let evaluate = |decisions: &[(Range<usize>, usize)]| -> Result<usize> {
        let mut trial = light.clone();
        let mut tl = t.timeline.clone();
        let mut sorted: Vec<&(Range<usize>, usize)> = decisions.iter().collect();
        sorted.sort_by_key(|d| std::cmp::Reverse(d.0.start));
        for (chain, k) in sorted {
            let ops = &program.ops[chain.clone()];
            let plan = super::stripe::plan(ops, *k);
            let sizes = super::stripe::stripe_sizes(ops, &plan);
            let mut stripe_buf = Vec::new();
            for (i, op) in ops.iter().enumerate().take(ops.len() - 1) {
                trial.buffers[op.ofm.buffer].size = 0;
                stripe_buf.push(BufferId(trial.buffers.len()));
                trial.buffers.push(super::npu_op::Buffer {
                    name: String::new(),
                    size: sizes[i],
                    kind: BufferKind::Arena,
                    io: None,
                });
            }
            let mut steps = Vec::new();
            for rows in &plan {
                for (i, op) in ops.iter().enumerate() {
                    if rows[i].is_empty() {
                        continue;
                    }
                    let mut uses: Vec<BufferId> = op.buffers().collect();
                    for u in &mut uses {
                        if i > 0 && *u == ops[i - 1].ofm.buffer {
                            *u = stripe_buf[i - 1];
                        } else if i + 1 < ops.len() && *u == op.ofm.buffer {
                            *u = stripe_buf[i];
                        }
                    }
                    steps.push(uses);
                }
            }
            let (first, last) = (t.npu_pos[chain.start], t.npu_pos[chain.end - 1]);
            tl.splice(first..=last, steps);
        }
        Ok(arena_plan(&trial, &tl, false)?.1.size)
    };
    // Every stretch (of up to 8 operations) of every chain: a strided operation makes the rows
    // a stripe needs grow towards the chain's start, so the best cut is often short.
    let stretches: Vec<Range<usize>> = super::stripe::chains(program, ranges, &t.pinned)
        .into_iter()
        .flat_map(|c| {
            c.clone()
                .flat_map(move |a| (a + 2..=c.end.min(a + 8)).map(move |b| a..b))
        })
        .collect();
    let budget = options.arena_budget.unwrap_or(0);
    let mut decisions: Decisions = Vec::new();
    let mut size = evaluate(&decisions)?;
    let mut history: Vec<(usize, Decisions)> = Vec::new();
    while size > budget || options.optimise_size {
        let mut best: Option<(usize, Decisions)> = None;
        let mut consider = |cand: Decisions, len: usize| -> Result<()> {
            let s = evaluate(&cand)?;
            let better = match &best {
                None => s < size,
                Some((bs, bc)) => {
                    let blen = bc.iter().map(|d| d.0.len()).sum::<usize>();
                    s < *bs || (s == *bs && len > blen)
                }
            };
            if better {
                best = Some((s, cand));
            }
            Ok(())
        };
        let decided_len: usize = decisions.iter().map(|d| d.0.len()).sum();
        for stretch in &stretches {
            if decisions
                .iter()
                .any(|(c, _)| c.start < stretch.end && stretch.start < c.end)
            {
                continue;
            }
            let height = program.ops[stretch.end - 1].ofm.shape[0];
            for &k in STRIPES.iter().filter(|&&k| k <= height) {
                let mut cand = decisions.clone();
                cand.push((stretch.clone(), k));
                consider(cand, decided_len + stretch.len())?;
            }
        }
        for (j, (chain, k)) in decisions.iter().enumerate() {
            let height = program.ops[chain.end - 1].ofm.shape[0];
            for &more in STRIPES.iter().filter(|&&m| m > *k && m <= height) {
                let mut cand = decisions.clone();
                cand[j].1 = more;
                consider(cand, decided_len)?;
            }
        }
        match best {
            Some((s, cand)) => {
                size = s;
                decisions = cand;
                history.push((size, decisions.clone()));
            }
            None => break,
        }
    }
    // The smallest arena is often reached early and then only held by more striping (another
    // stretch at the same peak): keep the fewest decisions that reach it, as a budget of that
    // size would (each round's choice does not depend on the budget).
    if options.optimise_size
        && let Some((_, first)) = history.iter().find(|(s, _)| *s <= size)
    {
        decisions = first.clone();
    }
    // Fewer stripes where the arena allows it: each stripe recomputes its halo rows and
    // makes the operations smaller, so the fewest that keep the arena are the fastest.
    let target = if options.optimise_size {
        size
    } else {
        size.max(budget)
    };
    for j in 0..decisions.len() {
        for &fewer in STRIPES.iter().filter(|&&m| m < decisions[j].1) {
            let mut cand = decisions.clone();
            cand[j].1 = fewer;
            let s = evaluate(&cand)?;
            if s <= target {
                decisions = cand;
                size = s;
                break;
            }
        }
    }
    if size > budget && options.arena_budget.is_some() {
        return Err(Error::Budget {
            // The floor: what is live at once when every chain that shrinks the arena is
            // striped (inputs, outputs, tensors read twice, stripe buffers).
            what: striped_floor(graph),
            needed: size as u64,
            limit: budget as u64,
        });
    }
    // Apply from the last stretch back, so earlier operation indices stay valid.
    decisions.sort_by_key(|d| std::cmp::Reverse(d.0.start));
    for (chain, k) in decisions {
        super::stripe::stripe(program, ranges, chain, k);
    }
    Ok(())
}

/// Gives every buffer a `(region, address)`: constants into the read-only region, feature maps
/// by liveness over `timeline` (the buffers each step uses, in execution order) into the arena,
/// or, given a fast-scratch budget, the intermediate ones into the fast scratch (region 2, the
/// memory mode's SRAM when the arena is in DRAM) as far as they fit. Buffers in `pinned` (the
/// model's inputs and outputs, what CPU steps touch, weight copies) stay in the arena.
fn place_buffers(
    program: &Program,
    timeline: &[Vec<BufferId>],
    npu_pos: &[usize],
    ro: &mut ReadOnly,
    keep_all: bool,
    fast_budget: Option<usize>,
    pinned: &std::collections::HashSet<BufferId>,
) -> Result<Places> {
    let mut placed = vec![(0u8, 0u64); program.buffers.len()];
    for (id, b) in program.buffers.iter().enumerate() {
        if let BufferKind::Const(bytes) = &b.kind {
            placed[id] = (REGION_CONST, ro.add(bytes) as u64);
        }
    }
    // A buffer that may go to the fast scratch is not merged with one that must stay in the
    // arena (the merged group would have to stay there too).
    let fast_ok = |id: BufferId| {
        fast_budget.is_some_and(|budget| budget > 0)
            && program.buffers[id].io.is_none()
            && !pinned.contains(&id)
    };
    let alias = if keep_all {
        (0..program.buffers.len()).map(BufferId).collect()
    } else {
        in_place_aliases(program, timeline, npu_pos, &fast_ok)
    };
    // The timeline in terms of each group's first buffer.
    let tl: Vec<Vec<BufferId>> = timeline
        .iter()
        .map(|uses| {
            uses.iter()
                .map(|&b| alias.get(b.index()).copied().unwrap_or(b))
                .collect()
        })
        .collect();
    let live = liveness_of(program, &tl, keep_all, Some(&alias))?;
    // Every member of a group is bound for the same memory as its first (`fast_ok` is equal
    // across a group), so the first decides.
    let (mut fast, mut slow): (Vec<_>, Vec<_>) = live
        .into_iter()
        .partition(|(id, b)| fast_ok(*id) && fast_budget.is_some_and(|budget| b.size <= budget));
    // Fit the budget: the largest buffers go back to the arena until the rest fits (they are
    // the ones a cascade would have to stripe; the small ones are read and written most often
    // per byte).
    let mut fast_plan = alloc::plan(
        &fast.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
        ALIGN,
    );
    let budget = fast_budget.unwrap_or(0);
    while fast_plan.size > budget {
        let Some(k) = (0..fast.len()).max_by_key(|&k| (fast[k].1.size, std::cmp::Reverse(k)))
        else {
            break;
        };
        slow.push(fast.swap_remove(k));
        fast_plan = alloc::plan(
            &fast.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
            ALIGN,
        );
    }
    slow.sort_by_key(|(id, _)| *id);
    let slow_plan = alloc::plan(
        &slow.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
        ALIGN,
    );
    for (k, (id, _)) in slow.iter().enumerate() {
        placed[id.index()] = (REGION_ARENA, slow_plan.offsets[k] as u64);
    }
    for (k, (id, _)) in fast.iter().enumerate() {
        placed[id.index()] = (REGION_FAST, fast_plan.offsets[k] as u64);
    }
    for (id, &root) in alias.iter().enumerate() {
        if root.index() != id {
            placed[id] = placed[root.index()];
        }
    }
    Ok(Places {
        buffers: placed,
        arena_size: slow_plan.size,
        fast_scratch_size: if fast.is_empty() { 0 } else { fast_plan.size },
    })
}

/// What [`place_buffers`] decided.
struct Places {
    /// `(region, address)` of every buffer.
    buffers: Vec<(u8, u64)>,
    arena_size: usize,
    fast_scratch_size: usize,
}

/// The arena buffers (ids) with their lifetimes over `timeline`.
fn liveness(
    program: &Program,
    timeline: &[Vec<BufferId>],
    keep_all: bool,
) -> Result<Vec<(BufferId, alloc::Buffer)>> {
    liveness_of(program, timeline, keep_all, None)
}

/// [`liveness`] where buffers may share bytes: `alias[b]` is the buffer whose bytes `b` uses
/// (itself for most); `timeline` names only those. Each group is one lifetime, live from the
/// start when a member is an input and to the end when one is an output.
fn liveness_of(
    program: &Program,
    timeline: &[Vec<BufferId>],
    keep_all: bool,
    alias: Option<&[BufferId]>,
) -> Result<Vec<(BufferId, alloc::Buffer)>> {
    let root = |id: usize| alias.and_then(|a| a.get(id)).map_or(id, |r| r.index());
    let (mut input, mut output) = (
        vec![false; program.buffers.len()],
        vec![false; program.buffers.len()],
    );
    for (id, b) in program.buffers.iter().enumerate() {
        match b.io {
            Some(Io::Input(_)) => input[root(id)] = true,
            Some(Io::Output(_)) => output[root(id)] = true,
            // Kept between runs: live throughout, never shared.
            Some(Io::State(_)) => {
                input[root(id)] = true;
                output[root(id)] = true;
            }
            None => {}
        }
    }
    let n_ops = timeline.len();
    let mut first = vec![usize::MAX; program.buffers.len()];
    let mut last = vec![0usize; program.buffers.len()];
    for (i, uses) in timeline.iter().enumerate() {
        for &b in uses {
            if b.index() >= program.buffers.len() {
                return Err(Error::Internal(format!(
                    "step {i} refers to buffer {b} of {}",
                    program.buffers.len()
                )));
            }
            first[b.index()] = first[b.index()].min(i);
            last[b.index()] = last[b.index()].max(i);
        }
    }
    let mut live = Vec::new();
    for (id, b) in program.buffers.iter().enumerate() {
        if let BufferKind::Arena = &b.kind {
            if root(id) != id {
                continue;
            }
            let (mut f, mut l) = (first[id], last[id]);
            // Inputs are written by the caller before the first op; outputs are read after the
            // last.
            if input[id] {
                f = 0;
            }
            if output[id] {
                l = n_ops;
            }
            if f == usize::MAX || keep_all {
                // Never touched by an op (an input that is also an output, say), or kept for
                // inspection: live throughout.
                f = 0;
                l = n_ops;
            }
            live.push((
                BufferId(id),
                alloc::Buffer {
                    size: b.size,
                    first: f,
                    last: l.max(f),
                },
            ));
        }
    }
    Ok(live)
}

/// Operations that may write their output over their input, as Vela does for element-wise
/// operations (`live_range.py`, `_get_ifm_to_fuse`): for each buffer, the buffer whose bytes it
/// shares (itself for most). An element-wise operation or a 1x1 pooling (table lookups,
/// requantizations, int16 LOGISTIC) whose input dies there and whose output is born there,
/// both the same box (offset, shape, strides, layout, element size) of same-size arena buffers:
/// each output element is written after the input element at the same address was read, and
/// no other one reads it, so the two buffers can be one. The input may be a model input (its
/// bytes are not read after the run); an output is never written over.
fn in_place_aliases(
    program: &Program,
    timeline: &[Vec<BufferId>],
    npu_pos: &[usize],
    same_memory: &dyn Fn(BufferId) -> bool,
) -> Vec<BufferId> {
    let n = program.buffers.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    for (i, uses) in timeline.iter().enumerate() {
        for &b in uses {
            if b.index() < n {
                first[b.index()] = first[b.index()].min(i);
                last[b.index()] = last[b.index()].max(i);
            }
        }
    }
    let mut alias: Vec<BufferId> = (0..n).map(BufferId).collect();
    for (op, &pos) in program.ops.iter().zip(npu_pos) {
        let candidates: Vec<&super::npu_op::FeatureMap> = match &op.kind {
            NpuOpKind::Elementwise { ifm2, .. } => {
                let mut c = vec![&op.ifm];
                if let Some(super::npu_op::Operand2::Tensor(f)) = ifm2 {
                    c.push(f);
                }
                c
            }
            NpuOpKind::Pool(_)
                if op.kernel == super::npu_op::Kernel::UNIT
                    && op.padding == crate::ir::Padding::default()
                    && op.upscale == npu_rt::ethos_u::regs::IfmUpscaleMode::None =>
            {
                vec![&op.ifm]
            }
            _ => continue,
        };
        let o = &op.ofm;
        let reads = candidates.clone();
        let arena = |b: BufferId| {
            program
                .buffers
                .get(b.index())
                .is_some_and(|x| matches!(x.kind, BufferKind::Arena))
        };
        let Some(a) = candidates.into_iter().find(|a| {
            a.buffer != o.buffer
                && arena(a.buffer)
                && arena(o.buffer)
                && a.offset == o.offset
                && a.shape == o.shape
                && a.strides == o.strides
                && a.layout == o.layout
                && a.reverse == o.reverse
                && a.wrap.is_none()
                && o.wrap.is_none()
                && a.dtype.bytes() == o.dtype.bytes()
                && program.buffers[a.buffer].size == program.buffers[o.buffer].size
                && !matches!(program.buffers[a.buffer].io, Some(Io::Output(_)))
                && program.buffers[o.buffer].io.is_none_or(|io| matches!(io, Io::Output(_)))
                && last[a.buffer.index()] == pos
                && first[o.buffer.index()] == pos
                && same_memory(a.buffer) == same_memory(o.buffer)
                // The other operand may read the same buffer only in the same box (x * x).
                && reads.iter().all(|f| f.buffer != a.buffer || (f.offset, f.strides, f.shape) == (a.offset, a.strides, a.shape))
        }) else {
            continue;
        };
        alias[o.buffer.index()] = alias[a.buffer.index()];
    }
    alias
}

/// The arena buffers (ids) and their placement by liveness over `timeline` (all in one arena).
pub(super) fn arena_plan(
    program: &Program,
    timeline: &[Vec<BufferId>],
    keep_all: bool,
) -> Result<(Vec<BufferId>, alloc::Plan)> {
    let live = liveness(program, timeline, keep_all)?;
    let plan = alloc::plan(
        &live.iter().map(|(_, b)| b.clone()).collect::<Vec<_>>(),
        ALIGN,
    );
    Ok((live.into_iter().map(|(id, _)| id).collect(), plan))
}
