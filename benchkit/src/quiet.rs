//! Whether a benchmark ran on a quiet host: the CPU that *other* processes used in a settle
//! window before the bench boots anything and in another after its last boot.
//!
//! The load average cannot tell: it counts the bench's own QEMU, which keeps a core busy by
//! design. So each window reads the host's busy time from `/proc/stat` (every CPU, all but
//! `idle` and `iowait`) and subtracts this process's own time from `/proc/self/stat` (xtask and
//! the children it waited for, so its finished guests too); what is left is what other processes
//! used, in host cores. A run is quiet when both windows stay below [`QUIET_CORES`]; a results
//! page from any other run opens with a warning (`cargo xtask report`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use harness::proc_stat::ProcStat;
use serde::{Deserialize, Serialize};

/// How long each settle window lasts.
pub const SETTLE: Duration = Duration::from_secs(3);

/// Other processes may use less than this many host cores in each window of a quiet run.
pub const QUIET_CORES: f64 = 0.5;

/// Linux's `USER_HZ`: `/proc/stat` and `/proc/PID/stat` count in ticks of 1/100 s on x86.
const USER_HZ: f64 = 100.0;

static AT_START: OnceLock<Option<f64>> = OnceLock::new();
static AT_END: OnceLock<Option<f64>> = OnceLock::new();

/// What other processes used around a run (`"quiet"` in every bench document).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quiet {
    /// Each window's length, seconds.
    pub settle_s: f64,
    /// Host cores other processes used in the window before the run (`None`: not measured).
    pub others_cores_start: Option<f64>,
    /// The same in the window after the run.
    pub others_cores_end: Option<f64>,
}

impl Quiet {
    /// Whether both windows were measured and stayed below [`QUIET_CORES`].
    pub fn is_quiet(&self) -> bool {
        let below = |cores: Option<f64>| cores.is_some_and(|cores| cores < QUIET_CORES);
        below(self.others_cores_start) && below(self.others_cores_end)
    }
}

/// Measures the window before a bench (once per process; a bench command calls it first).
pub fn note_start() {
    AT_START.get_or_init(settle);
}

/// Both windows, measuring the one after the run the first time it is asked for; `None` in a
/// process that measured no window before (not a bench command: a test, say).
pub fn around_run() -> Option<Quiet> {
    let start = *AT_START.get()?;
    Some(Quiet {
        settle_s: SETTLE.as_secs_f64(),
        others_cores_start: start,
        others_cores_end: *AT_END.get_or_init(settle),
    })
}

/// Cores other processes used over one [`SETTLE`] window, if `/proc` could be read.
fn settle() -> Option<f64> {
    let before = Sample::now()?;
    std::thread::sleep(SETTLE);
    let after = Sample::now()?;
    Some(others_cores(&before, &after))
}

/// One reading of the host's busy time and this process's own.
struct Sample {
    at: Instant,
    busy_ticks: u64,
    own_ticks: u64,
}

impl Sample {
    fn now() -> Option<Sample> {
        let busy_ticks = busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let own = ProcStat::parse(&std::fs::read_to_string("/proc/self/stat").ok()?).ok()?;
        Some(Sample {
            at: Instant::now(),
            busy_ticks,
            own_ticks: own.cpu_ticks + own.children_cpu_ticks,
        })
    }
}

/// Cores used between two samples by processes other than this one.
fn others_cores(before: &Sample, after: &Sample) -> f64 {
    let busy = after.busy_ticks.saturating_sub(before.busy_ticks);
    let own = after.own_ticks.saturating_sub(before.own_ticks);
    let wall = after.at.duration_since(before.at).as_secs_f64().max(1e-3);
    let cores = busy.saturating_sub(own) as f64 / USER_HZ / wall;
    (cores * 100.0).round() / 100.0
}

/// The host's busy ticks from `/proc/stat`'s `cpu` line: every field but `idle` (4th) and
/// `iowait` (5th); `guest` and `guest_nice` are already inside `user` and `nice`, so they are
/// left out too.
fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let (&[user, nice, system, _idle, _iowait], rest) = fields.split_first_chunk::<5>()?;
    let irq_softirq_steal: u64 = rest.iter().take(3).sum();
    Some(user + nice + system + irq_softirq_steal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_leaves_out_idle_iowait_and_guest_time() {
        let stat = "cpu  100 5 50 1000 7 1 2 3 40 0\ncpu0 50 2 25 500 3 0 1 1 20 0\n";
        assert_eq!(busy_ticks(stat), Some(100 + 5 + 50 + 1 + 2 + 3));
        assert_eq!(busy_ticks("cpu  1 2 3\n"), None);
        assert_eq!(busy_ticks("cpu  1 x 3 4 5\n"), None);
        assert_eq!(busy_ticks("intr 5\n"), None);
    }

    #[test]
    fn other_processes_are_what_is_busy_less_this_one() {
        let at = Instant::now();
        let before = Sample {
            at,
            busy_ticks: 1000,
            own_ticks: 40,
        };
        let after = Sample {
            at: at + Duration::from_secs(2),
            busy_ticks: 1000 + 150,
            own_ticks: 40 + 50,
        };
        // 100 ticks of others in 2 s: half a core.
        assert_eq!(others_cores(&before, &after), 0.5);
    }

    #[test]
    fn a_run_is_quiet_only_when_both_windows_were_measured_and_low() {
        let quiet = |start, end| {
            Quiet {
                settle_s: 3.0,
                others_cores_start: start,
                others_cores_end: end,
            }
            .is_quiet()
        };
        assert!(quiet(Some(0.1), Some(0.49)));
        assert!(!quiet(Some(0.1), Some(0.5)));
        assert!(!quiet(Some(0.9), Some(0.1)));
        assert!(!quiet(None, Some(0.1)));
    }

    /// This host's /proc reads: a window measures something (a core count is never negative).
    #[test]
    fn a_window_is_measured_from_proc() {
        let before = Sample::now().expect("/proc/stat and /proc/self/stat");
        let after = Sample::now().expect("/proc again");
        assert!(others_cores(&before, &after) >= 0.0);
    }
}
