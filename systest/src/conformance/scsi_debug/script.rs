//! The guest's side of the wire: a scenario rendered as `sg_cdb`'s script
//! (`harness/linux/scsi-conformance/sg_cdb.c`), and the console lines `sg_cdb` and `init.sh`
//! print, parsed back into answers. Both directions are pure, so host tests cover them.

use std::collections::BTreeMap;

use super::steps::{Dir, Step};

/// Data moved by a command: the bytes, or (above [`HEX_DATA_MAX`]) their FNV-1a hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Bytes(Vec<u8>),
    Hash { fnv1a64: u64, len: usize },
}

/// Above this many bytes `sg_cdb` prints a hash instead of the data.
pub const HEX_DATA_MAX: usize = 4096;

impl Data {
    /// How `sg_cdb` reports `bytes`.
    pub fn of(bytes: &[u8]) -> Data {
        if bytes.len() <= HEX_DATA_MAX {
            return Data::Bytes(bytes.to_vec());
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in bytes {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        Data::Hash {
            fnv1a64: hash,
            len: bytes.len(),
        }
    }
}

/// What a command came back with, on either side: SG_IO's fields, our target's mapped onto
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// SCSI status byte.
    pub status: u8,
    /// The host byte (`DID_*`).
    pub host: u16,
    pub resid: i64,
    pub sense: Vec<u8>,
    /// The data transferred (data-in only).
    pub data: Data,
}

/// What one step produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Answer(Answer),
    /// A reset, with its errno (0: done).
    Reset {
        errno: i32,
    },
    Slept,
    /// `sg_cdb` could not send the step.
    Error(String),
}

/// `sg_cdb`'s script for `steps`; a step's id is its index.
pub fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for (id, step) in steps.iter().enumerate() {
        let line = match step {
            Step::Command(command) => {
                let dir = match command.dir {
                    Dir::None => 'n',
                    Dir::In => 'i',
                    Dir::Out => 'o',
                };
                let cdb: String = command.cdb.iter().map(|b| format!("{b:02x}")).collect();
                format!(
                    "cmd {id} {} {dir} {} {} {cdb} {}",
                    command.lun, command.len, command.timeout_ms, command.seed
                )
            }
            Step::Sleep { ms } => format!("sleep {id} {ms}"),
            Step::Reset { kind, lun } => format!("reset {id} {} {lun}", kind.word()),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// What the guest printed for one scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestRun {
    /// The SCSI hosts present while it ran (`host0` expected: our model answers as host 0).
    pub hosts: Vec<String>,
    pub outcomes: BTreeMap<usize, Outcome>,
    /// The scenario's module load or set-up failed: why.
    pub errors: Vec<String>,
    /// `SGC-END` was seen.
    pub ended: bool,
}

/// Everything the guest printed, scenario by scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestReport {
    /// `uname -r` of the guest.
    pub kernel: String,
    pub scenarios: BTreeMap<String, GuestRun>,
    /// `SGC-DONE` was seen: every scenario ran.
    pub done: bool,
}

fn hex(text: &str) -> Result<Vec<u8>, String> {
    if text.len() % 2 != 0 {
        return Err(format!("odd hex length in `{text}`"));
    }
    (0..text.len() / 2)
        .map(|i| {
            u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|e| format!("`{text}`: {e}"))
        })
        .collect()
}

/// The scenario the lines belong to (before the first `SGC-SCENARIO`: the unnamed one).
fn run<'a>(report: &'a mut GuestReport, current: &Option<String>) -> &'a mut GuestRun {
    let name = current.clone().unwrap_or_default();
    report.scenarios.entry(name).or_default()
}

/// Parses the `key=value` words of an `SGR` line after its id.
fn answer(words: &[&str]) -> Result<Answer, String> {
    let field = |key: &str| {
        words
            .iter()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
            .ok_or_else(|| format!("no {key}= in `{}`", words.join(" ")))
    };
    let number = |key: &str, radix| {
        let text = field(key)?;
        i64::from_str_radix(text, radix).map_err(|e| format!("{key}={text}: {e}"))
    };
    let data = field("data")?;
    let data = match data.strip_prefix("fnv1a64:") {
        Some(rest) => {
            let (hash, len) = rest.split_once(':').ok_or_else(|| format!("data={data}"))?;
            Data::Hash {
                fnv1a64: u64::from_str_radix(hash, 16).map_err(|e| format!("data={data}: {e}"))?,
                len: len.parse().map_err(|e| format!("data={data}: {e}"))?,
            }
        }
        None => Data::Bytes(hex(data)?),
    };
    Ok(Answer {
        status: number("status", 16)? as u8,
        host: number("host", 16)? as u16,
        resid: number("resid", 10)?,
        sense: hex(field("sense")?)?,
        data,
    })
}

