//! The kernel command line: scsi_debug/fio-style `key=value` words from PVH `cmdline_paddr`.
//!
//! Words are separated by ASCII whitespace. Every word must be `key=value` with a known key and a
//! value that parses; anything else is a [`CmdlineError`] naming the key and the value, and the
//! kernel exits with the failure code instead of guessing. A key given twice is an error too:
//! for a benchmark, silently taking the last of two sizes hides a typo in a script.
//!
//! The value parsers ([`parse_count`], [`parse_choice`]) are public so later keys (`numjobs`,
//! `iodepth`, `bs`, `runtime`, `rw`, `sense=`, scsi_debug's parameters) reuse the same spelling
//! rules: decimal or `0x` hex, with fio's binary suffixes `k`, `m`, `g`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// What the kernel runs after boot when no `test=` is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The mpt3sas chain-pool pattern on the dmapool(s) selected by `impl=`.
    Dmapool,
    /// A dmapool alloc/free storm from every CPU at once, one shared pool against a per-node
    /// pool set (`dmapool=`), with each pool's lock contention (`workload::numa`).
    Numa,
    /// Every SCSI host found on PCI: scan, then write patterns, read back and compare
    /// (`workload::verify`; the pattern is `seed=`-keyed so the host can check the images).
    Verify,
    /// Every SCSI host found on PCI: scan and print what was found (vendor, product, capacity).
    Scan,
    /// Every SCSI host found on PCI: scan, then fio-style random I/O on its first disk with the
    /// `iodepth=`/`bs=`/`rw=`/`runtime=` words (`workload::device`).
    Device,
    /// fio-style random I/O through the midlayer to an in-memory scsi_debug host 0 with the
    /// fio and scsi_debug words, one submission queue per CPU (`workload::fake_rw`).
    FakeRw,
    /// `slab` vs `mempool:2` vs `prealloc` sense buffers on the fake-rw workload, alternating,
    /// clean and with `every_nth` error injection (`workload::sense_reserve`).
    SenseReserve,
    /// Serve the first disk of the scan over NBD on virtio-net, with a stats port, until told
    /// to stop (`workload::nbd`; `ip=`, `gw=`, `nbd_port=`, `stats_port=`).
    Nbd,
    /// Boot, print the machine summary and exit.
    None,
}

/// Which dmapool implementation(s) the dmapool workload drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolImpl {
    /// Per-page free lists, O(n) alloc and free (Linux before 6.4).
    Legacy,
    /// One pool-wide free stack, O(1) alloc and free (Linux 6.4+).
    Scalable,
    /// Legacy then scalable, in one boot.
    Both,
}

/// `dmapool=`: one device-wide dmapool, or one pool per NUMA node (Linux's
/// `dma_pool_create_node`, as the NVMe PRP pools since 2025).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DmapoolMode {
    /// One pool shared by all CPUs.
    Shared,
    /// A pool per node; each CPU allocates from its own node's pool.
    PerNode,
}

/// `smp_inject=`: a deliberate bring-up failure, to show that a CPU that does not come online is
/// reported and the boot goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmpInject {
    /// Start every CPU normally.
    None,
    /// Give CPU 1 no stack: it halts in the trampoline and never comes online.
    ApNoStack,
}

/// Which guest tests `test=` selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestSelection {
    /// Every test that is expected to pass (`test=all`).
    All,
    /// The named tests, in the order given.
    Named(Vec<String>),
}

/// The parsed command line. [`Default`] is what an empty command line means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmdline {
    /// `workload=dmapool|verify|scan|device|none`.
    pub workload: Workload,
    /// `n=`: blocks allocated (and then freed) by the dmapool workload.
    pub n: usize,
    /// `size=`: dmapool block size in bytes.
    pub size: usize,
    /// `align=`: dmapool block alignment in bytes (a power of two).
    pub align: usize,
    /// `impl=legacy|scalable|both`.
    pub pool_impl: PoolImpl,
    /// `dmapool=shared|per-node`; unset, `workload=numa` runs both side by side and
    /// `workload=dmapool` uses a shared pool.
    pub dmapool: Option<DmapoolMode>,
    /// `test=all|NAME[,NAME...]`: run the guest test runner instead of the workload.
    pub tests: Option<TestSelection>,
    /// `loglevel=off|error|warn|info|debug|trace` (or 0..=5).
    pub loglevel: log::LevelFilter,
    /// `maxcpus=N` (Linux's name): start at most N CPUs, the boot CPU included.
    pub maxcpus: Option<usize>,
    /// `smp_inject=none|ap-no-stack`.
    pub smp_inject: SmpInject,
    /// fio and scsi_debug words (`iodepth`, `bs`, `rw`, `runtime`, `ios`, `seed`, `sense`,
    /// `max_queue`, ...), parsed by the `scsi` crate's own parameter table so the guest and
    /// the host examples spell them the same way.
    pub io: scsi::workload::WorkloadParams,
    /// `ip=`, `gw=`, `nbd_port=`, `stats_port=`: the network for `workload=nbd`.
    pub net: crate::net::config::NetConfig,
}

