//! What a person sees while a guest runs, and where the rest goes.
//!
//! `cargo xtask run` and the benches show the guest's human lines live (its log and summary
//! lines). Machine lines (`RESULT`, `BOOT`, `VERIFY-PLAN`, `TEST-LIST` JSON) and the QEMU
//! command line go only to a log file under `target/logs/`, which also keeps every human line,
//! so the log is the whole console; the command names it at the end. `--verbose` shows
//! everything live as well.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::console::{self, Line};
use crate::error::{Error, Result};
use crate::workspace;

static VERBOSE: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<Option<(PathBuf, File)>> = Mutex::new(None);

/// Shows machine lines live too (`--verbose`).
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether machine lines are shown live.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Starts (truncating) `target/logs/<name>.log` and returns its path.
pub fn open(name: &str) -> Result<PathBuf> {
    let path = workspace::output_dir("logs")?.join(format!("{name}.log"));
    let file = File::create(&path).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    *LOG.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((path.clone(), file));
    Ok(path)
}

/// The open log's path, if any.
pub fn path() -> Option<PathBuf> {
    LOG.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .map(|(path, _)| path.clone())
}

/// Appends `line` to the log, if one is open. A log that cannot be written loses lines, never
/// the run.
pub fn write(line: &str) {
    if let Some((_, file)) = LOG
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_mut()
    {
        let _ = writeln!(file, "{line}");
    }
}

/// Names the open log, if any, once the command is done: the whole console is there.
pub fn announce() {
    let Some(path) = path() else {
        return;
    };
    let root = workspace::root();
    eprintln!(
        "xtask: the whole console, with the RESULT lines, is in {}{}",
        path.strip_prefix(&root).unwrap_or(&path).display(),
        if verbose() {
            ""
        } else {
            " (--verbose shows it live)"
        }
    );
}

/// Whether a console line is for xtask rather than for a person.
pub(crate) fn is_machine_line(line: &str) -> bool {
    matches!(
        console::classify(line),
        Line::Result(_) | Line::Boot(_) | Line::VerifyPlan(_) | Line::TestList(_)
    )
}

/// Whether a console line is shown live (the log gets every line); `summary_only` also hides
/// the guest's timestamped log lines (`[    0.042329] …`).
pub fn shown(line: &str, summary_only: bool) -> bool {
    verbose() || !(is_machine_line(line) || summary_only && line.starts_with('['))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_lines_are_kept_from_people() {
        assert!(is_machine_line(r#"RESULT {"iops": 1}"#));
        assert!(is_machine_line(r#"BOOT {"kernel": "x"}"#));
        assert!(is_machine_line(r#"VERIFY-PLAN {"disk": "d0"}"#));
        assert!(is_machine_line(r#"TEST-LIST {"name": "t"}"#));
        assert!(!is_machine_line(
            "fake-rw: randread bs=4096 iodepth=32: 296049 IOPS"
        ));
        assert!(!is_machine_line("test pools ... ok"));
        assert!(!is_machine_line("PANIC at kernel/src/main.rs:1"));
        assert!(!is_machine_line("1 passed, 0 failed"));
    }

    #[test]
    fn summaries_hide_the_timestamped_log() {
        let log = "[    0.042329]   [mem 0x000000fd00000000-0x000000ffffffffff] reserved";
        assert!(shown(log, false));
        assert!(!shown(log, true));
        assert!(shown("fake-rw: randread bs=4096: 206173 IOPS", true));
        assert!(!shown(r#"RESULT {"iops": 1}"#, false));
    }
}
