//! An export held in memory: the disk of host tests, examples and xtask's host-side server
//! tests. Ranges are checked by the session before they get here (see [`crate::session`]);
//! an access outside the buffer is still an error here, never a panic.

use alloc::vec;
use alloc::vec::Vec;

use crate::session::Export;
use crate::wire::Errno;

/// A byte-addressed disk in a `Vec`, counting what it was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryExport {
    /// The disk's contents.
    pub data: Vec<u8>,
    /// Flushes asked for (`Export::flush`, FUA writes included).
    pub flushes: u64,
}

impl MemoryExport {
    /// A zeroed disk of `size_bytes`.
    pub fn new(size_bytes: usize) -> MemoryExport {
        MemoryExport {
            data: vec![0; size_bytes],
            flushes: 0,
        }
    }

    fn range(&self, offset: u64, len: u64) -> Result<core::ops::Range<usize>, Errno> {
        let end = offset.checked_add(len).ok_or(Errno::EOVERFLOW)?;
        if end > self.data.len() as u64 {
            return Err(Errno::EINVAL);
        }
        Ok(offset as usize..end as usize)
    }
}

impl Export for MemoryExport {
    fn size_bytes(&self) -> u64 {
        self.data.len() as u64
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let range = self.range(offset, buf.len() as u64)?;
        buf.copy_from_slice(&self.data[range]);
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        let range = self.range(offset, data.len() as u64)?;
        self.data[range].copy_from_slice(data);
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    fn write_zeroes(&mut self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let range = self.range(offset, len)?;
        self.data[range].fill(0);
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Errno> {
        self.flushes += 1;
        Ok(())
    }
}
