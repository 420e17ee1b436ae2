//! [`OwnedQueue`]: a virtqueue that owns what it lends the device.
//!
//! virtio-drivers' `VirtQueue::add` is `unsafe` because the device keeps using a request's
//! buffers after the call returns, and its `pop_used` must be given exactly those buffers
//! again. An `OwnedQueue` makes that argument once for every queue of the drivers: `add`
//! *moves* the request's buffers (a [`Lend`] value) into the table slot of its descriptor
//! token, with whatever the caller wants back beside them, and `pop` hands both back with the
//! completion. Nothing else can reach a buffer while it is lent.
//!
//! The device is untrusted. virtio-drivers pops only the head of the used ring, so the token
//! there is looked up first: one that matches nothing outstanding (never added, or returned a
//! second time) is [`QueueError::UnknownToken`] and cannot be popped at all; the queue is
//! wedged and the owner resets the device. A used length beyond the bytes lent comes back as
//! it is, beside the lent length, for the owner to judge ([`Completion::checked_used_len`]).
//! After a confirmed reset the buffers are the driver's again ([`OwnedQueue::drain_after_reset`]);
//! after an unconfirmed one they are leaked with the queue ([`OwnedQueue::abandon`]).

pub mod lend;

use alloc::boxed::Box;
use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;

pub use lend::{DataDirection, DeviceReads, DeviceWrites, Exchange, Lend, NoData, Part, Pinned};

/// Why a queue operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// virtio-drivers refused (no free descriptors, a bad parameter, a pop it could not do).
    #[error("virtqueue: {0}")]
    Virtqueue(#[from] virtio_drivers::Error),
    /// The used ring returned a token no outstanding request has: never added, or returned
    /// twice. The entry can never be popped; the device needs a reset.
    #[error("device returned token {token}, which no outstanding request has")]
    UnknownToken {
        /// The token.
        token: u16,
    },
    /// virtio-drivers handed out a token that is still outstanding or beyond the queue.
    #[error("virtqueue handed out token {token}, which is in use or out of range")]
    TokenInUse {
        /// The token.
        token: u16,
    },
    /// As many requests as the owner allows are outstanding.
    #[error("{in_flight} requests in flight, limit {limit}")]
    Full {
        /// In flight.
        in_flight: usize,
        /// Limit.
        limit: usize,
    },
    /// The device reported more bytes used than the request lent it.
    #[error("used length {used_len} exceeds the {lent_len} bytes lent")]
    UsedLengthTooLong {
        /// What the device said.
        used_len: u32,
        /// Bytes lent.
        lent_len: u32,
    },
}

/// A request [`OwnedQueue::add`] did not add.
pub struct NotAdded<L, M> {
    /// Why.
    pub error: QueueError,
    /// The buffers and the caller's record, handed back; `None` only after
    /// [`QueueError::TokenInUse`], when the device may already use them and they are leaked.
    pub returned: Option<(L, M)>,
}

/// A request the device is done with.
pub struct Completion<L, M> {
    /// Its token.
    pub token: u16,
    /// The buffers, as the device left them.
    pub lent: L,
    /// What the caller stored beside them.
    pub meta: M,
    /// The used length as the device reported it (not yet checked).
    pub used_len: u32,
}

impl<L: Lend, M> Completion<L, M> {
    /// The used length, if it is within the bytes lent.
    pub fn checked_used_len(&self) -> Result<u32, QueueError> {
        let lent_len = u32::try_from(self.lent.lent_len()).unwrap_or(u32::MAX);
        if self.used_len > lent_len {
            return Err(QueueError::UsedLengthTooLong {
                used_len: self.used_len,
                lent_len,
            });
        }
        Ok(self.used_len)
    }
}

/// A virtqueue of `SIZE` descriptors that owns each outstanding request's buffers (`L`) and
/// the caller's record of it (`M`), by token.
pub struct OwnedQueue<H: Hal, L, M, const SIZE: usize> {
    queue: VirtQueue<H, SIZE>,
    /// One slot per token, as many as the ring has descriptors: with the length in the type, a
    /// token found here is known to be below `SIZE`, and virtio-drivers' own index check of the
    /// same token on pop folds away.
    slots: Box<[Option<(L, M)>; SIZE]>,
    in_flight: usize,
    limit: usize,
}

