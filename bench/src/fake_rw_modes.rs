//! `cargo xtask bench fake-rw --sense MODES`: the headline case of the sense modes' per-I/O
//! cost, 4 KiB reads at iodepth 32 on one vCPU, booted once per mode (`sense=MODE`, and
//! `sense_slab=` with `--sense-slab`), in the order given and then again reversed, so each
//! mode's count and IOPS come from two boots at two places in the run. With `--count-insns`
//! each row carries instructions per I/O; with `--breakdown` one more boot per mode charges the
//! window's blocks to the I/O path's layers (`target/bench/fake-rw-breakdown-MODE.json`), and a
//! table sets the modes' layers side by side: where each mode's instructions go.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use workloads::io::WorkloadParams;

use benchkit::ResultSet;
use benchkit::progress::Progress;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns;
use harness::profile::Profile;
use harness::{profile, workspace};

use crate::breakdown;
use crate::fake_rw::{FakeRwRow, Labelled, Options, Place, runtime};
use crate::fake_rw_record::FakeRwRecord;

/// A mode's run: the guest's fake-rw run (its `rep` the pass) and the slab cache under the mode.
#[derive(Debug, Clone, Serialize)]
struct ModeRun {
    #[serde(flatten)]
    run: FakeRwRecord,
    /// `sense_slab=`: `slab` unless `--sense-slab` said otherwise.
    sense_slab: String,
}

impl FakeRwRow for ModeRun {
    fn guest(&self) -> Option<&FakeRwRecord> {
        Some(&self.run)
    }

    fn labelled(&self) -> Labelled {
        self.run.labelled()
    }
}

/// The modes' case: every word but the mode's.
fn case(runtime: &str) -> String {
    format!("workload=fake-rw runtime={runtime} bs=4096 iodepth=32 numjobs=1")
}

/// `sense=MODE` plus `sense_slab=` when given, checked as the guest will parse them.
fn mode_words(mode: &str, slab: Option<&str>) -> Result<String> {
    let mut words = format!("sense={mode}");
    if let Some(slab) = slab {
        words.push_str(&format!(" sense_slab={slab}"));
    }
    WorkloadParams::parse(&words).map_err(|_| Error::BadOption {
        option: "--sense/--sense-slab",
        value: words.clone(),
        reason: "modes are slab, mempool[:N] (N >= 1), prealloc, pertag or backup; slabs slab or slub",
    })?;
    Ok(words)
}

/// Runs `--sense MODES` in the guest and reports it as the rest of the bench does.
pub fn run(options: &Options) -> Result<()> {
    if options.place != Place::Guest {
        return Err(Error::BadOption {
            option: "--sense",
            value: "--where host".into(),
            reason: "the modes' counts are guest instructions: run them in the guest",
        });
    }
    let modes = options.sense.as_deref().unwrap_or_default();
    crate::fake_rw::report(in_guest(options, modes)?)
}

/// Boots the case once per mode, forward then reversed, and the breakdown boots.
fn in_guest(options: &Options, modes: &[String]) -> Result<ResultSet<ModeRun>> {
    let guest = options.guest_options.prepare()?;
    let profile = profile::load("default")?;
    let plugin = options.count.plugin(guest.accel.accel)?;
    let slab = options.sense_slab.as_deref();
    let words: Vec<String> = modes
        .iter()
        .map(|mode| mode_words(mode, slab))
        .collect::<Result<_>>()?;
    let case = case(runtime(options.quick));
    let mut set = ResultSet::new(
        "fake-rw",
        "fake-rw-modes",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let order: Vec<&String> = words.iter().chain(words.iter().rev()).collect();
    let mut progress = Progress::new(order.len());
    for (pass, mode) in order.into_iter().enumerate() {
        let args = format!("{case} {mode}");
        progress.start(&args);
        let overrides = Overrides {
            smp: Some(1),
            timeout: Some(Duration::from_secs(120)),
            kernel_args: Some(args),
            counting: insns::for_boot(plugin.as_deref(), false)?,
            ..Overrides::default()
        };
        let runs: Vec<FakeRwRecord> =
            benchkit::run_guest_case(&guest, &profile, &overrides, "fake-rw RESULT")?;
        set.extend(runs.into_iter().map(|run| ModeRun {
            run: run.with(|context| {
                context.smp = Some(1);
                context.rep = Some(pass as u32);
            }),
            sense_slab: slab.unwrap_or("slab").to_owned(),
        }));
    }
    if options.breakdown {
        let layers = breakdowns(&guest, &profile, plugin.as_deref(), &case, modes, &words)?;
        print_layers(modes, &layers);
    }
    Ok(set)
}

/// One breakdown boot per mode; each mode's layers (name, instructions per I/O) in order.
fn breakdowns(
    guest: &Guest,
    profile: &Profile,
    plugin: Option<&std::path::Path>,
    case: &str,
    modes: &[String],
    words: &[String],
) -> Result<Vec<Vec<(String, f64)>>> {
    let mut all = Vec::new();
    for (mode, words) in modes.iter().zip(words) {
        let stem = format!("fake-rw-breakdown-{}", mode.replace(':', "-"));
        let args = format!("{case} {words}");
        breakdown::run(guest, profile, plugin, (&args, 1), &stem)?;
        let path = workspace::output_dir("bench")?.join(format!("{stem}.json"));
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        let json: Value = serde_json::from_str(&text).unwrap_or_default();
        let layers = json["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|layer| {
                let name = layer["layer"].as_str().unwrap_or("?").to_owned();
                (name, layer["insns_per_op"].as_f64().unwrap_or(0.0))
            })
            .collect();
        all.push(layers);
    }
    Ok(all)
}

/// The layers of every mode side by side (the first mode's layer order).
fn print_layers(modes: &[String], layers: &[Vec<(String, f64)>]) {
    println!();
    print!("{:<32}", "instructions per I/O by layer");
    for mode in modes {
        print!("{mode:>12}");
    }
    println!();
    let Some(first) = layers.first() else { return };
    for (name, _) in first {
        print!("{name:<32}");
        for mode in layers {
            let value = mode.iter().find(|(n, _)| n == name).map_or(0.0, |l| l.1);
            print!("{value:>12.1}");
        }
        println!();
    }
    print!("{:<32}", "total");
    for mode in layers {
        print!("{:>12.1}", mode.iter().map(|l| l.1).sum::<f64>());
    }
    println!();
}
