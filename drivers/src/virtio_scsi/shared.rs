//! What the request queues of one device share, and what a device reset means when each
//! queue belongs to a different CPU.
//!
//! Each request queue is owned by one host handle (`super::host::VirtioScsiHost`, one per
//! CPU), which submits and completes on it without a lock. The rest of the device (the
//! transport, the control queue for task management, the event queue) sits in [`Shared`]
//! behind a `lock_api` mutex that only the cold paths take: task management, events, a
//! reset, and a notify for a queue that has no doorbell of its own.
//!
//! A reset is of the whole device: virtio has no per-queue reset that virtio-drivers or
//! QEMU 7.2's virtio-scsi support, and a status write of 0 stops every queue. So a reset
//! that any handle asks for (a wedged used ring, a task management time-out, the midlayer's
//! host reset) goes like this, under the lock:
//!
//! 1. If another handle already reset the device since this one last looked, nothing more
//!    is done: this handle's queue was stopped by that reset.
//! 2. Otherwise the device is reset and the reset confirmed (status reads back 0): from
//!    then on it touches no buffer of any queue. It is initialised again with fresh rings
//!    for *every* request queue, parked here, and the generation counter is bumped.
//! 3. Each handle notices the new generation on its next call (one atomic load on the hot
//!    path), hands its outstanding commands back as `HostError::Reset` with their buffers
//!    (safe: the confirmed reset stopped the device before the fresh rings existed, and the
//!    old ring is never shown to the device again), and moves to its fresh ring.
//!
//! If the reset is not confirmed the device may still write anything it was given, on any
//! queue: the device is marked dead, its device-wide part and any parked rings are leaked,
//! the generation is bumped, and each handle, when it notices, leaks its own ring and
//! buffers and completes its commands with `HostError::ResetFailed`. A handle that never
//! looks again leaks nothing it should not: its ring and buffers stay where they are.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use lock_api::{Mutex, MutexGuard, RawMutex};
use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::Transport;

use super::device::{VirtioScsi, VirtioScsiError};
use crate::delay::Delay;

/// What runs after every re-initialisation, with the request virtqueues' numbers (the kernel
/// routes their MSI-X entries again: a reset device forgets them).
pub type ReinitHook = Box<dyn Fn(&[u16]) + Send + Sync>;

/// The device-wide state behind the lock.
pub struct SharedState<H: Hal, Tr: Transport, D: Delay, const QSIZE: usize> {
    /// `None` after a failed reset (leaked) or a failed re-initialisation.
    pub(super) device: Option<VirtioScsi<H, Tr, D>>,
    /// Rings set up by the last reset, by request queue index, until their handle takes them.
    fresh: Vec<Option<VirtQueue<H, QSIZE>>>,
    /// A reset was not confirmed: nothing may touch the device or free what it holds.
    dead: bool,
    /// Request queues the device was set up with (every re-initialisation sets up as many).
    queues: usize,
    /// Commands per queue asked for at initialisation.
    can_queue: usize,
    /// Called with the request virtqueues after every re-initialisation (MSI-X routing).
    reinit_hook: Option<ReinitHook>,
}

/// What a handle finds when it catches up with a reset.
pub(super) enum CaughtUp<H: Hal, const QSIZE: usize> {
    /// The device was reset and its queues set up again; this is the handle's fresh ring
    /// (`None` if re-initialisation failed: the host has no device from then on).
    Reset(Option<VirtQueue<H, QSIZE>>),
    /// A reset was not confirmed: the handle must leak its ring and buffers.
    Dead,
}

/// The part of a device its request-queue handles share.
pub struct Shared<H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize> {
    state: Mutex<R, SharedState<H, Tr, D, QSIZE>>,
    /// Bumped by every reset (confirmed or not), after the state it describes is in place.
    generation: AtomicU64,
}

