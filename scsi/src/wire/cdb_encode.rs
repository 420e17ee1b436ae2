//! Encoding a [`Cdb`] into its bytes: the inverse of `Cdb::parse`, built from the same
//! `cdb_layout` structs.

use super::cdb::{Cdb, CdbBytes, Rw10, Rw16, opcode};
use super::cdb_layout::*;

impl Cdb {
    /// Encodes the CDB. Infallible: every variant's fields fit its layout (4-bit and 6-bit
    /// fields are masked).
    #[inline]
    pub fn encode(&self) -> CdbBytes {
        match *self {
            Cdb::TestUnitReady => CdbBytes::from_layout(&TestUnitReady6::default()),
            Cdb::Inquiry {
                evpd,
                page,
                alloc_len,
            } => CdbBytes::from_layout(&Inquiry6 {
                opcode: opcode::INQUIRY,
                flags: u8::from(evpd),
                page_code: page,
                alloc_len: alloc_len.into(),
                control: 0,
            }),
            Cdb::RequestSense { desc, alloc_len } => CdbBytes::from_layout(&RequestSense6 {
                opcode: opcode::REQUEST_SENSE,
                flags: u8::from(desc),
                alloc_len,
                ..Default::default()
            }),
            Cdb::ModeSense6 {
                dbd,
                pc,
                page,
                subpage,
                alloc_len,
            } => CdbBytes::from_layout(&ModeSense6 {
                opcode: opcode::MODE_SENSE_6,
                flags: if dbd { 0x08 } else { 0 },
                page: ((pc as u8) << 6) | (page & 0x3f),
                subpage,
                alloc_len,
                control: 0,
            }),
            Cdb::ModeSense10 {
                llbaa,
                dbd,
                pc,
                page,
                subpage,
                alloc_len,
            } => CdbBytes::from_layout(&ModeSense10 {
                opcode: opcode::MODE_SENSE_10,
                flags: (u8::from(llbaa) << 4) | (u8::from(dbd) << 3),
                page: ((pc as u8) << 6) | (page & 0x3f),
                subpage,
                alloc_len: alloc_len.into(),
                ..Default::default()
            }),
            Cdb::StartStopUnit {
                immed,
                power_condition,
                loej,
                start,
            } => CdbBytes::from_layout(&StartStopUnit6 {
                opcode: opcode::START_STOP_UNIT,
                immed: u8::from(immed),
                flags: ((power_condition & 0x0f) << 4) | (u8::from(loej) << 1) | u8::from(start),
                ..Default::default()
            }),
            Cdb::ReadCapacity10 => CdbBytes::from_layout(&ReadCapacity10 {
                opcode: opcode::READ_CAPACITY_10,
                ..Default::default()
            }),
            Cdb::ReadCapacity16 { alloc_len } => CdbBytes::from_layout(&ServiceActionIn16 {
                opcode: opcode::SERVICE_ACTION_IN_16,
                service_action: opcode::SAI_READ_CAPACITY_16,
                alloc_len: alloc_len.into(),
                ..Default::default()
            }),
            Cdb::Read10(rw) => encode10(opcode::READ_10, rw),
            Cdb::Write10(rw) => encode10(opcode::WRITE_10, rw),
            Cdb::Read16(rw) => encode16(opcode::READ_16, rw),
            Cdb::Write16(rw) => encode16(opcode::WRITE_16, rw),
            Cdb::SynchronizeCache10 { immed, lba, blocks } => CdbBytes::from_layout(&Lba10 {
                opcode: opcode::SYNCHRONIZE_CACHE_10,
                flags: u8::from(immed) << 1,
                lba: lba.into(),
                blocks: blocks.into(),
                ..Default::default()
            }),
            Cdb::ReportLuns {
                select_report,
                alloc_len,
            } => CdbBytes::from_layout(&ReportLuns12 {
                opcode: opcode::REPORT_LUNS,
                select_report,
                alloc_len: alloc_len.into(),
                ..Default::default()
            }),
        }
    }
}

#[inline]
fn rw_flags(fua: bool, dpo: bool) -> u8 {
    (u8::from(dpo) << 4) | (u8::from(fua) << 3)
}

#[inline]
fn encode10(op: u8, rw: Rw10) -> CdbBytes {
    CdbBytes::from_layout(&Lba10 {
        opcode: op,
        flags: rw_flags(rw.fua, rw.dpo),
        lba: rw.lba.into(),
        group: 0,
        blocks: rw.blocks.into(),
        control: 0,
    })
}

#[inline]
fn encode16(op: u8, rw: Rw16) -> CdbBytes {
    CdbBytes::from_layout(&Lba16 {
        opcode: op,
        flags: rw_flags(rw.fua, rw.dpo),
        lba: rw.lba.0.into(),
        blocks: rw.blocks.0.into(),
        group: 0,
        control: 0,
    })
}
