//! Parsing the plugin's log: `sensepool-insns` lines of `key=value` words (see the comment at the
//! top of `harness/plugin/insn_count.c`). Other lines (QEMU's own `-d plugin` output) are skipped;
//! a malformed plugin line is an error naming it, never a panic.

use std::collections::HashMap;

use crate::error::{Error, Result};

const PREFIX: &str = "sensepool-insns ";

/// One slot's count at one publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The publish number (0, 1, … in the guest's order).
    pub window: u32,
    pub slot: u8,
    /// Windows (BEGIN/END pairs, all vCPUs) the count covers.
    pub windows: u64,
    pub insns: u64,
    /// The same count per vCPU.
    pub vcpu_insns: Vec<u64>,
    /// With the plugin's `tlb=on`: the softmmu TLB model's counts over the same windows.
    pub tlb: Option<TlbCounts>,
    /// With the plugin's `cache=on`: the data-cache model's counts over the same windows.
    pub cache: Option<CacheCounts>,
    /// Of `insns`, those in polls that found nothing and the waits after them (0 for a
    /// workload that marks no polls, or a plugin that predates the count).
    pub waiting: u64,
    /// Doorbell writes (the kernel's NOTIFY markers), working and waiting.
    pub notifies: Split,
    /// With the plugin's `io=on`: MMIO accesses and port instructions, working and waiting.
    pub io: Option<IoCounts>,
    /// Of `insns`, those at addresses in the upper canonical half (bit 63 set): a Linux
    /// guest's kernel, where its user space (fio) runs in the lower half. sensepool's kernel
    /// runs in the lower half, so this is 0 for it. `None` from a plugin that predates the count.
    pub upper_half: Option<u64>,
}

/// A count over a window's working part and its waiting part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub working: u64,
    pub waiting: u64,
}

/// Device register accesses in a slot's windows (`io=on`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Loads and stores that QEMU routed to a device (MMIO).
    pub mmio: Split,
    /// `in`/`out`/`ins`/`outs` instructions.
    pub pio: Split,
}

/// What the plugin's data-cache model (L1D 32 KiB 8-way, L2 1 MiB 16-way, 64-byte lines, LRU;
/// `harness/plugin/cache_model.h`) saw in a slot's windows (`cache=on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheCounts {
    /// Guest loads and stores.
    pub mem: u64,
    /// Accesses whose line was not in L1D.
    pub l1d_misses: u64,
    /// Of those, accesses whose line was not in L2 either.
    pub l2_misses: u64,
}

/// What the plugin's model of QEMU's softmmu data TLB saw in a slot's windows (`tlb=on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbCounts {
    /// Guest loads and stores.
    pub mem: u64,
    /// Lookups that missed the direct-mapped table (victim hits and refills).
    pub misses: u64,
    /// Lookups that missed the victim TLB too: a refill (a guest page walk in QEMU).
    pub fills: u64,
}

/// A translated block executed inside a window (breakdown mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub vaddr: u64,
    pub insns: u64,
    /// Executions in a window's working part.
    pub execs: u64,
    /// Executions in its waiting part (empty polls and the waits after them).
    pub wait_execs: u64,
}

/// Everything one boot's log said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginLog {
    /// The plugin loaded and printed its `start` line.
    pub started: bool,
    pub publishes: Vec<Published>,
    pub blocks: Vec<Block>,
    /// `anomaly` lines: unbalanced markers, a publish inside a window.
    pub anomalies: Vec<String>,
    /// Instructions of the whole boot, from the `exit` line (absent if QEMU died first).
    pub total_insns: Option<u64>,
}

/// Parses a log; `Err` names the first malformed plugin line.
pub fn parse(text: &str) -> Result<PluginLog> {
    let mut log = PluginLog::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(PREFIX) else {
            continue;
        };
        parse_line(rest, &mut log).map_err(|Malformed(reason)| Error::Plugin {
            reason: format!("{reason} in {line:?}"),
        })?;
    }
    Ok(log)
}

/// What is wrong with one plugin line.
struct Malformed(String);

impl From<&str> for Malformed {
    fn from(reason: &str) -> Self {
        Malformed(reason.to_owned())
    }
}

/// A line's `key=value` words.
struct Fields<'a>(HashMap<&'a str, &'a str>);

impl Fields<'_> {
    /// `key`'s value as a decimal or `0x` hex number.
    fn number(&self, key: &str) -> std::result::Result<u64, Malformed> {
        let value = self
            .0
            .get(key)
            .ok_or_else(|| Malformed(format!("no `{key}=`")))?;
        match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.parse(),
        }
        .map_err(|_| Malformed(format!("`{key}={value}` is not a number")))
    }

    /// `key`'s value, 0 when the line has no such key (a count an older plugin did not print).
    fn optional(&self, key: &str) -> std::result::Result<u64, Malformed> {
        match self.0.contains_key(key) {
            true => self.number(key),
            false => Ok(0),
        }
    }

    /// A working/waiting pair: `key=` and `key_waiting=`, 0 when absent.
    fn split(&self, key: &str) -> std::result::Result<Split, Malformed> {
        Ok(Split {
            working: self.optional(key)?,
            waiting: self.optional(&format!("{key}_waiting"))?,
        })
    }

    /// Whether any of `keys` is present.
    fn has(&self, keys: [&str; 2]) -> bool {
        keys.iter().any(|key| self.0.contains_key(key))
    }
}

