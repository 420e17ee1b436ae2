//! Command descriptor blocks: one typed [`Cdb`] enum that parses from and encodes to bytes.
//!
//! The midlayer encodes a `Cdb` into a 16-byte [`CdbBytes`] on every command and the scsi_debug
//! target parses it back, so both directions are allocation-free and do no formatting. Reserved
//! bits and the CONTROL byte are ignored on parse and written as zero on encode, so
//! `parse(encode(c)) == c` holds for every `Cdb` while arbitrary bytes still parse leniently, as a
//! real device would accept them.

use super::cdb_layout::*;
use super::types::{BlockCount, Lba};
use super::{WireError, need};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Operation codes (SPC-5 Annex E, SBC-4 §5).
pub mod opcode {
    /// TEST UNIT READY (SPC-5 §6.47).
    pub const TEST_UNIT_READY: u8 = 0x00;
    /// REQUEST SENSE (SPC-5 §6.39).
    pub const REQUEST_SENSE: u8 = 0x03;
    /// INQUIRY (SPC-5 §6.6).
    pub const INQUIRY: u8 = 0x12;
    /// MODE SENSE(6) (SPC-5 §6.14).
    pub const MODE_SENSE_6: u8 = 0x1a;
    /// START STOP UNIT (SBC-4 §5.25).
    pub const START_STOP_UNIT: u8 = 0x1b;
    /// READ CAPACITY(10) (SBC-4 §5.15).
    pub const READ_CAPACITY_10: u8 = 0x25;
    /// READ(10) (SBC-4 §5.11).
    pub const READ_10: u8 = 0x28;
    /// WRITE(10) (SBC-4 §5.35).
    pub const WRITE_10: u8 = 0x2a;
    /// SYNCHRONIZE CACHE(10) (SBC-4 §5.27).
    pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
    /// MODE SENSE(10) (SPC-5 §6.15).
    pub const MODE_SENSE_10: u8 = 0x5a;
    /// READ(16) (SBC-4 §5.13).
    pub const READ_16: u8 = 0x88;
    /// WRITE(16) (SBC-4 §5.37).
    pub const WRITE_16: u8 = 0x8a;
    /// SERVICE ACTION IN(16): READ CAPACITY(16) and other service actions (SBC-4 §5.16).
    pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
    /// REPORT LUNS (SPC-5 §6.33).
    pub const REPORT_LUNS: u8 = 0xa0;
    /// Service action of SERVICE ACTION IN(16) for READ CAPACITY(16).
    pub const SAI_READ_CAPACITY_16: u8 = 0x10;
}

/// The longest CDB this crate builds (16 bytes; 32-byte variable-length CDBs are not used).
pub const MAX_CDB_LEN: usize = 16;

/// An encoded CDB: up to 16 bytes plus its length, `Copy` so it can live in a command slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CdbBytes {
    bytes: [u8; MAX_CDB_LEN],
    len: u8,
}

impl CdbBytes {
    /// Copies raw CDB bytes (for pass-through); `Err` if longer than 16 bytes or empty.
    pub fn from_slice(raw: &[u8]) -> Result<CdbBytes, WireError> {
        if raw.is_empty() || raw.len() > MAX_CDB_LEN {
            return Err(WireError::InvalidField {
                what: "CDB length",
                value: raw.len() as u64,
            });
        }
        let mut bytes = [0u8; MAX_CDB_LEN];
        bytes[..raw.len()].copy_from_slice(raw);
        Ok(CdbBytes {
            bytes,
            len: raw.len() as u8,
        })
    }

