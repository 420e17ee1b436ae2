//! What the lab needs from the kernel it runs on.
//!
//! The OS must not depend on the lab (`tests/apart.rs`), so the lab defines the small trait it
//! needs and each guest implements it once: the sensepool kernel binary over the `os`
//! library, the Hermit application over Hermit. A workload written against [`Platform`] runs on
//! both, with the same console lines and the same `RESULT`.
//!
//! Today it is what `workload=verify` uses: the console and a clock. The device workload's
//! DMA backing, lock and per-CPU run join it when that workload moves here.

/// A guest kernel as the lab sees it.
pub trait Platform {
    /// The clock the lab times with, which also marks counted windows (instruction-count
    /// markers on both guests).
    type Clock: scsi::clock::Clock + protocol::window::CountedWindows;

    /// The clock.
    fn clock(&self) -> Self::Clock;

    /// Prints one line on the guest's console (the serial port xtask reads), as it is.
    fn print(&self, line: &str);
}

impl<P: Platform + ?Sized> Platform for &P {
    type Clock = P::Clock;

    fn clock(&self) -> Self::Clock {
        (**self).clock()
    }

    fn print(&self, line: &str) {
        (**self).print(line);
    }
}
