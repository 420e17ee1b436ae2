//! A fake disk behind the fake IOC: just enough SCSI (TEST UNIT READY, INQUIRY, READ
//! CAPACITY(10), READ(10), WRITE(10)) to move real bytes through real SGLs.

use alloc::vec;
use alloc::vec::Vec;

use crate::dma::fake::FakeDmaSpace;
use crate::dma::{DmaAddr, Segment};

/// A RAM disk of 512-byte blocks.
#[derive(Debug, Clone)]
pub struct FakeDisk {
    /// The bytes.
    pub data: Vec<u8>,
}

/// What executing a CDB did.
pub(super) struct Execution {
    pub status: u8,
    pub transferred: u32,
    pub sense: Vec<u8>,
    pub dma_errors: usize,
}

const BLOCK: usize = 512;

fn check_condition(key: u8, asc: u8) -> Execution {
    let mut sense = vec![0u8; 18];
    sense[0] = 0x70;
    sense[2] = key;
    sense[7] = 10;
    sense[12] = asc;
    Execution {
        status: 0x02,
        transferred: 0,
        sense,
        dma_errors: 0,
    }
}

impl FakeDisk {
    /// A zeroed disk of `blocks` blocks.
    #[must_use]
    pub fn new(blocks: usize) -> Self {
        Self {
            data: vec![0; blocks * BLOCK],
        }
    }

    pub(super) fn execute(
        &mut self,
        cdb: &[u8],
        segments: &[Segment],
        data_length: u32,
        space: &FakeDmaSpace,
    ) -> Execution {
        let good = |transferred| Execution {
            status: 0,
            transferred,
            sense: Vec::new(),
            dma_errors: 0,
        };
        match cdb.first() {
            Some(0x00) => good(0),
            Some(0x12) => {
                let mut inquiry = vec![0u8; 36];
                inquiry[2] = 5;
                inquiry[3] = 2;
                inquiry[4] = 31;
                inquiry[8..16].copy_from_slice(b"QEMU    ");
                inquiry[16..32].copy_from_slice(b"QEMU HARDDISK   ");
                inquiry[32..36].copy_from_slice(b"2.5+");
                self.to_host(&inquiry, segments, data_length, space)
            }
            Some(0x25) => {
                let last = (self.data.len() / BLOCK).saturating_sub(1) as u32;
                let mut capacity = last.to_be_bytes().to_vec();
                capacity.extend_from_slice(&(BLOCK as u32).to_be_bytes());
                self.to_host(&capacity, segments, data_length, space)
            }
            Some(&op @ (0x28 | 0x2A)) if cdb.len() >= 10 => {
                let lba = u32::from_be_bytes([cdb[2], cdb[3], cdb[4], cdb[5]]) as usize;
                let count = usize::from(u16::from_be_bytes([cdb[7], cdb[8]]));
                let start = lba * BLOCK;
                let len = count * BLOCK;
                if start + len > self.data.len() {
                    return check_condition(0x05, 0x21);
                }
                if len > data_length as usize {
                    return check_condition(0x05, 0x24);
                }
                if op == 0x28 {
                    let bytes = self.data[start..start + len].to_vec();
                    self.to_host(&bytes, segments, data_length, space)
                } else {
                    let mut bytes = vec![0u8; len];
                    let errors = walk(segments, len, |offset, seg_addr, n| {
                        space.read(seg_addr, &mut bytes[offset..offset + n]).is_ok()
                    });
                    self.data[start..start + len].copy_from_slice(&bytes);
                    Execution {
                        dma_errors: errors,
                        ..good(len as u32)
                    }
                }
            }
            _ => check_condition(0x05, 0x20),
        }
    }

    fn to_host(
        &self,
        bytes: &[u8],
        segments: &[Segment],
        data_length: u32,
        space: &FakeDmaSpace,
    ) -> Execution {
        let len = bytes.len().min(data_length as usize);
        let errors = walk(segments, len, |offset, addr, n| {
            space.write(addr, &bytes[offset..offset + n]).is_ok()
        });
        Execution {
            status: 0,
            transferred: len as u32,
            sense: Vec::new(),
            dma_errors: errors,
        }
    }
}

/// Calls `step(offset, addr, n)` for each piece of the first `len` bytes of `segments`;
/// returns how many steps failed.
fn walk(
    segments: &[Segment],
    len: usize,
    mut step: impl FnMut(usize, DmaAddr, usize) -> bool,
) -> usize {
    let mut offset = 0;
    let mut errors = 0;
    for segment in segments {
        if offset >= len {
            break;
        }
        let n = (segment.len_bytes as usize).min(len - offset);
        if !step(offset, segment.addr, n) {
            errors += 1;
        }
        offset += n;
    }
    errors
}