impl<H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize> Shared<H, Tr, D, R, QSIZE> {
    /// Wraps a device initialised with `queues` request queues of `can_queue` commands.
    pub(super) fn new(device: VirtioScsi<H, Tr, D>, queues: usize, can_queue: usize) -> Self {
        Self {
            state: Mutex::new(SharedState {
                device: Some(device),
                fresh: Vec::new(),
                dead: false,
                queues,
                can_queue,
                reinit_hook: None,
            }),
            generation: AtomicU64::new(0),
        }
    }

    /// The number of resets so far (a handle compares it with the one it last saw).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The device-wide state, locked (off the hot path only).
    pub(super) fn lock(&self) -> MutexGuard<'_, R, SharedState<H, Tr, D, QSIZE>> {
        self.state.lock()
    }

    /// Resets the device unless someone did since generation `seen` (see the module docs).
    /// `Err` means the reset was not confirmed and the device is dead.
    pub(super) fn reset(&self, seen: u64) -> Result<(), VirtioScsiError> {
        let mut state = self.state.lock();
        if self.generation.load(Ordering::Acquire) != seen {
            return if state.dead {
                Err(VirtioScsiError::ResetTimeout { waited_us: 0 })
            } else {
                Ok(())
            };
        }
        if state.dead {
            return Err(VirtioScsiError::ResetTimeout { waited_us: 0 });
        }
        let result = state.reset_and_rebuild();
        self.generation.fetch_add(1, Ordering::Release);
        result
    }

    /// What a handle of request queue `index` must do after a reset it had not seen, and
    /// the generation that answer belongs to (read under the lock, which every reset holds
    /// while it bumps the generation, so the two agree).
    pub(super) fn catch_up(&self, index: u16) -> (u64, CaughtUp<H, QSIZE>) {
        let mut state = self.state.lock();
        let generation = self.generation.load(Ordering::Acquire);
        if state.dead {
            return (generation, CaughtUp::Dead);
        }
        let fresh = state
            .fresh
            .get_mut(usize::from(index))
            .and_then(Option::take);
        (generation, CaughtUp::Reset(fresh))
    }
}

impl<H: Hal, Tr: Transport, D: Delay, const QSIZE: usize> SharedState<H, Tr, D, QSIZE> {
    /// Sets what runs after every re-initialisation ([`super::host::VirtioScsiHost::on_reinit`]).
    pub(super) fn set_reinit_hook(&mut self, hook: ReinitHook) {
        self.reinit_hook = Some(hook);
    }

    /// Whether a reset was not confirmed.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Steps 2 and the failure path of the module docs, with the lock held.
    fn reset_and_rebuild(&mut self) -> Result<(), VirtioScsiError> {
        let Some(mut device) = self.device.take() else {
            // Re-initialisation failed earlier: there is nothing to reset.
            return Ok(());
        };
        if let Err(error) = device.reset_device() {
            self.dead = true;
            // The device may still use its control and event buffers and every ring it was
            // shown, the parked fresh ones included.
            core::mem::forget(device);
            for ring in self.fresh.drain(..) {
                core::mem::forget(ring);
            }
            return Err(error);
        }
        // Confirmed: rings nobody took yet are no longer the device's.
        self.fresh.clear();
        let (transport, delay) = device.into_parts();
        match VirtioScsi::init::<(), QSIZE>(transport, delay, self.can_queue, self.queues) {
            Ok(initialized) => {
                if let Some(hook) = &self.reinit_hook {
                    let virtqueues: Vec<u16> =
                        initialized.queues.iter().map(|q| q.virtqueue()).collect();
                    hook(&virtqueues);
                }
                self.device = Some(initialized.device);
                self.fresh = initialized
                    .queues
                    .into_iter()
                    .map(|queue| Some(queue.into_ring()))
                    .collect();
            }
            Err(error) => log::error!("virtio-scsi: re-initialisation failed: {error}"),
        }
        Ok(())
    }
}
