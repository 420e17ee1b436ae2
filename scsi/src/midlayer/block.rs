//! Synchronous use of the midlayer: run one command to completion ([`Midlayer::execute`]), and
//! the block device API that reads and writes LBA ranges, split into commands no larger than
//! the host's `max_sectors` and `sg_tablesize` allow and kept up to `cmd_per_lun` deep.

use super::{Completion, DeviceId, Done, Midlayer, Request, ScsiError};
use crate::clock::Clock;
use crate::host::ScsiHost;
use crate::sense_alloc::SenseStorage;
use crate::wire::{BlockCount, Cdb, Lba};
use alloc::vec;
use alloc::vec::Vec;
use pools::ElementAllocator;

/// A direct-access logical unit ready for I/O (what a scan finds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    /// The logical unit.
    pub device: DeviceId,
    /// Logical block size in bytes.
    pub block_len: u32,
    /// Number of logical blocks.
    pub blocks: u64,
}

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    /// Submits `request` and polls until it completes; completions of other commands met on
    /// the way are kept for the next [`poll`](Self::poll). While the host is in error recovery
    /// the request waits to be taken, as one queued in the block layer does. Returns the result
    /// and the buffer.
    pub fn execute(&mut self, request: Request) -> (Result<Completion, ScsiError>, Vec<u8>) {
        let mut done = Vec::new();
        let mut request = request;
        let tag = loop {
            match self.submit(request) {
                Ok(tag) => break tag,
                Err(rejected) if rejected.error == ScsiError::HostInRecovery => {
                    request = rejected.request;
                    let mut stash = core::mem::take(&mut self.stash);
                    if self.poll(&mut stash) == 0 {
                        self.idle();
                    }
                    self.stash = stash;
                }
                Err(rejected) => return (Err(rejected.error), rejected.request.data),
            }
        };
        loop {
            // Poll with the stash held aside (a stashed Done may carry a recycled tag number).
            let mut stash = core::mem::take(&mut self.stash);
            self.poll(&mut done);
            let mine = done.iter().position(|d| d.tag == tag);
            if let Some(at) = mine {
                let Done { result, data, .. } = done.swap_remove(at);
                stash.append(&mut done);
                self.stash = stash;
                return (result, data);
            }
            stash.append(&mut done);
            self.stash = stash;
            self.idle();
        }
    }

    fn check_range(&self, disk: &Disk, lba: Lba, len_bytes: usize) -> Result<u64, ScsiError> {
        // A `Disk` is plain data a caller can build; a zero block length must not divide.
        if disk.block_len == 0 || len_bytes % disk.block_len as usize != 0 {
            return Err(ScsiError::BadBufferLength {
                len_bytes,
                block_len: disk.block_len,
            });
        }
        let blocks = (len_bytes / disk.block_len as usize) as u64;
        if lba
            .0
            .checked_add(blocks)
            .is_none_or(|end| end > disk.blocks)
        {
            return Err(ScsiError::OutOfRange {
                lba: lba.0,
                blocks,
                capacity: disk.blocks,
            });
        }
        Ok(blocks)
    }

    /// Blocks per command: the host limits rounded down to whole blocks.
    fn chunk_blocks(&self, disk: &Disk) -> Result<u64, ScsiError> {
        let max = self.max_transfer_bytes();
        let blocks = max.checked_div(disk.block_len as usize).unwrap_or(0) as u64;
        if blocks == 0 {
            return Err(ScsiError::TransferTooLarge {
                bytes: disk.block_len as usize,
                max_bytes: max,
            });
        }
        Ok(blocks)
    }

    /// Reads `buf.len()` bytes starting at `lba`.
    pub fn read_blocks(&mut self, disk: &Disk, lba: Lba, buf: &mut [u8]) -> Result<(), ScsiError> {
        self.transfer(disk, lba, Transfer::Read(buf))
    }

    /// Writes `buf` starting at `lba`.
    pub fn write_blocks(&mut self, disk: &Disk, lba: Lba, buf: &[u8]) -> Result<(), ScsiError> {
        self.transfer(disk, lba, Transfer::Write(buf))
    }

    fn transfer(&mut self, disk: &Disk, lba: Lba, mut io: Transfer<'_>) -> Result<(), ScsiError> {
        let total = self.check_range(disk, lba, io.len())?;
        let chunk = self.chunk_blocks(disk)?;
        let block_len = disk.block_len as usize;
        let depth = usize::from(self.template.cmd_per_lun.min(self.template.can_queue)).max(1);
        let (mut next, mut in_flight, mut first_error) = (0u64, 0usize, None);
        let mut done = Vec::new();
        // Which tags belong to this transfer (a caller may have other commands in flight).
        let mut mine = vec![false; usize::from(self.template.can_queue)];
        while next < total || in_flight > 0 {
            while next < total && in_flight < depth && first_error.is_none() {
                let blocks = chunk.min(total - next);
                let range = next as usize * block_len..(next + blocks) as usize * block_len;
                let at = Lba(lba.0 + next);
                let (cdb, data) = match &io {
                    Transfer::Read(_) => (
                        Cdb::read(at, BlockCount(blocks as u32)),
                        vec![0u8; range.len()],
                    ),
                    Transfer::Write(buf) => (
                        Cdb::write(at, BlockCount(blocks as u32)),
                        buf[range].to_vec(),
                    ),
                };
                let mut request = Request::new(disk.device, cdb, data);
                request.user_data = next;
                match self.submit(request) {
                    Ok(tag) => {
                        mine[usize::from(tag.0)] = true;
                        in_flight += 1;
                        next += blocks;
                    }
                    Err(rejected) if rejected.error == ScsiError::QueueFull && in_flight > 0 => {
                        break;
                    }
                    Err(rejected) => {
                        first_error = Some(rejected.error);
                        break;
                    }
                }
            }
            if first_error.is_some() && in_flight == 0 {
                break;
            }
            let mut stash = core::mem::take(&mut self.stash);
            let waiting = in_flight;
            self.poll(&mut done);
            let mut keep = Vec::new();
            for d in done.drain(..) {
                if !mine[usize::from(d.tag.0)] {
                    keep.push(d);
                    continue;
                }
                mine[usize::from(d.tag.0)] = false;
                in_flight -= 1;
                match d.result {
                    Ok(c) if c.residual_bytes != 0 => {
                        first_error.get_or_insert(ScsiError::ShortTransfer {
                            residual_bytes: c.residual_bytes,
                        });
                    }
                    Ok(_) => io.complete(d.user_data as usize * block_len, &d.data),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            stash.append(&mut keep);
            self.stash = stash;
            // Nothing of ours finished: wait. Otherwise submit the next chunks first.
            if in_flight > 0 && in_flight == waiting {
                self.idle();
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

enum Transfer<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Transfer<'_> {
    fn len(&self) -> usize {
        match self {
            Transfer::Read(buf) => buf.len(),
            Transfer::Write(buf) => buf.len(),
        }
    }

    fn complete(&mut self, offset: usize, data: &[u8]) {
        if let Transfer::Read(buf) = self {
            buf[offset..offset + data.len()].copy_from_slice(data);
        }
    }
}
