//! Deterministic instruction counts (`--count-insns`): xtask's TCG plugin, built and read here.
//!
//! The plugin (`harness/plugin/insn_count.c`) is built with the system C compiler into
//! `target/plugin/insn_count.so` and loaded with `-plugin …,breakdown=on|off -d plugin -D LOG`.
//! It counts guest instructions per vCPU inside the windows the kernel marks
//! (`kernel/src/arch/insn_marker.rs`) and writes `sensepool-insns …` lines to LOG. A workload's
//! `RESULT` line names its publish and slot (`insn_window`, `insn_slot`) and its operation count
//! (`insn_ops`); [`join`] turns them into `insns` and `insns_per_op`.
//!
//! Instruction counts are not time: they miss memory stalls, MMIO and port exits and all device
//! emulation in QEMU, and the plugin's callbacks slow TCG down (timings of a counted boot are
//! lower than an uncounted one's). They are exact and repeatable, which timings here are not.

mod figures;
mod log;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub use self::figures::InsnFigures;
pub use self::log::{Block, CacheCounts, IoCounts, PluginLog, Split, TlbCounts, parse};
use crate::accel::Accel;
use crate::console::ResultLine;
use crate::error::{Error, Result};
use crate::{process, workspace};

/// The plugin's source, relative to the workspace root.
const SOURCE: &str = "harness/plugin/insn_count.c";
/// The data-cache model it includes.
const CACHE_MODEL: &str = "harness/plugin/cache_model.h";

/// `--count-insns` (and `--breakdown` where a bench offers it): the options every scenario bench
/// flattens in.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CountOptions {
    /// Count guest instructions per operation in each case's timed window (a QEMU TCG plugin;
    /// TCG only). Adds `insns_per_op` beside the timings.
    #[arg(long)]
    pub count_insns: bool,
}

impl CountOptions {
    /// With `--count-insns`: checks the accelerator is TCG (the plugin is a TCG feature) and
    /// builds the plugin; `None` without the flag.
    pub fn plugin(&self, accel: Accel) -> Result<Option<PathBuf>> {
        if !self.count_insns {
            return Ok(None);
        }
        if accel != Accel::Tcg {
            return Err(Error::Plugin {
                reason: format!(
                    "instruction counts come from a TCG plugin, but this run uses {accel}; add --accel tcg"
                ),
            });
        }
        build_plugin().map(Some)
    }
}

/// The counting of the next boot, if `plugin` is built (see [`CountOptions::plugin`]).
pub fn for_boot(plugin: Option<&Path>, breakdown: bool) -> Result<Option<Counting>> {
    plugin
        .map(|plugin| Counting::next_boot(plugin, breakdown))
        .transpose()
}

/// How one boot is counted: the plugin, its log, and whether it records every block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counting {
    pub plugin: PathBuf,
    pub log: PathBuf,
    pub breakdown: bool,
    /// The plugin's softmmu TLB model (`tlb=on`): adds `tlb_fills_per_op` and its kin.
    pub tlb_model: bool,
    /// The plugin's data-cache model (`cache=on`): adds `l1d_misses` and its kin.
    pub cache_model: bool,
    /// The plugin's count of MMIO accesses and port instructions (`io=on`): adds
    /// `mmio_per_op` and `pio_per_op`.
    pub io_count: bool,
}

impl Counting {
    /// A fresh log file under `target/insns/` for the next boot.
    pub fn next_boot(plugin: &Path, breakdown: bool) -> Result<Self> {
        static BOOTS: AtomicU32 = AtomicU32::new(0);
        let dir = workspace::output_dir("insns")?;
        let boot = BOOTS.fetch_add(1, Ordering::Relaxed);
        let log = dir.join(format!("boot-{}-{boot}.log", std::process::id()));
        // A stale log from an earlier process must not be read as this boot's.
        let _ = std::fs::remove_file(&log);
        Ok(Self {
            plugin: plugin.to_owned(),
            log,
            breakdown,
            tlb_model: false,
            cache_model: false,
            io_count: false,
        })
    }

