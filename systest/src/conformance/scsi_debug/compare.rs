//! Linux's answer against ours, field by field: status, host byte, residual, sense (length,
//! then each byte), data (length, then each byte, or the hash above 4 KiB). Each difference
//! names its field and byte; the allow-list passes the ones that cannot be the same, each
//! with its reason.

use std::fmt;

use super::script::{Answer, Data, Outcome};

/// The field two answers differ in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// One side answered and the other did not (or reset, slept, failed otherwise).
    Outcome,
    Status,
    Host,
    Residual,
    SenseLength,
    SenseByte(usize),
    DataLength,
    DataByte(usize),
    DataHash,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Outcome => write!(f, "outcome"),
            Field::Status => write!(f, "status"),
            Field::Host => write!(f, "host status"),
            Field::Residual => write!(f, "residual"),
            Field::SenseLength => write!(f, "sense length"),
            Field::SenseByte(at) => write!(f, "sense byte {at}"),
            Field::DataLength => write!(f, "data length"),
            Field::DataByte(at) => write!(f, "data byte {at}"),
            Field::DataHash => write!(f, "data (hashed)"),
        }
    }
}

/// One field that differs, with both values as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub field: Field,
    pub linux: String,
    pub ours: String,
}

fn differ(field: Field, linux: impl fmt::Display, ours: impl fmt::Display) -> Difference {
    Difference {
        field,
        linux: linux.to_string(),
        ours: ours.to_string(),
    }
}

fn bytes(
    out: &mut Vec<Difference>,
    length: Field,
    byte: fn(usize) -> Field,
    linux: &[u8],
    ours: &[u8],
) {
    if linux.len() != ours.len() {
        out.push(differ(length, linux.len(), ours.len()));
    }
    for (at, (l, o)) in linux.iter().zip(ours).enumerate() {
        if l != o {
            out.push(differ(byte(at), format!("{l:02x}"), format!("{o:02x}")));
        }
    }
}

/// Every field in which `ours` differs from `linux`.
pub fn compare(linux: &Outcome, ours: &Outcome) -> Vec<Difference> {
    let (Outcome::Answer(l), Outcome::Answer(o)) = (linux, ours) else {
        return if linux == ours {
            Vec::new()
        } else {
            vec![differ(Field::Outcome, describe(linux), describe(ours))]
        };
    };
    answers(l, o)
}

fn answers(l: &Answer, o: &Answer) -> Vec<Difference> {
    let mut out = Vec::new();
    if l.status != o.status {
        out.push(differ(
            Field::Status,
            format!("{:02x}", l.status),
            format!("{:02x}", o.status),
        ));
    }
    if l.host != o.host {
        out.push(differ(
            Field::Host,
            format!("{:02x}", l.host),
            format!("{:02x}", o.host),
        ));
    }
    if l.resid != o.resid {
        out.push(differ(Field::Residual, l.resid, o.resid));
    }
    bytes(
        &mut out,
        Field::SenseLength,
        Field::SenseByte,
        &l.sense,
        &o.sense,
    );
    match (&l.data, &o.data) {
        (Data::Bytes(l), Data::Bytes(o)) => {
            bytes(&mut out, Field::DataLength, Field::DataByte, l, o)
        }
        (l, o) if l != o => out.push(differ(Field::DataHash, data(l), data(o))),
        _ => {}
    }
    out
}

fn data(data: &Data) -> String {
    match data {
        Data::Bytes(bytes) => format!("{} bytes", bytes.len()),
        Data::Hash { fnv1a64, len } => format!("{len} bytes, FNV-1a {fnv1a64:016x}"),
    }
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Answer(a) => format!("status {:02x} host {:02x}", a.status, a.host),
        Outcome::Reset { errno } => format!("reset, errno {errno}"),
        Outcome::Slept => "slept".into(),
        Outcome::Error(reason) => format!("not sent: {reason}"),
    }
}

/// A difference that cannot go away, and why.
pub struct Allowance {
    pub scenario: &'static str,
    /// The command's name in the scenario.
    pub command: &'static str,
    pub fields: fn(Field) -> bool,
    pub reason: &'static str,
}

/// Whether `difference` of `command` in `scenario` is allowed, and by which entry.
pub fn allowed<'a>(
    list: &'a [Allowance],
    scenario: &str,
    command: &str,
    difference: &Difference,
) -> Option<&'a Allowance> {
    list.iter().find(|entry| {
        entry.scenario == scenario && entry.command == command && (entry.fields)(difference.field)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u8, resid: i64, sense: &[u8], data: &[u8]) -> Outcome {
        Outcome::Answer(Answer {
            status,
            host: 0,
            resid,
            sense: sense.to_vec(),
            data: Data::Bytes(data.to_vec()),
        })
    }

    #[test]
    fn each_differing_field_and_byte_is_named() {
        let linux = answer(2, 0, &[0x70, 0, 5, 0], &[1, 2, 3]);
        let ours = answer(2, 512, &[0xf0, 0, 5], &[1, 9, 3, 4]);
        let fields: Vec<Field> = compare(&linux, &ours).iter().map(|d| d.field).collect();
        assert_eq!(
            fields,
            [
                Field::Residual,
                Field::SenseLength,
                Field::SenseByte(0),
                Field::DataLength,
                Field::DataByte(1)
            ]
        );
        assert!(compare(&linux, &linux).is_empty());
        let differences = compare(&linux, &Outcome::Error("no device".into()));
        assert_eq!(differences[0].field, Field::Outcome);
        assert_eq!(differences[0].ours, "not sent: no device");
    }

    #[test]
    fn hashed_data_differs_as_a_whole() {
        let hashed = |fnv1a64| {
            Outcome::Answer(Answer {
                status: 0,
                host: 0,
                resid: 0,
                sense: Vec::new(),
                data: Data::Hash { fnv1a64, len: 8192 },
            })
        };
        let differences = compare(&hashed(1), &hashed(2));
        assert_eq!(differences.len(), 1);
        assert_eq!(differences[0].field, Field::DataHash);
    }

    #[test]
    fn an_allowance_covers_its_scenario_command_and_fields_only() {
        let list = [Allowance {
            scenario: "s",
            command: "c",
            fields: |field| matches!(field, Field::SenseByte(3..=6)),
            reason: "wall clock",
        }];
        let byte = |at| differ(Field::SenseByte(at), "00", "01");
        assert!(allowed(&list, "s", "c", &byte(4)).is_some());
        assert!(allowed(&list, "s", "c", &byte(7)).is_none());
        assert!(allowed(&list, "s", "d", &byte(4)).is_none());
        assert!(allowed(&list, "t", "c", &byte(4)).is_none());
    }
}
