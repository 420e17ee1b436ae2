//! A byte-addressed [`Export`] over a block device: requests on the block grid go straight to
//! the device; the partial blocks at either end of an unaligned request are read, patched and
//! written back (the server advertises a 512-byte minimum block size, so well-behaved clients
//! never need this, but the protocol does not forbid it). SCSI errors become NBD errno values
//! here ([`errno_for`]).
//!
//! FLUSH coalesces: the export remembers whether anything was written since the last successful
//! SYNCHRONIZE CACHE, and a flush with nothing written since is answered without a command, so
//! a client flooding FLUSH costs one cache flush per write it follows, not one per request. (All
//! requests run to completion one after another, so "written since" covers every write any client
//! has had acknowledged.) [`BlockExport::sync_cache`] always sends the command.
//!
//! [`MidlayerDisk`] is the block device both guests export: a scanned disk on the SCSI midlayer.

use alloc::vec;

use scsi::midlayer::ScsiError;

mod midlayer;

pub use midlayer::MidlayerDisk;
use scsi::wire::SenseKey;

use crate::session::{Export, ZERO_CHUNK_BYTES};
use crate::wire::Errno;

/// What [`BlockExport`] needs from a disk. Ranges are whole blocks within the disk.
pub trait BlockDevice {
    /// Logical block size in bytes (a power of two).
    fn block_bytes(&self) -> u32;
    /// Number of logical blocks.
    fn blocks(&self) -> u64;
    /// Reads `buf.len()` bytes (a multiple of the block size) from `lba`.
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ScsiError>;
    /// Writes `data` (a multiple of the block size) at `lba`.
    fn write_blocks(&mut self, lba: u64, data: &[u8]) -> Result<(), ScsiError>;
    /// SYNCHRONIZE CACHE over the whole medium.
    fn flush(&mut self) -> Result<(), ScsiError>;
}

/// The NBD error for a failed SCSI command or block operation.
pub fn errno_for(error: &ScsiError) -> Errno {
    match error {
        ScsiError::CheckCondition { key, asc, ascq, .. } => match *key {
            // SPACE ALLOCATION FAILED WRITE PROTECT: the backing store is full (QEMU's answer
            // to a host ENOSPC under werror=report). Linux fails such an I/O with ENOSPC too
            // (scsi_check_sense: "thin provisioning hard threshold reached").
            SenseKey::DataProtect if (*asc, *ascq) == (0x27, 0x07) => Errno::ENOSPC,
            SenseKey::DataProtect => Errno::EPERM,
            // LBA out of range (21h) or invalid field in CDB (24h): the request was wrong.
            SenseKey::IllegalRequest if matches!(asc, 0x21 | 0x24) => Errno::EINVAL,
            // Medium, hardware, not ready, aborted, a command the device refuses, ...: the
            // data could not be moved. (The protocol reserves ENOTSUP for fast-zero requests.)
            _ => Errno::EIO,
        },
        ScsiError::OutOfRange { .. } | ScsiError::BadBufferLength { .. } => Errno::EINVAL,
        // A piece larger than the adapter moves is this server's failure, not the client's
        // (the protocol reserves EOVERFLOW for structured reads and payload-less commands).
        ScsiError::TransferTooLarge { .. } => Errno::EIO,
        ScsiError::SenseUnavailable | ScsiError::QueueFull => Errno::ENOMEM,
        _ => Errno::EIO,
    }
}

/// An [`Export`] over a [`BlockDevice`].
#[derive(Debug)]
pub struct BlockExport<D> {
    device: D,
    /// Something was written (or a write was attempted) since the last successful flush.
    dirty: bool,
    /// SYNCHRONIZE CACHE commands sent.
    cache_syncs: u64,
}

impl<D: BlockDevice> BlockExport<D> {
    /// Wraps `device`.
    pub fn new(device: D) -> Self {
        BlockExport {
            device,
            // The disk's cache state before this export is unknown.
            dirty: true,
            cache_syncs: 0,
        }
    }

    /// SYNCHRONIZE CACHE now, whatever was written (the final flush at shutdown).
    pub fn sync_cache(&mut self) -> Result<(), Errno> {
        self.cache_syncs += 1;
        self.device.flush().map_err(|e| errno_for(&e))?;
        self.dirty = false;
        Ok(())
    }

    /// SYNCHRONIZE CACHE commands sent so far (flushes answered without one are not counted).
    pub fn cache_syncs(&self) -> u64 {
        self.cache_syncs
    }

    /// The device, for counters.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, to change it between requests (hot-plug handling, tests).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// `offset..offset+len` widened to whole blocks: (first LBA, bytes).
    fn widen(&self, offset: u64, len: usize) -> (u64, usize) {
        let block = u64::from(self.device.block_bytes());
        let start = offset / block * block;
        let end = (offset + len as u64).div_ceil(block) * block;
        (start / block, (end - start) as usize)
    }

    fn is_aligned(&self, offset: u64, len: usize) -> bool {
        let block = u64::from(self.device.block_bytes());
        offset % block == 0 && len as u64 % block == 0
    }

    fn write_inner(&mut self, offset: u64, data: &[u8]) -> Result<(), ScsiError> {
        // Before the command: a failed write may still have changed the medium's cache.
        self.dirty = true;
        if self.is_aligned(offset, data.len()) {
            let lba = offset / u64::from(self.device.block_bytes());
            return self.device.write_blocks(lba, data);
        }
        let (lba, bytes) = self.widen(offset, data.len());
        let mut bounce = vec![0u8; bytes];
        self.device.read_blocks(lba, &mut bounce)?;
        let skip = (offset - lba * u64::from(self.device.block_bytes())) as usize;
        bounce[skip..skip + data.len()].copy_from_slice(data);
        self.device.write_blocks(lba, &bounce)
    }
}

impl<D: BlockDevice> Export for BlockExport<D> {
    fn size_bytes(&self) -> u64 {
        self.device
            .blocks()
            .saturating_mul(u64::from(self.device.block_bytes()))
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return Ok(());
        }
        if self.is_aligned(offset, buf.len()) {
            let lba = offset / u64::from(self.device.block_bytes());
            return self.device.read_blocks(lba, buf).map_err(|e| errno_for(&e));
        }
        let (lba, bytes) = self.widen(offset, buf.len());
        let mut bounce = vec![0u8; bytes];
        self.device
            .read_blocks(lba, &mut bounce)
            .map_err(|e| errno_for(&e))?;
        let skip = (offset - lba * u64::from(self.device.block_bytes())) as usize;
        buf.copy_from_slice(&bounce[skip..skip + buf.len()]);
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        if !data.is_empty() {
            self.write_inner(offset, data).map_err(|e| errno_for(&e))?;
        }
        if fua { self.flush() } else { Ok(()) }
    }

    fn write_zeroes(&mut self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let chunk = ZERO_CHUNK_BYTES;
        let zeroes = vec![0u8; chunk.min(len) as usize];
        let mut done = 0;
        while done < len {
            let now = chunk.min(len - done) as usize;
            self.write_inner(offset + done, &zeroes[..now])
                .map_err(|e| errno_for(&e))?;
            done += now as u64;
        }
        if fua { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<(), Errno> {
        if self.dirty {
            self.sync_cache()
        } else {
            Ok(())
        }
    }
}
