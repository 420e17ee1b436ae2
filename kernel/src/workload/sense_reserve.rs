//! `workload=sense-reserve`: how big must the sense-buffer reserve be, measured in the guest.
//! Every sense mode (`slab`, `mempool:1/2/3/4/16`, `pertag`, `prealloc`, `backup`) runs the
//! same fake-rw job side by side, each on its own scsi_debug + midlayer stack over its own
//! `scsi_sense_cache` on the DMA frames, on both slab caches in turn (the magazine slab and the
//! SLUB-shaped one; `sense_slab=` picks one), with the cache's pages charged to a page budget
//! under memory pressure. The stacks run on CPU 0; the competing allocator of the write-back
//! cases runs on CPU 1 at the same time (`PageBudget::compete` in a loop), or, with one CPU,
//! between the passes. Linux's error-handling timeouts are divided by `eh_scale` (default
//! [`GUEST_EH_SCALE`]: 30 ms per command, 10 ms for the handler's own), which each row states.
//! The scenarios, the defaults (`can_queue=1519`, `runtime=100ms` per round, `stall_ms=500`,
//! `ndelay=10000`) and the rotation live in `workloads::io` (`sense_reserve_cases`,
//! `run_matrix_on`), which the host example runs too. Each cell prints a `RESULT` line with
//! `"bench":"sense-reserve"` (`protocol::result::SenseReserveResult`).

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use protocol::result::result_line;
use scsi::sense_alloc::SenseMode;
use scsi::target::OPT_RECOVERED_ERR;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::PageBudget;
use workloads::io::{
    Case, Cell, Competitor, MATRIX_MODES, WorkloadError, WorkloadParams, matrix_budgets,
    run_matrix_on, sense_reserve_cases, sense_reserve_defaults, table_header,
};

use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::arch::insn_marker::{self, Counted};
use os::platform::console::println;
use os::platform::smp;
use os::storage::KernelClock;

/// What Linux's error-handling timeouts are divided by in the guest unless `eh_scale=` says:
/// a 30 s timeout would outlast the whole bench.
pub const GUEST_EH_SCALE: u32 = 1000;

fn print_case(case: &str, slab: &str, cells: &[Cell]) {
    println!("sense-reserve {case}: sense_slab={slab} {}", table_header());
    for c in cells {
        for line in c.table_row().lines() {
            println!("sense-reserve {case}: {line}");
        }
    }
    // Every cell's windows have closed: hand their counts to the instruction-count plugin
    // (one slot per mode, `SenseMode::slot`), so `--count-insns` adds insns_per_op per cell.
    let window = insn_marker::publish();
    for c in cells {
        let counted = Counted {
            window,
            slot: c.mode.slot(),
            ops: c.ios + c.failed,
        };
        let mut result = c.result("guest", case);
        result.insns = Some(counted.insn_count());
        println!("{}", result_line(&result));
    }
}

/// What must hold whatever the speed or the verdicts: the reserve sizes, sense really used in
/// the errors case, and a pertag command never waiting.
fn check(case: &str, params: &WorkloadParams, cells: &[Cell]) -> Option<String> {
    for c in cells {
        let want = c.reserve_entries() * SCSI_SENSE_BUFFERSIZE;
        if c.reserve_bytes != want {
            return Some(alloc::format!(
                "{case}: {} holds {} reserve bytes, expected {want}",
                c.mode,
                c.reserve_bytes
            ));
        }
        let injects_recovered = params.target.opts & OPT_RECOVERED_ERR != 0;
        if params.target.every_nth != 0 && injects_recovered && c.recovered == 0 {
            return Some(alloc::format!("{case}: {} saw no injected error", c.mode));
        }
        if c.mode == SenseMode::Pertag && c.waits != 0 {
            return Some(alloc::format!("{case}: pertag waited {} times", c.waits));
        }
    }
    None
}

/// Runs `case` on CPU 0 with the competing allocator on CPU 1 (between the passes with one
/// CPU online).
fn run_case(
    case: &Case,
    modes: &[SenseMode],
    frames: &'static os::memory::dma::DmaFrames,
    rounds: u32,
) -> Result<Vec<Cell>, WorkloadError> {
    let budgets = matrix_budgets(&case.params, modes.len());
    if smp::online_count() < 2 {
        let here = Competitor::BetweenPasses;
        return run_matrix_on(
            &case.params,
            case.pressure,
            modes,
            frames,
            KernelClock,
            rounds,
            &budgets,
            here,
        );
    }
    let done = AtomicBool::new(false);
    let compete = |budgets: &[PageBudget]| {
        while !done.load(Ordering::Acquire) {
            for budget in budgets {
                budget.compete();
            }
            core::hint::spin_loop();
        }
    };
    let mut results = smp::run_on_each_cpu(|context| match context.index {
        0 => {
            let cells = run_matrix_on(
                &case.params,
                case.pressure,
                modes,
                frames,
                KernelClock,
                rounds,
                &budgets,
                Competitor::OtherCpu,
            );
            done.store(true, Ordering::Release);
            Some(cells)
        }
        1 => {
            compete(&budgets);
            None
        }
        _ => None,
    });
    results.swap_remove(0).unwrap_or(Err(WorkloadError::NoDisk))
}

/// `workload=sense-reserve`.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let Some(frames) = os::memory::dma::frames() else {
        log::error!("sense-reserve: no DMA frame allocator");
        return ExitCode::Failure;
    };
    let mut params = sense_reserve_defaults(cmdline.io.clone());
    params.eh_scale.get_or_insert(GUEST_EH_SCALE);
    let modes: &[SenseMode] = params.sense_modes.as_deref().unwrap_or(&MATRIX_MODES);
    // Rounds per case: each mode takes each position once.
    let rounds = modes.len() as u32;
    log::info!(
        "sense-reserve: {} modes, {rounds} rotated rounds per case, can_queue={} bs={} iodepth={} mem_budget={} pages, {} CPUs, timeouts over {}",
        modes.len(),
        params.target.host_can_queue(),
        params.job.bs,
        params.job.iodepth,
        params.mem_budget_pages,
        smp::online_count(),
        params.eh_scale.unwrap_or(1)
    );
    for slab in params.matrix_slabs.clone() {
        let mut params = params.clone();
        params.sense_slab = slab;
        for case in sense_reserve_cases(&params) {
            let cells = match run_case(&case, modes, frames, rounds) {
                Ok(cells) => cells,
                Err(error) => {
                    println!("sense-reserve: FAILED: {}: {error}", case.name);
                    return ExitCode::Failure;
                }
            };
            print_case(&case.name, slab.name(), &cells);
            if let Some(failure) = check(&case.name, &case.params, &cells) {
                println!("sense-reserve: FAILED: {failure}");
                return ExitCode::Failure;
            }
        }
    }
    ExitCode::Success
}
