//! The `VERIFY-PLAN {json}` lines of `workload=verify`: one per range it writes, so xtask checks
//! the disk image after QEMU exits from what the guest wrote rather than from offsets copied by
//! hand.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// One range `workload=verify` writes with the `offset-u64` pattern.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyPlanRange {
    /// The guest's name for the disk (`sda`).
    pub disk: String,
    /// Its host:channel:target:LUN address.
    pub hctl: String,
    /// Its unit serial number: the profile's `[[disk]] name`.
    pub serial: String,
    /// Bytes per logical block.
    pub block_len: u64,
    /// The disk's size in blocks.
    pub blocks: u64,
    /// The plan's seed.
    pub seed: u64,
    /// The plan's name for the range.
    pub range: String,
    /// Its first block.
    pub lba: u64,
    /// Its length in blocks.
    pub len_blocks: u64,
}
