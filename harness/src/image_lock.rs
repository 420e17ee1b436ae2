//! Who holds a disk image. QEMU takes OFD locks on its images, which `/proc/locks` lists with pid
//! -1, so the holder is found the way `fuser` does: the processes with the file open among their
//! `/proc/PID/fd` links. Used when QEMU or `qemu-img` fails with `Failed to get "write" lock`
//! (a QEMU left running by a killed run), so the message can name the process to stop.

use std::path::Path;

/// QEMU's words when another process holds an image's lock.
pub(crate) const LOCK_ERROR: &str = "Failed to get \"write\" lock";

/// (pid, command line) of every other process with `image` open.
pub fn holders(image: &Path) -> Vec<(u32, String)> {
    let Ok(target) = image.canonicalize() else {
        return Vec::new();
    };
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let open = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|link| link == target));
        if open {
            let cmdline = std::fs::read(entry.path().join("cmdline"))
                .map(|raw| {
                    String::from_utf8_lossy(&raw)
                        .split('\0')
                        .filter(|w| !w.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            found.push((pid, cmdline));
        }
    }
    found
}

/// A sentence naming the holders of `image`, for a lock error.
pub fn explain(image: &Path) -> String {
    let holders = holders(image);
    if holders.is_empty() {
        return format!(
            "{} is locked by another process (none found in /proc; it may have just exited)",
            image.display()
        );
    }
    let list: Vec<String> = holders
        .iter()
        .map(|(pid, cmdline)| {
            let short: String = cmdline.chars().take(120).collect();
            format!("PID {pid} ({short})")
        })
        .collect();
    format!(
        "{} is locked by {}; a QEMU left by a killed run? stop it with `kill {}`",
        image.display(),
        list.join(", "),
        holders
            .iter()
            .map(|(pid, _)| pid.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_process_holding_a_file_is_named() {
        let dir = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("held.raw");
        std::fs::write(&file, b"x").unwrap();
        // `sleep` with the file open on its stdin stands in for a QEMU holding its image.
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::from(std::fs::File::open(&file).unwrap()))
            .spawn()
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..50 {
            seen = holders(&file);
            if !seen.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(seen.iter().any(|(pid, _)| *pid == child.id()), "{seen:?}");
        assert!(explain(Path::new("/nonexistent/x.raw")).contains("locked by another process"));
    }
}
