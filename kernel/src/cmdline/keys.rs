//! The command line's key table: the kernel's own keys here, then the network's
//! ([`NetConfig`]), the fio words ([`WorkloadParams`]) and scsi_debug's parameters
//! ([`ScsiDebugParams`]), each table kept by the layer that owns the field. [`apply`] looks a
//! key up in them in that order; [`spellings`] lists them for the unknown-key message; the
//! docs test below checks the kernel-words table of `docs/cmdline.md` against them, so a key
//! added here and not there (or the reverse) fails `cargo xtask test`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use scsi::param::number::count;
use scsi::param::{self, Key, ValueError, choice};
use scsi::target::ScsiDebugParams;
use workloads::io::WorkloadParams;
use workloads::sense_cost::SenseCostParams;

use scsi::wait::IoMode;

use super::Workload;
use super::{Cmdline, CmdlineError, DmapoolMode, MAX_CPUS, PoolImpl, SmpInject, TestSelection};
use os::net::config::NetConfig;

/// The kernel's own keys.
pub const KEYS: &[Key<Cmdline>] = &[
    Key {
        name: "workload",
        aliases: &[],
        set: |c, v| {
            c.workload = choice(v, WORKLOADS)?;
            Ok(())
        },
    },
    Key {
        name: "n",
        aliases: &[],
        set: |c, v| {
            c.n = count(v, 1, 1 << 24)?;
            Ok(())
        },
    },
    Key {
        name: "size",
        aliases: &[],
        set: |c, v| {
            c.size = count(v, 1, 1 << 16)?;
            Ok(())
        },
    },
    Key {
        name: "align",
        aliases: &[],
        set: |c, v| {
            let align: usize = count(v, 1, 4096)?;
            if !align.is_power_of_two() {
                return Err(ValueError::expected("a power of two in 1..=4096"));
            }
            c.align = align;
            Ok(())
        },
    },
    Key {
        name: "impl",
        aliases: &[],
        set: |c, v| {
            let impls = [
                ("legacy", PoolImpl::Legacy),
                ("scalable", PoolImpl::Scalable),
                ("both", PoolImpl::Both),
            ];
            c.pool_impl = choice(v, &impls)?;
            Ok(())
        },
    },
    Key {
        name: "dmapool",
        aliases: &[],
        set: |c, v| {
            let modes = [
                ("shared", DmapoolMode::Shared),
                ("per-node", DmapoolMode::PerNode),
            ];
            c.dmapool = Some(choice(v, &modes)?);
            Ok(())
        },
    },
    Key {
        name: "test",
        aliases: &[],
        set: |c, v| {
            // The names are checked against the runner's list once the line is read
            // (`check_tests`): the table's setters know nothing of the runner.
            c.tests = Some(match v {
                "all" => TestSelection::All,
                "list" => TestSelection::List,
                _ => TestSelection::Named(v.split(',').map(String::from).collect()),
            });
            Ok(())
        },
    },
    Key {
        name: "loglevel",
        aliases: &[],
        set: |c, v| {
            c.loglevel = loglevel(v)?;
            Ok(())
        },
    },
    Key {
        name: "maxcpus",
        aliases: &[],
        set: |c, v| {
            c.maxcpus = Some(count(v, 1, MAX_CPUS)?);
            Ok(())
        },
    },
    Key {
        name: "smp_inject",
        aliases: &[],
        set: |c, v| {
            let injections = [
                ("none", SmpInject::None),
                ("ap-no-stack", SmpInject::ApNoStack),
            ];
            c.smp_inject = choice(v, &injections)?;
            Ok(())
        },
    },
    Key {
        name: "io_mode",
        aliases: &[],
        set: |c, v| {
            let modes = [
                ("poll", IoMode::Poll),
                ("irq", IoMode::Irq),
                ("hybrid", IoMode::Hybrid { poll_us: 0 }),
            ];
            c.io_mode = Some(choice(v, &modes)?);
            Ok(())
        },
    },
    Key {
        name: "poll_us",
        aliases: &[],
        set: |c, v| {
            c.poll_us = Some(count(v, 0, 1_000_000)?);
            Ok(())
        },
    },
];

const WORKLOADS: &[(&str, Workload)] = &[
    ("dmapool", Workload::Dmapool),
    ("numa", Workload::Numa),
    ("verify", Workload::Verify),
    ("scan", Workload::Scan),
    ("device", Workload::Device),
    ("fake-rw", Workload::FakeRw),
    ("sense-reserve", Workload::SenseReserve),
    ("sense-cost", Workload::SenseCost),
    ("nbd", Workload::Nbd),
    ("none", Workload::None),
];

/// `0..=5` or a level name.
fn loglevel(value: &str) -> Result<log::LevelFilter, ValueError> {
    use log::LevelFilter as L;
    let levels = [L::Off, L::Error, L::Warn, L::Info, L::Debug, L::Trace];
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        let level: usize = count(value, 0, 5)
            .map_err(|_| ValueError::expected("0..=5 or off|error|warn|info|debug|trace"))?;
        return Ok(levels[level]);
    }
    let names = ["off", "error", "warn", "info", "debug", "trace"];
    choice(
        value,
        &core::array::from_fn::<_, 6, _>(|i| (names[i], levels[i])),
    )
}