/// The mpt3sas chain pool: 373959 blocks of 128 bytes, 16-byte aligned.
pub const MPT3SAS_CHAIN_BLOCKS: usize = 373_959;

impl Default for Cmdline {
    fn default() -> Self {
        Cmdline {
            workload: Workload::Dmapool,
            n: MPT3SAS_CHAIN_BLOCKS,
            size: 128,
            align: 16,
            pool_impl: PoolImpl::Scalable,
            dmapool: None,
            tests: None,
            loglevel: log::LevelFilter::Info,
            maxcpus: None,
            smp_inject: SmpInject::None,
            io: scsi::workload::WorkloadParams::default(),
            net: crate::net::config::NetConfig::default(),
        }
    }
}

/// Why a command line was rejected. `Display` always starts with `key '<key>':`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    /// The key is not one this kernel knows.
    #[error("key '{key}': unknown key (known: {known})")]
    UnknownKey { key: String, known: &'static str },
    /// A word without `=`, or with nothing after it.
    #[error("key '{key}': missing value (write {key}=VALUE)")]
    MissingValue { key: String },
    /// The value does not parse or is out of range.
    #[error("key '{key}': bad value '{value}': expected {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: String,
    },
    /// The key appeared more than once.
    #[error("key '{key}': given more than once")]
    Duplicate { key: String },
}

impl CmdlineError {
    fn bad(key: &str, value: &str, expected: impl ToString) -> Self {
        CmdlineError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }
}

const KNOWN_KEYS: &str = "workload, n, size, align, impl, dmapool, test, loglevel, maxcpus, smp_inject, \
     ip, gw, nbd_port, stats_port, \
     and the fio/scsi_debug words (iodepth, bs, rw, runtime, ios, seed, sense, max_queue, ...)";
/// Most CPUs `maxcpus=` accepts (the kernel's per-CPU table size).
pub const MAX_CPUS: u64 = crate::topology::MAX_CPUS as u64;

/// Splits a command line into `(key, value)` words without judging the keys.
pub fn words(line: &str) -> impl Iterator<Item = Result<(&str, &str), CmdlineError>> {
    line.split_ascii_whitespace()
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !key.is_empty() && !value.is_empty() => Ok((key, value)),
            Some((key, _)) if !key.is_empty() => Err(CmdlineError::MissingValue {
                key: key.to_string(),
            }),
            _ => Err(CmdlineError::MissingValue {
                key: word.to_string(),
            }),
        })
}

/// Parses an unsigned count: decimal or `0x` hex, optional binary suffix `k`, `m` or `g`
/// (fio's `bs=4k`), within `min..=max`.
pub fn parse_count(key: &str, value: &str, min: u64, max: u64) -> Result<u64, CmdlineError> {
    let expected = || alloc::format!("an integer in {min}..={max} (decimal, 0x hex, k/m/g suffix)");
    let (digits, shift) = match value.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') => (&value[..value.len() - 1], 10),
        Some(b'm') => (&value[..value.len() - 1], 20),
        Some(b'g') => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    let parsed = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse::<u64>(),
    };
    let number = parsed.map_err(|_| CmdlineError::bad(key, value, expected()))?;
    let scaled = number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| CmdlineError::bad(key, value, expected()))?;
    if !(min..=max).contains(&scaled) {
        return Err(CmdlineError::bad(key, value, expected()));
    }
    Ok(scaled)
}

/// Parses one of a fixed set of spellings.
pub fn parse_choice<T: Copy>(
    key: &str,
    value: &str,
    choices: &[(&str, T)],
) -> Result<T, CmdlineError> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, choice)| choice)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            CmdlineError::bad(key, value, alloc::format!("one of {}", names.join("|")))
        })
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

