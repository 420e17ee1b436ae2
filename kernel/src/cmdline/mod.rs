//! The kernel command line: scsi_debug/fio-style `key=value` words from PVH `cmdline_paddr`.
//!
//! Words are separated by ASCII whitespace. Every word must be `key=value` with a known key and a
//! value that parses; anything else is a [`CmdlineError`] naming the key and the value, and the
//! kernel exits with the failure code instead of guessing. A key given twice is an error too:
//! for a benchmark, silently taking the last of two sizes hides a typo in a script.
//!
//! Every key is spelled once, in a key table ([`scsi::param::Key`]: name, aliases, setter):
//! the kernel's own in [`keys`], the network's in [`os::net::config`], the fio and
//! scsi_debug words in the `scsi` crate. [`keys`] joins them; the parser, the unknown-key
//! message and the docs check (`docs/cmdline.md`) read that union. Numbers have one syntax everywhere
//! ([`scsi::param::number`]: decimal or `0x` hex, fio's `k`/`m`/`g`, durations in `ns`..`s`).
//! A name and its alias (`iodepth` and `qd`) count as one key for the duplicate check.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use scsi::wait::IoMode;

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
    /// The 2008 sense-buffer experiment's rows (`static`, `slab`, `slab+idle:K`, `mempool:N`)
    /// as rings of commands on our sense allocator, shaped as the stock kernels' `sp_sense`
    /// module runs them (`workload::sense_cost`; `modes=`, `touch=`, `hosts=`, `cpus=`,
    /// `fail=`, `rounds=`, `commands=`, `commands_short=`).
    SenseCost,
    /// Serve the first disk of the scan over NBD on virtio-net, with a stats port, until told
    /// to stop (`workload::nbd`; `ip=`, `gw=`, `nbd_port=`, `stats_port=`, `nbd_max_clients=`,
    /// `nbd_idle_s=`).
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

pub use os::config::SmpInject;

/// Which guest tests `test=` selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestSelection {
    /// Every test that is expected to pass (`test=all`).
    All,
    /// Print the test table (`test=list`), run nothing: xtask builds its guest test list from
    /// it, so a test is registered only in the kernel.
    List,
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
    /// `test=all|list|NAME[,NAME...]`: run the guest test runner instead of the workload.
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
    pub io: workloads::io::WorkloadParams,
    /// `modes=`, `touch=`, `hosts=`, `cpus=`, `fail=`, `rounds=`, `commands=`,
    /// `commands_short=`: `workload=sense-cost`.
    pub sense_cost: workloads::sense_cost::SenseCostParams,
    /// `ip=`, `gw=`, `nbd_port=`, `stats_port=`, `nbd_max_clients=`, `nbd_idle_s=`: the network
    /// for `workload=nbd`.
    pub net: os::net::config::NetConfig,
    /// `io_mode=poll|irq|hybrid` as given; [`Cmdline::io_mode`] applies the default.
    pub io_mode: Option<IoMode>,
    /// `poll_us=N`: hybrid's polling window, in microseconds.
    pub poll_us: Option<u32>,
}

/// Hybrid's polling window when `poll_us=` is not given.
pub const DEFAULT_POLL_US: u32 = 50;

impl Cmdline {
    /// The words the OS takes before the lab runs.
    pub fn boot_config(&self) -> os::BootConfig {
        os::BootConfig {
            loglevel: self.loglevel,
            maxcpus: self.maxcpus,
            smp_inject: self.smp_inject,
        }
    }