    /// READ or WRITE of `blocks` at `lba`: the same bytes as
    /// `Cdb::read(lba, blocks).encode()` (or `Cdb::write`). When the range fits READ/WRITE(10)'s
    /// fields (the per-command case) the ten bytes are put together as two little-endian words
    /// and stored at once: the opcode, the big-endian LBA at bytes 2–5 and the big-endian
    /// transfer length at bytes 7–8, every other byte zero (SBC-4 §5.11, §5.35). It builds no
    /// [`Cdb`] value and goes through no dispatch over the opcodes; a range that needs
    /// READ/WRITE(16) goes through the encoder, out of line.
    #[inline]
    pub fn rw(write: bool, lba: Lba, blocks: BlockCount) -> CdbBytes {
        // Both ways end in two words and a length, so the CDB is put together from registers
        // once (a cold call returning the whole CDB would make both ways meet in memory).
        let (low, high, len) = match (u32::try_from(lba.0), u16::try_from(blocks.0)) {
            (Ok(lba32), Ok(blocks16)) => {
                let opcode = if write {
                    opcode::WRITE_10
                } else {
                    opcode::READ_10
                };
                // Bytes 0..8 as a little-endian word: byte 0 the opcode, bytes 2..6 the LBA
                // (big endian), byte 7 the transfer length's high byte; byte 8 its low byte.
                let length = blocks16.to_be_bytes();
                let low = u64::from(opcode)
                    | u64::from(lba32.swap_bytes()) << 16
                    | u64::from(length[0]) << 56;
                (low, u64::from(length[1]), 10)
            }
            _ => {
                let (low, high) = Self::rw16_words(write, lba, blocks);
                (low, high, 16)
            }
        };
        let mut bytes = [0u8; MAX_CDB_LEN];
        let (first, second) = bytes.split_at_mut(8);
        first.copy_from_slice(&low.to_le_bytes());
        second.copy_from_slice(&high.to_le_bytes());
        CdbBytes { bytes, len }
    }

    /// [`Self::rw`] of a range READ/WRITE(10) cannot carry: READ/WRITE(16) from the encoder,
    /// as its two little-endian words.
    #[cold]
    #[inline(never)]
    fn rw16_words(write: bool, lba: Lba, blocks: BlockCount) -> (u64, u64) {
        let cdb = if write {
            Cdb::write(lba, blocks)
        } else {
            Cdb::read(lba, blocks)
        }
        .encode();
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&cdb.bytes[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        (word(0), word(8))
    }

    /// [`Cdb::is_rw`] of these bytes, read from the fixed array without slicing it (the
    /// per-command test of a `fake_rw` target).
    #[inline]
    pub fn is_rw(&self) -> bool {
        match self.bytes[0] {
            opcode::READ_10 | opcode::WRITE_10 => self.len >= 10,
            opcode::READ_16 | opcode::WRITE_16 => self.len >= 16,
            _ => false,
        }
    }

    /// The CDB in its 16-byte array, zero past its length: how a device reads fields at fixed
    /// offsets without a length check per field (Linux's `scp->cmnd` is read so).
    #[inline]
    pub fn padded(&self) -> &[u8; MAX_CDB_LEN] {
        &self.bytes
    }

    /// The CDB bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    #[inline]
    pub(crate) fn from_layout<T: IntoBytes + Immutable>(layout: &T) -> CdbBytes {
        let raw = layout.as_bytes();
        let mut bytes = [0u8; MAX_CDB_LEN];
        bytes[..raw.len()].copy_from_slice(raw);
        CdbBytes {
            bytes,
            len: raw.len() as u8,
        }
    }
}

/// Page control of MODE SENSE (SPC-5 §6.14.1, table 171): which values to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageControl {
    /// The values in effect now.
    Current = 0,
    /// A mask of the bits MODE SELECT may change.
    Changeable = 1,
    /// The values the device starts with.
    Default = 2,
    /// The values saved to the medium (a device without saved pages answers SAVING PARAMETERS NOT SUPPORTED).
    Saved = 3,
}

impl PageControl {
    fn from_bits(bits: u8) -> PageControl {
        match bits & 3 {
            0 => PageControl::Current,
            1 => PageControl::Changeable,
            2 => PageControl::Default,
            _ => PageControl::Saved,
        }
    }
}

/// Fields of READ(10)/WRITE(10) (SBC-4 §5.11, §5.35).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rw10 {
    /// First logical block.
    pub lba: u32,
    /// Blocks to transfer; 0 transfers none (SBC-4: not "65536").
    pub blocks: u16,
    /// Force unit access: the data must reach (or come from) the medium.
    pub fua: bool,
    /// Disable page out: do not keep the data in cache.
    pub dpo: bool,
}

/// Fields of READ(16)/WRITE(16) (SBC-4 §5.13, §5.37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rw16 {
    /// First logical block.
    pub lba: Lba,
    /// Blocks to transfer; 0 transfers none.
    pub blocks: BlockCount,
    /// Force unit access, as in [`Rw10::fua`].
    pub fua: bool,
    /// Disable page out, as in [`Rw10::dpo`].
    pub dpo: bool,
}