fn parse_line(rest: &str, log: &mut PluginLog) -> std::result::Result<(), Malformed> {
    let (kind, tail) = match rest.split_once(' ') {
        Some((kind, tail)) => (kind, tail),
        None => (rest, ""),
    };
    if kind == "anomaly" {
        log.anomalies.push(tail.to_owned());
        return Ok(());
    }
    let mut map: HashMap<&str, &str> = tail
        .split_whitespace()
        .filter_map(|word| word.split_once('='))
        .collect();
    if let Some((key, value)) = kind.split_once('=') {
        map.insert(key, value);
    }
    let fields = Fields(map);
    match kind.split_once('=').map_or(kind, |(key, _)| key) {
        "start" => log.started = true,
        "publish" => log.publishes.push(publish(&fields)?),
        "tb" => log.blocks.push(Block {
            vaddr: fields.number("vaddr")?,
            insns: fields.number("insns")?,
            execs: fields.number("execs")?,
            wait_execs: fields.optional("wait_execs")?,
        }),
        "exit" => log.total_insns = Some(fields.number("total")?),
        // `published=K` closes a publish; nothing to keep.
        _ => {}
    }
    Ok(())
}

/// A `publish=N slot=S windows=W insns=I vcpu_insns=A/B [mem=M tlb_… | l1d_… l2_…]` line.
fn publish(fields: &Fields<'_>) -> std::result::Result<Published, Malformed> {
    let window = u32::try_from(fields.number("publish")?).map_err(|_| "publish too large")?;
    let slot = u8::try_from(fields.number("slot")?).map_err(|_| "slot too large")?;
    let vcpu_insns = fields
        .0
        .get("vcpu_insns")
        .ok_or("no `vcpu_insns=`")?
        .split('/')
        .map(|n| {
            n.parse()
                .map_err(|_| Malformed(format!("vcpu_insns `{n}`")))
        })
        .collect::<std::result::Result<Vec<u64>, Malformed>>()?;
    let tlb = match fields.has(["tlb_misses", "tlb_fills"]) {
        true => Some(TlbCounts {
            mem: fields.number("mem")?,
            misses: fields.number("tlb_misses")?,
            fills: fields.number("tlb_fills")?,
        }),
        false => None,
    };
    let cache = match fields.has(["l1d_misses", "l2_misses"]) {
        true => Some(CacheCounts {
            mem: fields.number("mem")?,
            l1d_misses: fields.number("l1d_misses")?,
            l2_misses: fields.number("l2_misses")?,
        }),
        false => None,
    };
    let io = match fields.has(["mmio", "pio"]) {
        true => Some(IoCounts {
            mmio: fields.split("mmio")?,
            pio: fields.split("pio")?,
        }),
        false => None,
    };
    let insns = fields.number("insns")?;
    let waiting = fields.optional("waiting")?;
    let upper_half = match fields.0.contains_key("upper_half") {
        true => Some(fields.number("upper_half")?),
        false => None,
    };
    within_window(insns, "waiting", Some(waiting))?;
    within_window(insns, "upper_half", upper_half)?;
    Ok(Published {
        window,
        slot,
        windows: fields.number("windows")?,
        insns,
        vcpu_insns,
        tlb,
        cache,
        waiting,
        notifies: fields.split("notifies")?,
        io,
        upper_half,
    })
}