/// Parses the guest's console. Lines that are not ours (the kernel's, the shell's) are
/// skipped; one of ours that does not parse is an error naming it.
pub fn parse(console: &[String]) -> Result<GuestReport, String> {
    let mut report = GuestReport::default();
    let mut current: Option<String> = None;
    for line in console {
        let line = line.trim_end();
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&tag, rest)) = words.split_first() else {
            continue;
        };
        let id = || -> Result<usize, String> {
            rest.first()
                .and_then(|id| id.parse().ok())
                .ok_or_else(|| format!("no step id in `{line}`"))
        };
        match tag {
            "SGC-INFO" => {
                report.kernel = rest
                    .iter()
                    .find_map(|w| w.strip_prefix("kernel="))
                    .unwrap_or_default()
                    .to_owned();
            }
            "SGC-SCENARIO" => {
                let name = rest.first().ok_or_else(|| format!("`{line}`"))?;
                current = Some((*name).to_owned());
                report.scenarios.entry((*name).to_owned()).or_default();
            }
            "SGC-HOST" => run(&mut report, &current)
                .hosts
                .extend(rest.iter().map(|h| h.to_string())),
            "SGC-ERROR" => run(&mut report, &current).errors.push(rest.join(" ")),
            "SGC-END" => run(&mut report, &current).ended = true,
            "SGC-DONE" => report.done = true,
            "SGR" => {
                let outcome =
                    Outcome::Answer(answer(&rest[1..]).map_err(|e| format!("`{line}`: {e}"))?);
                run(&mut report, &current).outcomes.insert(id()?, outcome);
            }
            "SGRESET" => {
                let errno = rest
                    .get(1)
                    .and_then(|w| w.strip_prefix("rc="))
                    .and_then(|rc| rc.parse().ok())
                    .ok_or_else(|| format!("`{line}`"))?;
                run(&mut report, &current)
                    .outcomes
                    .insert(id()?, Outcome::Reset { errno });
            }
            "SGSLEPT" => {
                run(&mut report, &current)
                    .outcomes
                    .insert(id()?, Outcome::Slept);
            }
            "SGERR" => {
                let reason = rest[1..].join(" ");
                match id() {
                    Ok(id) => {
                        run(&mut report, &current)
                            .outcomes
                            .insert(id, Outcome::Error(reason));
                    }
                    Err(_) => run(&mut report, &current).errors.push(rest.join(" ")),
                }
            }
            _ => {}
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::scsi_debug::steps::{ResetKind, Steps, cdb};

    #[test]
    fn a_script_has_one_line_per_step_with_its_index() {
        let mut s = Steps::new();
        s.tur("TUR");
        s.lun(1).write("WRITE", &cdb::lba10(0x2a, 0, 5, 1), 512, 9);
        s.sleep(20);
        s.reset(ResetKind::Target);
        assert_eq!(
            render(&s.steps),
            "cmd 0 0 n 0 30000 000000000000 0\n\
             cmd 1 1 o 512 30000 2a000000000500000100 9\n\
             sleep 2 20\n\
             reset 3 target 1\n"
        );
    }

    #[test]
    fn console_lines_parse_into_answers_per_scenario() {
        let console: Vec<String> = [
            "[    0.1] some kernel line",
            "SGC-INFO kernel=6.12.95+deb12-amd64",
            "SGC-SCENARIO defaults",
            "SGC-HOST host0",
            "SGR 0 status=02 host=0000 driver=0008 resid=0 sense=700006 data=",
            "SGR 1 status=00 host=0000 driver=0000 resid=4 sense= data=00112233",
            "SGR 2 status=00 host=0000 driver=0000 resid=0 sense= data=fnv1a64:00000000000000ff:131072",
            "SGRESET 3 rc=0",
            "SGSLEPT 4",
            "SGERR 5 SG_IO: Invalid argument",
            "SGC-END defaults",
            "SGC-SCENARIO dsense",
            "SGC-ERROR dsense insmod failed",
            "SGC-DONE",
        ]
        .map(String::from)
        .to_vec();
        let report = parse(&console).unwrap();
        assert_eq!(report.kernel, "6.12.95+deb12-amd64");
        assert!(report.done);
        let defaults = &report.scenarios["defaults"];
        assert!(defaults.ended);
        assert_eq!(defaults.hosts, ["host0"]);
        assert_eq!(
            defaults.outcomes[&0],
            Outcome::Answer(Answer {
                status: 2,
                host: 0,
                resid: 0,
                sense: vec![0x70, 0, 6],
                data: Data::Bytes(vec![]),
            })
        );
        assert_eq!(
            defaults.outcomes[&2],
            Outcome::Answer(Answer {
                status: 0,
                host: 0,
                resid: 0,
                sense: vec![],
                data: Data::Hash {
                    fnv1a64: 0xff,
                    len: 131072
                },
            })
        );
        assert_eq!(defaults.outcomes[&3], Outcome::Reset { errno: 0 });
        assert_eq!(defaults.outcomes[&4], Outcome::Slept);
        assert_eq!(
            defaults.outcomes[&5],
            Outcome::Error("SG_IO: Invalid argument".into())
        );
        assert_eq!(report.scenarios["dsense"].errors, ["dsense insmod failed"]);
        let bad = ["SGR 1 status=zz host=0 driver=0 resid=0 sense= data="].map(String::from);
        assert!(parse(&bad).unwrap_err().contains("status=zz"));
    }

    #[test]
    fn data_above_4_kib_is_hashed_as_sg_cdb_hashes_it() {
        assert_eq!(Data::of(&[1, 2]), Data::Bytes(vec![1, 2]));
        // FNV-1a of 4097 zero bytes, as the C loop computes it.
        let mut hash: u64 = 0xcbf29ce484222325;
        for _ in 0..4097 {
            hash = hash.wrapping_mul(0x100000001b3);
        }
        assert_eq!(
            Data::of(&[0; 4097]),
            Data::Hash {
                fnv1a64: hash,
                len: 4097
            }
        );
    }
}
