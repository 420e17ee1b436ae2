//! Host CPU the guest costs while its NBD server idles: QEMU's user + system time from
//! `/proc/PID/stat` ([`harness::proc_stat`], all threads) across a window in which no
//! client talks to it. The QEMU process is the one whose command line forwards this run's NBD
//! port, so other QEMUs on the machine are never measured. A guest that busy-polls costs about
//! one host core (100%); one that halts costs little. The figure is reported, never judged: a
//! timing does not fail a test.

use std::time::{Duration, Instant};

use harness::proc_stat::{ProcStat, ticks_to_duration};

/// QEMU's CPU use over one idle window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleCpu {
    /// QEMU's process id.
    pub pid: u32,
    /// Wall time of the window.
    pub wall: Duration,
    /// CPU time QEMU used in it (user + system, all threads).
    pub cpu: Duration,
}

impl IdleCpu {
    /// CPU time as a percentage of one host core.
    pub fn core_percent(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }
}

impl std::fmt::Display for IdleCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QEMU (pid {}) used {:.1}% of a host core while idle: {} ms CPU in {:.1} s",
            self.pid,
            self.core_percent(),
            self.cpu.as_millis(),
            self.wall.as_secs_f64()
        )
    }
}

/// The QEMU process forwarding host port `nbd_port`.
pub fn qemu_pid(nbd_port: u16) -> Result<u32, String> {
    let forward = format!("hostfwd=tcp:127.0.0.1:{nbd_port}-:");
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let mut args = cmdline.split(|&b| b == 0).map(String::from_utf8_lossy);
        let is_qemu = args
            .next()
            .is_some_and(|arg0| arg0.ends_with("qemu-system-x86_64"));
        if is_qemu && args.any(|arg| arg.contains(&forward)) {
            return Ok(pid);
        }
    }
    Err(format!(
        "no qemu-system-x86_64 forwarding 127.0.0.1:{nbd_port}"
    ))
}

fn cpu_ticks(pid: u32) -> Result<u64, String> {
    Ok(ProcStat::read(pid)?.cpu_ticks)
}

/// Measures the QEMU that forwards `nbd_port` across `window` of idleness.
pub fn measure(nbd_port: u16, window: Duration) -> Result<IdleCpu, String> {
    let pid = qemu_pid(nbd_port)?;
    let (start, before) = (Instant::now(), cpu_ticks(pid)?);
    std::thread::sleep(window);
    let (after, wall) = (cpu_ticks(pid)?, start.elapsed());
    let ticks = after
        .checked_sub(before)
        .ok_or("QEMU's CPU time went backwards")?;
    Ok(IdleCpu {
        pid,
        wall,
        cpu: ticks_to_duration(ticks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentage_is_of_one_core() {
        let idle = IdleCpu {
            pid: 1,
            wall: Duration::from_secs(10),
            cpu: Duration::from_millis(500),
        };
        assert!((idle.core_percent() - 5.0).abs() < 1e-9);
    }
}
