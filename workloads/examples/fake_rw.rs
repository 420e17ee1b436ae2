//! fake_rw on the host: fio-style random I/O through the midlayer to scsi_debug with
//! `fake_rw=1`, the same `workloads::io` code the guest runs. Prints one `RESULT {json}` line
//! per case.
//!
//! ```text
//! cargo run --release -p workloads --example fake_rw                      # bs 512/4096 × iodepth 1/32
//! cargo run --release -p workloads --example fake_rw -- bs=4k iodepth=32 runtime=2 sense=slab
//! ```
//! Any workload or scsi_debug parameter may be given; `bs`/`iodepth` select a single case.

mod support;

use support::{StdClock, args, sense_cache, sense_front};
use workloads::io::{self as workload, WorkloadParams};

fn main() {
    let words = args();
    let single = words
        .iter()
        .any(|w| w.starts_with("bs=") || w.starts_with("iodepth=") || w.starts_with("qd="));
    let base = format!("runtime=1 {}", words.join(" "));
    let cases: Vec<String> = if single {
        vec![base]
    } else {
        [(512, 1), (512, 32), (4096, 1), (4096, 32)]
            .iter()
            .map(|(bs, qd)| format!("{base} bs={bs} iodepth={qd}"))
            .collect()
    };
    println!(
        "{:>6} {:>7} {:>8} {:>12} {:>11} {:>10} {:>10}",
        "bs", "iodepth", "numjobs", "sense", "IOPS", "mean ns", "p99 ns"
    );
    for case in cases {
        let params = match WorkloadParams::parse(&case) {
            Ok(p) => p,
            Err(error) => {
                eprintln!("fake_rw: {error}");
                std::process::exit(2);
            }
        };
        let cache = sense_cache();
        let report = match workload::run_fake_rw(
            &params,
            sense_front(&cache, params.sense_magazine),
            StdClock::new(),
        ) {
            Ok(r) => r,
            Err(error) => {
                eprintln!("fake_rw: {error}");
                std::process::exit(1);
            }
        };
        println!(
            "{:>6} {:>7} {:>8} {:>12} {:>11} {:>10} {:>10}",
            report.job.bs,
            report.job.iodepth,
            report.job.numjobs,
            report.sense_mode.to_string(),
            report.iops(),
            report.latency.mean_ns(),
            report.latency.quantile_ns(990)
        );
        println!("{}", protocol::result::result_line(&report.result("host")));
    }
}
