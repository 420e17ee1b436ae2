//! The contract between the midlayer and a host adapter driver (Linux `scsi_host_template` plus
//! `queuecommand`, reshaped for polling).
//!
//! A command handed to [`ScsiHost::queue_command`] is a borrowed view of a midlayer command slot:
//! its tag, I_T_L nexus, CDB, direction, data buffer and the 96-byte sense buffer the midlayer
//! allocated for it (from the [`crate::sense_alloc`] allocator). The buffers stay owned by the midlayer and stay put until the command
//! completes or is aborted, which is what lets a DMA driver post their addresses. The data buffer
//! is described to the device as 4 KiB segments ([`SEGMENT_BYTES`]), at most `sg_tablesize` of
//! them; the kernel maps memory identity, so each segment is physically contiguous.
//!
//! Completions come back in batches: [`ScsiHost::poll`] pushes any number of [`HostCompletion`]s
//! into a vector the midlayer preallocated, so one poll can retire a whole used ring. Drivers whose
//! device returns sense in its own response structure (virtio-scsi) copy it into the command's
//! sense buffer during `poll` through [`InFlight`].

use crate::sense_alloc::SenseStorage;
use crate::wire::{CdbBytes, Lun, Status, Tag};
use alloc::vec::Vec;

/// The size of one scatter-gather segment: a page.
pub const SEGMENT_BYTES: usize = 4096;

/// Limits a host adapter declares (Linux `struct scsi_host_template`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTemplate {
    /// Commands the host accepts at once; tags are `0..can_queue`.
    pub can_queue: u16,
    /// Commands in flight per logical unit.
    pub cmd_per_lun: u16,
    /// Scatter-gather segments per command.
    pub sg_tablesize: u16,
    /// Largest transfer per command, in 512-byte sectors.
    pub max_sectors: u32,
    /// Targets are `0..max_target`.
    pub max_target: u16,
    /// LUN indexes probed by a sequential scan are `0..max_lun`.
    pub max_lun: u16,
}

/// Data transfer direction (Linux `dma_data_direction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    None,
    /// Device to memory (READ).
    FromDevice,
    /// Memory to device (WRITE).
    ToDevice,
}

/// One command as the host sees it at queue time.
pub struct ScsiCmd<'a> {
    pub tag: Tag,
    pub target: u16,
    pub lun: Lun,
    pub cdb: &'a CdbBytes,
    pub direction: DataDirection,
    /// The data buffer; empty for no-data commands. See [`ScsiCmd::segments`].
    pub data: &'a mut [u8],
    /// The command's 96-byte sense buffer: store the device's sense data here (or give the
    /// device its bus address) and report the length in the completion.
    pub sense: &'a mut dyn SenseStorage,
}

impl core::fmt::Debug for ScsiCmd<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScsiCmd")
            .field("tag", &self.tag)
            .field("target", &self.target)
            .field("lun", &self.lun)
            .field("cdb", &self.cdb.as_slice())
            .field("direction", &self.direction)
            .field("data_len", &self.data.len())
            .finish()
    }
}

impl ScsiCmd<'_> {
    /// The scatter-gather list: the data buffer in [`SEGMENT_BYTES`] pieces.
    pub fn segments(&mut self) -> impl Iterator<Item = &mut [u8]> {
        self.data.chunks_mut(SEGMENT_BYTES)
    }

    /// Number of scatter-gather segments.
    pub fn segment_count(&self) -> usize {
        self.data.len().div_ceil(SEGMENT_BYTES)
    }
}

/// Host-level failure of a command, independent of SCSI status (Linux host byte, `DID_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// No such target (`DID_NO_CONNECT`/`DID_BAD_TARGET`).
    #[error("no such target")]
    NoConnect,
    /// The host is busy; requeue (`DID_BUS_BUSY`).
    #[error("host bus busy")]
    Busy,
    /// The transport lost the command; retryable (`DID_ERROR`, `DID_SOFT_ERROR`).
    #[error("transport error")]
    Transport,
    /// The device transferred more than the buffer holds, or in the wrong direction.
    #[error("data overrun or direction mismatch")]
    DataOverrun,
    /// The command was terminated by a reset (`DID_RESET`); retryable.
    #[error("terminated by reset")]
    Reset,
    /// The host adapter is dead (an earlier reset failed); the command never reached the
    /// device. Not retried (`DID_NO_CONNECT` on an offlined host).
    #[error("host adapter is dead")]
    Dead,
    /// The command was outstanding when a reset of the host failed: the device may still
    /// write its data buffer, so the midlayer leaks that buffer instead of handing it back
    /// (a careful driver never frees memory a device may still DMA into). Not retried.
    #[error("outstanding when the host reset failed; data buffer leaked")]
    ResetFailed,
}

