//! fake-rw results as xtask keeps them: the guest's own type
//! ([`protocol::result::FakeRwResult`], what the kernel prints), read once from its line, in a
//! [`Run`] with what xtask knows around the boot (vCPUs, repetition, kernel, the host CPUs QEMU
//! got) and its instruction counts. Reading a line fails, naming the field, when the guest and
//! xtask disagree; the table's columns are checked against the type by a test.

use protocol::result::{FakeRwResult, InsnKeys, IoResult};
use serde::{Deserialize, Serialize};

use benchkit::Run;

/// One guest boot's fake-rw result and xtask's notes on it.
pub type FakeRwRecord = Run<FakeRwResult>;

/// What a host run (`cargo run -p workloads --example fake_rw`) prints, named as the guest's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFakeRw {
    /// `fake-rw` (the example does not print it; xtask names the bench).
    #[serde(default)]
    pub bench: String,
    /// What the example printed.
    #[serde(flatten)]
    pub io: IoResult,
}

impl InsnKeys for HostFakeRw {}

/// A host run with its context (one host thread: `smp` 1).
pub type HostFakeRwRecord = Run<HostFakeRw>;
