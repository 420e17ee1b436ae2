//! Counted windows: where a workload's measured loop starts and ends, for
//! `cargo xtask bench … --count-insns`. The stack's clock (`pools::clock::Clock`) only keeps
//! time (and says how to wait); marking windows is the lab's business, so it is a trait of its
//! own here that the workloads ask of their clock, and the guest kernels (the sensepool kernel
//! and the Hermit application) implement with their instruction-count markers
//! ([`crate::insn_marker`]). Everything else takes the defaults, which do nothing.

use alloc::rc::Rc;

/// Marks the timed windows of a workload.
pub trait CountedWindows {
    /// A timed window opens: the workload's measured loop starts now. `slot` names the case
    /// (the fake-rw loop passes its sense mode's `SenseMode::slot`). The guest kernels put an
    /// instruction-count marker here; the default does nothing.
    fn window_begin(&self, slot: u8) {
        let _ = slot;
    }

    /// The timed window opened by [`window_begin`](Self::window_begin) closes.
    fn window_end(&self, slot: u8) {
        let _ = slot;
    }

    /// A poll of the device starts (inside a window). What follows is the I/Os' work unless
    /// [`poll_empty`](Self::poll_empty) says otherwise.
    fn poll_begin(&self) {}

    /// The poll since [`poll_begin`](Self::poll_begin) found nothing: it, and what the loop
    /// does until the next poll (halting, taking the interrupt), is waiting, counted apart from
    /// the work (`insns_waiting_per_op`).
    fn poll_empty(&self) {}
}

/// Implements [`CountedWindows`] for a guest's clock type with the instruction-count markers
/// ([`crate::insn_marker`], x86_64): the one implementation both guests (the sensepool kernel's
/// clock and the Hermit application's) use, so their windows are bracketed by the same
/// instructions.
#[cfg(target_arch = "x86_64")]
#[macro_export]
macro_rules! insn_marked_windows {
    ($clock:ty) => {
        impl $crate::window::CountedWindows for $clock {
            #[inline]
            fn window_begin(&self, slot: u8) {
                $crate::insn_marker::begin(slot);
            }
            #[inline]
            fn window_end(&self, slot: u8) {
                $crate::insn_marker::end(slot);
            }
            #[inline]
            fn poll_begin(&self) {
                $crate::insn_marker::poll();
            }
            #[inline]
            fn poll_empty(&self) {
                $crate::insn_marker::empty();
            }
        }
    };
}

impl<W: CountedWindows + ?Sized> CountedWindows for &W {
    fn window_begin(&self, slot: u8) {
        (**self).window_begin(slot)
    }
    fn window_end(&self, slot: u8) {
        (**self).window_end(slot)
    }
    fn poll_begin(&self) {
        (**self).poll_begin()
    }
    fn poll_empty(&self) {
        (**self).poll_empty()
    }
}

impl<W: CountedWindows + ?Sized> CountedWindows for Rc<W> {
    fn window_begin(&self, slot: u8) {
        (**self).window_begin(slot)
    }
    fn window_end(&self, slot: u8) {
        (**self).window_end(slot)
    }
    fn poll_begin(&self) {
        (**self).poll_begin()
    }
    fn poll_empty(&self) {
        (**self).poll_empty()
    }
}

/// Simulated time counts no instructions.
#[cfg(feature = "manual-clock")]
impl CountedWindows for pools::clock::ManualClock {}
