//! Conformance checks against Linux itself: the same inputs sent to one of our components and
//! to its Linux counterpart in a stock kernel, the answers compared field by field.
//! [`scsi_debug`]: our scsi_debug target against Linux 6.12's module.

pub mod scsi_debug;

/// `cargo xtask conformance ...`.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Raw CDBs to Linux 6.12's scsi_debug (SG_IO in a stock guest) and to ours
    /// (`ScsiDebug::from_params`, same parameters); one line per differing field and a
    /// summary. Fails on any difference outside the reasoned allow-list.
    ScsiDebug(scsi_debug::Options),
}

/// Runs `command`; `Ok(true)` when it found no difference outside its allow-list.
pub fn run(command: &Command) -> harness::error::Result<bool> {
    match command {
        Command::ScsiDebug(options) => scsi_debug::run(options),
    }
}
