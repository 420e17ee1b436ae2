//! Which knobs a cell's outcome depends on, read off the run by three stated rules (a knob the
//! run did not vary is judged by what the cell shows, not by running again):
//! - `timeout`: its longest stall is at least half the command timeout, so the stall is a
//!   timeout's and scales with it (the row's `timeout_ns` and `timeout_scale` say which);
//! - `round length`: commands timed out, and the device swallows one command in `every_nth`
//!   (1000 in the `eh` cases): a round of fewer commands has no timeout at all;
//! - `batch_complete`: its verdict differs from its twin's, the same scenario and mode with the
//!   device completing its queue together (`+batch`), or without.

use super::{BATCH_SUFFIX, Cell, SenseReserveRecord, base_scenario};

/// The knobs of every cell, in the cells' order, each a comma-separated list (empty: none).
pub fn knobs(cells: &[SenseReserveRecord]) -> Vec<String> {
    cells
        .iter()
        .map(|cell| of(cells, cell).join(", "))
        .collect()
}

fn of(cells: &[SenseReserveRecord], cell: &SenseReserveRecord) -> Vec<&'static str> {
    let mut knobs = Vec::new();
    let r = &cell.result;
    if r.timeout_ns > 0 && r.longest_stall_s * 1e9 >= r.timeout_ns as f64 / 2.0 {
        knobs.push("timeout");
    }
    if r.timeouts > 0 {
        knobs.push("round length");
    }
    let twin_case = match cell.case().strip_suffix(BATCH_SUFFIX) {
        Some(base) => base.to_owned(),
        None => format!("{}{BATCH_SUFFIX}", base_scenario(cell.case())),
    };
    let twin = cells
        .iter()
        .find(|c| c.case() == twin_case && c.mode() == cell.mode() && c.slab() == cell.slab());
    if twin.is_some_and(|t| t.verdict() != cell.verdict()) {
        knobs.push("batch_complete");
    }
    knobs
}

/// Writes each cell's knobs into it (`knobs`).
pub fn annotate(cells: &mut [SenseReserveRecord]) {
    let all = knobs(cells);
    for (cell, knobs) in cells.iter_mut().zip(all) {
        cell.result.knobs = knobs;
    }
}
