//! A device vector as the completion-wait policy's interrupt source, for every adapter.
//!
//! What differs between adapters is only how the source is masked after a storm: an MSI-X
//! entry has a per-vector mask bit (virtio-scsi), plain MSI without per-vector masking
//! (mptsas) can only be switched off. The rest (the vector's count, the clock, the halt) is
//! the same [`irq::DeviceVector`] everywhere, so it is written once here.

use alloc::sync::Arc;

use drivers::irq::{InterruptSource, Woken};

use crate::arch::{idle, irq, time};

/// How an interrupt source is silenced while the policy waits out a storm.
pub trait Mask {
    /// Masks (`true`) or unmasks the source at the device's MSI or MSI-X capability.
    fn set_masked(&mut self, masked: bool);
}

/// A device vector and the mask of the message that raises it.
#[derive(Debug)]
pub struct VectorSource<M> {
    /// The capability or table entry that sends the vector's message.
    pub mask: M,
    /// The vector, shared with whoever reports its count after the run.
    pub vector: Arc<irq::DeviceVector>,
}

impl<M: Mask> InterruptSource for VectorSource<M> {
    fn count(&self) -> u64 {
        self.vector.count()
    }

    fn now_ns(&self) -> u64 {
        time::now_ns()
    }

    fn wait(&mut self, seen: u64, deadline_ns: u64) -> Woken {
        let (count, now_ns) = self.vector.wait(seen, deadline_ns);
        Woken { count, now_ns }
    }

    fn set_masked(&mut self, masked: bool) {
        self.mask.set_masked(masked);
    }

    fn settle(&mut self) {
        idle::take_pending();
    }
}
