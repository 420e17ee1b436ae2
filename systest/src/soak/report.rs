//! The soak's summary: the verdict, the table and `target/bench/soak.json`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Tally, kill};
use harness::error::{Error, Result};
use harness::workspace;

/// What a soak found.
pub struct Report {
    pub duration: Duration,
    pub clients: u64,
    pub tally: Tally,
    pub bad_sectors: u64,
    pub garbage_connections: u64,
    pub hotplug_cycles: u64,
    pub hotplug_errors: Vec<String>,
    /// The first connection errors of each client.
    pub connection_errors: Vec<String>,
    pub lost_acknowledged: u64,
    pub image_blocks_checked: u64,
    pub kill: kill::KillReport,
    /// The `ListenOverflows` delta over the run (host listeners dropping a client's handshake).
    pub listen_overflows: std::result::Result<u64, String>,
    /// Whether the run had a network namespace of its own (then the delta is its own).
    pub isolated: std::result::Result<(), String>,
}

impl Report {
    /// Zero mismatches, lost writes, missed errors and broken connections in both phases, and
    /// no listen overflow in the run's own network namespace: the soak's clients never hang up
    /// unannounced except where counted as `hang_ups`, so any other broken connection (a missing
    /// greeting, a reset, a reply that never came) is unexplained.
    pub fn verdict(&self) -> std::result::Result<(), String> {
        let t = &self.tally;
        let mut wrong = Vec::new();
        if t.connection_errors > 0 {
            wrong.push(format!(
                "{} connections broken or never greeted",
                t.connection_errors
            ));
        }
        match (&self.isolated, &self.listen_overflows) {
            (Ok(()), Ok(0)) => {}
            (Ok(()), Ok(overflows)) => {
                wrong.push(format!("{overflows} listen overflows on the host"));
            }
            (Ok(()), Err(e)) => wrong.push(format!("ListenOverflows unreadable: {e}")),
            // In the host's namespace other runs' listeners count too: reported, not judged.
            (Err(_), _) => {}
        }
        if t.mismatches > 0 {
            wrong.push(format!("{} mismatched blocks", t.mismatches));
        }
        if self.lost_acknowledged > 0 {
            wrong.push(format!(
                "{} acknowledged blocks lost",
                self.lost_acknowledged
            ));
        }
        if t.missed_errors > 0 {
            wrong.push(format!("{} injected errors not reported", t.missed_errors));
        }
        if t.wrong_errno > 0 {
            wrong.push(format!(
                "{} writes to a full disk not answered ENOSPC",
                t.wrong_errno
            ));
        }
        if self.kill.lost > 0 {
            wrong.push(format!("{} flushed blocks lost by kill -9", self.kill.lost));
        }
        if self.kill.reread_mismatches > 0 {
            wrong.push(format!(
                "{} blocks differ after the restart",
                self.kill.reread_mismatches
            ));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join(", "))
        }
    }

    pub fn print(&self) {
        let t = &self.tally;
        let rows = [
            (
                "duration",
                format!(
                    "{:.1} min, {} clients",
                    self.duration.as_secs_f64() / 60.0,
                    self.clients
                ),
            ),
            ("reads", t.reads.to_string()),
            ("writes (FUA)", format!("{} ({})", t.writes, t.fua_writes)),
            ("flushes", t.flushes.to_string()),
            ("trims", t.trims.to_string()),
            ("write_zeroes", t.write_zeroes.to_string()),
            ("hang-ups mid-write", t.hang_ups.to_string()),
            (
                "connections broken under a request",
                t.connection_errors.to_string(),
            ),
            ("garbage connections", self.garbage_connections.to_string()),
            (
                "hot-plug cycles",
                format!(
                    "{} ({} errors)",
                    self.hotplug_cycles,
                    self.hotplug_errors.len()
                ),
            ),
            ("failing sectors injected", self.bad_sectors.to_string()),
            (
                "injected errors seen by clients",
                t.injected_errors_seen.to_string(),
            ),
            ("other errors seen by clients", t.other_errors.to_string()),
            ("injected errors missed", t.missed_errors.to_string()),
            (
                "disk-full writes answered ENOSPC (otherwise)",
                format!("{} ({})", t.disk_full_errors, t.wrong_errno),
            ),
            ("mismatches", t.mismatches.to_string()),
            (
                "final read-back blocks (unreadable)",
                format!("{} ({})", t.final_checked, t.final_unreadable),
            ),
            (
                "image blocks checked",
                self.image_blocks_checked.to_string(),
            ),
            (
                "lost acknowledged writes",
                self.lost_acknowledged.to_string(),
            ),
            (
                "kill -9 after flush: blocks checked",
                self.kill.checked.to_string(),
            ),
            ("kill -9 after flush: lost", self.kill.lost.to_string()),
            (
                "after restart: blocks differing",
                self.kill.reread_mismatches.to_string(),
            ),
            ("host ListenOverflows delta", self.overflows_text()),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (key, value) in rows {
            println!("{key:<width$}  {value}");
        }
        for error in &self.connection_errors {
            println!("connection error: {error}");
        }
        for error in &self.hotplug_errors {
            println!("hot-plug error: {error}");
        }
    }

    /// The `ListenOverflows` delta and whose listeners it counts.
    pub fn overflows_text(&self) -> String {
        let delta = match &self.listen_overflows {
            Ok(delta) => delta.to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        match &self.isolated {
            Ok(()) => format!("{delta} (own network namespace)"),
            Err(e) => format!("{delta} (whole host, other runs included: {e})"),
        }
    }

    fn to_json(&self) -> Value {
        let t = &self.tally;
        json!({
            "bench": "soak",
            "minutes": self.duration.as_secs_f64() / 60.0,
            "clients": self.clients,
            "ops": { "reads": t.reads, "writes": t.writes, "fua_writes": t.fua_writes,
                     "flushes": t.flushes, "trims": t.trims, "write_zeroes": t.write_zeroes,
                     "hang_ups": t.hang_ups },
            "connection_errors": t.connection_errors,
            "connection_error_messages": self.connection_errors,
            "garbage_connections": self.garbage_connections,
            "hotplug_cycles": self.hotplug_cycles,
            "hotplug_errors": self.hotplug_errors,
            "failing_sectors": self.bad_sectors,
            "injected_errors_seen": t.injected_errors_seen,
            "other_errors_seen": t.other_errors,
            "missed_errors": t.missed_errors,
            "disk_full_errors": t.disk_full_errors,
            "disk_full_wrong_errno": t.wrong_errno,
            "mismatches": t.mismatches,
            "final_checked_blocks": t.final_checked,
            "final_unreadable_blocks": t.final_unreadable,
            "image_blocks_checked": self.image_blocks_checked,
            "lost_acknowledged_writes": self.lost_acknowledged,
            "listen_overflows": self.listen_overflows.as_ref().ok(),
            "own_network_namespace": self.isolated.is_ok(),
            "kill_after_flush": { "checked": self.kill.checked, "lost": self.kill.lost,
                                  "reread_mismatches": self.kill.reread_mismatches },
        })
    }

    pub fn write_json(&self) -> Result<PathBuf> {
        let dir = workspace::output_dir("bench")?;
        let path = dir.join("soak.json");
        let text = serde_json::to_string_pretty(&self.to_json()).unwrap_or_default() + "\n";
        std::fs::write(&path, text).map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}
