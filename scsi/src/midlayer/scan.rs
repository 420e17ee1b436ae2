//! Scanning a host for logical units, the way Linux `scsi_scan.c` and `sd` probe: REPORT LUNS
//! on LUN 0 of each target (reissued with a larger buffer if the list was cut short), falling
//! back to a sequential INQUIRY walk when REPORT LUNS fails; INQUIRY to each LUN; TEST UNIT
//! READY until the unit is ready (UNIT ATTENTION is retried by the midlayer, NOT READY
//! "becoming ready" is waited out, "initializing command required" gets START STOP UNIT); READ
//! CAPACITY(16), falling back to READ CAPACITY(10).

use super::{DeviceId, Disk, Midlayer, Request, ScsiError};
use crate::clock::Clock;
use crate::host::{HostError, ScsiHost};
use crate::sense_alloc::SenseStorage;
use crate::wire::{
    Cdb, DeviceType, INQUIRY_STANDARD_LEN, InquiryData, Lun, ReadCapacity10Data,
    ReadCapacity16Data, ReportLunsData, SenseKey,
};
use alloc::vec;
use alloc::vec::Vec;
use pools::ElementAllocator;

/// Scan command timeout (Linux uses 30 s for INQUIRY; shorter is fine for emulated devices).
const SCAN_TIMEOUT_NS: u64 = 10_000_000_000;
/// How long TEST UNIT READY may keep reporting "becoming ready" (Linux `sd_spinup_disk`: 100 s).
const SPINUP_BUDGET_NS: u64 = 100_000_000_000;

/// One logical unit found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedLun {
    /// The name I/O uses for it.
    pub device: DeviceId,
    /// Its target id.
    pub target: u16,
    /// Its LUN.
    pub lun: Lun,
    /// Its standard INQUIRY data.
    pub inquiry: InquiryData,
    /// Capacity, for direct-access units that answered READ CAPACITY.
    pub disk: Option<Disk>,
}

