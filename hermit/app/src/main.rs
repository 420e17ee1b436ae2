//! sensepool on Hermit: the unchanged `pools`, `scsi` and `drivers` crates as a Hermit
//! (hermit-kernel 0.11) application, booted by `hermit/loader` under QEMU.
//!
//! Hermit hands the application the words after `--` in its bootargs (the loader puts the QEMU
//! `-append` line there). They are the sensepool kernel's words: `workload=fake-rw` (the
//! default; the in-memory scsi_debug), `workload=verify`, `workload=scan`, `workload=device` (the
//! virtio-scsi and LSI SAS1068 adapters on PCI; [`storage`]) or `workload=nbd` (the first disk
//! over NBD on Hermit's TCP stack; [`nbd_workload`], with `nbd::config`'s network words),
//! `io_mode=`/`poll_us=` ([`io_words`]) and the fio and scsi_debug keys of [`workloads::io::WorkloadParams`]. Anything else is a `CMDLINE ERROR:` line that names the
//! word, and the boot fails; a key given twice is an error too, as on the sensepool kernel.
//!
//! The runs print the same console lines and `RESULT` fields as the sensepool kernel's
//! (`workloads::io::fake_rw`, `workloads::verify` and `scsi::midlayer::scan_text` build them for
//! both) and leave QEMU through isa-debug-exit with the same codes.
#![no_std]
#![no_main]
#![deny(unsafe_code)]

extern crate alloc;

mod attach;
#[expect(
    unsafe_code,
    reason = "`sys_spawn2` runs a job on a task pinned to a core, given the address of its call"
)]
mod cores;
mod fake_rw;
#[expect(
    unsafe_code,
    reason = "configuration ports, BARs checked in Hermit's page tables (the SAS1068's as its registers), and virtio-drivers' `Hal` over Hermit's heap"
)]
mod hal;
#[expect(unsafe_code, reason = "the fw_cfg ports, for the NBD control secret")]
mod host_files;
mod io_words;
#[expect(
    unsafe_code,
    reason = "the handler's read of the virtio ISR byte, and `cli`/`sti; hlt` around the halt"
)]
mod irq;
mod mpt;
mod nbd_server;
mod nbd_workload;
#[expect(
    unsafe_code,
    reason = "heap chunks as a `pools::Backing`, and the isa-debug-exit port"
)]
mod platform;
#[expect(
    unsafe_code,
    reason = "Hermit's socket calls take raw pointers to buffers and addresses"
)]
mod sockets;
mod storage;
mod virtio;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use hermit::println;
use nbd::config::NetConfig;
use scsi::wait::IoMode;
use workloads::io::{WorkloadError, WorkloadParams};

use crate::platform::ExitCode;

