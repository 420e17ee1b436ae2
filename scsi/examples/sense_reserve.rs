//! The 2008 sense-buffer question, measured on the host: `slab` vs `mempool:2` vs `prealloc` (a
//! reserve of can_queue = 1519 buffers) on the same fake_rw workload, in one process, with
//! repetitions alternating between the modes (`scsi::workload::compare_sense_modes`, the code
//! the guest runs too). Reports median IOPS, the median per-round ratio against `slab` and the
//! bytes each reserve holds; then again with `every_nth` recovered-error injection, so sense
//! buffers are actually written.
//!
//! ```text
//! cargo run --release -p scsi --example sense_reserve -- reps=9 runtime=300ms
//! ```

mod support;

use scsi::workload::{WorkloadParams, compare_sense_modes};
use support::{StdClock, args, sense_cache, sense_front};

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
        ("every_nth=50,opts=8", "every_nth=50 opts=8 fake_rw=0"),
    ] {
        let text = format!("can_queue=1519 iodepth=32 bs=4k runtime=500ms {injection} {user}");
        let params = WorkloadParams::parse(&text).unwrap_or_else(|e| {
            eprintln!("sense_reserve: {e}");
            std::process::exit(2)
        });
        let caches = [sense_cache(), sense_cache(), sense_cache()];
        let slabs = caches
            .each_ref()
            .map(|cache| sense_front(cache, params.sense_magazine));
        let summary =
            compare_sense_modes(&params, slabs, StdClock::new(), reps).unwrap_or_else(|e| {
                eprintln!("sense_reserve: {e}");
                std::process::exit(1)
            });
        println!(
            "case {case}: {:>10} {:>12} {:>14} {:>12} {:>10} {:>14}",
            "mode", "median IOPS", "ratio_vs_slab", "best IOPS", "best ratio", "reserve_bytes"
        );
        for s in &summary {
            println!(
                "{:>22} {:>12} {:>14.4} {:>12} {:>10.4} {:>14}",
                s.mode.to_string(),
                s.median_iops,
                s.ratio_vs_slab,
                s.best_iops,
                s.best_ratio_vs_slab,
                s.reserve_bytes
            );
            println!("RESULT {}", s.to_json("host", case));
        }
    }
}