    /// The same counting with the plugin's softmmu TLB model on or off.
    pub fn with_tlb_model(self, tlb_model: bool) -> Self {
        Self { tlb_model, ..self }
    }

    /// The same counting with the plugin's data-cache model on or off.
    pub fn with_cache_model(self, cache_model: bool) -> Self {
        Self {
            cache_model,
            ..self
        }
    }

    /// The same counting with the plugin's MMIO and port-access count on or off.
    pub fn with_io_count(self, io_count: bool) -> Self {
        Self { io_count, ..self }
    }

    /// The QEMU options: `-plugin FILE,breakdown=on|off,tlb=on|off,cache=on|off,io=on|off -d
    /// plugin -D LOG`.
    pub(crate) fn qemu_args(&self) -> Vec<String> {
        let plugin = self.plugin.to_string_lossy().replace(',', ",,");
        let on_off = |on: bool| if on { "on" } else { "off" };
        vec![
            "-plugin".into(),
            format!(
                "{plugin},breakdown={},tlb={},cache={},io={}",
                on_off(self.breakdown),
                on_off(self.tlb_model),
                on_off(self.cache_model),
                on_off(self.io_count)
            ),
            "-d".into(),
            "plugin".into(),
            "-D".into(),
            self.log.to_string_lossy().into_owned(),
        ]
    }

    /// Reads and parses the boot's log.
    pub fn read_log(&self) -> Result<PluginLog> {
        let text = std::fs::read_to_string(&self.log).map_err(|source| Error::Read {
            path: self.log.clone(),
            source,
        })?;
        parse(&text).map_err(|error| match error {
            Error::Plugin { reason } => Error::Plugin {
                reason: format!("{}: {reason}", self.log.display()),
            },
            other => other,
        })
    }
}

/// Builds the plugin if its source or the cache model is newer than the library; returns the
/// library's path. A missing C compiler is an error that says what to install.
pub fn build_plugin() -> Result<PathBuf> {
    let source = workspace::root().join(SOURCE);
    let out = workspace::output_dir("plugin")?.join("insn_count.so");
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let written = modified(&source).max(modified(&workspace::root().join(CACHE_MODEL)));
    if let (Some(built), Some(written)) = (modified(&out), written)
        && built >= written
    {
        return Ok(out);
    }
    let compiler = c_compiler()?;
    let mut command = Command::new(&compiler);
    command.args(["-shared", "-fPIC", "-O2", "-std=gnu11", "-Wall", "-Wextra"]);
    command.args(["-fvisibility=hidden", "-o"]);
    command.arg(&out).arg(&source);
    process::run(&mut command)?;
    Ok(out)
}

/// The C compiler the plugin is built with (`$CC`, else `gcc`), or an error that says what to
/// install.
fn c_compiler() -> Result<String> {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    if process::find_on_path(&compiler).is_none() {
        return Err(Error::Plugin {
            reason: format!(
                "building the instruction-count plugin needs a C compiler, and `{compiler}` is not on PATH; install one (sudo apt-get install gcc) or set CC"
            ),
        });
    }
    Ok(compiler)
}

/// The QEMU messages that mean the plugin could not be loaded (QEMU without plugin support,
/// another plugin API version, a bad argument), as one error.
pub fn load_failure(stderr: &[String]) -> Option<Error> {
    let lines: Vec<&String> = stderr
        .iter()
        .filter(|line| line.contains("plugin"))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let said: Vec<&str> = lines.iter().map(|line| line.trim()).collect();
    Some(Error::Plugin {
        reason: format!(
            "QEMU could not load the instruction-count plugin (it needs a QEMU built with TCG plugin support, plugin API version 1 as in QEMU 7.2): {}",
            said.join("; ")
        ),
    })
}