/// Why the command line was refused.
#[derive(Debug, thiserror::Error)]
pub enum CmdlineError {
    /// A word without `=`.
    #[error("command line word {word:?} is not key=value")]
    NotKeyValue {
        /// The word.
        word: String,
    },
    /// A workload this build does not have.
    #[error("workload={name} is not available on Hermit (only fake-rw, verify, scan and device)")]
    Workload {
        /// The name given.
        name: String,
    },
    /// The same key twice.
    #[error("key {key} given twice")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// A bad `io_mode=` or `poll_us=`.
    #[error("key '{key}': bad value '{value}': {reason}")]
    IoWord {
        /// `io_mode` or `poll_us`.
        key: String,
        /// The value given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A workload key or value the `scsi` crate refused.
    #[error(transparent)]
    Param(#[from] WorkloadError),
    /// A network word (`nbd::config`) with a value it does not take.
    #[error("network parameter `{key}={value}`: {reason}")]
    Net {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: scsi::param::ValueError,
    },
}

/// The workloads of the Hermit build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The in-memory scsi_debug run (the default).
    FakeRw,
    /// Write, read back and compare on every virtio-scsi disk.
    Verify,
    /// Only scan the adapters.
    Scan,
    /// fio-style random I/O on the first disk of every adapter.
    Device,
    /// Serve the first disk over NBD on Hermit's TCP stack.
    Nbd,
}

/// What the command line asks for.
#[derive(Debug, Clone)]
pub struct Words {
    /// The workload.
    pub workload: Workload,
    /// Its fio and scsi_debug parameters.
    pub params: WorkloadParams,
    /// How completions are waited for ([`io_words`]).
    pub io_mode: IoMode,
    /// The network words (`workload=nbd`).
    pub net: NetConfig,
}

/// Parses the application's words into the workload, its parameters and how completions are
/// waited for ([`io_words`]).
pub fn parse(words: &[String]) -> Result<Words, CmdlineError> {
    let mut params = WorkloadParams::default();
    let mut net = NetConfig::default();
    let mut io = io_words::IoWords::default();
    let mut workload = Workload::FakeRw;
    let mut seen: Vec<&str> = Vec::new();
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| CmdlineError::NotKeyValue { word: word.clone() })?;
        if seen.contains(&key) {
            return Err(CmdlineError::Duplicate {
                key: key.to_string(),
            });
        }
        seen.push(key);
        if key == "workload" {
            workload = match value {
                "fake-rw" => Workload::FakeRw,
                "verify" => Workload::Verify,
                "scan" => Workload::Scan,
                "device" => Workload::Device,
                "nbd" => Workload::Nbd,
                _ => {
                    return Err(CmdlineError::Workload {
                        name: value.to_string(),
                    });
                }
            };
            continue;
        }
        if let Some(entry) = scsi::param::find(NetConfig::KEYS, key) {
            (entry.set)(&mut net, value).map_err(|reason| CmdlineError::Net {
                key: key.to_string(),
                value: value.to_string(),
                reason,
            })?;
            continue;
        }
        if !io.set(key, value)? {
            params.set(key, value)?;
        }
    }
    Ok(Words {
        workload,
        params,
        io_mode: io.resolve(workload)?,
        net,
    })
}

/// The arguments after `argv[0]`, as Hermit passes them.
///
/// # Safety
/// `argv` must hold `argc` NUL-terminated strings, as Hermit's `runtime_entry` contract gives.
#[expect(unsafe_code, reason = "reading Hermit's C argv")]
unsafe fn words(argc: i32, argv: *const *const u8) -> Vec<String> {
    (1..usize::try_from(argc).unwrap_or(0))
        .map(|index| {
            // SAFETY: the caller guarantees `argc` valid NUL-terminated entries.
            let text = unsafe { core::ffi::CStr::from_ptr((*argv.add(index)).cast()) };
            String::from_utf8_lossy(text.to_bytes()).into_owned()
        })
        .collect()
}

/// Hermit's application entry point (called on its first task once the kernel is up).
#[expect(
    unsafe_code,
    reason = "Hermit calls this symbol by name with its C argv"
)]
#[unsafe(no_mangle)]
extern "C" fn runtime_entry(argc: i32, argv: *const *const u8, _env: *const *const u8) -> ! {
    // SAFETY: Hermit passes its argv array of `argc` NUL-terminated strings.
    let words = unsafe { words(argc, argv) };
    let code = match parse(&words) {
        Ok(words) => match words.workload {
            Workload::FakeRw => fake_rw::run(&words.params),
            Workload::Device => storage::device(&words.params, words.io_mode),
            Workload::Nbd => nbd_workload::run(&words.params, words.io_mode, words.net),
            Workload::Verify | Workload::Scan => storage::verify(
                &words.params,
                words.io_mode,
                words.workload == Workload::Verify,
            ),
        },
        Err(error) => {
            // The sensepool kernel's report line for a refused command line, which xtask knows.
            println!("CMDLINE ERROR: {error}");
            ExitCode::Failure
        }
    };
    platform::exit(code)
}