/// An error when a part of a window (`key=` of a publish line) exceeds the window's `insns`.
fn within_window(insns: u64, key: &str, part: Option<u64>) -> std::result::Result<(), Malformed> {
    match part {
        Some(part) if part > insns => Err(Malformed(format!("{key}={part} exceeds insns={insns}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_kind_is_read() {
        let log = parse(
            "plugin noise\n\
             sensepool-insns start api=1 vcpus=2 breakdown=on\n\
             sensepool-insns publish=3 slot=1 windows=2 insns=42 vcpu_insns=40/2\n\
             sensepool-insns published=3\n\
             sensepool-insns publish=4 slot=2 windows=1 insns=9 vcpu_insns=9/0 mem=5 tlb_misses=2 tlb_fills=1\n\
             sensepool-insns publish=5 slot=0 windows=1 insns=9 vcpu_insns=9/0 mem=5 l1d_misses=3 l2_misses=1\n\
             sensepool-insns publish=6 slot=0 windows=1 insns=90 vcpu_insns=90/0 waiting=30 notifies=2 notifies_waiting=0 mmio=4 mmio_waiting=6 pio=0 pio_waiting=1\n\
             sensepool-insns anomaly vcpu=1 END without a matching BEGIN\n\
             sensepool-insns tb vaddr=0x10a0f0 insns=7 execs=1000\n\
             sensepool-insns tb vaddr=0x10a100 insns=3 execs=10 wait_execs=5\n\
             sensepool-insns exit total=123 publishes=4 anomalies=1\n",
        )
        .unwrap();
        assert!(log.started);
        assert_eq!(
            log.publishes,
            [
                Published {
                    window: 3,
                    slot: 1,
                    windows: 2,
                    insns: 42,
                    vcpu_insns: vec![40, 2],
                    tlb: None,
                    cache: None,
                    waiting: 0,
                    notifies: Split::default(),
                    io: None,
                    upper_half: None,
                },
                Published {
                    window: 4,
                    slot: 2,
                    windows: 1,
                    insns: 9,
                    vcpu_insns: vec![9, 0],
                    tlb: Some(TlbCounts {
                        mem: 5,
                        misses: 2,
                        fills: 1
                    }),
                    cache: None,
                    waiting: 0,
                    notifies: Split::default(),
                    io: None,
                    upper_half: None,
                },
                Published {
                    window: 5,
                    slot: 0,
                    windows: 1,
                    insns: 9,
                    vcpu_insns: vec![9, 0],
                    tlb: None,
                    cache: Some(CacheCounts {
                        mem: 5,
                        l1d_misses: 3,
                        l2_misses: 1
                    }),
                    waiting: 0,
                    notifies: Split::default(),
                    io: None,
                    upper_half: None,
                },
                Published {
                    window: 6,
                    slot: 0,
                    windows: 1,
                    insns: 90,
                    vcpu_insns: vec![90, 0],
                    tlb: None,
                    cache: None,
                    waiting: 30,
                    notifies: Split {
                        working: 2,
                        waiting: 0
                    },
                    io: Some(IoCounts {
                        mmio: Split {
                            working: 4,
                            waiting: 6
                        },
                        pio: Split {
                            working: 0,
                            waiting: 1
                        },
                    }),
                    upper_half: None,
                }
            ]
        );
        assert_eq!(log.anomalies, ["vcpu=1 END without a matching BEGIN"]);
        assert_eq!(
            log.blocks,
            [
                Block {
                    vaddr: 0x10a0f0,
                    insns: 7,
                    execs: 1000,
                    wait_execs: 0
                },
                Block {
                    vaddr: 0x10a100,
                    insns: 3,
                    execs: 10,
                    wait_execs: 5
                }
            ]
        );
        assert_eq!(log.total_insns, Some(123));
    }

    /// A Linux window: fio in the lower half, the kernel in the upper; the split is exact.
    #[test]
    fn the_upper_half_count_is_read_and_bounded_by_the_window() {
        let log = parse(
            "sensepool-insns publish=0 slot=0 windows=1 insns=1000 vcpu_insns=1000/0 waiting=0 notifies=0 notifies_waiting=0 upper_half=700\n",
        )
        .unwrap();
        assert_eq!(log.publishes[0].upper_half, Some(700));
        let old =
            parse("sensepool-insns publish=0 slot=0 windows=1 insns=5 vcpu_insns=5\n").unwrap();
        assert_eq!(old.publishes[0].upper_half, None, "an older plugin's line");
        let bad = "sensepool-insns publish=0 slot=0 windows=1 insns=5 vcpu_insns=5 upper_half=6";
        let error = parse(bad).unwrap_err().to_string();
        assert!(error.contains("upper_half=6 exceeds insns=5"), "{error}");
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for bad in [
            "sensepool-insns publish=x slot=0 windows=1 insns=1 vcpu_insns=1",
            "sensepool-insns publish=1 slot=999 windows=1 insns=1 vcpu_insns=1",
            "sensepool-insns publish=1 slot=0 windows=1 vcpu_insns=1",
            "sensepool-insns publish=1 slot=0 windows=1 insns=1 vcpu_insns=1/z",
            "sensepool-insns tb vaddr=0xzz insns=1 execs=1",
            "sensepool-insns exit",
            "sensepool-insns publish=1 slot=0 windows=1 insns=1 vcpu_insns=1 mem=3 tlb_fills=1",
            "sensepool-insns publish=1 slot=0 windows=1 insns=1 vcpu_insns=1 mem=3 l1d_misses=1",
            "sensepool-insns publish=1 slot=0 windows=1 insns=1 vcpu_insns=1 l1d_misses=1 l2_misses=0",
            "sensepool-insns publish=1 slot=0 windows=1 insns=1 vcpu_insns=1 waiting=2",
            "sensepool-insns publish=1 slot=0 windows=1 insns=9 vcpu_insns=9 mmio=x",
            "sensepool-insns tb vaddr=0x10 insns=1 execs=1 wait_execs=-1",
            "sensepool-insns publish=1 slot=0 windows=1 insns=9 vcpu_insns=9 upper_half=x",
        ] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }

    #[test]
    fn an_empty_log_has_not_started() {
        let log = parse("").unwrap();
        assert!(!log.started);
        assert!(log.publishes.is_empty());
    }
}
