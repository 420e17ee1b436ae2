//! `cargo xtask bench nbd`: read throughput through the guest's NBD server over QEMU user
//! networking, from a host client.
//!
//! One boot of the `nbd` profile serves its 64 MiB virtio-scsi disk; the host client
//! ([`crate::nbd_client`]) then runs each case for a fixed time: sequential and random 4 KiB
//! reads at iodepth 1 and 8 (requests kept in flight on one connection), and sequential 1 MiB
//! reads at iodepth 2 for the bulk rate. Informational: the path is mostly QEMU's slirp and the
//! emulated NIC, so the figures say what the stack costs end to end, not what it could do.
//!
//! After the cases it leaves the server idle (3 s with `--quick`, else 10 s) and prints the host
//! CPU QEMU used meanwhile ([`nbd_tests::idle`]). The client times every request (send to
//! reply) and reports min, mean, p50 … p99.99 and max. Writes `target/bench/nbd.json`,
//! `nbd.fio.json` (fio's layout, [`super::fio`]) and `nbd.svg` (MiB/s per case).

use std::time::{Duration, Instant};

use serde_json::Value;
use workloads::Rng;

use super::plot::{self, BarChart};
use super::{Column, Record, ResultSet, columns, fio, number};
use crate::accel::AccelRequest;
use crate::error::{Error, Result};
use crate::guest::{Guest, Overrides};
use crate::nbd_client::{self as nbd, Client};
use crate::{nbd_tests, profile, workspace};

/// Options of `cargo xtask bench nbd`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// 1 s per case instead of 5 s.
    #[arg(long)]
    pub quick: bool,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
}

/// One measured case.
struct Case {
    name: &'static str,
    random: bool,
    bs: u32,
    iodepth: usize,
}

const CASES: [Case; 5] = [
    Case {
        name: "seq-4k-qd1",
        random: false,
        bs: 4096,
        iodepth: 1,
    },
    Case {
        name: "seq-4k-qd8",
        random: false,
        bs: 4096,
        iodepth: 8,
    },
    Case {
        name: "rand-4k-qd1",
        random: true,
        bs: 4096,
        iodepth: 1,
    },
    Case {
        name: "rand-4k-qd8",
        random: true,
        bs: 4096,
        iodepth: 8,
    },
    Case {
        name: "seq-1m-qd2",
        random: false,
        bs: 1 << 20,
        iodepth: 2,
    },
];

fn measure(case: &Case, duration: Duration) -> std::io::Result<Record> {
    let mut client = Client::open(nbd_tests::nbd_addr())?;
    let blocks = client.size / u64::from(case.bs);
    let (mut seq, mut rng) = (0u64, Rng::new(0x6e_6264));
    let mut offset = || {
        let block = if case.random {
            rng.below(blocks)
        } else {
            seq = (seq + 1) % blocks;
            seq
        };
        block * u64::from(case.bs)
    };
    let start = Instant::now();
    let mut sent = Vec::new();
    for handle in 0..case.iodepth as u64 {
        client.request(nbd::cmd::READ, handle, offset(), case.bs, &[])?;
        sent.push(Instant::now());
    }
    let mut latencies_ns: Vec<u64> = Vec::new();
    loop {
        let (error, handle) = client.reply()?;
        if error != 0 {
            return Err(std::io::Error::other(format!(
                "read answered errno {error}"
            )));
        }
        client.bytes(case.bs as usize)?;
        latencies_ns.push(sent[handle as usize].elapsed().as_nanos() as u64);
        if start.elapsed() >= duration {
            break;
        }
        client.request(nbd::cmd::READ, handle, offset(), case.bs, &[])?;
        sent[handle as usize] = Instant::now();
    }
    let elapsed = start.elapsed();
    // Drain what is still in flight before hanging up.
    for _ in 1..case.iodepth {
        client.reply()?;
        client.bytes(case.bs as usize)?;
    }
    client.disconnect()?;
    let done = latencies_ns.len() as u64;
    let seconds = elapsed.as_secs_f64();
    let mut record = Record::new();
    record.insert("case".into(), Value::from(case.name));
    record.insert(
        "rw".into(),
        Value::from(if case.random { "randread" } else { "read" }),
    );
    record.insert("bs".into(), Value::from(case.bs));
    record.insert("iodepth".into(), Value::from(case.iodepth));
    record.insert("ios".into(), Value::from(done));
    record.insert("elapsed_ns".into(), Value::from(elapsed.as_nanos() as u64));
    record.insert("iops".into(), Value::from((done as f64 / seconds).round()));
    record.insert(
        "mib_per_s".into(),
        Value::from(
            ((done * u64::from(case.bs)) as f64 / seconds / 1048576.0 * 100.0).round() / 100.0,
        ),
    );
    let mean_ns = latencies_ns.iter().sum::<u64>() / done.max(1);
    record.insert("lat_mean_us".into(), Value::from(mean_ns / 1000));
    record.extend(latency_fields(&mut latencies_ns));
    Ok(record)
}

