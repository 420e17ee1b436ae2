//! `cargo xtask bench device`: random 4 KiB reads through a real QEMU host adapter, virtio-scsi
//! and/or the LSI SAS1068, at iodepth 1 and 32.
//!
//! Each case is one boot of the `virtio-scsi-null` or `mptsas-null` profile (one 1 GiB `null-co`
//! target: reads return zeroes without touching a host file) with
//! `workload=device rw=randread bs=4k iodepth=N runtime=…`: the guest scans, then runs the
//! `scsi` crate's fio-style loop on the disk and prints IOPS and per-command latency (mean,
//! p99). The devices alternate within a repetition (their order flips every repetition), so
//! drift on a shared host hits both alike; the table and plots use each case's best run.
//!
//! Writes `target/bench/device.json` and two bar charts beside it: `device.svg` (IOPS) and
//! `device-latency.svg` (p99 latency in µs).

use std::time::Duration;

use serde_json::Value;

use super::plot::{self, BarChart};
use super::{Column, Record, ResultSet, number};
use crate::accel::AccelRequest;
use crate::error::{Error, Result};
use crate::guest::{Guest, Overrides};
use crate::insns::{self, CountOptions};
use crate::{profile, workspace};

/// Which adapter to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// virtio-scsi-pci (profile `virtio-scsi-null`).
    VirtioScsi,
    /// mptsas1068 (profile `mptsas-null`).
    Mptsas,
}

impl Device {
    /// The name the guest reports in its RESULT line.
    pub fn name(self) -> &'static str {
        match self {
            Device::VirtioScsi => "virtio-scsi",
            Device::Mptsas => "mptsas",
        }
    }

    fn profile(self) -> &'static str {
        match self {
            Device::VirtioScsi => "virtio-scsi-null",
            Device::Mptsas => "mptsas-null",
        }
    }
}

/// Options of `cargo xtask bench device`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The adapter(s) to measure (repeat the option for several); default: both.
    #[arg(long, value_enum)]
    pub device: Vec<Device>,
    /// Shorter runs (500 ms per case) and one repetition.
    #[arg(long)]
    pub quick: bool,
    /// Repetitions of every case; default 3, 1 with --quick.
    #[arg(long)]
    pub reps: Option<u32>,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub count: CountOptions,
}

/// The iodepths measured.
pub const IODEPTHS: [u32; 2] = [1, 32];

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let devices = if options.device.is_empty() {
        vec![Device::VirtioScsi, Device::Mptsas]
    } else {
        options.device.clone()
    };
    let guest = Guest::prepare(options.accel, options.kernel.clone())?;
    let mut set = ResultSet::new(
        "device",
        "device",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let runtime = if options.quick { "500ms" } else { "2s" };
    let plugin = options.count.plugin(&guest)?;
    let reps = options
        .reps
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    for rep in 0..reps {
        let mut order = devices.clone();
        if rep % 2 == 1 {
            order.reverse();
        }
        for iodepth in IODEPTHS {
            for &device in &order {
                let profile = profile::load(device.profile())?;
                let overrides = Overrides {
                    timeout: Some(Duration::from_secs(120)),
                    kernel_args: Some(format!(
                        "workload=device rw=randread bs=4k iodepth={iodepth} runtime={runtime}"
                    )),
                    counting: insns::for_boot(plugin.as_deref(), false)?,
                    ..Overrides::default()
                };
                let records = super::run_guest_case(&guest, &profile, &overrides)?;
                if let Some(wrong) = records
                    .iter()
                    .find(|r| r.get("device").and_then(Value::as_str) != Some(device.name()))
                {
                    return Err(Error::ResultLine {
                        line: Value::Object(wrong.clone()).to_string(),
                        reason: format!("the {} profile should report that device", device.name()),
                    });
                }
                set.extend(records.into_iter().map(|mut record| {
                    record.insert("bench".into(), Value::from("device"));
                    record.insert("rep".into(), Value::from(rep));
                    record
                }));
            }
        }
    }
    report(&set)
}

