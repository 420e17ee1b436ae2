//! SCSI status codes (SAM-5 §5.3.1, table 28).

use super::WireError;

/// The status byte a logical unit returns at the end of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// The command completed successfully.
    Good = 0x00,
    /// Sense data describes an error or exception; see the sense buffer.
    CheckCondition = 0x02,
    /// A PRE-FETCH-style condition was met.
    ConditionMet = 0x04,
    /// The logical unit is busy; retry later.
    Busy = 0x08,
    /// Obsolete INTERMEDIATE status (SAM-2).
    Intermediate = 0x10,
    /// Obsolete INTERMEDIATE-CONDITION MET status (SAM-2).
    IntermediateConditionMet = 0x14,
    /// Another initiator holds a conflicting reservation.
    ReservationConflict = 0x18,
    /// Obsolete COMMAND TERMINATED status (SAM-2).
    CommandTerminated = 0x22,
    /// The task set is full; retry once a command completes.
    TaskSetFull = 0x28,
    /// An ACA condition exists.
    AcaActive = 0x30,
    /// The command was aborted by another I_T nexus.
    TaskAborted = 0x40,
}

impl Status {
    /// The status byte.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Decodes a status byte. Bits 0 and 6-7 are reserved in SAM-5 but some targets set bit 0
    /// (SCSI-2 vendor unique), so the byte must match exactly.
    pub fn from_code(code: u8) -> Result<Status, WireError> {
        Ok(match code {
            0x00 => Status::Good,
            0x02 => Status::CheckCondition,
            0x04 => Status::ConditionMet,
            0x08 => Status::Busy,
            0x10 => Status::Intermediate,
            0x14 => Status::IntermediateConditionMet,
            0x18 => Status::ReservationConflict,
            0x22 => Status::CommandTerminated,
            0x28 => Status::TaskSetFull,
            0x30 => Status::AcaActive,
            0x40 => Status::TaskAborted,
            _ => {
                return Err(WireError::InvalidField {
                    what: "status",
                    value: u64::from(code),
                });
            }
        })
    }

    /// The name used in SAM-5.
    pub fn name(self) -> &'static str {
        match self {
            Status::Good => "GOOD",
            Status::CheckCondition => "CHECK CONDITION",
            Status::ConditionMet => "CONDITION MET",
            Status::Busy => "BUSY",
            Status::Intermediate => "INTERMEDIATE",
            Status::IntermediateConditionMet => "INTERMEDIATE-CONDITION MET",
            Status::ReservationConflict => "RESERVATION CONFLICT",
            Status::CommandTerminated => "COMMAND TERMINATED",
            Status::TaskSetFull => "TASK SET FULL",
            Status::AcaActive => "ACA ACTIVE",
            Status::TaskAborted => "TASK ABORTED",
        }
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_decodes_or_errors_and_round_trips() {
        let mut known = 0;
        for code in 0..=255u8 {
            if let Ok(status) = Status::from_code(code) {
                assert_eq!(status.code(), code);
                known += 1;
            }
        }
        assert_eq!(known, 11);
    }
}
