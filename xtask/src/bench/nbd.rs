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
//! CPU QEMU used meanwhile ([`nbd_tests::idle`]). Writes `target/bench/nbd.json` and `nbd.svg`
//! (MiB/s per case).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::plot::{self, BarChart};
use super::{Column, Record, ResultSet, number};
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

/// xorshift64: the random offsets need no quality, only repeatability.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn measure(case: &Case, duration: Duration) -> std::io::Result<Record> {
    let mut client = Client::open(nbd_tests::nbd_addr())?;
    let blocks = client.size / u64::from(case.bs);
    let (mut seq, mut rng) = (0u64, 0x9e37_79b9_7f4a_7c15u64);
    let mut offset = || {
        let block = if case.random {
            next_random(&mut rng) % blocks
        } else {
            seq = (seq + 1) % blocks;
            seq
        };
        block * u64::from(case.bs)
    };
    let start = Instant::now();
    let mut sent = Vec::new();
    for handle in 0..case.iodepth as u64 {
        client.request(nbd::CMD_READ, handle, offset(), case.bs, &[])?;
        sent.push(Instant::now());
    }
    let (mut done, mut latency_ns) = (0u64, 0u128);
    loop {
        let (error, handle) = client.reply()?;
        if error != 0 {
            return Err(std::io::Error::other(format!(
                "read answered errno {error}"
            )));
        }
        client.bytes(case.bs as usize)?;
        done += 1;
        latency_ns += sent[handle as usize].elapsed().as_nanos();
        if start.elapsed() >= duration {
            break;
        }
        client.request(nbd::CMD_READ, handle, offset(), case.bs, &[])?;
        sent[handle as usize] = Instant::now();
    }
    // Drain what is still in flight before hanging up.
    for _ in 1..case.iodepth {
        client.reply()?;
        client.bytes(case.bs as usize)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    client.disconnect()?;
    let mut record = Record::new();
    record.insert("case".into(), Value::from(case.name));
    record.insert(
        "rw".into(),
        Value::from(if case.random { "randread" } else { "read" }),
    );
    record.insert("bs".into(), Value::from(case.bs));
    record.insert("iodepth".into(), Value::from(case.iodepth));
    record.insert("ios".into(), Value::from(done));
    record.insert("iops".into(), Value::from((done as f64 / seconds).round()));
    record.insert(
        "mib_per_s".into(),
        Value::from(
            ((done * u64::from(case.bs)) as f64 / seconds / 1048576.0 * 100.0).round() / 100.0,
        ),
    );
    record.insert(
        "lat_mean_us".into(),
        Value::from((latency_ns / u128::from(done.max(1)) / 1000) as u64),
    );
    Ok(record)
}

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
        match nbd_tests::idle::measure(nbd_tests::nbd_addr().port(), idle_window) {
            Ok(idle) => println!("idle {idle}"),
            Err(error) => println!("idle: not measured ({error})"),
        }
        let _ = nbd_tests::shutdown();
        let outcome = boot.join();
        (records, outcome)
    });
    let (records, outcome) = records;
    let records = records.map_err(|reason| Error::Guest { verdict: reason })?;
    if !matches!(outcome, Ok(Ok(ref o)) if o.verdict == crate::boot::Verdict::Pass) {
        return Err(Error::Guest {
            verdict: "the nbd guest did not stop cleanly".into(),
        });
    }
    set.extend(records);
    super::print_table(
        &set.results,
        &[
            Column {
                header: "case",
                key: "case",
            },
            Column {
                header: "IOPS",
                key: "iops",
            },
            Column {
                header: "MiB/s",
                key: "mib_per_s",
            },
            Column {
                header: "mean lat us",
                key: "lat_mean_us",
            },
        ],
    );
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
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}