const COLUMNS: [Column<'static>; 15] = [
    Column {
        header: "device",
        key: "device",
    },
    Column {
        header: "rep",
        key: "rep",
    },
    Column {
        header: "bs",
        key: "bs",
    },
    Column {
        header: "iodepth",
        key: "iodepth",
    },
    Column {
        header: "IOPS",
        key: "iops",
    },
    Column {
        header: "insns/IO",
        key: "insns_per_op",
    },
    Column {
        header: "mean ns",
        key: "lat_mean_ns",
    },
    Column {
        header: "p50 ns",
        key: "lat_p50_ns",
    },
    Column {
        header: "p90 ns",
        key: "lat_p90_ns",
    },
    Column {
        header: "p99 ns",
        key: "lat_p99_ns",
    },
    Column {
        header: "p99.9 ns",
        key: "lat_p999_ns",
    },
    Column {
        header: "p99.99 ns",
        key: "lat_p9999_ns",
    },
    Column {
        header: "max ns",
        key: "lat_max_ns",
    },
    Column {
        header: "I/Os",
        key: "ios",
    },
    Column {
        header: "errors",
        key: "errors",
    },
];

fn label(record: &Record) -> String {
    format!(
        "{} qd{}",
        record.get("device").and_then(Value::as_str).unwrap_or("?"),
        number(record, "iodepth").unwrap_or(0.0)
    )
}

/// The best run of each case (highest IOPS), in first-seen order.
pub fn best_runs(set: &ResultSet) -> Vec<(String, Record)> {
    let mut best: Vec<(String, Record)> = Vec::new();
    for record in &set.results {
        let name = label(record);
        let iops = number(record, "iops").unwrap_or(0.0);
        match best.iter_mut().find(|(n, _)| *n == name) {
            Some((_, kept)) if number(kept, "iops").unwrap_or(0.0) < iops => *kept = record.clone(),
            Some(_) => {}
            None => best.push((name, record.clone())),
        }
    }
    best
}

/// Prints the table and the best run per case, writes the JSON, draws the charts.
fn report(set: &ResultSet) -> Result<()> {
    super::print_tables(&set.results, &[("device", &COLUMNS)]);
    println!();
    let best = best_runs(set);
    for (name, record) in &best {
        let insns = number(record, "insns_per_op")
            .map(|n| format!("   {n:.1} guest insns/IO"))
            .unwrap_or_default();
        println!(
            "best {name:<16} {:>8.0} IOPS   latency mean {:>7.1} us   p99 {:>7.1} us{insns}",
            number(record, "iops").unwrap_or(0.0),
            number(record, "lat_mean_ns").unwrap_or(0.0) / 1000.0,
            number(record, "lat_p99_ns").unwrap_or(0.0) / 1000.0
        );
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let place = set.place_label();
    let svg = dir.join("device.svg");
    plot::draw_bars(
        &svg,
        &BarChart {
            title: format!("randread 4 KiB IOPS on a null-co disk, best run, {place}"),
            y_label: "IOPS".into(),
            bars: best
                .iter()
                .map(|(name, r)| (name.clone(), number(r, "iops").unwrap_or(0.0)))
                .collect(),
        },
    )?;
    let latency_svg = dir.join("device-latency.svg");
    plot::draw_bars(
        &latency_svg,
        &BarChart {
            title: format!("randread 4 KiB p99 latency (us), best run, {place}"),
            y_label: "p99 latency (us)".into(),
            bars: best
                .iter()
                .map(|(name, r)| {
                    (
                        name.clone(),
                        number(r, "lat_p99_ns").unwrap_or(0.0) / 1000.0,
                    )
                })
                .collect(),
        },
    )?;
    println!(
        "wrote {}, {} and {}",
        json.display(),
        svg.display(),
        latency_svg.display()
    );
    if set.results.is_empty() {
        return Err(Error::NoResults {
            what: "device".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    #[test]
    fn best_run_per_device_and_iodepth() {
        let mut set = ResultSet::new("device", "device", "guest", None);
        let lines = [
            r#"{"device":"virtio-scsi","iodepth":32,"iops":90000,"rep":0}"#,
            r#"{"device":"mptsas","iodepth":32,"iops":40000,"rep":0}"#,
            r#"{"device":"virtio-scsi","iodepth":32,"iops":120000,"rep":1}"#,
            r#"{"device":"virtio-scsi","iodepth":1,"iops":20000,"rep":1}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        let best = best_runs(&set);
        let names: Vec<&str> = best.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["virtio-scsi qd32", "mptsas qd32", "virtio-scsi qd1"]
        );
        assert_eq!(number(&best[0].1, "iops"), Some(120000.0));
        assert_eq!(number(&best[0].1, "rep"), Some(1.0));
    }
}