/// The guest test of a counted boot: the plugin ran, its markers balanced, and every `RESULT`
/// of the boot (`results`) got a positive `insns_per_op`. Returns `"N insns/op"` for the report
/// line.
pub fn judge_counted(counting: &Counting, results: &[ResultLine]) -> Result<String> {
    let log = counting.read_log()?;
    if !log.started {
        return Err(Error::Plugin {
            reason: format!("the plugin never started (see {})", counting.log.display()),
        });
    }
    if let Some(anomaly) = log.anomalies.first() {
        return Err(Error::Plugin {
            reason: format!("unbalanced markers: {anomaly}"),
        });
    }
    let per_op: Vec<String> = results
        .iter()
        .map(|line| match join(line, Some(&log))?.insns_per_op {
            Some(n) if n > 0.0 => Ok(format!("{n} insns/op")),
            _ => Err(Error::Plugin {
                reason: "a RESULT line has no instruction count (no markers around its window?)"
                    .into(),
            }),
        })
        .collect::<Result<_>>()?;
    if per_op.is_empty() {
        return Err(Error::NoResults {
            what: "the counted boot".into(),
        });
    }
    Ok(per_op.join(", "))
}

/// Whether the working instructions per operation of a counted boot's lines agree within `pct`
/// percent among the lines with the same `group` field (say `device`: one adapter's disks, one
/// completing at once and one late, must do the same work per I/O). Returns
/// `"device=virtio-scsi: 1610 and 1612.5 insns/op (0.16% apart)"` per group, or an error naming
/// the group that disagrees or has a single line.
pub fn agree_within(
    counting: &Counting,
    results: &[ResultLine],
    group: &str,
    pct: f64,
) -> Result<String> {
    let log = counting.read_log()?;
    let mut counts = Vec::new();
    for line in results {
        let name = line
            .field(group)
            .map(|value| value.to_string().trim_matches('"').to_owned())
            .unwrap_or_default();
        let per_op = join(line, Some(&log))?
            .insns_per_op
            .ok_or_else(|| Error::Plugin {
                reason: format!("a RESULT of {group}={name} has no instruction count"),
            })?;
        counts.push((name, per_op));
    }
    agree_by_group(&counts, group, pct)
}

/// [`agree_within`] over `(group name, working instructions per op)` pairs.
fn agree_by_group(counts: &[(String, f64)], group: &str, pct: f64) -> Result<String> {
    let mut groups: Vec<(&str, Vec<f64>)> = Vec::new();
    for (name, per_op) in counts {
        match groups.iter_mut().find(|(known, _)| known == name) {
            Some((_, values)) => values.push(*per_op),
            None => groups.push((name, vec![*per_op])),
        }
    }
    let mut said = Vec::new();
    for (name, values) in &groups {
        if values.len() < 2 {
            return Err(Error::Plugin {
                reason: format!("{group}={name} has one counted RESULT; nothing to compare"),
            });
        }
        let (low, high) = values.iter().fold((f64::MAX, f64::MIN), |(low, high), &n| {
            (low.min(n), high.max(n))
        });
        let apart_pct = 100.0 * (high - low) / low.max(f64::MIN_POSITIVE);
        let list: Vec<String> = values.iter().map(|n| format!("{n}")).collect();
        let line = format!(
            "{group}={name}: {} insns/op ({apart_pct:.2}% apart)",
            list.join(" and ")
        );
        if apart_pct > pct {
            return Err(Error::Plugin {
                reason: format!("working counts disagree by more than {pct}%: {line}"),
            });
        }
        said.push(line);
    }
    Ok(said.join("; "))
}

