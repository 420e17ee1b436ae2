//! Byte layouts of the CDBs this crate speaks, as drawn in SPC-5 and SBC-4. Each struct is the
//! full CDB including the operation code, so `size_of` is the CDB length.

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// TEST UNIT READY (SPC-5 §6.47), 6 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct TestUnitReady6 {
    pub opcode: u8,
    pub reserved: [u8; 4],
    pub control: u8,
}

/// INQUIRY (SPC-5 §6.6), 6 bytes. `flags` bit 0 is EVPD.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct Inquiry6 {
    pub opcode: u8,
    pub flags: u8,
    pub page_code: u8,
    pub alloc_len: U16,
    pub control: u8,
}

/// REQUEST SENSE (SPC-5 §6.39), 6 bytes. `flags` bit 0 is DESC.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct RequestSense6 {
    pub opcode: u8,
    pub flags: u8,
    pub reserved: [u8; 2],
    pub alloc_len: u8,
    pub control: u8,
}

/// MODE SENSE(6) (SPC-5 §6.14), 6 bytes. `flags` bit 3 is DBD; `page` is PC(7:6) and PAGE CODE(5:0).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct ModeSense6 {
    pub opcode: u8,
    pub flags: u8,
    pub page: u8,
    pub subpage: u8,
    pub alloc_len: u8,
    pub control: u8,
}

/// MODE SENSE(10) (SPC-5 §6.15), 10 bytes. `flags` bit 4 is LLBAA, bit 3 DBD.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct ModeSense10 {
    pub opcode: u8,
    pub flags: u8,
    pub page: u8,
    pub subpage: u8,
    pub reserved: [u8; 3],
    pub alloc_len: U16,
    pub control: u8,
}

/// START STOP UNIT (SBC-4 §5.25), 6 bytes. `immed` bit 0 is IMMED; `flags` is POWER
/// CONDITION(7:4), NO_FLUSH(2), LOEJ(1), START(0).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct StartStopUnit6 {
    pub opcode: u8,
    pub immed: u8,
    pub reserved: u8,
    pub power_condition_modifier: u8,
    pub flags: u8,
    pub control: u8,
}

/// READ CAPACITY(10) (SBC-4 §5.15), 10 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct ReadCapacity10 {
    pub opcode: u8,
    pub reserved1: u8,
    pub obsolete_lba: U32,
    pub reserved2: [u8; 2],
    pub obsolete_pmi: u8,
    pub control: u8,
}

/// READ(10), WRITE(10) and SYNCHRONIZE CACHE(10) share this shape (SBC-4 §5.11, §5.35,
/// §5.27): flags (RDPROTECT/DPO/FUA, or IMMED for SYNCHRONIZE CACHE), LBA, group, length.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct Lba10 {
    pub opcode: u8,
    pub flags: u8,
    pub lba: U32,
    pub group: u8,
    pub blocks: U16,
    pub control: u8,
}

/// READ(16) and WRITE(16) (SBC-4 §5.13, §5.37), 16 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct Lba16 {
    pub opcode: u8,
    pub flags: u8,
    pub lba: U64,
    pub blocks: U32,
    pub group: u8,
    pub control: u8,
}

/// SERVICE ACTION IN(16) / READ CAPACITY(16) (SBC-4 §5.16), 16 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct ServiceActionIn16 {
    pub opcode: u8,
    pub service_action: u8,
    pub lba: U64,
    pub alloc_len: U32,
    pub pmi: u8,
    pub control: u8,
}

/// REPORT LUNS (SPC-5 §6.33), 12 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
pub(crate) struct ReportLuns12 {
    pub opcode: u8,
    pub reserved1: u8,
    pub select_report: u8,
    pub reserved2: [u8; 3],
    pub alloc_len: U32,
    pub reserved3: u8,
    pub control: u8,
}
