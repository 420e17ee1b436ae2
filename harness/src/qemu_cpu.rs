//! The host CPU a benchmark's QEMU got while the guest ran its job: user + system time of the
//! QEMU process (all threads, `/proc/PID/stat`, see [`crate::proc_stat`])
//! sampled every [`PERIOD`] while it runs, then taken over the job's window as a fraction of
//! the window's wall time. 1.0 is one host core; two vCPUs that both run flat out need 2.0, and
//! on a shared host they may not get it, which is why a scaling factor is shown beside it.
//!
//! The QEMU watched is this process's child (the one [`crate::guest::Guest::boot`] spawns), so
//! other engineers' QEMUs on the machine are never measured. The window is anchored at QEMU's
//! last sample alive: the device workload exits right after its RESULT line, so the last
//! `elapsed_ns` before that is the job (give or take a sampling period and the detach).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::proc_stat::{ProcStat, ticks_to_seconds};

/// How often QEMU's CPU time is read.
pub(crate) const PERIOD: Duration = Duration::from_millis(10);

/// One reading: when, and QEMU's CPU ticks so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at: Instant,
    pub ticks: u64,
}

/// The first `qemu-system-*` child of this process, if one is running.
fn child_qemu() -> Option<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = ProcStat::read(pid).ok()?;
            (stat.parent_pid == me && stat.name.starts_with("qemu-system")).then_some(pid)
        })
}

/// QEMU's ticks, or `None` once it has exited (gone, or a zombie whose threads are reaped).
fn ticks(pid: u32) -> Option<u64> {
    let stat = ProcStat::read(pid).ok()?;
    (!stat.exited()).then_some(stat.cpu_ticks)
}

/// Samples this process's QEMU child from when it appears until it exits or `stop` is set.
/// Run it on a thread beside the boot.
pub fn sample_child(stop: &AtomicBool) -> Vec<Sample> {
    let pid = loop {
        if stop.load(Ordering::Relaxed) {
            return Vec::new();
        }
        if let Some(pid) = child_qemu() {
            break pid;
        }
        std::thread::sleep(PERIOD);
    };
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let at = Instant::now();
        let Some(ticks) = ticks(pid) else { break };
        samples.push(Sample { at, ticks });
        std::thread::sleep(PERIOD);
    }
    samples
}

/// Host CPUs QEMU used over the last `window` of `samples` (CPU seconds per wall second),
/// interpolating between the samples around the window's start. `None` when the samples do not
/// cover the window.
pub fn cpus_over_last(samples: &[Sample], window: Duration) -> Option<f64> {
    let last = samples.last()?;
    let start = last.at.checked_sub(window)?;
    let after = samples.iter().position(|s| s.at >= start)?;
    let ticks_at_start = if samples[after].at == start {
        samples[after].ticks as f64
    } else {
        let before = samples.get(after.checked_sub(1)?)?;
        let span = (samples[after].at - before.at).as_secs_f64();
        let part = (start - before.at).as_secs_f64() / span;
        before.ticks as f64 + part * (samples[after].ticks as f64 - before.ticks as f64)
    };
    let cpu_seconds = ticks_to_seconds(last.ticks as f64 - ticks_at_start);
    Some(cpu_seconds / window.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ticks: &[u64]) -> Vec<Sample> {
        let t0 = Instant::now();
        ticks
            .iter()
            .enumerate()
            .map(|(i, &ticks)| Sample {
                at: t0 + Duration::from_millis(100 * i as u64),
                ticks,
            })
            .collect()
    }

    #[test]
    fn the_window_ends_at_the_last_sample() {
        // Boot at 1 core (10 ticks per 100 ms), then the job at 2 cores.
        let s = samples(&[0, 10, 20, 40, 60, 80]);
        let cpus = cpus_over_last(&s, Duration::from_millis(300)).unwrap();
        assert!((cpus - 2.0).abs() < 1e-9, "{cpus}");
        // Half-way between samples: interpolated.
        let cpus = cpus_over_last(&s, Duration::from_millis(350)).unwrap();
        assert!((cpus - 65.0 / 100.0 / 0.35).abs() < 1e-9, "{cpus}");
    }

    #[test]
    fn a_window_longer_than_the_samples_is_not_measured() {
        let s = samples(&[0, 10, 20]);
        assert_eq!(cpus_over_last(&s, Duration::from_millis(500)), None);
        assert_eq!(cpus_over_last(&[], Duration::from_millis(1)), None);
    }

    #[test]
    fn this_process_has_no_qemu_child() {
        assert_eq!(child_qemu(), None);
        let stop = AtomicBool::new(true);
        assert!(sample_child(&stop).is_empty());
    }
}