impl<H: Hal, L: Lend, M, const SIZE: usize> OwnedQueue<H, L, M, SIZE> {
    /// Owns `queue` (set up with the device), admitting at most `limit` requests at once.
    pub fn new(queue: VirtQueue<H, SIZE>, limit: usize) -> Self {
        Self {
            queue,
            slots: empty_slots(),
            in_flight: 0,
            limit: limit.min(SIZE),
        }
    }

    /// Requests outstanding.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Most requests outstanding at once.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether the limit admits another request (descriptors may still run out).
    #[must_use]
    pub fn has_room(&self) -> bool {
        self.in_flight < self.limit
    }

    /// Free descriptors.
    #[must_use]
    pub fn available_desc(&self) -> usize {
        self.queue.available_desc()
    }

    /// Whether the device wants to hear about new requests.
    #[must_use]
    pub fn should_notify(&self) -> bool {
        self.queue.should_notify()
    }

    /// Asks the device to interrupt on used buffers, or not (virtio 1.2 §2.7.10, a hint).
    pub fn set_dev_notify(&mut self, enable: bool) {
        self.queue.set_dev_notify(enable);
    }

    /// Whether the used ring holds an entry not yet popped.
    #[must_use]
    pub fn can_pop(&self) -> bool {
        self.queue.can_pop()
    }

    /// Gives `lent` to the device and keeps it, with `meta`, until its completion pops.
    /// Returns the token.
    #[inline]
    pub fn add(&mut self, mut lent: L, meta: M) -> Result<u16, NotAdded<L, M>> {
        // The refusals are rare and marked cold (`cold_path`): the success path is laid out
        // and given registers for itself.
        if !self.has_room() {
            crate::virtio::cold_path();
            let error = QueueError::Full {
                in_flight: self.in_flight,
                limit: self.limit,
            };
            return Err(NotAdded {
                error,
                returned: Some((lent, meta)),
            });
        }
        // `lent` moves into the token's slot below and leaves it only by `pop` (after
        // `pop_used` with the same slices succeeded), by `drain_after_reset` (the device
        // confirmed a reset and uses nothing any more), or not at all (`abandon` and an
        // unrecordable token leak it): what `lend_to` asks.
        let added = lend_to(&mut self.queue, &mut lent);
        let token = match added {
            Ok(token) => token,
            Err(error) => {
                crate::virtio::cold_path();
                let error = error.into();
                return Err(NotAdded {
                    error,
                    returned: Some((lent, meta)),
                });
            }
        };
        match self.slots.get_mut(usize::from(token)) {
            Some(slot @ None) => {
                *slot = Some((lent, meta));
                self.in_flight += 1;
                Ok(token)
            }
            _ => {
                crate::virtio::cold_path();
                // Posted but not recordable: the device may use the buffers, so they are
                // leaked rather than dropped; the caller learns only the error.
                // A copy for the message (`{ token }`): formatting takes its argument's
                // address, which kept the token in a stack slot on the success path.
                log::error!("virtqueue: token {} is in use or out of range", { token });
                core::mem::forget(lent);
                core::mem::forget(meta);
                Err(NotAdded {
                    error: QueueError::TokenInUse { token },
                    returned: None,
                })
            }
        }
    }

    /// The token at the head of the used ring, if any (not yet checked).
    #[must_use]
    pub fn peek_token(&self) -> Option<u16> {
        self.queue.peek_used()
    }

    /// Pops the head of the used ring and hands its buffers and record back.
    ///
    /// `Err(UnknownToken)` leaves the entry where it is (it can never be popped: reset the
    /// device); `Err(Virtqueue)` leaves the request outstanding, its buffers in their slot.
    #[inline]
    pub fn pop(&mut self) -> Result<Option<Completion<L, M>>, QueueError> {
        let Some(token) = self.queue.peek_used() else {
            return Ok(None);
        };
        // The slot is looked up once, for the pop and then to empty it.
        let Some(slot) = self.slots.get_mut(usize::from(token)) else {
            return Err(QueueError::UnknownToken { token });
        };
        let Some((lent, _)) = slot.as_mut() else {
            return Err(QueueError::UnknownToken { token });
        };
        let queue = &mut self.queue;
        // Inlined into each shape, as in `add`.
        // SAFETY: `lent` is what was added under `token` (it has stayed in the token's slot),
        // so `lend` gives the same slices `add` did; `peek_used` returned `token` above and
        // nothing has popped since (`self` is borrowed mutably throughout).
        let used_len = lent.lend(
            #[inline(always)]
            |inputs, outputs| unsafe { queue.pop_used_peeked(token, inputs, outputs) },
        );
        let (lent, meta) = slot.take().ok_or(QueueError::UnknownToken { token })?;
        self.in_flight -= 1;
        Ok(Some(Completion {
            token,
            lent,
            meta,
            used_len,
        }))
    }

