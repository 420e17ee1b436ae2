//! One case of the matrix over its fronts (one per mode, whatever the slab cache): a stack per
//! mode, the rotated rounds under each mode's pressure actor, and the cells' end-of-case
//! figures.

use super::super::{JobParams, WorkloadError, first_disk, run_with};
use super::{
    Cell, Matrix, PressureMode, actors, cells, eh_scale, run_rounds, shared, steady_after,
};
use alloc::vec::Vec;
use pools::slab::SlabConfig;
use pools::{Backing, ElementAllocator, SlabCache};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::midlayer::{DEFAULT_EH_TIMEOUT_NS, Disk, Midlayer};
use scsi::sense_alloc::{Reclaim, SenseMode, SenseStorage};
use scsi::target::{OPT_TIMEOUT, ScsiDebug};

const PAGE_BYTES: usize = 4096;

/// Runs the matrix's case over `fronts` (mode m allocates through `fronts[m]`); `pages(m)`
/// counts mode m's cache pages.
pub(super) fn run_cells<B, C, F>(
    matrix: &Matrix<'_, B, C>,
    fronts: &[F],
    pages: impl Fn(usize) -> usize,
) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
    F: ElementAllocator + Reclaim,
    F::Element: SenseStorage,
{
    if let PressureMode::Shared { holders } = matrix.pressure {
        return shared::run_shared_cells(matrix, holders, fronts, pages);
    }
    let params = matrix.params;
    let pad_cache = pad_cache(matrix)?;
    let mut padding = None;
    let mut stacks = Vec::with_capacity(fronts.len());
    for (m, (mode, front)) in matrix.modes.iter().zip(fronts).enumerate() {
        if let (Some(pad), Some(pad_cache)) = (params.sense_pad, &pad_cache)
            && pad.position == m
        {
            let pages = pad_cache.alloc().map_err(WorkloadError::SenseSlab)?;
            padding = Some((pages, alloc::vec![0u8; pad.pages * PAGE_BYTES]));
        }
        stacks.push(stack(matrix, *mode, front)?);
    }
    let mut actors = actors(matrix.pressure, matrix.budgets, matrix.competitor);
    let mut cells = cells(matrix);
    let steady_after = steady_after(&params.job);
    run_rounds(&mut cells, matrix.rounds, |m| {
        let (stack, disk) = &mut stacks[m];
        let actor = &mut actors[m];
        actor.begin(steady_after);
        let report = run_with(stack, disk, &params.job, actor);
        actor.relieve();
        report
    })?;
    for (m, cell) in cells.iter_mut().enumerate() {
        cell.reserve_bytes = stacks[m].0.sense_stats().reserve_bytes();
        fronts[m].reclaim();
        cell.pinned_pages = pages(m);
        cell.budget = matrix.budgets[m].stats();
    }
    drop(padding);
    Ok(cells)
}

type Stack<'f, C, F> = Midlayer<ScsiDebug<C, <F as ElementAllocator>::Element>, &'f F, C>;

/// Mode `mode`'s stack over `front`, scanned, with the case's error handling and injection.
fn stack<'f, B, C, F>(
    matrix: &Matrix<'_, B, C>,
    mode: SenseMode,
    front: &'f F,
) -> Result<(Stack<'f, C, F>, Disk), WorkloadError>
where
    C: Clock + Clone,
    F: ElementAllocator,
    F::Element: SenseStorage,
{
    let params = matrix.params;
    let pressure = matrix.pressure;
    // The scan runs on a healthy device; injected timeouts start with the job.
    let mut target_params = params.target.clone();
    let swallows = target_params.opts & OPT_TIMEOUT != 0;
    if swallows {
        target_params.every_nth = 0;
    }
    let target = ScsiDebug::try_new(target_params, matrix.clock.clone())?;
    let mut stack = Midlayer::new(target, front, mode, matrix.clock.clone())?;
    stack.set_elements_per_command(pressure.elements_per_step())?;
    if let PressureMode::Eh { second_buffer } = pressure {
        // A command waiting for a buffer was never dispatched: it waits as long as the
        // default timeout lets it, whatever the device's timeout is scaled to.
        stack.set_sense_wait_timeout_ns(JobParams::default().timeout_ns);
        stack.set_eh_timeout_ns((DEFAULT_EH_TIMEOUT_NS / eh_scale(params)).max(1));
        stack.set_recovery_buffer(second_buffer);
    }
    let disk = first_disk(&mut stack)?;
    if swallows {
        let (every_nth, opts) = (params.target.every_nth, params.target.opts);
        stack.host_mut().set_injection(every_nth, opts);
    }
    Ok((stack, disk))
}

/// The cache `sense_pad=K:N` takes its padding from: one object of N whole pages, straight
/// from the backing (not charged to any mode's budget).
fn pad_cache<B: Backing + Copy, C>(
    matrix: &Matrix<'_, B, C>,
) -> Result<Option<SlabCache<B>>, WorkloadError> {
    let Some(pad) = matrix.params.sense_pad else {
        return Ok(None);
    };
    let bytes = pad.pages * PAGE_BYTES;
    let config = SlabConfig::new("sense_pad", bytes)
        .align(PAGE_BYTES)
        .slab_bytes(bytes);
    SlabCache::create(config, matrix.backing)
        .map(Some)
        .map_err(WorkloadError::SenseSlab)
}