impl Cmdline {
    /// Parses `line`. `known_tests` are the names `test=` accepts besides `all`.
    pub fn parse(line: &str, known_tests: &[&str]) -> Result<Self, CmdlineError> {
        let mut cmdline = Cmdline::default();
        let mut seen: Vec<&str> = Vec::new();
        for word in words(line) {
            let (key, value) = word?;
            if seen.contains(&key) {
                return Err(CmdlineError::Duplicate {
                    key: key.to_string(),
                });
            }
            seen.push(key);
            cmdline.apply(key, value, known_tests)?;
        }
        Ok(cmdline)
    }

    fn apply(&mut self, key: &str, value: &str, known_tests: &[&str]) -> Result<(), CmdlineError> {
        match key {
            "workload" => {
                self.workload = parse_choice(
                    key,
                    value,
                    &[
                        ("dmapool", Workload::Dmapool),
                        ("numa", Workload::Numa),
                        ("verify", Workload::Verify),
                        ("scan", Workload::Scan),
                        ("device", Workload::Device),
                        ("fake-rw", Workload::FakeRw),
                        ("sense-reserve", Workload::SenseReserve),
                        ("nbd", Workload::Nbd),
                        ("none", Workload::None),
                    ],
                )?;
            }
            "n" => self.n = to_usize(parse_count(key, value, 1, 1 << 24)?),
            "size" => self.size = to_usize(parse_count(key, value, 1, 1 << 16)?),
            "align" => {
                let align = parse_count(key, value, 1, 4096)?;
                if !align.is_power_of_two() {
                    return Err(CmdlineError::bad(key, value, "a power of two in 1..=4096"));
                }
                self.align = to_usize(align);
            }
            "impl" => {
                self.pool_impl = parse_choice(
                    key,
                    value,
                    &[
                        ("legacy", PoolImpl::Legacy),
                        ("scalable", PoolImpl::Scalable),
                        ("both", PoolImpl::Both),
                    ],
                )?;
            }
            "dmapool" => {
                self.dmapool = Some(parse_choice(
                    key,
                    value,
                    &[
                        ("shared", DmapoolMode::Shared),
                        ("per-node", DmapoolMode::PerNode),
                    ],
                )?);
            }
            "test" => self.tests = Some(parse_tests(key, value, known_tests)?),
            "loglevel" => self.loglevel = parse_loglevel(key, value)?,
            "maxcpus" => self.maxcpus = Some(to_usize(parse_count(key, value, 1, MAX_CPUS)?)),
            "smp_inject" => {
                self.smp_inject = parse_choice(
                    key,
                    value,
                    &[
                        ("none", SmpInject::None),
                        ("ap-no-stack", SmpInject::ApNoStack),
                    ],
                )?;
            }
            _ if crate::net::config::NetConfig::is_key(key) => self
                .net
                .set(key, value)
                .map_err(|err| CmdlineError::bad(key, value, err))?,
            _ if scsi::workload::WorkloadParams::is_key(key) => self
                .io
                .set(key, value)
                .map_err(|err| CmdlineError::bad(key, value, err))?,
            _ => {
                return Err(CmdlineError::UnknownKey {
                    key: key.to_string(),
                    known: KNOWN_KEYS,
                });
            }
        }
        Ok(())
    }
}

fn parse_tests(
    key: &str,
    value: &str,
    known_tests: &[&str],
) -> Result<TestSelection, CmdlineError> {
    if value == "all" {
        return Ok(TestSelection::All);
    }
    let mut names = Vec::new();
    for name in value.split(',') {
        if !known_tests.contains(&name) {
            let expected = alloc::format!(
                "all or a comma-separated list of {}",
                known_tests.join(", ")
            );
            return Err(CmdlineError::bad(key, name, expected));
        }
        names.push(name.to_string());
    }
    Ok(TestSelection::Named(names))
}

fn parse_loglevel(key: &str, value: &str) -> Result<log::LevelFilter, CmdlineError> {
    use log::LevelFilter as L;
    let levels = [L::Off, L::Error, L::Warn, L::Info, L::Debug, L::Trace];
    if let Ok(digit) = value.parse::<usize>() {
        return levels.get(digit).copied().ok_or_else(|| {
            CmdlineError::bad(key, value, "0..=5 or off|error|warn|info|debug|trace")
        });
    }
    parse_choice(
        key,
        value,
        &[
            ("off", L::Off),
            ("error", L::Error),
            ("warn", L::Warn),
            ("info", L::Info),
            ("debug", L::Debug),
            ("trace", L::Trace),
        ],
    )
}

#[cfg(test)]
mod tests;