/// Applies `spelling=value` through the table that has the key; returns the key's name.
pub fn apply(
    cmdline: &mut Cmdline,
    spelling: &str,
    value: &str,
) -> Result<&'static str, CmdlineError> {
    apply_in(KEYS, cmdline, spelling, value)
        .or_else(|| apply_in(NetConfig::KEYS, &mut cmdline.net, spelling, value))
        .or_else(|| apply_in(WorkloadParams::KEYS, &mut cmdline.io, spelling, value))
        .or_else(|| {
            apply_in(
                SenseCostParams::KEYS,
                &mut cmdline.sense_cost,
                spelling,
                value,
            )
        })
        .or_else(|| {
            apply_in(
                ScsiDebugParams::KEYS,
                &mut cmdline.io.target,
                spelling,
                value,
            )
        })
        .unwrap_or_else(|| {
            Err(CmdlineError::UnknownKey {
                key: spelling.to_string(),
                known: spellings().join(", "),
            })
        })
}

fn apply_in<T>(
    table: &'static [Key<T>],
    target: &mut T,
    spelling: &str,
    value: &str,
) -> Option<Result<&'static str, CmdlineError>> {
    let key = param::find(table, spelling)?;
    Some(
        (key.set)(target, value)
            .map(|()| key.name)
            .map_err(|reason| CmdlineError::bad(spelling, value, reason)),
    )
}

/// Every spelling the command line accepts, names and aliases, in table order.
pub fn spellings() -> Vec<&'static str> {
    let kernel = KEYS.iter().flat_map(Key::spellings);
    let net = NetConfig::KEYS.iter().flat_map(Key::spellings);
    let io = WorkloadParams::KEYS.iter().flat_map(Key::spellings);
    let cost = SenseCostParams::KEYS.iter().flat_map(Key::spellings);
    let target = ScsiDebugParams::KEYS.iter().flat_map(Key::spellings);
    kernel
        .chain(net)
        .chain(io)
        .chain(cost)
        .chain(target)
        .collect()
}

/// `test=` names must be the runner's.
pub(super) fn check_tests(cmdline: &Cmdline, known_tests: &[&str]) -> Result<(), CmdlineError> {
    let Some(TestSelection::Named(names)) = &cmdline.tests else {
        return Ok(());
    };
    match names
        .iter()
        .find(|name| !known_tests.contains(&name.as_str()))
    {
        Some(name) => Err(CmdlineError::bad(
            "test",
            name,
            alloc::format!(
                "expected all, list or a comma-separated list of {}",
                known_tests.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// The NBD server and the stats endpoint cannot share a port; the error blames the key the
/// line gave (`stats_port` if it gave both), so `nbd_port=10810` alone names `nbd_port`.
pub(super) fn check_ports(
    cmdline: &Cmdline,
    given: impl Fn(&str) -> bool,
) -> Result<(), CmdlineError> {
    let net = &cmdline.net;
    if net.nbd_port != net.stats_port {
        return Ok(());
    }
    let (key, other) = if given("stats_port") || !given("nbd_port") {
        ("stats_port", "nbd_port")
    } else {
        ("nbd_port", "stats_port")
    };
    Err(CmdlineError::bad(
        key,
        &net.nbd_port.to_string(),
        alloc::format!("expected a port other than {other}'s {}", net.nbd_port),
    ))
}

/// `poll_us=` is hybrid's window: with any other mode it would silently do nothing.
pub(super) fn check_poll_us(cmdline: &Cmdline) -> Result<(), CmdlineError> {
    match (cmdline.poll_us, cmdline.io_mode()) {
        (Some(poll_us), mode) if !matches!(mode, IoMode::Hybrid { .. }) => Err(CmdlineError::bad(
            "poll_us",
            &poll_us.to_string(),
            alloc::format!("only io_mode=hybrid polls for a window (io_mode is {mode})"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The keys the kernel-words table of `docs/cmdline.md` names: every backticked word of its
    /// first column, up to any `=`.
    fn documented_keys() -> BTreeSet<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cmdline.md");
        let page = std::fs::read_to_string(path).expect("docs/cmdline.md in the workspace");
        let table = page
            .split("| words | meaning |")
            .nth(1)
            .expect("docs/cmdline.md has a '| words | meaning |' table");
        let mut keys = BTreeSet::new();
        for row in table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
        {
            // `\|` inside a cell is an escaped bar, not a column edge.
            let row = row.replace("\\|", "/");
            let words = row.split('|').nth(1).unwrap_or_default();
            for code in words.split('`').skip(1).step_by(2) {
                for word in code.split_ascii_whitespace() {
                    keys.insert(word.split('=').next().unwrap_or(word).to_string());
                }
            }
        }
        keys
    }

    #[test]
    fn the_documented_table_names_exactly_the_keys_of_the_table() {
        let table: BTreeSet<String> = spellings().into_iter().map(String::from).collect();
        let documented = documented_keys();
        let missing: Vec<&String> = table.difference(&documented).collect();
        let extra: Vec<&String> = documented.difference(&table).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "docs/cmdline.md's kernel-words table and the key table differ: \
             not in docs/cmdline.md {missing:?}, not a key {extra:?}"
        );
    }

    #[test]
    fn no_spelling_is_in_two_tables() {
        let all = spellings();
        let unique: BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "{all:?}");
    }

    #[test]
    fn the_unknown_key_message_lists_every_table() {
        let err = apply(&mut Cmdline::default(), "bogus", "1").unwrap_err();
        let text = err.to_string();
        for key in ["workload", "stats_port", "qd", "max_queue"] {
            assert!(text.contains(key), "{text}");
        }
    }
}
