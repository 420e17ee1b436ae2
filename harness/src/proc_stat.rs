//! A process's `/proc/PID/stat` line (proc(5)), parsed in one place: its state, parent, and the
//! CPU time it and its waited-for children used. Benchmarks read it to show how many host CPUs
//! QEMU actually got, and the NBD idle test to show what an idle guest costs.
//!
//! The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so
//! every later field is counted after the line's *last* `)`. Times are in clock ticks of
//! [`USER_HZ`].

use std::time::Duration;

use crate::error::{Error, Result};

/// Linux's `USER_HZ`, the unit of every `/proc/PID/stat` time: 100 on x86 (a fixed user ABI,
/// unlike the kernel's internal `HZ`).
pub(crate) const USER_HZ: u64 = 100;

/// The fields of one `/proc/PID/stat` line that xtask uses (proc(5) numbering).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 2, `comm`, without its parentheses.
    pub name: String,
    /// Field 3, `state` (`R`, `S`, `Z`, ...).
    pub state: char,
    /// Field 4, `ppid`.
    pub parent_pid: u32,
    /// Fields 14 and 15, `utime` + `stime`: this process, all threads, in ticks.
    pub cpu_ticks: u64,
    /// Fields 16 and 17, `cutime` + `cstime`: its waited-for children, in ticks.
    pub children_cpu_ticks: u64,
}

impl ProcStat {
    /// Parses the text of a `/proc/PID/stat` file; an error names the field that is missing or
    /// not a number.
    pub fn parse(stat: &str) -> Result<Self> {
        let bad = |reason: String| Error::Proc {
            what: format!("/proc stat line {stat:?}"),
            reason,
        };
        let (head, rest) = stat.rsplit_once(')').ok_or_else(|| bad("no ')'".into()))?;
        let name = head.split_once('(').ok_or_else(|| bad("no '('".into()))?.1;
        // After ')' come field 3 (state) onwards.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |number: usize| -> Result<u64> {
            fields
                .get(number - 3)
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| bad(format!("field {number} missing or not a number")))
        };
        let state = fields
            .first()
            .and_then(|state| state.chars().next())
            .ok_or_else(|| bad("field 3 (state) missing".into()))?;
        let parent_pid =
            u32::try_from(field(4)?).map_err(|_| bad("field 4 (ppid) out of range".into()))?;
        Ok(Self {
            name: name.to_owned(),
            state,
            parent_pid,
            cpu_ticks: field(14)? + field(15)?,
            children_cpu_ticks: field(16)? + field(17)?,
        })
    }

    /// Reads and parses `/proc/PID/stat`.
    pub fn read(pid: u32) -> Result<Self> {
        Self::read_path(&format!("/proc/{pid}/stat"))
    }

    /// Reads and parses this process's own `/proc/self/stat`.
    pub fn read_self() -> Result<Self> {
        Self::read_path("/proc/self/stat")
    }

    fn read_path(path: &str) -> Result<Self> {
        let stat = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.into(),
            source,
        })?;
        Self::parse(&stat)
    }

    /// Whether the process has exited (a zombie, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// The processes whose parent is `parent` and whose command name starts with `name` (the
/// kernel keeps 15 bytes of it: `qemu-system-x86`), by pid.
pub fn children_named(parent: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&pid| {
            ProcStat::read(pid)
                .is_ok_and(|stat| stat.parent_pid == parent && stat.name.starts_with(name))
        })
        .collect();
    children.sort_unstable();
    children
}

/// `ticks` of [`USER_HZ`] as a duration.
pub(crate) fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_millis(ticks * 1000 / USER_HZ)
}

/// `ticks` of [`USER_HZ`] in seconds.
pub fn ticks_to_seconds(ticks: f64) -> f64 {
    ticks / USER_HZ as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_after_the_last_parenthesis() {
        let stat = "4242 (qemu (x) y) S 1 2 3 4 5 6 7 8 9 10 250 31 7 5 20 0 9 0 100 0 0";
        let parsed = ProcStat::parse(stat).unwrap();
        assert_eq!(parsed.name, "qemu (x) y");
        assert_eq!(parsed.state, 'S');
        assert_eq!(parsed.parent_pid, 1);
        assert_eq!(parsed.cpu_ticks, 281);
        assert_eq!(parsed.children_cpu_ticks, 12);
        assert!(!parsed.exited());
    }

    #[test]
    fn a_short_or_malformed_line_is_an_error_naming_the_field() {
        let short = ProcStat::parse("4242 (qemu) S 1 2")
            .unwrap_err()
            .to_string();
        assert!(short.contains("field 14"), "{short}");
        assert!(ProcStat::parse("no parenthesis").is_err());
        assert!(ProcStat::parse("1 (x)").is_err());
        let bad = ProcStat::parse("1 (x) S 1 2 3 4 5 6 7 8 9 10 a 0 0 0")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("field 14"), "{bad}");
    }

    #[test]
    fn this_process_reads_its_own_line() {
        let me = ProcStat::read_self().unwrap();
        assert!(!me.exited());
        assert_eq!(
            ProcStat::read(std::process::id()).unwrap().parent_pid,
            me.parent_pid
        );
    }

    #[test]
    fn ticks_are_hundredths_of_a_second() {
        assert_eq!(ticks_to_duration(250), Duration::from_millis(2500));
        assert!((ticks_to_seconds(50.0) - 0.5).abs() < 1e-12);
    }
}
