//! Locks for a multi-CPU kernel. Interrupts stay off in this kernel, so a spinlock never needs
//! to mask them; what matters is measuring contention, which is what [`spinlock`] adds
//! (the lock itself lives in `pools::counting_lock`).

pub mod barrier;
pub mod spinlock;