/// A decoded CDB. Variants hold exactly the fields of their encoding, so every value encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cdb {
    /// TEST UNIT READY (SPC-5 §6.47).
    TestUnitReady,
    /// INQUIRY (SPC-5 §6.6): the standard page when `evpd` is false (then `page` must be 0).
    Inquiry {
        /// Enable vital product data: return the VPD page `page` instead.
        evpd: bool,
        /// VPD page code (0 when `evpd` is false).
        page: u8,
        /// Most bytes the initiator accepts.
        alloc_len: u16,
    },
    /// REQUEST SENSE (SPC-5 §6.39); `desc` asks for descriptor-format sense.
    RequestSense {
        /// Ask for descriptor-format (72h) rather than fixed-format (70h) sense.
        desc: bool,
        /// Most bytes the initiator accepts.
        alloc_len: u8,
    },
    /// MODE SENSE(6) (SPC-5 §6.14). `page` is the 6-bit page code.
    ModeSense6 {
        /// Disable block descriptors: return none.
        dbd: bool,
        /// Which values to return.
        pc: PageControl,
        /// Page code (6 bits; 3Fh returns every page).
        page: u8,
        /// Subpage code (0 for the page itself, FFh for all subpages).
        subpage: u8,
        /// Most bytes the initiator accepts.
        alloc_len: u8,
    },
    /// MODE SENSE(10) (SPC-5 §6.15).
    ModeSense10 {
        /// Long LBA accepted: the device may return 16-byte block descriptors.
        llbaa: bool,
        /// Disable block descriptors: return none.
        dbd: bool,
        /// Which values to return.
        pc: PageControl,
        /// Page code (6 bits; 3Fh returns every page).
        page: u8,
        /// Subpage code (0 for the page itself, FFh for all subpages).
        subpage: u8,
        /// Most bytes the initiator accepts.
        alloc_len: u16,
    },
    /// START STOP UNIT (SBC-4 §5.25). `power_condition` is the 4-bit field.
    StartStopUnit {
        /// Return before the operation completes.
        immed: bool,
        /// POWER CONDITION (0: governed by `start` and `loej`).
        power_condition: u8,
        /// Load or eject the medium (with `start`).
        loej: bool,
        /// Make the logical unit ready (true) or stop it (false).
        start: bool,
    },
    /// READ CAPACITY(10) (SBC-4 §5.15).
    ReadCapacity10,
    /// READ CAPACITY(16) (SBC-4 §5.16).
    ReadCapacity16 {
        /// Most bytes the initiator accepts (32 for the whole parameter data).
        alloc_len: u32,
    },
    /// READ(10).
    Read10(Rw10),
    /// READ(16).
    Read16(Rw16),
    /// WRITE(10).
    Write10(Rw10),
    /// WRITE(16).
    Write16(Rw16),
    /// SYNCHRONIZE CACHE(10) (SBC-4 §5.27); `blocks == 0` means to the end of the medium.
    SynchronizeCache10 {
        /// Return before the cache is written.
        immed: bool,
        /// First logical block to write back.
        lba: u32,
        /// Blocks to write back; 0 means to the end of the medium.
        blocks: u16,
    },
    /// REPORT LUNS (SPC-5 §6.33).
    ReportLuns {
        /// SELECT REPORT: 0 = the logical units that are addressable, 2 = all of them.
        select_report: u8,
        /// Most bytes the initiator accepts (at least 16, SPC-5 §6.33).
        alloc_len: u32,
    },
}

fn read<T: FromBytes + KnownLayout + Immutable>(
    what: &'static str,
    raw: &[u8],
) -> Result<T, WireError> {
    need(what, raw, core::mem::size_of::<T>())?;
    T::read_from_prefix(raw)
        .map(|(value, _)| value)
        .map_err(|_| WireError::Truncated {
            what,
            need: core::mem::size_of::<T>(),
            got: raw.len(),
        })
}

impl Cdb {
    /// READ(10) when the range fits its fields, else READ(16), the way `sd` chooses.
    #[inline]
    pub fn read(lba: Lba, blocks: BlockCount) -> Cdb {
        match (u32::try_from(lba.0), u16::try_from(blocks.0)) {
            (Ok(lba), Ok(blocks)) => Cdb::Read10(Rw10 {
                lba,
                blocks,
                fua: false,
                dpo: false,
            }),
            _ => Cdb::Read16(Rw16 {
                lba,
                blocks,
                fua: false,
                dpo: false,
            }),
        }
    }