/// The figures of a `RESULT` line counted by the plugin (`log`): a line naming its
/// instruction-count keys ([`protocol::result::InsnCount`]: `insn_window`, `insn_slot`,
/// `insn_ops`) gets `insns` (the slot's instructions over all vCPUs) and `insns_per_op` over
/// `insn_ops`, and the TLB and cache models' figures where the plugin ran them. A line without
/// keys, or a boot not counted (`log` = `None`), gets none. A line with only some of the keys
/// is an error naming them, and so is one naming a window the plugin never published. The
/// reader of the line's type takes the keys out of it
/// ([`protocol::result::InsnKeys::take_insn_keys`]), so no results file carries them.
pub fn join(line: &ResultLine, log: Option<&PluginLog>) -> Result<InsnFigures> {
    let (Some(keys), Some(log)) = (figures::keys(line)?, log) else {
        return Ok(InsnFigures::default());
    };
    let published = log
        .publishes
        .iter()
        .find(|p| u64::from(p.window) == keys.insn_window && u64::from(p.slot) == keys.insn_slot)
        .ok_or_else(|| Error::Plugin {
            reason: format!(
                "a RESULT names instruction window {} slot {}, but the plugin published no such count",
                keys.insn_window, keys.insn_slot
            ),
        })?;
    let ops = keys.insn_ops;
    let per_op = |count: u64| (ops > 0).then(|| (count as f64 / ops as f64 * 10.0).round() / 10.0);
    let tlb = |count: fn(&TlbCounts) -> u64| published.tlb.as_ref().and_then(|t| per_op(count(t)));
    let cache = published.cache;
    let per_op_exact =
        |count: u64| (ops > 0).then(|| (count as f64 / ops as f64 * 1e4).round() / 1e4);
    let working = published.insns - published.waiting;
    let io = published.io;
    Ok(InsnFigures {
        insns: Some(working),
        insn_ops: Some(ops),
        insns_per_op: per_op(working),
        insns_waiting: Some(published.waiting),
        insns_waiting_per_op: per_op(published.waiting),
        notifies_per_op: per_op_exact(published.notifies.working + published.notifies.waiting),
        mmio_per_op: io.and_then(|io| per_op_exact(io.mmio.working)),
        mmio_waiting_per_op: io.and_then(|io| per_op_exact(io.mmio.waiting)),
        pio_per_op: io.and_then(|io| per_op_exact(io.pio.working)),
        pio_waiting_per_op: io.and_then(|io| per_op_exact(io.pio.waiting)),
        insns_ratio: None,
        mem_per_op: tlb(|t| t.mem).or_else(|| cache.and_then(|c| per_op(c.mem))),
        tlb_misses_per_op: tlb(|t| t.misses),
        tlb_fills_per_op: tlb(|t| t.fills),
        l1d_misses: cache.map(|c| c.l1d_misses),
        l2_misses: cache.map(|c| c.l2_misses),
        l1d_misses_per_op: cache.and_then(|c| per_op_exact(c.l1d_misses)),
        l2_misses_per_op: cache.and_then(|c| per_op_exact(c.l2_misses)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    const LOG: &str = "sensepool-insns start api=1 vcpus=2 breakdown=off\n\
        sensepool-insns publish=0 slot=0 windows=2 insns=1000000 vcpu_insns=600000/400000\n\
        sensepool-insns published=0\n\
        sensepool-insns publish=1 slot=2 windows=1 insns=5000 vcpu_insns=5000/0\n\
        sensepool-insns published=1\n\
        sensepool-insns exit total=9999999 publishes=2 anomalies=0\n";

    /// The lines of a boot, parsed.
    fn lines(texts: &[&str]) -> Vec<ResultLine> {
        texts
            .iter()
            .map(|text| parse_result(text).unwrap())
            .collect()
    }

    #[test]
    fn lines_gain_insns_per_op() {
        let log = parse(LOG).unwrap();
        let lines = lines(&[
            r#"{"ios":1000,"insn_window":0,"insn_slot":0,"insn_ops":1000}"#,
            r#"{"ios":3,"insn_window":1,"insn_slot":2,"insn_ops":3}"#,
            r#"{"ios":7}"#,
        ]);
        let figures: Vec<InsnFigures> = lines
            .iter()
            .map(|line| join(line, Some(&log)).unwrap())
            .collect();
        assert_eq!(figures[0].insns, Some(1_000_000));
        assert_eq!(figures[0].insns_per_op, Some(1000.0));
        assert_eq!(figures[1].insns_per_op, Some(1666.7));
        assert_eq!(figures[2], InsnFigures::default());
    }

    #[test]
    fn a_result_without_its_publish_is_an_error() {
        let log = parse(LOG).unwrap();
        let line = &lines(&[r#"{"insn_window":5,"insn_slot":0,"insn_ops":10}"#])[0];
        let error = join(line, Some(&log)).unwrap_err().to_string();
        assert!(error.contains("window 5 slot 0"), "{error}");
    }

    #[test]
    fn uncounted_lines_get_no_figures() {
        let line = &lines(&[r#"{"ios":1,"insn_window":0,"insn_slot":0,"insn_ops":1}"#])[0];
        assert_eq!(join(line, None).unwrap(), InsnFigures::default());
    }

    #[test]
    fn cache_counts_join_as_totals_and_per_op() {
        let log = parse(
            "sensepool-insns publish=0 slot=3 windows=1 insns=500 vcpu_insns=500 mem=40 l1d_misses=7 l2_misses=2\n",
        )
        .unwrap();
        let line = &lines(&[r#"{"insn_window":0,"insn_slot":3,"insn_ops":4}"#])[0];
        let figures = join(line, Some(&log)).unwrap();
        assert_eq!(figures.l1d_misses, Some(7));
        assert_eq!(figures.l2_misses, Some(2));
        assert_eq!(figures.l1d_misses_per_op, Some(1.75));
        assert_eq!(figures.mem_per_op, Some(10.0));
        assert_eq!(figures.tlb_misses_per_op, None);
    }

    /// The cache model's own C test program (`harness/plugin/cache_model_test.c`): patterns whose
    /// misses follow from the geometry, checked exactly.
    #[test]
    fn the_cache_model_misses_what_its_geometry_says() {
        const CACHE_MODEL_TEST: &str = "harness/plugin/cache_model_test.c";
        let out = workspace::output_dir("plugin")
            .unwrap()
            .join("cache_model_test");
        let mut build = Command::new(c_compiler().unwrap());
        build.args(["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"]);
        build
            .arg(&out)
            .arg(workspace::root().join(CACHE_MODEL_TEST));
        process::run(&mut build).unwrap();
        let run = Command::new(&out).output().unwrap();
        let said = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{said}");
        assert!(said.ends_with("0 failed\n"), "{said}");
    }

    #[test]
    fn plugin_load_failures_are_named() {
        let stderr = vec![
            "qemu-system-x86_64: Could not load plugin /x.so: plugin requires API version 2, but this QEMU supports only up to version 1".to_owned(),
        ];
        let error = load_failure(&stderr).unwrap().to_string();
        assert!(error.contains("API version 2"), "{error}");
        assert!(load_failure(&["other".to_owned()]).is_none());
    }

    #[test]
    fn working_counts_agree_per_group_or_the_group_is_named() {
        let counts: Vec<(String, f64)> = [
            ("virtio-scsi", 1000.0),
            ("virtio-scsi", 1009.0),
            ("mptsas", 1500.0),
            ("mptsas", 1520.0),
        ]
        .iter()
        .map(|(name, n)| (name.to_string(), *n))
        .collect();
        let said = agree_by_group(&counts[..2], "device", 1.0).unwrap();
        assert!(said.contains("virtio-scsi: 1000 and 1009"), "{said}");
        let error = agree_by_group(&counts, "device", 1.0)
            .unwrap_err()
            .to_string();
        assert!(error.contains("device=mptsas"), "{error}");
        assert!(agree_by_group(&counts, "device", 2.0).is_ok());
        let alone = agree_by_group(&counts[..1], "device", 1.0).unwrap_err();
        assert!(alone.to_string().contains("one counted RESULT"), "{alone}");
    }

    #[test]
    fn qemu_args_name_the_plugin_and_the_log() {
        let counting = Counting {
            plugin: PathBuf::from("/t/insn_count.so"),
            log: PathBuf::from("/t/boot.log"),
            breakdown: true,
            tlb_model: false,
            cache_model: false,
            io_count: false,
        };
        assert_eq!(
            counting
                .with_cache_model(true)
                .with_io_count(true)
                .qemu_args(),
            [
                "-plugin",
                "/t/insn_count.so,breakdown=on,tlb=off,cache=on,io=on",
                "-d",
                "plugin",
                "-D",
                "/t/boot.log"
            ]
        );
    }
}
