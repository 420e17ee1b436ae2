//! The kernel's counting spinlock, which lives in `pools` ([`pools::counting_lock`]) so that the
//! Hermit build of the fake-rw workload (`hermit/app`) counts its slab lock the same way.

pub use pools::counting_lock::{CountingMutex, LockStats};

#[cfg_attr(
    not(target_os = "none"),
    expect(
        unused_imports,
        reason = "on the host only the pure modules are built, and they name the lock through CountingMutex"
    )
)]
pub use pools::counting_lock::CountingSpinLock;