    /// WRITE(10) when the range fits its fields, else WRITE(16).
    #[inline]
    pub fn write(lba: Lba, blocks: BlockCount) -> Cdb {
        match (u32::try_from(lba.0), u16::try_from(blocks.0)) {
            (Ok(lba), Ok(blocks)) => Cdb::Write10(Rw10 {
                lba,
                blocks,
                fua: false,
                dpo: false,
            }),
            _ => Cdb::Write16(Rw16 {
                lba,
                blocks,
                fua: false,
                dpo: false,
            }),
        }
    }

    /// The standard INQUIRY page with the usual 36-byte allocation.
    pub fn inquiry() -> Cdb {
        Cdb::Inquiry {
            evpd: false,
            page: 0,
            alloc_len: 36,
        }
    }

    /// The LBA range a READ or WRITE addresses, `None` for other commands.
    pub fn lba_range(&self) -> Option<(Lba, BlockCount)> {
        match *self {
            Cdb::Read10(rw) | Cdb::Write10(rw) => {
                Some((Lba(u64::from(rw.lba)), BlockCount(u32::from(rw.blocks))))
            }
            Cdb::Read16(rw) | Cdb::Write16(rw) => Some((rw.lba, rw.blocks)),
            _ => None,
        }
    }

    /// The operation code.
    pub fn opcode(&self) -> u8 {
        self.encode().as_slice()[0]
    }

    /// The per-command fast decode of READ/WRITE(10)/(16): `Some((is_write, lba, blocks))`
    /// for those four opcodes at full length, `None` for anything else (then use
    /// [`parse`](Self::parse)). Agrees with `parse(raw)?.lba_range()`; a target answering
    /// millions of commands a second calls this first.
    #[inline]
    pub fn parse_rw(raw: &[u8]) -> Option<(bool, Lba, BlockCount)> {
        match *raw {
            [
                opcode::READ_10 | opcode::WRITE_10,
                _,
                a,
                b,
                c,
                d,
                _,
                e,
                f,
                _,
                ..,
            ] => Some((
                raw[0] == opcode::WRITE_10,
                Lba(u64::from(u32::from_be_bytes([a, b, c, d]))),
                BlockCount(u32::from(u16::from_be_bytes([e, f]))),
            )),
            [
                opcode::READ_16 | opcode::WRITE_16,
                _,
                a,
                b,
                c,
                d,
                e,
                f,
                g,
                h,
                i,
                j,
                k,
                l,
                _,
                _,
                ..,
            ] => Some((
                raw[0] == opcode::WRITE_16,
                Lba(u64::from_be_bytes([a, b, c, d, e, f, g, h])),
                BlockCount(u32::from_be_bytes([i, j, k, l])),
            )),
            _ => None,
        }
    }

    /// Whether [`parse_rw`](Self::parse_rw) would decode `raw` (a READ/WRITE(10)/(16) at full
    /// length), without decoding its fields: what a `fake_rw` target, which moves no data and
    /// checks no range, needs to know.
    #[inline]
    pub fn is_rw(raw: &[u8]) -> bool {
        match raw.first() {
            Some(&(opcode::READ_10 | opcode::WRITE_10)) => raw.len() >= 10,
            Some(&(opcode::READ_16 | opcode::WRITE_16)) => raw.len() >= 16,
            _ => false,
        }
    }

