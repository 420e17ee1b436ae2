//! `workload=sense-reserve`: how big must the sense-buffer reserve be, measured in the guest.
//! Every sense mode (`slab`, `mempool:1/2/3/4/16`, `pertag`, `prealloc`, `backup`) runs the
//! same fake-rw job side by side, each on its own scsi_debug + midlayer stack over its own
//! `scsi_sense_cache` slab on the DMA frames (shared with a neighbour user), behind the
//! per-CPU magazine fake-rw uses, with the slab's pages charged to a page budget under memory
//! pressure. The scenarios, the defaults (`can_queue=1519`, `runtime=100ms` per round,
//! `stall_ms=500`, `ndelay=10000`) and the rotation live in
//! `workloads::io` (`sense_reserve_cases`, `run_matrix`), which the host example runs too.
//! Each cell prints a `RESULT` line with `"bench":"sense-reserve"`
//! (`workloads::result::SenseReserveResult`).

use alloc::string::String;

use scsi::sense_alloc::SenseMode;
use scsi::target::OPT_RECOVERED_ERR;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::io::{
    Cell, MATRIX_MODES, WorkloadParams, run_matrix, sense_reserve_cases, sense_reserve_defaults,
    table_header,
};
use workloads::result::result_line;

use crate::arch::exit::ExitCode;
use crate::arch::insn_marker::{self, Counted};
use crate::cmdline::Cmdline;
use crate::platform::console::println;
use crate::storage::KernelClock;

fn print_case(case: &str, cells: &[Cell]) {
    println!("sense-reserve {case}: {}", table_header());
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

/// `workload=sense-reserve`.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let Some(frames) = crate::memory::dma::frames() else {
        log::error!("sense-reserve: no DMA frame allocator");
        return ExitCode::Failure;
    };
    let params = sense_reserve_defaults(cmdline.io.clone());
    let modes: &[SenseMode] = params.sense_modes.as_deref().unwrap_or(&MATRIX_MODES);
    // Rounds per case: each mode takes each position once.
    let rounds = modes.len() as u32;
    log::info!(
        "sense-reserve: {} modes, {rounds} rotated rounds per case, can_queue={} bs={} iodepth={} mem_budget={} pages",
        modes.len(),
        params.target.host_can_queue(),
        params.job.bs,
        params.job.iodepth,
        params.mem_budget_pages
    );
    for case in sense_reserve_cases(&params) {
        let cells = match run_matrix(
            &case.params,
            case.pressure,
            modes,
            frames,
            KernelClock,
            rounds,
        ) {
            Ok(cells) => cells,
            Err(error) => {
                println!("sense-reserve: FAILED: {}: {error}", case.name);
                return ExitCode::Failure;
            }
        };
        print_case(&case.name, &cells);
        if let Some(failure) = check(&case.name, &case.params, &cells) {
            println!("sense-reserve: FAILED: {failure}");
            return ExitCode::Failure;
        }
    }
    ExitCode::Success
}
