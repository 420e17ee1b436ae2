//! From windows to rows: per stack, configuration and mode, the nanoseconds per command over the
//! timed rounds, and the instructions and modelled cache misses per command as differences of
//! two rounds' counts (a long round and the short one after it, so the set-up, the ring's fill
//! and the window's own cost cancel), each with its spread; then what each mode adds over
//! `static` and what that is as a share of a whole fake_rw I/O on the same stack.

use protocol::result::SenseCostResult;
use serde::{Deserialize, Serialize};
use stats::Spread;

/// One window as measured: the module's words or our line, where it ran, and the plugin's
/// counts for it when the boot was counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// `Linux 6.12`, `Linux 6.12 init_on_alloc=0`, `sensepool`.
    pub stack: String,
    /// `default`, or the words that differ from it (`fail=0.01`, `cpus=2`, …).
    pub config: String,
    /// Whether the boot ran the plugin (then the counts are set and the time is not used).
    pub counted: bool,
    #[serde(flatten)]
    pub line: SenseCostResult,
    /// Instructions of the window, all vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_insns: Option<u64>,
    /// The data-cache model's L1D misses in the window, all vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_l1d_misses: Option<u64>,
    /// The model's L2 misses in the window, all vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_l2_misses: Option<u64>,
    /// The host's 1-minute load when the boot ended.
    pub host_load: f64,
}

impl Window {
    /// Commands in the window, all rings of all CPUs.
    pub fn commands(&self) -> u64 {
        self.line.n * self.line.hosts * self.line.cpus
    }

    /// CPU 0's nanoseconds per command.
    pub fn ns_per_command(&self) -> Option<f64> {
        let commands = self.line.n * self.line.hosts;
        (commands > 0).then(|| self.line.ns as f64 / commands as f64)
    }
}

/// One row of the table: a mode on a stack in a configuration. Each measured figure comes with
/// its minimum and maximum (`_min`, `_max`) over the rounds or pairs of rounds it was taken
/// from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SenseRow {
    pub stack: String,
    pub config: String,
    pub mode: String,
    /// CPU 0's nanoseconds per command, median over the timed rounds.
    pub ns_per_cmd: Option<f64>,
    pub ns_min: Option<f64>,
    pub ns_max: Option<f64>,
    /// Instructions per command, median over pairs of counted rounds.
    pub insns_per_cmd: Option<f64>,
    pub insns_min: Option<f64>,
    pub insns_max: Option<f64>,
    /// Pairs of rounds the counts are taken over.
    pub pairs: usize,
    /// A counted window's instructions that do not grow with its commands (filling the ring,
    /// and whatever the start state costs once), median over the pairs.
    pub fixed_insns: Option<f64>,
    /// Modelled L1D and L2 misses per command, median over the pairs.
    pub l1d_per_cmd: Option<f64>,
    pub l1d_min: Option<f64>,
    pub l1d_max: Option<f64>,
    pub l2_per_cmd: Option<f64>,
    pub l2_min: Option<f64>,
    pub l2_max: Option<f64>,
    /// Instructions per command over `static`'s, same stack and configuration.
    pub added_insns: Option<f64>,
    /// Nanoseconds per command over `static`'s.
    pub added_ns: Option<f64>,
    /// Instructions of one whole fake_rw I/O on this stack with static sense buffers (Linux:
    /// fio, whose requests own their buffers since 3.17; ours: fake-rw `sense=pertag`).
    pub io_insns: Option<f64>,
    /// `added_insns` as a percentage of `io_insns`.
    pub added_pct_of_io: Option<f64>,
    /// The thread's measure: throughput as a percentage of the static kernel's,
    /// `100 × io / (io + added)`.
    pub pct_of_static: Option<f64>,
    /// The 2008 thread's figure for this row, where it has one.
    pub seed_pct: Option<f64>,
    /// Over the counted rounds: attempts retried, failures injected, commands.
    pub retries: u64,
    pub injected: u64,
    pub commands: u64,
    /// Slab pages CPU 0's in-flight buffers sat in at the end of a round (median).
    pub ring_slabs: Option<f64>,
    /// Linux: the share of frees (%) that went to a slab other than SLUB's active one, in the
    /// untimed probe after each window (median over windows).
    pub offslab_pct: Option<f64>,
    /// Objects held outside the rings.
    pub idle: u64,
    /// Ours: how the row differs in meaning from the module's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
    /// The host's highest 1-minute load over the row's boots.
    pub host_load: f64,
}

/// The 2008 thread's percentages of the static kernel (scsi_debug fake_rw=1, DIO reads, 8
/// threads) for the rows that match one of its configurations.
pub fn seed_pct(mode: &str) -> Option<f64> {
    match mode {
        "slab" => Some(99.3),
        "mempool:1" => Some(98.3),
        "slab+idle:1519" => Some(96.2),
        "mempool:1519" => Some(94.6),
        _ => None,
    }
}

