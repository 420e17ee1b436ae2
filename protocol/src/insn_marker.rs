//! Instruction-count markers: the guest half of `cargo xtask bench … --count-insns`.
//!
//! Under QEMU with xtask's TCG plugin (`harness/plugin/insn_count.c`) every guest instruction is
//! counted per vCPU. A workload brackets its timed window with [`begin`] and [`end`] and, once
//! every CPU's window has closed, calls [`publish`]: the plugin then reports, per slot, the
//! instructions all vCPUs executed inside their windows since the last publish. The `RESULT`
//! line carries the publish number, the slot and the operation count ([`Counted`]), and xtask
//! joins them into `insns_per_op`.
//!
//! A marker is one `nopl DISP(%rax,%rax,1)` (bytes `0f 1f 84 00` + disp32) with
//! DISP = `0x5e45_0000 | op << 8 | slot`: an architectural no-op costing one instruction, which
//! the plugin recognises by its bytes when it translates the block. Compilers pad with the same
//! NOP only with displacement 0. Without the plugin (or under KVM) markers do nothing.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

const BEGIN: u32 = 1;
const END: u32 = 2;
const PUBLISH: u32 = 3;
const POLL: u32 = 4;
const EMPTY: u32 = 5;
const NOTIFY: u32 = 6;

/// Emits the marker `op` for `slot` (a constant in the instruction, so one arm per slot).
macro_rules! marker {
    ($op:expr, $slot:expr, [$($n:literal),*]) => {
        match $slot {
            $(
                // SAFETY: a multi-byte NOP: it reads no memory (the address is never
                // accessed), writes nothing and keeps the flags. It is not `nomem`, so the
                // compiler keeps the window's memory accesses on their side of it.
                $n => unsafe {
                    core::arch::asm!(
                        "nopl {disp}(%rax,%rax,1)",
                        disp = const 0x5e45_0000u32 | ($op << 8) | $n,
                        options(att_syntax, nostack, preserves_flags)
                    )
                },
            )*
            _ => {}
        }
    };
}

/// Opens this CPU's counted window on `slot`: the plugin keeps 16 slots apart (one per case
/// compared in a publish); a slot of 16 or more emits no marker.
#[inline(always)]
pub fn begin(slot: u8) {
    marker!(
        BEGIN,
        slot,
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
}

/// Closes this CPU's window on `slot`.
#[inline(always)]
pub fn end(slot: u8) {
    marker!(
        END,
        slot,
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
}

/// A poll of the device starts. Inside a window the plugin counts what follows as work unless
/// the poll turns out [`empty`].
#[inline(always)]
pub fn poll() {
    marker!(POLL, 0u8, [0]);
}

/// The poll since the last [`poll`] found nothing: from that poll up to the next one the window
/// is waiting (the plugin's `waiting=`), not working.
#[inline(always)]
pub fn empty() {
    marker!(EMPTY, 0u8, [0]);
}

/// A doorbell write (a notification of the device) follows.
#[inline(always)]
pub fn notify() {
    marker!(NOTIFY, 0u8, [0]);
}

/// The next publish number: the plugin counts its publishes in the same order.
static PUBLISHED: AtomicU32 = AtomicU32::new(0);
/// Keeps the counter and the marker in one order when two CPUs publish at once: a plain spin
/// flag, as a publish happens once per measured case, outside every window.
static PUBLISHING: AtomicBool = AtomicBool::new(false);

/// Publishes the windows closed since the last publish (every CPU's window must be closed)
/// and returns the publish number the `RESULT` lines name.
pub fn publish() -> u32 {
    while PUBLISHING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    let number = PUBLISHED.fetch_add(1, Ordering::Relaxed);
    marker!(PUBLISH, 0u8, [0]);
    PUBLISHING.store(false, Ordering::Release);
    number
}

/// What a `RESULT` line needs to be joined with the plugin's count: the line's type carries it
/// as an [`InsnCount`](crate::result::InsnCount) (`"insn_window":K,"insn_slot":S,"insn_ops":N`,
/// see [`Counted::insn_count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    /// The [`publish`] number.
    pub window: u32,
    /// The slot the windows were counted on.
    pub slot: u8,
    /// Operations (I/Os, allocations + frees) the slot's windows covered.
    pub ops: u64,
}

impl Counted {
    /// The keys as the typed results carry them (flattened into the line).
    pub fn insn_count(&self) -> crate::result::InsnCount {
        crate::result::InsnCount {
            insn_window: u64::from(self.window),
            insn_slot: u64::from(self.slot),
            insn_ops: self.ops,
        }
    }
}