/// The end of one command, reported by [`ScsiHost::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCompletion {
    pub tag: Tag,
    /// The raw status byte from the device; the midlayer validates it.
    pub status: u8,
    /// Bytes of the data buffer not transferred.
    pub residual_bytes: u32,
    /// Valid bytes in the command's sense buffer (0 when none).
    pub sense_len: u8,
    /// Set when the host, not the device, failed the command.
    pub host_error: Option<HostError>,
}

impl HostCompletion {
    /// GOOD status, nothing left over.
    #[inline]
    pub fn good(tag: Tag) -> HostCompletion {
        HostCompletion {
            tag,
            status: Status::Good.code(),
            residual_bytes: 0,
            sense_len: 0,
            host_error: None,
        }
    }

    /// A host-level failure.
    pub fn host_error(tag: Tag, error: HostError) -> HostCompletion {
        HostCompletion {
            host_error: Some(error),
            ..HostCompletion::good(tag)
        }
    }
}

/// Why [`ScsiHost::queue_command`] did not take a command (`SCSI_MLQUEUE_*_BUSY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The host has no room now; the midlayer requeues after a completion.
    #[error("host busy")]
    HostBusy,
}

/// Why [`ScsiHost::abort`] failed; the midlayer escalates to [`ScsiHost::reset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("abort of tag {0:?} failed")]
pub struct AbortFailed(pub Tag);

/// Why [`ScsiHost::reset`] failed: the device may still be using the buffers of outstanding
/// commands, so none of them may be freed or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("host reset failed: {reason}")]
pub struct HostResetFailed {
    /// What the adapter saw (for example, the device never finished its reset).
    pub reason: &'static str,
}

/// Access to the buffers of in-flight commands during [`ScsiHost::poll`].
pub trait InFlight {
    /// The sense buffer of in-flight command `tag`, `None` if `tag` is not in flight.
    fn sense_mut(&mut self, tag: Tag) -> Option<&mut dyn SenseStorage>;
    /// The data buffer of in-flight command `tag`.
    fn data_mut(&mut self, tag: Tag) -> Option<&mut [u8]>;
}

/// A host adapter driver.
///
/// Contract: after `queue_command` returns `Ok`, the host reports exactly one completion for that
/// tag through `poll`, unless `abort` for the tag returns `Ok` or `reset` runs first, after which
/// it reports none. The midlayer treats completions for tags it does not have in flight as device
/// bugs: it counts and drops them.
pub trait ScsiHost {
    /// The host's limits; read once when the midlayer attaches.
    fn template(&self) -> HostTemplate;

    /// Starts a command. The buffers in `cmd` stay valid until the completion is polled.
    fn queue_command(&mut self, cmd: ScsiCmd<'_>) -> Result<(), QueueError>;

    /// Pushes finished commands to `done` (as many as are ready) and returns how many.
    fn poll(&mut self, inflight: &mut dyn InFlight, done: &mut Vec<HostCompletion>) -> usize;

    /// Aborts one command (ABORT TASK). `Ok` means no completion for `tag` will follow.
    fn abort(&mut self, tag: Tag) -> Result<(), AbortFailed>;

    /// Resets the host: every outstanding command is dropped without a completion.
    ///
    /// `Err` means the device could not be shown to have stopped: the outstanding commands'
    /// buffers must never be freed or reused (the midlayer fails them with
    /// [`HostError::ResetFailed`] and leaks their data), and the host is dead from then on
    /// (later commands complete with [`HostError::Dead`]).
    fn reset(&mut self) -> Result<(), HostResetFailed>;

    /// Pushes the changes of the host's logical units that the adapter reported by itself
    /// since the last call (virtio-scsi's event queue; Linux `virtscsi_handle_event`). Hosts
    /// without such notices report nothing. The addresses come from the device: the caller
    /// checks them against the template before acting on them.
    fn poll_events(&mut self, out: &mut Vec<HostEvent>) {
        let _ = out;
    }
}

/// A change of the host's logical units, reported by the adapter (hot-plug).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEvent {
    /// A logical unit appeared: scan it (Linux `scsi_add_device`).
    Added {
        /// Target.
        target: u16,
        /// LUN.
        lun: Lun,
    },
    /// A logical unit went away (Linux `scsi_remove_device`).
    Removed {
        /// Target.
        target: u16,
        /// LUN.
        lun: Lun,
    },
    /// The adapter lost notices: scan everything again (Linux `scsi_scan_host`).
    RescanAll,
}