/// Per-command slopes and fixed parts from pairs of counted rounds: round `2i` (long) with
/// round `2i + 1` (short), `(count_long − count_short) / (commands_long − commands_short)`. A
/// negative slope is kept: a miss count that did not grow with the commands is noise around
/// zero, and hiding it would bias the median.
pub fn pairs(windows: &[&Window], count: impl Fn(&Window) -> Option<u64>) -> (Vec<f64>, Vec<f64>) {
    let (mut slopes, mut fixed) = (Vec::new(), Vec::new());
    for long in windows.iter().filter(|w| w.line.round % 2 == 0) {
        let Some(short) = windows.iter().find(|w| w.line.round == long.line.round + 1) else {
            continue;
        };
        let (Some(a), Some(b)) = (count(long), count(short)) else {
            continue;
        };
        let extra = long.commands().saturating_sub(short.commands());
        if extra == 0 {
            continue;
        }
        let slope = (a as f64 - b as f64) / extra as f64;
        slopes.push(slope);
        fixed.push(a as f64 - slope * long.commands() as f64);
    }
    (slopes, fixed)
}

/// The median, min and max of `values`, each rounded to `decimals`.
fn spread(mut values: Vec<f64>, decimals: i32) -> (Option<f64>, Option<f64>, Option<f64>) {
    let round = |value: f64| {
        let scale = 10f64.powi(decimals);
        (value * scale).round() / scale
    };
    match Spread::of(&mut values) {
        Some(s) => (
            Some(round(s.median)),
            Some(round(s.min)),
            Some(round(s.max)),
        ),
        None => (None, None, None),
    }
}

/// The rows of every (stack, configuration, mode) in `windows`, in the order first met, with
/// each stack's instructions per whole I/O from `io_insns`.
pub fn rows(windows: &[Window], io_insns: &dyn Fn(&str) -> Option<f64>) -> Vec<SenseRow> {
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for w in windows {
        let key = (w.stack.as_str(), w.config.as_str(), w.line.mode.as_str());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut rows: Vec<SenseRow> = keys
        .iter()
        .map(|&(stack, config, mode)| {
            let of: Vec<&Window> = windows
                .iter()
                .filter(|w| w.stack == stack && w.config == config && w.line.mode == mode)
                .collect();
            row(stack, config, mode, &of, io_insns(stack))
        })
        .collect();
    let statics: Vec<Option<(Option<f64>, Option<f64>)>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|s| s.stack == r.stack && s.config == r.config && s.mode == "static")
                .map(|s| (s.insns_per_cmd, s.ns_per_cmd))
        })
        .collect();
    for (row, base) in rows.iter_mut().zip(statics) {
        let Some((base_insns, base_ns)) = base else {
            continue;
        };
        let less = |a: Option<f64>, b: Option<f64>| Some(((a? - b?) * 10.0).round() / 10.0);
        row.added_insns = less(row.insns_per_cmd, base_insns);
        row.added_ns = less(row.ns_per_cmd, base_ns);
        if let (Some(added), Some(io)) = (row.added_insns, row.io_insns) {
            row.added_pct_of_io = Some((1000.0 * added / io).round() / 10.0);
            row.pct_of_static = Some((1000.0 * io / (io + added)).round() / 10.0);
        }
    }
    rows
}

fn row(stack: &str, config: &str, mode: &str, of: &[&Window], io: Option<f64>) -> SenseRow {
    let counted: Vec<&Window> = of.iter().copied().filter(|w| w.counted).collect();
    let timed = of.iter().filter(|w| !w.counted);
    let (ns_per_cmd, ns_min, ns_max) =
        spread(timed.filter_map(|w| w.ns_per_command()).collect(), 1);
    let (insns, fixed) = pairs(&counted, |w| w.window_insns);
    let pairs_count = insns.len();
    let (insns_per_cmd, insns_min, insns_max) = spread(insns, 1);
    let (l1d, _) = pairs(&counted, |w| w.window_l1d_misses);
    let (l1d_per_cmd, l1d_min, l1d_max) = spread(l1d, 4);
    let (l2, _) = pairs(&counted, |w| w.window_l2_misses);
    let (l2_per_cmd, l2_min, l2_max) = spread(l2, 4);
    let mut slabs: Vec<f64> = of
        .iter()
        .filter_map(|w| w.line.ring_slabs.map(|n| n as f64))
        .collect();
    let offslab = of
        .iter()
        .filter_map(|w| {
            let probe = w.line.probe.filter(|&n| n > 0)?;
            Some(100.0 * w.line.offslab_frees? as f64 / probe as f64)
        })
        .collect();
    SenseRow {
        stack: stack.into(),
        config: config.into(),
        mode: mode.into(),
        ns_per_cmd,
        ns_min,
        ns_max,
        insns_per_cmd,
        insns_min,
        insns_max,
        pairs: pairs_count,
        fixed_insns: spread(fixed, 0).0,
        l1d_per_cmd,
        l1d_min,
        l1d_max,
        l2_per_cmd,
        l2_min,
        l2_max,
        io_insns: io,
        seed_pct: seed_pct(mode),
        retries: counted.iter().map(|w| w.line.retries).sum(),
        injected: counted.iter().map(|w| w.line.injected).sum(),
        commands: counted.iter().map(|w| w.commands()).sum(),
        ring_slabs: stats::median(&mut slabs),
        offslab_pct: spread(offslab, 1).0,
        idle: of.first().map_or(0, |w| w.line.idle),
        differs: of.first().and_then(|w| w.line.differs.clone()),
        host_load: of.iter().map(|w| w.host_load).fold(0.0, f64::max),
        ..SenseRow::default()
    }
}

#[cfg(test)]
mod tests;