    /// The buffers lent under `token`, to read (the device may still write them).
    pub fn lent(&self, token: u16) -> Result<&L, QueueError> {
        self.slots
            .get(usize::from(token))
            .and_then(Option::as_ref)
            .map(|(lent, _)| lent)
            .ok_or(QueueError::UnknownToken { token })
    }

    /// The caller's record of the request under `token`.
    pub fn meta_mut(&mut self, token: u16) -> Result<&mut M, QueueError> {
        self.slots
            .get_mut(usize::from(token))
            .and_then(Option::as_mut)
            .map(|(_, meta)| meta)
            .ok_or(QueueError::UnknownToken { token })
    }

    /// Every outstanding request's buffers and record, in token order, after the device
    /// confirmed a reset (its status read back 0, virtio 1.2 §2.1: it uses none of them any
    /// more). The ring itself must not be used again: set the device up with a fresh one
    /// ([`Self::replace_ring`]).
    pub fn drain_after_reset(&mut self) -> Vec<(L, M)> {
        self.in_flight = 0;
        self.slots.iter_mut().filter_map(Option::take).collect()
    }

    /// Moves to `fresh`, the ring set up again after a confirmed reset, and hands back every
    /// outstanding request ([`Self::drain_after_reset`]); the old ring is freed.
    pub fn replace_ring(&mut self, fresh: VirtQueue<H, SIZE>) -> Vec<(L, M)> {
        let returned = self.drain_after_reset();
        self.queue = fresh;
        returned
    }

    /// The ring, for a queue with nothing outstanding (its buffers are dropped otherwise:
    /// only after a confirmed reset).
    pub fn into_ring(mut self) -> VirtQueue<H, SIZE> {
        drop(self.drain_after_reset());
        self.queue
    }

    /// Gives up on a device that did not confirm its reset: hands back the records of the
    /// outstanding requests and leaks their buffers and the ring, which it may still use.
    pub fn abandon(mut self) -> Vec<M> {
        let mut records = Vec::with_capacity(self.in_flight);
        for (lent, meta) in self.slots.iter_mut().filter_map(Option::take) {
            core::mem::forget(lent);
            records.push(meta);
        }
        core::mem::forget(self);
        records
    }
}

/// `SIZE` empty slots on the heap (built there: an array of them on the stack first could be
/// large).
fn empty_slots<T, const SIZE: usize>() -> Box<[Option<T>; SIZE]> {
    let slots: Box<[Option<T>]> = (0..SIZE).map(|_| None).collect();
    match slots.try_into() {
        Ok(slots) => slots,
        Err(_) => unreachable!("{SIZE} slots collected"),
    }
}

/// Gives the slices of `lent` to the device on `queue`; returns the token. `lent` must keep them
/// for the device until `pop_used` with the same slices succeeds, or a confirmed reset, or for
/// ever (it is leaked).
///
/// The closure is inlined into each shape `lend` calls it with, so virtio-drivers' `add`
/// (inlined in turn: see third_party/virtio-drivers) runs with its buffer counts known at
/// compile time: no slices built on the stack, no loop over them. A queue without indirect
/// descriptors (virtio-scsi's at its usual sizes) takes `add_direct_only`, the same `add` less
/// the indirect path: that path is a call that takes the slices by reference, so with it in the
/// function they were stored on the stack on every add.
#[inline(always)]
fn lend_to<H: Hal, L: Lend, const SIZE: usize>(
    queue: &mut VirtQueue<H, SIZE>,
    lent: &mut L,
) -> Result<u16, virtio_drivers::Error> {
    if queue.uses_indirect() {
        lent.lend(
            #[inline(always)]
            // SAFETY: `Lend` promises that the slices stay where they are while `lent` moves
            // and that nothing else reaches them; our caller keeps `lent` until the device is
            // done with them (`OwnedQueue::add`).
            |inputs, outputs| unsafe { queue.add(inputs, outputs) },
        )
    } else {
        lent.lend(
            #[inline(always)]
            // SAFETY: as for `add` just above (`add_direct_only` asks the same).
            |inputs, outputs| unsafe { queue.add_direct_only(inputs, outputs) },
        )
    }
}
