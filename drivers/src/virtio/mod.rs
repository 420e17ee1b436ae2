//! What every virtio driver of the stack shares: finding and bringing up the PCI function
//! ([`pci`]), the virtqueue that owns what it lends the device ([`queue`]), and resetting the
//! device with a bounded wait ([`reset`]).
//!
//! virtio-drivers supplies the transport and the split virtqueues; these pieces cover what it
//! leaves to the driver or does in a way the stack cannot use (its `PciTransport` drop spins
//! on the device status without a bound).

pub mod pci;
#[expect(
    unsafe_code,
    reason = "virtqueue `add`/`pop_used`: a request's buffers stay in its token's slot while the device owns them"
)]
pub mod queue;

use virtio_drivers::transport::{DeviceStatus, Transport};

use crate::delay::{Delay, TimedOut, poll_until};

/// Marks the path that calls it as rarely taken (a refusal), so the compiler lays out and
/// allocates registers for the other one. `core::hint::cold_path` does this from Rust 1.95; the
/// workspace's declared minimum is 1.85, so this is the older form of it: a call to a cold
/// function marks its block cold.
#[cold]
#[inline(never)]
pub(crate) fn cold_path() {}

/// How long a device may take to finish a reset.
pub const RESET_TIMEOUT_US: u64 = 1_000_000;

/// Resets the device (a zero write to the device status) and waits, at most
/// [`RESET_TIMEOUT_US`] of delay budget, until the status reads back 0: from then on the
/// device no longer uses any buffer or queue it was given (virtio 1.2 §2.1, §3.1.1), so they
/// may be freed or reused, and the device must be initialised again before use.
///
/// `Err` means the device never confirmed: it may still read and write every buffer it
/// holds, so none of them may be freed or reused (leak them).
pub fn reset(transport: &mut impl Transport, delay: &mut dyn Delay) -> Result<(), TimedOut> {
    transport.set_status(DeviceStatus::empty());
    poll_until(delay, RESET_TIMEOUT_US, 10, || {
        transport.get_status().is_empty().then_some(())
    })
}