/// Exact request latencies as the guest reports its own: `lat_min_ns`, `lat_mean_ns`, the
/// percentiles `lat_p50_ns` … `lat_p9999_ns` (the sample of rank ⌈q·n⌉, the rule the guest's
/// histogram uses) and `lat_max_ns`. Empty for no samples.
fn latency_fields(latencies_ns: &mut [u64]) -> Record {
    let mut fields = Record::new();
    latencies_ns.sort_unstable();
    let (Some(&min), Some(&max)) = (latencies_ns.first(), latencies_ns.last()) else {
        return fields;
    };
    let n = latencies_ns.len() as u64;
    let mean = latencies_ns.iter().sum::<u64>() / n;
    fields.insert("lat_min_ns".into(), Value::from(min));
    fields.insert("lat_mean_ns".into(), Value::from(mean));
    for (key, ppm) in [
        ("lat_p50_ns", 500_000u64),
        ("lat_p90_ns", 900_000),
        ("lat_p99_ns", 990_000),
        ("lat_p999_ns", 999_000),
        ("lat_p9999_ns", 999_900),
    ] {
        let rank = (n * ppm).div_ceil(1_000_000).max(1);
        fields.insert(key.into(), Value::from(latencies_ns[rank as usize - 1]));
    }
    fields.insert("lat_max_ns".into(), Value::from(max));
    fields
}

/// The table's columns (console and results page).
pub const COLUMNS: [Column<'static>; 8] = [
    columns::CASE,
    columns::IOPS,
    Column::new("MiB/s", "mib_per_s"),
    Column::new("mean lat us", "lat_mean_us"),
    columns::LAT_P50_NS,
    columns::LAT_P99_NS,
    columns::LAT_P9999_NS,
    columns::LAT_MAX_NS,
];

/// Boots the server, runs every case, stops the guest, prints and writes the results.
pub fn run(options: &Options) -> Result<()> {
    let profile = profile::load("nbd")?;
    let guest = Guest::prepare(options.accel, None)?;
    let duration = Duration::from_secs(if options.quick { 1 } else { 5 });
    let idle_window = if options.quick {
        Duration::from_secs(3)
    } else {
        nbd_tests::IDLE_WINDOW
    };
    let mut set = ResultSet::new("nbd", "nbd", "guest", Some(guest.accel.accel.to_string()));
    let profile =
        nbd_tests::with_free_ports(&profile).map_err(|verdict| Error::Guest { verdict })?;
    let overrides = Overrides {
        timeout: Some(Duration::from_secs(900)),
        ..Overrides::default()
    };
    let records = std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&profile, &overrides, crate::boot::Echo::Quiet));
        let ready = nbd_tests::wait_ready(&boot);
        let records: std::result::Result<Vec<Record>, String> = ready.and_then(|_| {
            CASES
                .iter()
                .map(|case| measure(case, duration).map_err(|e| format!("{}: {e}", case.name)))
                .collect()
        });
        // After the cases, the server is left alone: what does it cost the host to idle?
        let idle = match nbd_tests::idle::measure(nbd_tests::forwarded_nbd_port(), idle_window) {
            Ok(idle) => format!("idle {idle}"),
            Err(error) => format!("idle: not measured ({error})"),
        };
        let _ = nbd_tests::shutdown();
        let outcome = boot.join();
        (records, outcome, idle)
    });
    let (records, outcome, idle) = records;
    set.headline(idle);
    let records = records.map_err(|reason| Error::Guest { verdict: reason })?;
    if !matches!(outcome, Ok(Ok(ref o)) if o.verdict == crate::boot::Verdict::Pass) {
        return Err(Error::Guest {
            verdict: "the nbd guest did not stop cleanly".into(),
        });
    }
    set.extend(records);
    super::print_table(&set.results, &COLUMNS);
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svg = dir.join("nbd.svg");
    plot::draw_bars(
        &svg,
        &BarChart {
            title: "NBD reads from the host over QEMU user networking (MiB/s)".into(),
            y_label: "MiB/s".into(),
            bars: set
                .results
                .iter()
                .map(|r| {
                    let name = r
                        .get("case")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned();
                    (name, number(r, "mib_per_s").unwrap_or(0.0))
                })
                .collect(),
        },
    )?;
    let runs: Vec<fio::Run<'_>> = set
        .results
        .iter()
        .map(|record| fio::Run {
            name: format!(
                "nbd {}",
                record.get("case").and_then(Value::as_str).unwrap_or("?")
            ),
            engine: "nbd client (xtask) over QEMU user networking",
            option_keys: &[],
            record,
        })
        .collect();
    let fio_json = fio::write(&dir, &set.file_stem, &fio::document(&runs))?;
    println!(
        "wrote {}, {} and {}",
        json.display(),
        fio_json.display(),
        svg.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles_take_the_rank_the_guest_takes() {
        let mut samples: Vec<u64> = (1..=1000).rev().collect();
        let fields = latency_fields(&mut samples);
        let get = |key: &str| fields[key].as_u64().unwrap();
        assert_eq!((get("lat_min_ns"), get("lat_max_ns")), (1, 1000));
        assert_eq!(get("lat_mean_ns"), 500);
        assert_eq!(get("lat_p50_ns"), 500);
        assert_eq!(get("lat_p90_ns"), 900);
        assert_eq!(get("lat_p99_ns"), 990);
        assert_eq!(get("lat_p999_ns"), 999);
        assert_eq!(get("lat_p9999_ns"), 1000);
        assert!(latency_fields(&mut []).is_empty());
    }
}