    /// How device completions are waited for: `io_mode=` (with `poll_us=`), else `irq`
    /// wherever a device is driven (`verify`, `device`, `nbd`, `scan`) and `poll` elsewhere
    /// (`fake-rw` has no device).
    pub fn io_mode(&self) -> IoMode {
        match self.io_mode {
            Some(IoMode::Hybrid { .. }) => IoMode::Hybrid {
                poll_us: self.poll_us.unwrap_or(DEFAULT_POLL_US),
            },
            Some(mode) => mode,
            None => match self.workload {
                Workload::Verify | Workload::Device | Workload::Nbd | Workload::Scan => IoMode::Irq,
                _ => IoMode::Poll,
            },
        }
    }
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
            io: workloads::io::WorkloadParams::default(),
            sense_cost: workloads::sense_cost::SenseCostParams::default(),
            net: os::net::config::NetConfig::default(),
            io_mode: None,
            poll_us: None,
        }
    }
}

/// Why a command line was rejected. `Display` starts with `key '<key>':` when one word is at
/// fault, and with `command line:` when the line as a whole is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    /// The key is not one this kernel knows.
    #[error("key '{key}': unknown key (known: {known})")]
    UnknownKey { key: String, known: String },
    /// A word without `=`, or with nothing after it.
    #[error("key '{key}': missing value (write {key}=VALUE)")]
    MissingValue { key: String },
    /// The value does not parse or is out of range.
    #[error("key '{key}': bad value '{value}': {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
    /// The key appeared more than once, as `key` now and as `earlier` before (the same
    /// spelling, or a name and its alias).
    #[error("key '{key}': given more than once (also as '{earlier}')")]
    Duplicate { key: String, earlier: String },
    /// The loader's command line has no NUL within the bytes the kernel reads: it was cut,
    /// and a cut word (`runtime=100ms` read as `runtime=10`) must not run.
    #[error("command line: no NUL terminator within {max_bytes} bytes (line too long)")]
    Unterminated { max_bytes: usize },
    /// The loader's command line is not UTF-8.
    #[error("command line: byte {offset} ({byte:#04x}) is not valid UTF-8")]
    NotUtf8 { offset: usize, byte: u8 },
}

impl CmdlineError {
    fn bad(key: &str, value: &str, reason: impl ToString) -> Self {
        CmdlineError::BadValue {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Most CPUs `maxcpus=` accepts (the kernel's per-CPU table size).
pub const MAX_CPUS: u64 = os::platform::topology::MAX_CPUS as u64;

/// The command line in the loader's buffer: the bytes before the first NUL of `window` (the
/// bytes the kernel may read at `cmdline_paddr`), which must be UTF-8. A window without a NUL
/// is an error, not a cut line.
pub fn boot_line(window: &[u8]) -> Result<&str, CmdlineError> {
    let len = window
        .iter()
        .position(|&byte| byte == 0)
        .ok_or(CmdlineError::Unterminated {
            max_bytes: window.len(),
        })?;
    core::str::from_utf8(&window[..len]).map_err(|err| {
        let offset = err.valid_up_to();
        CmdlineError::NotUtf8 {
            offset,
            byte: window[offset],
        }
    })
}

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

impl Cmdline {
    /// Parses `line`. `known_tests` are the names `test=` accepts besides `all`.
    pub fn parse(line: &str, known_tests: &[&str]) -> Result<Self, CmdlineError> {
        let mut cmdline = Cmdline::default();
        // (key name, spelling used), so `qd=` after `iodepth=` is caught and both are named.
        let mut seen: Vec<(&'static str, &str)> = Vec::new();
        for word in words(line) {
            let (spelling, value) = word?;
            let name = keys::apply(&mut cmdline, spelling, value)?;
            if let Some(&(_, earlier)) = seen.iter().find(|(seen_name, _)| *seen_name == name) {
                return Err(CmdlineError::Duplicate {
                    key: spelling.to_string(),
                    earlier: earlier.to_string(),
                });
            }
            seen.push((name, spelling));
        }
        keys::check_tests(&cmdline, known_tests)?;
        keys::check_ports(&cmdline, |name| seen.iter().any(|(seen, _)| *seen == name))?;
        keys::check_poll_us(&cmdline)?;
        Ok(cmdline)
    }
}

pub mod keys;

#[cfg(test)]
mod tests;
