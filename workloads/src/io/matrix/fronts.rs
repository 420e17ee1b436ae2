//! The sense caches of a matrix and the fronts hosts allocate through, per slab cache: the
//! magazine slab (a `SlabCache` behind a per-CPU magazine of `sense_magazine` objects) or the
//! SLUB-shaped cache (a `SlubCache` and its CPU's front). One cache and one front per cell,
//! every host of the cell allocating through them (they all run on one CPU), each front behind
//! the cell's failslab draw.

use super::super::WorkloadError;
use super::{Cell, Matrix, run};
use crate::{BudgetBacking, Failslab};
use alloc::vec::Vec;
use pools::slab::SlabConfig;
use pools::{Backing, Magazine, SlabCache, SlubCache};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::sense_alloc::SlabSense;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;

fn config() -> SlabConfig {
    SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE)
}

/// The matrix on the magazine slab.
pub(super) fn on_slab<B, C>(matrix: &Matrix<'_, B, C>) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
{
    let caches = matrix
        .budgets
        .iter()
        .map(|budget| {
            SlabCache::<_>::create(config(), BudgetBacking::new(matrix.backing, budget))
                .map_err(WorkloadError::SenseSlab)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let magazine = matrix.params.sense_magazine;
    let fronts: Vec<_> = caches
        .iter()
        .zip(matrix.budgets)
        .map(|(cache, budget)| {
            Failslab::new(Magazine::new(SlabSense::new(cache), magazine), budget)
        })
        .collect();
    run::run_cells(matrix, &fronts, |m| caches[m].stats().slabs)
}

/// The matrix on the SLUB-shaped cache (`sense_magazine` does not apply: SLUB has no
/// magazine, its CPU's slab is the front).
pub(super) fn on_slub<B, C>(matrix: &Matrix<'_, B, C>) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
{
    let caches = matrix
        .budgets
        .iter()
        .map(|budget| {
            SlubCache::<_>::create(config(), BudgetBacking::new(matrix.backing, budget))
                .map_err(WorkloadError::SenseSlab)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cpus: Vec<_> = caches.iter().map(SlubCache::cpu).collect();
    let fronts: Vec<_> = cpus
        .iter()
        .zip(matrix.budgets)
        .map(|(cpu, budget)| Failslab::new(cpu, budget))
        .collect();
    run::run_cells(matrix, &fronts, |m| caches[m].stats().slabs)
}
