//! Fake virtio devices for host tests: virtio-drivers `Transport`s that process the split
//! virtqueues in host memory the way QEMU does ([`ring`], shared), for virtio-scsi ([`scsi`],
//! re-exported here) and virtio-net ([`net`]).
#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses a different subset"
)]

pub mod net;
pub mod ring;
pub mod scsi;

pub use ring::HeapHal;
pub use scsi::*;