    /// Decodes a CDB. Unknown opcodes give `UnsupportedOpcode`; short buffers `Truncated`.
    pub fn parse(raw: &[u8]) -> Result<Cdb, WireError> {
        let Some(&op) = raw.first() else {
            return Err(WireError::Truncated {
                what: "CDB",
                need: 1,
                got: 0,
            });
        };
        Ok(match op {
            opcode::TEST_UNIT_READY => {
                read::<TestUnitReady6>("TEST UNIT READY", raw)?;
                Cdb::TestUnitReady
            }
            opcode::INQUIRY => {
                let c = read::<Inquiry6>("INQUIRY", raw)?;
                let evpd = c.flags & 1 != 0;
                if !evpd && c.page_code != 0 {
                    // SPC-5 §6.6.1: PAGE CODE must be zero when EVPD is zero.
                    let value = u64::from(c.page_code);
                    return Err(WireError::InvalidField {
                        what: "INQUIRY page code",
                        value,
                    });
                }
                Cdb::Inquiry {
                    evpd,
                    page: c.page_code,
                    alloc_len: c.alloc_len.get(),
                }
            }
            opcode::REQUEST_SENSE => {
                let c = read::<RequestSense6>("REQUEST SENSE", raw)?;
                Cdb::RequestSense {
                    desc: c.flags & 1 != 0,
                    alloc_len: c.alloc_len,
                }
            }
            opcode::MODE_SENSE_6 => {
                let c = read::<ModeSense6>("MODE SENSE(6)", raw)?;
                Cdb::ModeSense6 {
                    dbd: c.flags & 0x08 != 0,
                    pc: PageControl::from_bits(c.page >> 6),
                    page: c.page & 0x3f,
                    subpage: c.subpage,
                    alloc_len: c.alloc_len,
                }
            }
            opcode::MODE_SENSE_10 => {
                let c = read::<ModeSense10>("MODE SENSE(10)", raw)?;
                Cdb::ModeSense10 {
                    llbaa: c.flags & 0x10 != 0,
                    dbd: c.flags & 0x08 != 0,
                    pc: PageControl::from_bits(c.page >> 6),
                    page: c.page & 0x3f,
                    subpage: c.subpage,
                    alloc_len: c.alloc_len.get(),
                }
            }
            opcode::START_STOP_UNIT => {
                let c = read::<StartStopUnit6>("START STOP UNIT", raw)?;
                Cdb::StartStopUnit {
                    immed: c.immed & 1 != 0,
                    power_condition: c.flags >> 4,
                    loej: c.flags & 0x02 != 0,
                    start: c.flags & 0x01 != 0,
                }
            }
            opcode::READ_CAPACITY_10 => {
                read::<ReadCapacity10>("READ CAPACITY(10)", raw)?;
                Cdb::ReadCapacity10
            }
            opcode::READ_10 | opcode::WRITE_10 => {
                let c = read::<Lba10>("READ/WRITE(10)", raw)?;
                let rw = Rw10 {
                    lba: c.lba.get(),
                    blocks: c.blocks.get(),
                    fua: c.flags & 0x08 != 0,
                    dpo: c.flags & 0x10 != 0,
                };
                if op == opcode::READ_10 {
                    Cdb::Read10(rw)
                } else {
                    Cdb::Write10(rw)
                }
            }
            opcode::READ_16 | opcode::WRITE_16 => {
                let c = read::<Lba16>("READ/WRITE(16)", raw)?;
                let rw = Rw16 {
                    lba: Lba(c.lba.get()),
                    blocks: BlockCount(c.blocks.get()),
                    fua: c.flags & 0x08 != 0,
                    dpo: c.flags & 0x10 != 0,
                };
                if op == opcode::READ_16 {
                    Cdb::Read16(rw)
                } else {
                    Cdb::Write16(rw)
                }
            }
            opcode::SYNCHRONIZE_CACHE_10 => {
                let c = read::<Lba10>("SYNCHRONIZE CACHE(10)", raw)?;
                Cdb::SynchronizeCache10 {
                    immed: c.flags & 0x02 != 0,
                    lba: c.lba.get(),
                    blocks: c.blocks.get(),
                }
            }
            opcode::SERVICE_ACTION_IN_16 => {
                let c = read::<ServiceActionIn16>("SERVICE ACTION IN(16)", raw)?;
                let service_action = c.service_action & 0x1f;
                if service_action != opcode::SAI_READ_CAPACITY_16 {
                    return Err(WireError::UnsupportedServiceAction {
                        opcode: op,
                        service_action,
                    });
                }
                Cdb::ReadCapacity16 {
                    alloc_len: c.alloc_len.get(),
                }
            }
            opcode::REPORT_LUNS => {
                let c = read::<ReportLuns12>("REPORT LUNS", raw)?;
                Cdb::ReportLuns {
                    select_report: c.select_report,
                    alloc_len: c.alloc_len.get(),
                }
            }
            _ => return Err(WireError::UnsupportedOpcode(op)),
        })
    }
}

#[cfg(test)]
mod tests;
