//! Host CPU the guest costs while its NBD server idles: QEMU's user + system time from
//! `/proc/PID/stat` (fields 14 and 15, all threads, in clock ticks) across a window in which no
//! client talks to it. The QEMU process is the one whose command line forwards this run's NBD
//! port, so other QEMUs on the machine are never measured. A guest that busy-polls costs about
//! one host core (100%); one that halts costs little. The figure is reported, never judged: a
//! timing does not fail a test.

use std::time::{Duration, Instant};

/// Linux's `USER_HZ`, the unit of `/proc/PID/stat` times: 100 on x86 (a fixed user ABI).
const TICKS_PER_SECOND: u64 = 100;

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

/// User + system ticks from the text of `/proc/PID/stat`. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_cpu_ticks(stat: &str) -> Result<u64, String> {
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| format!("no ')' in /proc stat line {stat:?}"))?;
    // After ')' come field 3 (state) onwards: utime is field 14, stime field 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |number: usize| -> Result<u64, String> {
        fields
            .get(number - 3)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| format!("field {number} missing or not a number in {stat:?}"))
    };
    Ok(field(14)? + field(15)?)
}

fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    parse_cpu_ticks(&stat)
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
        cpu: Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let stat = "4242 (qemu (x) y) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_cpu_ticks(stat), Ok(281));
        assert!(parse_cpu_ticks("4242 (qemu) S 1 2").is_err());
        assert!(parse_cpu_ticks("no parenthesis").is_err());
    }

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
