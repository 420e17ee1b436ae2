//! `workload=sense-reserve`: the 2008 sense-buffer question measured in the guest. The same
//! fake-rw job runs on three scsi_debug + midlayer stacks whose sense buffers come from
//! `slab`, `mempool:2` and `prealloc` (a reserve of can_queue buffers, the v1 patch), each over
//! its own `scsi_sense_cache` slab on the DMA frames behind the per-CPU magazine fake-rw uses
//! (a Linux slab has its per-CPU array cache too), in alternating repetitions
//! (`scsi::workload::compare_sense_modes`, the code the host example runs). Then again with
//! `every_nth` error injection (RECOVERED ERROR every 50th command unless the command line sets
//! its own), so sense buffers are actually written.
//!
//! Defaults differ from fake-rw's where the comparison needs it: `can_queue=1519` (can_queue
//! of the 2008 measurement, so `prealloc` holds 1519 × 96 bytes) and `runtime=100ms` per
//! repetition, unless the command line sets them. Each mode prints a `RESULT` line with
//! `"bench":"sense-reserve"`.

use alloc::string::String;

use pools::slab::SlabConfig;
use pools::{Magazine, SlabCache};
use scsi::sense_alloc::{SenseMode, SlabSense};
use scsi::target::OPT_RECOVERED_ERR;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use scsi::workload::{JobParams, Limit, ModeSummary, WorkloadParams, compare_sense_modes};

use crate::arch::exit::ExitCode;
use crate::arch::insn_marker::{self, Counted};
use crate::cmdline::Cmdline;
use crate::console::println;
use crate::storage::{Frames, KernelClock};

/// The host's can_queue in the 2008 measurement.
const CAN_QUEUE_2008: u16 = 1519;
/// Repetitions per mode; the median and the best of them are reported. Many short rounds
/// beat few long ones on a shared host, where noise comes in bursts.
const REPS: u32 = 11;

/// The command line's parameters with this benchmark's defaults where it left them alone.
fn parameters(cmdline: &Cmdline) -> WorkloadParams {
    let mut params = cmdline.io.clone();
    if params.target.can_queue.is_none() {
        params.target.can_queue = Some(CAN_QUEUE_2008);
    }
    if params.job.limit == JobParams::default().limit {
        params.job.limit = Limit::RuntimeNs(100_000_000);
    }
    params
}

fn print_case(case: &str, summary: &[ModeSummary]) {
    println!(
        "sense-reserve {case}: {:>10} {:>12} {:>10} {:>12} {:>10} {:>14} {:>10}",
        "mode", "median IOPS", "ratio", "best IOPS", "best ratio", "reserve bytes", "recovered"
    );
    for s in summary {
        println!(
            "sense-reserve {case}: {:>10} {:>12} {:>10.4} {:>12} {:>10.4} {:>14} {:>10}",
            alloc::format!("{}", s.mode),
            s.median_iops,
            s.ratio_vs_slab,
            s.best_iops,
            s.best_ratio_vs_slab,
            s.reserve_bytes,
            s.last.recovered
        );
    }
    // Every mode's windows have closed: hand their counts to the plugin (one slot per mode).
    let window = insn_marker::publish();
    for s in summary {
        let counted = Counted {
            window,
            slot: s.mode.slot(),
            ops: s.commands,
        };
        let line = s.json_object("guest", case).extend(counted.json_object());
        println!("RESULT {}", line.finish());
    }
}

/// What the comparison must show whatever the speed: the reserve sizes, and sense really
/// used in the injected case.
fn check(case: &str, params: &WorkloadParams, summary: &[ModeSummary]) -> Option<String> {
    let can_queue = usize::from(params.target.host_can_queue());
    for s in summary {
        let want = match s.mode {
            SenseMode::Slab => 0,
            SenseMode::Mempool(n) => n * SCSI_SENSE_BUFFERSIZE,
            SenseMode::Prealloc => can_queue * SCSI_SENSE_BUFFERSIZE,
        };
        if s.reserve_bytes != want {
            return Some(alloc::format!(
                "{case}: {} holds {} reserve bytes, expected {want}",
                s.mode,
                s.reserve_bytes
            ));
        }
        if params.target.every_nth != 0 && s.last.recovered + s.last.errors == 0 {
            return Some(alloc::format!("{case}: {} saw no injected error", s.mode));
        }
        if s.last.sense.in_use != 0 {
            return Some(alloc::format!(
                "{case}: {} still owns sense buffers",
                s.mode
            ));
        }
    }
    None
}

/// `workload=sense-reserve`.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let Some(frames) = crate::dma::frames() else {
        log::error!("sense-reserve: no DMA frame allocator");
        return ExitCode::Failure;
    };
    let clean = parameters(cmdline);
    let mut injected = clean.clone();
    if injected.target.every_nth == 0 {
        injected.target.every_nth = 50;
        injected.target.opts |= OPT_RECOVERED_ERR;
    }
    // Injection on READ/WRITE happens in the response function, which fake_rw=1 skips (Linux).
    injected.target.fake_rw = false;
    let injected_name = alloc::format!(
        "every_nth={},opts={}",
        injected.target.every_nth,
        injected.target.opts
    );
    log::info!(
        "sense-reserve: slab vs mempool:2 vs prealloc (can_queue={}), {REPS} alternating rounds, bs={} iodepth={}",
        clean.target.host_can_queue(),
        clean.job.bs,
        clean.job.iodepth
    );
    let cases = [("clean", &clean), (injected_name.as_str(), &injected)];
    for (case, params) in cases {
        let config = || SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
        let caches: [SlabCache<Frames>; 3] = match (
            SlabCache::create(config(), frames),
            SlabCache::create(config(), frames),
            SlabCache::create(config(), frames),
        ) {
            (Ok(a), Ok(b), Ok(c)) => [a, b, c],
            _ => {
                println!("sense-reserve: FAILED: no memory for the sense slabs");
                return ExitCode::Failure;
            }
        };
        let slabs = caches
            .each_ref()
            .map(|cache| Magazine::new(SlabSense::new(cache), params.sense_magazine));
        let summary = match compare_sense_modes(params, slabs, KernelClock, REPS) {
            Ok(summary) => summary,
            Err(error) => {
                println!("sense-reserve: FAILED: {case}: {error}");
                return ExitCode::Failure;
            }
        };
        print_case(case, &summary);
        if let Some(failure) = check(case, params, &summary) {
            println!("sense-reserve: FAILED: {failure}");
            return ExitCode::Failure;
        }
    }
    ExitCode::Success
}
