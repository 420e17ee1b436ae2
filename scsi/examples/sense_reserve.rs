//! The 2008 sense-buffer question, measured: `slab` vs `mempool:2` vs `prealloc` (a reserve of
//! can_queue = 1519 buffers) on the same fake_rw workload, in one process, with repetitions
//! alternating between the modes so that machine noise hits all three alike. Reports the median
//! IOPS, the median of per-round ratios against `slab`, and the bytes each reserve holds; then
//! repeats with `every_nth` recovered-error injection so sense buffers are actually written.
//!
//! ```text
//! cargo run --release -p scsi --example sense_reserve -- reps=7 runtime=500ms
//! ```

mod support;

use scsi::clock::Clock;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{SenseMode, SlabSense};
use scsi::target::ScsiDebug;
use scsi::workload::{self, WorkloadParams};
use support::{StdClock, args, sense_cache};

const MODES: [SenseMode; 3] = [SenseMode::Slab, SenseMode::Mempool(2), SenseMode::Prealloc];

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let mut reps = 5;
    let mut rest = Vec::new();
    for word in args() {
        match word.strip_prefix("reps=") {
            Some(n) => reps = n.parse().expect("reps=N"),
            None => rest.push(word),
        }
    }
    let user = rest.join(" ");
    for (case, injection) in [
        ("clean", ""),
        ("every_nth=50,opts=8", "every_nth=50 opts=8"),
    ] {
        let text = format!("max_queue=1519 iodepth=32 bs=4k runtime=500ms {injection} {user}");
        let params = WorkloadParams::parse(&text).unwrap_or_else(|e| {
            eprintln!("sense_reserve: {e}");
            std::process::exit(2)
        });
        let clock = StdClock::new();
        let caches = [sense_cache(), sense_cache(), sense_cache()];
        let mut stacks: Vec<_> = MODES
            .iter()
            .zip(caches.iter())
            .map(|(&mode, cache)| {
                let target = ScsiDebug::new(params.target.clone(), clock);
                let mut stack =
                    Midlayer::new(target, SlabSense::new(cache), mode, clock).expect("reserve");
                let disk = stack.scan().luns[0].disk.expect("disk");
                (stack, disk)
            })
            .collect();
        let mut iops = vec![Vec::new(); MODES.len()];
        let mut ratios = vec![Vec::new(); MODES.len()];
        let mut last = Vec::new();
        for round in 0..reps {
            let mut round_iops = [0f64; 3];
            // Alternate the order each round so no mode always runs first.
            for k in 0..MODES.len() {
                let m = if round % 2 == 0 {
                    k
                } else {
                    MODES.len() - 1 - k
                };
                let (stack, disk) = &mut stacks[m];
                let report = workload::run(stack, disk, &params.job).expect("run");
                round_iops[m] = report.iops() as f64;
                if round == reps - 1 {
                    last.push((m, report));
                }
            }
            for m in 0..MODES.len() {
                iops[m].push(round_iops[m]);
                ratios[m].push(round_iops[m] / round_iops[0]);
            }
        }
        last.sort_by_key(|(m, _)| *m);
        let reserve_mempool = last[1].1.sense.reserve_bytes().max(1) as f64;
        println!(
            "case {case}: {:>10} {:>12} {:>14} {:>14}",
            "mode", "IOPS", "ratio_vs_slab", "reserve_bytes"
        );
        for (m, report) in &last {
            let (median_iops, ratio) = (median(&mut iops[*m]), median(&mut ratios[*m]));
            let reserve = report.sense.reserve_bytes();
            println!(
                "{:>22} {:>12.0} {:>14.4} {:>14}",
                MODES[*m].to_string(),
                median_iops,
                ratio,
                reserve
            );
            println!(
                "RESULT {{\"bench\":\"sense-reserve\",\"where\":\"host\",\"case\":\"{case}\",\"sense_mode\":\"{}\",\"iops\":{median_iops:.0},\"ratio_vs_slab\":{ratio:.4},\"reserve_bytes\":{reserve},\"reserve_vs_mempool2\":{:.1},\"reps\":{reps},\"can_queue\":1519,\"iodepth\":{},\"bs\":{},\"numjobs\":{},\"recovered_last_rep\":{},\"sense_reserve_hits_last_rep\":{},\"sense_waits_last_rep\":{}}}",
                MODES[*m],
                reserve as f64 / reserve_mempool,
                params.job.iodepth,
                params.job.bs,
                params.job.numjobs,
                report.recovered,
                report.sense.reserve_hits,
                report.sense.waits,
            );
        }
        let _ = clock.now_ns();
    }
}