/// The result of a scan: what was found and what went wrong on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// The logical units found, in target and LUN order.
    pub luns: Vec<ScannedLun>,
    /// Failures that skipped a target or LUN (target, LUN, error).
    pub errors: Vec<(u16, Lun, ScsiError)>,
    /// Targets where REPORT LUNS failed and LUNs were probed sequentially.
    pub sequential_fallbacks: u16,
}

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    fn scan_command(
        &mut self,
        device: DeviceId,
        cdb: Cdb,
        len: usize,
    ) -> Result<Vec<u8>, ScsiError> {
        let mut request = Request::new(device, cdb, vec![0u8; len]);
        request.timeout_ns = SCAN_TIMEOUT_NS;
        request.retries = 3;
        let (result, mut data) = self.execute(request);
        let completion = result?;
        data.truncate(len - (completion.residual_bytes as usize).min(len));
        Ok(data)
    }

    /// Scans every target of the host.
    pub fn scan(&mut self) -> ScanReport {
        let mut report = ScanReport::default();
        for target in 0..self.template.max_target {
            self.scan_target(target, &mut report);
        }
        report
    }

    /// Scans one logical unit, what a hot-plug notice asks for (Linux `scsi_add_device`): the
    /// unit is registered and probed, and forgotten again when nothing answers there. Scanning
    /// a unit already known probes it again under the same [`DeviceId`].
    pub fn scan_lun(&mut self, target: u16, lun: Lun) -> ScanReport {
        let mut report = ScanReport::default();
        let device = self.add_device(target, lun);
        self.probe(device, target, lun, &mut report);
        report
    }

    fn scan_target(&mut self, target: u16, report: &mut ScanReport) {
        let lun0 = self.add_device(target, Lun(0));
        let luns = match self.report_luns(lun0) {
            Ok(luns) => luns,
            Err(ScsiError::Host(HostError::NoConnect)) => {
                self.remove_device(lun0);
                return;
            }
            Err(error) => {
                report.errors.push((target, Lun(0), error));
                report.sequential_fallbacks += 1;
                self.scan_sequential(target, report);
                return;
            }
        };
        if !luns.contains(&Lun(0)) {
            self.remove_device(lun0);
        }
        for lun in luns {
            let device = self.add_device(target, lun);
            self.probe(device, target, lun, report);
        }
    }

    fn report_luns(&mut self, device: DeviceId) -> Result<Vec<Lun>, ScsiError> {
        let mut alloc_len = 8 + 8 * 64;
        loop {
            let cdb = Cdb::ReportLuns {
                select_report: 0,
                alloc_len: alloc_len as u32,
            };
            let data = self.scan_command(device, cdb, alloc_len)?;
            let parsed = ReportLunsData::parse(&data).map_err(ScsiError::Wire)?;
            let wanted = 8 + parsed.list_len_bytes as usize;
            if !parsed.is_truncated() || wanted <= alloc_len {
                return Ok(parsed.luns);
            }
            alloc_len = wanted.min(8 + 8 * 16384);
        }
    }

    /// LUN 0, 1, 2, ... until one is absent (Linux `scsi_sequential_lun_scan`).
    fn scan_sequential(&mut self, target: u16, report: &mut ScanReport) {
        for index in 0..self.template.max_lun {
            let Ok(lun) = Lun::from_index(index) else {
                break;
            };
            let device = self.add_device(target, lun);
            if !self.probe(device, target, lun, report) {
                self.remove_device(device);
                break;
            }
        }
    }

    /// Probes one LUN; returns whether a unit is present.
    fn probe(&mut self, device: DeviceId, target: u16, lun: Lun, report: &mut ScanReport) -> bool {
        let inquiry = match self
            .scan_command(device, Cdb::inquiry(), INQUIRY_STANDARD_LEN)
            .and_then(|data| InquiryData::parse(&data).map_err(ScsiError::Wire))
        {
            Ok(inquiry) if inquiry.is_present() && inquiry.device_type != DeviceType::NONE => {
                inquiry
            }
            Ok(_) => {
                self.remove_device(device);
                return false;
            }
            Err(error) => {
                report.errors.push((target, lun, error));
                self.remove_device(device);
                return false;
            }
        };
        let mut disk = None;
        if inquiry.device_type == DeviceType::DISK {
            match self
                .spin_up(device)
                .and_then(|()| self.read_capacity(device))
            {
                Ok(found) => disk = Some(found),
                Err(error) => report.errors.push((target, lun, error)),
            }
        }
        report.luns.push(ScannedLun {
            device,
            target,
            lun,
            inquiry,
            disk,
        });
        true
    }

    /// TEST UNIT READY until GOOD (Linux `sd_spinup_disk`).
    fn spin_up(&mut self, device: DeviceId) -> Result<(), ScsiError> {
        let start = self.clock.now_ns();
        let mut started = false;
        loop {
            match self.scan_command(device, Cdb::TestUnitReady, 0) {
                Ok(_) => return Ok(()),
                Err(ScsiError::CheckCondition {
                    key: SenseKey::NotReady,
                    asc: 0x04,
                    ascq: 0x02,
                    ..
                }) if !started => {
                    started = true;
                    let cdb = Cdb::StartStopUnit {
                        immed: false,
                        power_condition: 0,
                        loej: false,
                        start: true,
                    };
                    self.scan_command(device, cdb, 0)?;
                }
                Err(ScsiError::CheckCondition {
                    key: SenseKey::NotReady | SenseKey::UnitAttention,
                    ..
                }) if self.clock.now_ns().saturating_sub(start) < SPINUP_BUDGET_NS => {
                    self.clock.relax();
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// READ CAPACITY(16), or (10) if the unit rejects (16).
    fn read_capacity(&mut self, device: DeviceId) -> Result<Disk, ScsiError> {
        let cdb = Cdb::ReadCapacity16 {
            alloc_len: ReadCapacity16Data::LEN as u32,
        };
        let (last_lba, block_len) = match self.scan_command(device, cdb, ReadCapacity16Data::LEN) {
            Ok(data) => {
                let cap = ReadCapacity16Data::parse(&data).map_err(ScsiError::Wire)?;
                (cap.last_lba.0, cap.block_len)
            }
            Err(ScsiError::CheckCondition {
                key: SenseKey::IllegalRequest,
                ..
            }) => {
                let data =
                    self.scan_command(device, Cdb::ReadCapacity10, ReadCapacity10Data::LEN)?;
                let cap = ReadCapacity10Data::parse(&data).map_err(ScsiError::Wire)?;
                (u64::from(cap.last_lba), cap.block_len)
            }
            Err(error) => return Err(error),
        };
        if block_len == 0 || block_len % 512 != 0 {
            return Err(ScsiError::Wire(crate::wire::WireError::InvalidField {
                what: "logical block length",
                value: u64::from(block_len),
            }));
        }
        let blocks = last_lba.checked_add(1).ok_or(ScsiError::Wire(
            crate::wire::WireError::InvalidField {
                what: "returned logical block address",
                value: last_lba,
            },
        ))?;
        Ok(Disk {
            device,
            block_len,
            blocks,
        })
    }
}
