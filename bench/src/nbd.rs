//! `cargo xtask bench nbd`: read throughput through the guest's NBD server over QEMU user
//! networking, from a host client.
//!
//! One boot of the `nbd` profile serves its 64 MiB virtio-scsi disk; the host client
//! ([`harness::nbd_client`]) then runs each case for a fixed time: sequential and random 4 KiB
//! reads at iodepth 1 and 8 (requests kept in flight on one connection), and sequential 1 MiB
//! reads at iodepth 2 for the bulk rate. Informational: the path is mostly QEMU's slirp and the
//! emulated NIC, so the figures say what the stack costs end to end, not what it could do.
//!
//! After the cases it leaves the server idle (3 s with `--quick`, else 10 s) and prints the host
//! CPU QEMU used meanwhile ([`harness::idle_cpu`]). The client times every request (send to
//! reply) and reports min, mean, p50 … p99.99 and max. Writes `target/bench/nbd.json`,
//! `nbd.fio.json` (fio's layout, [`benchkit::fio`]) and `nbd.svg` (MiB/s per case). With
//! `--tls` it measures what TLS costs instead ([`crate::nbd_tls`]).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use workloads::Rng;

use crate::columns;
use benchkit::plot::{self, Bar, GroupedBars, Panel};
use benchkit::{Column, ResultSet, fio};
use harness::accel::AccelRequest;
use harness::boot::Echo;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::idle_cpu;
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;
use harness::{profile, workspace};

/// Options of `cargo xtask bench nbd`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// 1 s per case instead of 5 s.
    #[arg(long)]
    pub quick: bool,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// What TLS costs instead: handshake time and 4 KiB reads, plain and TLS clients in
    /// rotated rounds on one guest with `nbd_tls=on` (`target/bench/nbd-tls.json`).
    #[arg(long)]
    pub tls: bool,
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

fn measure(nbd: &NbdGuest, case: &Case, duration: Duration) -> std::io::Result<NbdRecord> {
    let mut client = Client::open(nbd.nbd_addr())?;
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
    let mean_ns = latencies_ns.iter().sum::<u64>() / done.max(1);
    Ok(NbdRecord {
        case: case.name.into(),
        rw: if case.random { "randread" } else { "read" }.into(),
        bs: case.bs,
        iodepth: case.iodepth as u64,
        ios: done,
        elapsed_ns: elapsed.as_nanos() as u64,
        iops: (done as f64 / seconds).round(),
        mib_per_s: ((done * u64::from(case.bs)) as f64 / seconds / 1048576.0 * 100.0).round()
            / 100.0,
        lat_mean_us: mean_ns / 1000,
        latency: latencies(&mut latencies_ns),
    })
}

/// One case's result: what the host client did and how long its requests took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NbdRecord {
    /// The case's name (`seq-4k-qd1`, …).
    pub case: String,
    /// fio's name of the pattern: `read` or `randread`.
    pub rw: String,
    pub bs: u32,
    /// Requests kept in flight on the connection.
    pub iodepth: u64,
    /// Requests answered in the timed window.
    pub ios: u64,
    pub elapsed_ns: u64,
    /// `ios` per second, rounded.
    pub iops: f64,
    /// MiB read per second, to 0.01.
    pub mib_per_s: f64,
    /// Mean request latency in whole µs.
    pub lat_mean_us: u64,
    /// The latency figures (absent when no request completed).
    #[serde(flatten)]
    pub latency: Option<Latencies>,
}

/// Exact request latencies under the names the guest reports its own with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latencies {
    pub lat_min_ns: u64,
    pub lat_mean_ns: u64,
    pub lat_p50_ns: u64,
    pub lat_p90_ns: u64,
    pub lat_p99_ns: u64,
    pub lat_p999_ns: u64,
    pub lat_p9999_ns: u64,
    pub lat_max_ns: u64,
}

/// Exact request latencies as the guest reports its own: min, mean, the percentiles p50 …
/// p99.99 (the sample of rank ⌈q·n⌉, the rule the guest's histogram uses) and max. `None` for
/// no samples.
fn latencies(latencies_ns: &mut [u64]) -> Option<Latencies> {
    latencies_ns.sort_unstable();
    let (&min, &max) = (latencies_ns.first()?, latencies_ns.last()?);
    let n = latencies_ns.len() as u64;
    let rank = |ppm: u64| latencies_ns[(n * ppm).div_ceil(1_000_000).max(1) as usize - 1];
    Some(Latencies {
        lat_min_ns: min,
        lat_mean_ns: latencies_ns.iter().sum::<u64>() / n,
        lat_p50_ns: rank(500_000),
        lat_p90_ns: rank(900_000),
        lat_p99_ns: rank(990_000),
        lat_p999_ns: rank(999_000),
        lat_p9999_ns: rank(999_900),
        lat_max_ns: max,
    })
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
    if options.tls {
        return crate::nbd_tls::run(options.accel, options.quick);
    }
    let profile = profile::load("nbd")?;
    let guest = Guest::prepare(options.accel, None)?;
    let duration = Duration::from_secs(if options.quick { 1 } else { 5 });
    let idle_window = if options.quick {
        Duration::from_secs(3)
    } else {
        idle_cpu::IDLE_WINDOW
    };
    let mut set = ResultSet::new("nbd", "nbd", "guest", Some(guest.accel.accel.to_string()));
    let nbd = NbdGuest::new(&profile)?;
    let (records, idle) = served(&guest, &nbd, duration, idle_window)?;
    set.headline(idle);
    report(set, &records)
}

