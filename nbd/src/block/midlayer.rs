//! A scanned disk behind the SCSI midlayer as a [`BlockDevice`]: what every guest exports. An
//! NBD read becomes READ(10/16) commands through the midlayer and the host adapter's driver,
//! and FLUSH becomes SYNCHRONIZE CACHE(10) over the whole medium.

use alloc::vec::Vec;

use pools::ElementAllocator;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::{Disk, Midlayer, Request, ScsiError};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::{Cdb, Lba};

use super::BlockDevice;

/// `disk` on `stack`, borrowed for as long as it is exported.
#[expect(
    missing_debug_implementations,
    reason = "the midlayer is not `Debug`: its host and sense pool are the guest's"
)]
pub struct MidlayerDisk<'s, H, A, C>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    /// The midlayer the disk was scanned on (the stats endpoint reads its counters, hot-plug
    /// handling scans on it between requests).
    pub stack: &'s mut Midlayer<H, A, C>,
    /// The exported logical unit.
    pub disk: Disk,
}

impl<H, A, C> BlockDevice for MidlayerDisk<'_, H, A, C>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    fn block_bytes(&self) -> u32 {
        self.disk.block_len
    }

    fn blocks(&self) -> u64 {
        self.disk.blocks
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ScsiError> {
        self.stack.read_blocks(&self.disk, Lba(lba), buf)
    }

    fn write_blocks(&mut self, lba: u64, data: &[u8]) -> Result<(), ScsiError> {
        self.stack.write_blocks(&self.disk, Lba(lba), data)
    }

    fn flush(&mut self) -> Result<(), ScsiError> {
        let cdb = Cdb::SynchronizeCache10 {
            immed: false,
            lba: 0,
            blocks: 0,
        };
        let (result, _) = self
            .stack
            .execute(Request::new(self.disk.device, cdb, Vec::new()));
        result.map(|_| ())
    }
}
