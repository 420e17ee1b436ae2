//! Host CPU the guest costs while its NBD server idles: QEMU's user + system time from
//! `/proc/PID/stat` ([`crate::proc_stat`], all threads) across a window in which no
//! client talks to it. The caller names the QEMU process (the NBD guest's is the one whose
//! command line forwards its NBD port, [`crate::nbd_guest::NbdGuest::qemu_pid`]), so other
//! QEMUs on the machine are never measured. A guest that busy-polls costs about
//! one host core (100%); one that halts costs little. The figure is reported, never judged: a
//! timing does not fail a test.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::proc_stat::{ProcStat, ticks_to_duration};

/// How long an idle guest is left alone while QEMU's CPU time is measured.
pub const IDLE_WINDOW: Duration = Duration::from_secs(10);

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
    pub(crate) fn core_percent(&self) -> f64 {
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

fn cpu_ticks(pid: u32) -> Result<u64> {
    Ok(ProcStat::read(pid)?.cpu_ticks)
}

/// Measures QEMU (process `pid`) across `window` of idleness.
pub fn measure(pid: u32, window: Duration) -> Result<IdleCpu> {
    let (start, before) = (Instant::now(), cpu_ticks(pid)?);
    std::thread::sleep(window);
    let (after, wall) = (cpu_ticks(pid)?, start.elapsed());
    let ticks = after.checked_sub(before).ok_or_else(|| Error::Proc {
        what: format!("/proc/{pid}/stat"),
        reason: "QEMU's CPU time went backwards".into(),
    })?;
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
