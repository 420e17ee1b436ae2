//! Running host programs: every command xtask starts goes through here, so each one is echoed the
//! same way (`+ program args…` on stderr) and fails with the same facts (the command and its status).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::error::{Error, Result};

/// The command as a user would type it, for messages.
pub fn describe(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    for arg in command.get_args() {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains([' ', '"', '\'']) {
            words.push(format!("'{}'", arg.replace('\'', "'\\''")));
        } else {
            words.push(arg.into_owned());
        }
    }
    words.join(" ")
}

/// Runs `command` with inherited stdio (stdin closed) and fails unless it exits 0.
pub fn run(command: &mut Command) -> Result<()> {
    let described = describe(command);
    eprintln!("+ {described}");
    let status = command
        .stdin(Stdio::null())
        .status()
        .map_err(|source| Error::Spawn {
            command: described.clone(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::CommandFailed {
            command: described,
            status,
        })
    }
}

/// Echoes and starts `command` (stdin closed; the caller sets up stdout and stderr) and returns
/// the child with the command as a user would type it, for the caller's messages.
pub fn spawn(command: &mut Command) -> Result<(Child, String)> {
    let described = describe(command);
    eprintln!("+ {described}");
    let child = command
        .stdin(Stdio::null())
        .spawn()
        .map_err(|source| Error::Spawn {
            command: described.clone(),
            source,
        })?;
    Ok((child, described))
}

/// Runs `command` quietly and returns its stdout, failing unless it exits 0.
pub fn output(command: &mut Command) -> Result<String> {
    let described = describe(command);
    let out = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| Error::Spawn {
            command: described.clone(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::CommandFailed {
            command: described,
            status: out.status,
        })
    }
}

/// Finds `program` on `PATH`, as a shell would.
pub(crate) fn find_on_path(program: impl AsRef<OsStr>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program.as_ref()))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The cargo that runs xtask (so nested builds use the same toolchain), or `cargo` from PATH.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}
