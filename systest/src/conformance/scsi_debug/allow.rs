//! The differences that stay, each with its reason. An entry names the scenario, the command
//! (as the scenario names it) and the fields it covers; anything else that differs fails the
//! run. `scsi/README.md` and `docs/linux-fidelity.md` list the same differences.

use super::compare::{Allowance, Field};

fn sense_information(field: Field) -> bool {
    matches!(field, Field::SenseByte(3..=6))
}

fn list_of_commands(field: Field) -> bool {
    matches!(
        field,
        Field::Residual | Field::DataLength | Field::DataByte(_) | Field::DataHash
    )
}

/// The allow-list.
pub const ALLOWED: &[Allowance] = &[
    Allowance {
        scenario: "tur-ms-to-ready",
        command: "TEST UNIT READY becoming ready",
        fields: sense_information,
        reason: "INFORMATION holds the milliseconds left until ready, which Linux counts from \
                 the device's creation in wall-clock time (the scan and the guest's pace come \
                 first); our model counts on the host's manual clock",
    },
    Allowance {
        scenario: "defaults",
        command: "REPORT SUPPORTED OPERATION CODES all",
        fields: list_of_commands,
        reason: "the list names the commands each target answers; ours lacks the ones \
                 scsi/README.md lists as not implemented (32-byte CDBs, WRITE SAME, UNMAP, \
                 MODE SELECT, LOG SENSE, ...)",
    },
    Allowance {
        scenario: "defaults",
        command: "REPORT SUPPORTED OPERATION CODES all, RCTD",
        fields: list_of_commands,
        reason: "as without RCTD: the list names the commands each target answers",
    },
];

#[cfg(test)]
mod tests {
    use super::super::scenarios;
    use super::*;
    use crate::conformance::scsi_debug::steps::Step;

    #[test]
    fn every_entry_has_a_reason_and_names_a_command_that_is_sent() {
        let scenarios = scenarios::all();
        for entry in ALLOWED {
            assert!(
                entry.reason.len() > 40,
                "{}: a reason, not a label",
                entry.command
            );
            let scenario = scenarios
                .iter()
                .find(|s| s.name == entry.scenario)
                .unwrap_or_else(|| panic!("no scenario {}", entry.scenario));
            assert!(
                scenario
                    .steps
                    .iter()
                    .any(|step| matches!(step, Step::Command(c) if c.name == entry.command)),
                "{} sends no `{}`",
                entry.scenario,
                entry.command
            );
        }
    }
}
