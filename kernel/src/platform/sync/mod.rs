//! Locks for a multi-CPU kernel. Interrupts stay off in this kernel, so a spinlock never needs
//! to mask them; what matters is measuring contention, which is what [`spinlock`] adds.

pub mod barrier;
#[expect(
    unsafe_code,
    reason = "the raw spinlock behind `lock_api`, whose `RawMutex` is an unsafe trait"
)]
pub mod spinlock;
