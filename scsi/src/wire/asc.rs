//! Additional sense codes (SPC-5 Annex F.2, table F.2): readable text for the codes a disk stack
//! meets in practice. The table is consulted only when printing or building an error message,
//! never on the command path, so a linear search is fine.

/// An ASC/ASCQ pair, printed as `29h/00h (POWER ON, ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AscAscq {
    /// ADDITIONAL SENSE CODE.
    pub asc: u8,
    /// ADDITIONAL SENSE CODE QUALIFIER.
    pub ascq: u8,
}

impl core::fmt::Display for AscAscq {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:02X}h/{:02X}h", self.asc, self.ascq)?;
        if let Some(text) = asc_text(self.asc, self.ascq) {
            write!(f, " ({text})")?;
        }
        Ok(())
    }
}

/// (ASC, ASCQ, text) as named in SPC-5 table F.2.
const TABLE: &[(u8, u8, &str)] = &[
    (0x00, 0x00, "NO ADDITIONAL SENSE INFORMATION"),
    (0x00, 0x06, "I/O PROCESS TERMINATED"),
    (0x00, 0x16, "OPERATION IN PROGRESS"),
    (0x00, 0x1d, "ATA PASS THROUGH INFORMATION AVAILABLE"),
    (0x02, 0x00, "NO SEEK COMPLETE"),
    (0x03, 0x00, "PERIPHERAL DEVICE WRITE FAULT"),
    (0x04, 0x00, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE"),
    (0x04, 0x01, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY"),
    (
        0x04,
        0x02,
        "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED",
    ),
    (
        0x04,
        0x03,
        "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED",
    ),
    (0x04, 0x04, "LOGICAL UNIT NOT READY, FORMAT IN PROGRESS"),
    (0x04, 0x09, "LOGICAL UNIT NOT READY, SELF-TEST IN PROGRESS"),
    (
        0x04,
        0x0a,
        "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION",
    ),
    (
        0x04,
        0x11,
        "LOGICAL UNIT NOT READY, NOTIFY (ENABLE SPINUP) REQUIRED",
    ),
    (0x05, 0x00, "LOGICAL UNIT DOES NOT RESPOND TO SELECTION"),
    (0x08, 0x00, "LOGICAL UNIT COMMUNICATION FAILURE"),
    (0x0c, 0x00, "WRITE ERROR"),
    (0x0c, 0x02, "WRITE ERROR - AUTO REALLOCATION FAILED"),
    (0x10, 0x01, "LOGICAL BLOCK GUARD CHECK FAILED"),
    (0x11, 0x00, "UNRECOVERED READ ERROR"),
    (
        0x11,
        0x04,
        "UNRECOVERED READ ERROR - AUTO REALLOCATE FAILED",
    ),
    (0x14, 0x01, "RECORD NOT FOUND"),
    (0x15, 0x00, "RANDOM POSITIONING ERROR"),
    (
        0x17,
        0x00,
        "RECOVERED DATA WITH NO ERROR CORRECTION APPLIED",
    ),
    (0x17, 0x01, "RECOVERED DATA WITH RETRIES"),
    (0x17, 0x02, "RECOVERED DATA WITH POSITIVE HEAD OFFSET"),
    (0x17, 0x03, "RECOVERED DATA WITH NEGATIVE HEAD OFFSET"),
    (0x18, 0x00, "RECOVERED DATA WITH ERROR CORRECTION APPLIED"),
    (0x1a, 0x00, "PARAMETER LIST LENGTH ERROR"),
    (0x1d, 0x00, "MISCOMPARE DURING VERIFY OPERATION"),
    (0x20, 0x00, "INVALID COMMAND OPERATION CODE"),
    (0x21, 0x00, "LOGICAL BLOCK ADDRESS OUT OF RANGE"),
    (0x24, 0x00, "INVALID FIELD IN CDB"),
    (0x25, 0x00, "LOGICAL UNIT NOT SUPPORTED"),
    (0x26, 0x00, "INVALID FIELD IN PARAMETER LIST"),
    (0x27, 0x00, "WRITE PROTECTED"),
    (
        0x28,
        0x00,
        "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED",
    ),
    (0x29, 0x00, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"),
    (0x29, 0x01, "POWER ON OCCURRED"),
    (0x29, 0x02, "SCSI BUS RESET OCCURRED"),
    (0x29, 0x03, "BUS DEVICE RESET FUNCTION OCCURRED"),
    (0x29, 0x04, "DEVICE INTERNAL RESET"),
    (0x29, 0x07, "I_T NEXUS LOSS OCCURRED"),
    (0x2a, 0x01, "MODE PARAMETERS CHANGED"),
    (0x2a, 0x09, "CAPACITY DATA HAS CHANGED"),
    (0x2f, 0x00, "COMMANDS CLEARED BY ANOTHER INITIATOR"),
    (0x31, 0x00, "MEDIUM FORMAT CORRUPTED"),
    (0x39, 0x00, "SAVING PARAMETERS NOT SUPPORTED"),
    (0x3a, 0x00, "MEDIUM NOT PRESENT"),
    (0x3f, 0x01, "MICROCODE HAS BEEN CHANGED"),
    (0x3f, 0x03, "INQUIRY DATA HAS CHANGED"),
    (0x3f, 0x0e, "REPORTED LUNS DATA HAS CHANGED"),
    (0x44, 0x00, "INTERNAL TARGET FAILURE"),
    (0x47, 0x00, "SCSI PARITY ERROR"),
    (0x4b, 0x00, "DATA PHASE ERROR"),
    (0x4e, 0x00, "OVERLAPPED COMMANDS ATTEMPTED"),
    (0x55, 0x03, "INSUFFICIENT RESOURCES"),
    (0x5d, 0x00, "FAILURE PREDICTION THRESHOLD EXCEEDED"),
    (0x5d, 0xff, "FAILURE PREDICTION THRESHOLD EXCEEDED (FALSE)"),
];

/// Readable text for an ASC/ASCQ pair, `None` if this table does not know it.
pub fn asc_text(asc: u8, ascq: u8) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|&&(a, q, _)| a == asc && q == ascq)
        .map(|&(_, _, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_codes_have_text() {
        for (asc, ascq) in [
            (0x29, 0),
            (0x28, 0),
            (0x04, 1),
            (0x11, 0),
            (0x20, 0),
            (0x24, 0),
            (0x21, 0),
            (0x3f, 0x0e),
            (0x25, 0),
            (0x17, 1),
        ] {
            assert!(asc_text(asc, ascq).is_some(), "{asc:#x}/{ascq:#x}");
        }
        assert_eq!(asc_text(0x7e, 0x7e), None);
    }

    #[test]
    fn table_has_no_duplicates() {
        for (i, a) in TABLE.iter().enumerate() {
            assert!(
                TABLE[i + 1..].iter().all(|b| (a.0, a.1) != (b.0, b.1)),
                "{:x}/{:x}",
                a.0,
                a.1
            );
        }
    }
}
