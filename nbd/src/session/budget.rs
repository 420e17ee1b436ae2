//! How much work one turn of a session may do, and the requests that span turns.

/// How much one call of [`super::Session::step_within`] may do: commands started and bytes moved to or
/// from the export. The call stops before starting work once either is spent; the piece of work
/// it starts may overshoot (a 256 KiB piece against 4 KiB left), so every call makes progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Requests (and options) that may still be started.
    pub commands: u32,
    /// Bytes that may still move to or from the export.
    pub bytes: u64,
}

impl Budget {
    /// No limit ([`super::Session::step`]: tests, and a blocking driver with one session).
    pub const UNLIMITED: Budget = Budget {
        commands: u32::MAX,
        bytes: u64::MAX,
    };

    /// Whether nothing more may be started.
    pub fn spent(&self) -> bool {
        self.commands == 0 || self.bytes == 0
    }

    pub(super) fn charge_command(&mut self) {
        self.commands = self.commands.saturating_sub(1);
    }

    pub(super) fn charge_bytes(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// A WRITE_ZEROES in progress: `offset..end` is still to be written.
#[derive(Debug, Clone, Copy)]
pub(super) struct ZeroRun {
    pub handle: u64,
    pub offset: u64,
    pub end: u64,
    pub fua: bool,
}

/// A WRITE whose payload is being taken: `remaining` bytes of it are still to come.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteRun {
    pub handle: u64,
    /// Where the next piece goes.
    pub offset: u64,
    pub remaining: u64,
    pub len: u32,
    pub fua: bool,
    /// The reply's error: set before the first piece when the request cannot run (the payload
    /// is then only drained), or by the first piece that fails (the rest is drained).
    pub error: Option<super::Errno>,
}

/// A READ being sent: `offset..end` is still to be read into the output.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadRun {
    pub offset: u64,
    pub end: u64,
    pub len: u32,
}

/// An option too long to hold: `remaining` bytes of its data are still to be dropped before it
/// is answered `NBD_REP_ERR_TOO_BIG`.
#[derive(Debug, Clone, Copy)]
pub(super) struct OptionDrain {
    pub option: u32,
    pub remaining: u32,
}
