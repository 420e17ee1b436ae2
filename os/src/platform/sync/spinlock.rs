//! The kernel's counting spinlock, which lives in `pools` ([`pools::counting_lock`]) so that the
//! Hermit build of the fake-rw workload (`hermit/app`) counts its slab lock the same way.

pub use pools::counting_lock::{CountingMutex, LockStats};

pub use pools::counting_lock::CountingSpinLock;
