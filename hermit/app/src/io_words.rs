//! `io_mode=poll|irq|hybrid` and `poll_us=N` on Hermit, with the sensepool kernel's meaning and
//! defaults (`kernel/src/cmdline`): `irq` wherever a device is driven (`verify`, `scan`,
//! `device`), `poll` for `fake-rw` (its in-memory host has no interrupt), hybrid's window 50 us
//! unless `poll_us=` says otherwise, and `poll_us=` with any other mode refused.

use alloc::string::{String, ToString};

use scsi::wait::IoMode;

use crate::{CmdlineError, Workload};

/// Hybrid's polling window when `poll_us=` is not given (the kernel's `DEFAULT_POLL_US`).
pub const DEFAULT_POLL_US: u32 = 50;
/// The longest `poll_us=` (the kernel's bound): one second.
const MAX_POLL_US: u32 = 1_000_000;

/// The two words as given.
#[derive(Debug, Default, Clone, Copy)]
pub struct IoWords {
    mode: Option<IoMode>,
    poll_us: Option<u32>,
}

impl IoWords {
    /// Takes `io_mode=` or `poll_us=`; `Ok(false)` for any other key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, CmdlineError> {
        let bad = |reason: &str| CmdlineError::IoWord {
            key: key.to_string(),
            value: value.to_string(),
            reason: String::from(reason),
        };
        match key {
            "io_mode" => {
                self.mode = Some(match value {
                    "poll" => IoMode::Poll,
                    "irq" => IoMode::Irq,
                    "hybrid" => IoMode::Hybrid { poll_us: 0 },
                    _ => return Err(bad("expected poll, irq or hybrid")),
                });
            }
            "poll_us" => {
                let us = value
                    .parse::<u32>()
                    .ok()
                    .filter(|us| *us <= MAX_POLL_US)
                    .ok_or_else(|| bad("expected microseconds from 0 to 1000000"))?;
                self.poll_us = Some(us);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The mode `workload` runs in; `poll_us=` without `io_mode=hybrid` is an error.
    pub fn resolve(self, workload: Workload) -> Result<IoMode, CmdlineError> {
        let mode = match self.mode {
            Some(IoMode::Hybrid { .. }) => IoMode::Hybrid {
                poll_us: self.poll_us.unwrap_or(DEFAULT_POLL_US),
            },
            Some(mode) => mode,
            // The NBD server polls its sockets anyway, and Hermit's network interrupt is
            // Hermit's own: its disk is polled too unless io_mode= says otherwise.
            None if matches!(workload, Workload::FakeRw | Workload::Nbd) => IoMode::Poll,
            None => IoMode::Irq,
        };
        match (self.poll_us, mode) {
            (Some(us), mode) if !matches!(mode, IoMode::Hybrid { .. }) => {
                Err(CmdlineError::IoWord {
                    key: String::from("poll_us"),
                    value: us.to_string(),
                    reason: alloc::format!(
                        "only io_mode=hybrid polls for a window (io_mode is {mode})"
                    ),
                })
            }
            _ => Ok(mode),
        }
    }
}