/// One boot of the server: every case for `duration`, then QEMU's CPU over `idle_window` of
/// idleness (the headline), then a clean stop.
fn served(
    guest: &Guest,
    nbd: &NbdGuest,
    duration: Duration,
    idle_window: Duration,
) -> Result<(Vec<NbdRecord>, String)> {
    let overrides = Overrides {
        timeout: Some(Duration::from_secs(900)),
        ..Overrides::default()
    };
    let (records, outcome, idle) = std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let ready = nbd.wait_ready(|| boot.is_finished()).map_err(String::from);
        let records: std::result::Result<Vec<NbdRecord>, String> = ready.and_then(|_| {
            CASES
                .iter()
                .map(|case| measure(nbd, case, duration).map_err(|e| format!("{}: {e}", case.name)))
                .collect()
        });
        // After the cases, the server is left alone: what does it cost the host to idle?
        let idle = nbd
            .qemu_pid()
            .and_then(|pid| idle_cpu::measure(pid, idle_window));
        let idle = match idle {
            Ok(idle) => format!("idle {idle}"),
            Err(error) => format!("idle: not measured ({error})"),
        };
        let _ = nbd.shutdown();
        (records, boot.join(), idle)
    });
    let records = records.map_err(|reason| Error::Guest { verdict: reason })?;
    if !matches!(outcome, Ok(Ok(ref o)) if o.verdict == harness::boot::Verdict::Pass) {
        return Err(Error::Guest {
            verdict: "the nbd guest did not stop cleanly".into(),
        });
    }
    Ok((records, idle))
}

/// Prints the table and writes the JSON, the plot and the fio file.
fn report(mut set: ResultSet<NbdRecord>, records: &[NbdRecord]) -> Result<()> {
    set.extend(records.iter().cloned());
    benchkit::print_table(&set.results, &COLUMNS);
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svgs = draw(&set.file_stem, &set.to_json(), &dir)?;
    let runs: Vec<fio::Run<'_, NbdRecord>> = set
        .results
        .iter()
        .map(|record| fio::Run {
            name: format!("nbd {}", record.case),
            engine: "nbd client (xtask) over QEMU user networking",
            option_keys: &[],
            record,
        })
        .collect();
    let fio_json = fio::write(&dir, &set.file_stem, &fio::document(&runs))?;
    println!("wrote {} and {}", json.display(), fio_json.display());
    for svg in svgs {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

/// Draws `<stem>.svg` from the bench's JSON `document`: MiB/s per case, and the request
/// latency with its range.
pub fn draw(
    stem: &str,
    document: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>> {
    let records: Vec<NbdRecord> = crate::document::results(document, "bench nbd result")?;
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let latency = |r: &NbdRecord| {
        r.latency.map(|l| Bar {
            value: l.lat_p50_ns as f64 / 1e3,
            min: l.lat_min_ns as f64 / 1e3,
            max: l.lat_p99_ns as f64 / 1e3,
        })
    };
    let chart = GroupedBars {
        title: crate::questions::question("nbd").to_owned(),
        subtitle: format!(
            "one timed run per case (no repetitions), host client to the guest's server, {}",
            crate::document::place(document)
        ),
        groups: records.iter().map(|r| r.case.clone()).collect(),
        series: vec!["one run".into()],
        panels: vec![
            Panel {
                y_label: "reads, MiB/s".into(),
                bars: records
                    .iter()
                    .map(|r| vec![Some(Bar::single(r.mib_per_s))])
                    .collect(),
                log: false,
            },
            Panel {
                // A 1 MiB request takes a hundred times a 4 KiB one's: on a linear axis the
                // 4 KiB latencies vanish.
                y_label: "request latency (median), µs (log scale)".into(),
                bars: records.iter().map(|r| vec![latency(r)]).collect(),
                log: true,
            },
        ],
        spread: "latency: fastest request to p99".into(),
    };
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_grouped(&path, &chart)?;
    Ok(vec![path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles_take_the_rank_the_guest_takes() {
        let mut samples: Vec<u64> = (1..=1000).rev().collect();
        let latency = latencies(&mut samples).unwrap();
        assert_eq!((latency.lat_min_ns, latency.lat_max_ns), (1, 1000));
        assert_eq!(latency.lat_mean_ns, 500);
        assert_eq!(latency.lat_p50_ns, 500);
        assert_eq!(latency.lat_p90_ns, 900);
        assert_eq!(latency.lat_p99_ns, 990);
        assert_eq!(latency.lat_p999_ns, 999);
        assert_eq!(latency.lat_p9999_ns, 1000);
        assert_eq!(latencies(&mut []), None);
    }

    /// A row of `target/bench/nbd.json` as main wrote it on 2026-12-01 (its results page).
    const OLD_RECORD: &str = r#"{"accel":"tcg","bs":4096,"case":"seq-4k-qd1","elapsed_ns":1000120000,"ios":399,"iodepth":1,"iops":399.0,"lat_max_ns":100253020,"lat_mean_ns":2494000,"lat_mean_us":2494,"lat_min_ns":200000,"lat_p50_ns":319182,"lat_p90_ns":400000,"lat_p99_ns":66023990,"lat_p999_ns":100253020,"lat_p9999_ns":100253020,"mib_per_s":1.56,"rw":"read","where":"guest"}"#;

    #[test]
    fn an_old_record_reads_and_every_column_is_a_field() {
        let record: NbdRecord = harness::typed::from_line(OLD_RECORD, "nbd result").unwrap();
        assert_eq!((record.iops, record.mib_per_s), (399.0, 1.56));
        assert_eq!(record.latency.unwrap().lat_p99_ns, 66023990);
        let old: serde_json::Value = serde_json::from_str(OLD_RECORD).unwrap();
        let fields = benchkit::table::fields(&record);
        for column in COLUMNS {
            assert!(fields.contains_key(column.key), "column `{}`", column.key);
        }
        for key in fields.keys() {
            assert!(old.get(key).is_some(), "`{key}` is not in the old record");
        }
    }
}
