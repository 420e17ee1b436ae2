//! What one request lends a device, and the promise that makes lending it safe.
//!
//! virtio-drivers' `VirtQueue::add` takes the request's buffers as slices the device reads
//! (`inputs`) and slices it writes (`outputs`), and its `pop_used` must be given the same
//! slices again. A [`Lend`] value owns those buffers and produces the same slices every time;
//! its bytes stay where they are however the value moves. The shapes here cover every queue
//! the drivers use: [`DeviceWrites`] (a receive or event buffer), [`DeviceReads`] (a frame to
//! send) and [`Exchange`] (a request header the device reads, a response it writes, and an
//! optional data buffer in either direction: virtio-scsi commands and task management).

use alloc::boxed::Box;
use core::ops::{Deref, DerefMut};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::dma::DmaBuffer;

/// Bytes that stay put while their owner moves.
///
/// # Safety
/// An implementer guarantees that `bytes`/`bytes_mut` return the same address and length on
/// every call for the life of the value, that the bytes live outside the value (moving it does
/// not move them), and that nothing but this value reaches them.
pub unsafe trait Part {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, to lend for writing.
    fn bytes_mut(&mut self) -> &mut [u8];
}

// SAFETY: `DmaBuffer` makes exactly this promise for its slice.
unsafe impl<B: DmaBuffer> Part for B {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self
    }
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// A plain-bytes value on the heap (a header, a response, an event), as a [`Part`].
pub struct Pinned<T>(Box<T>);

impl<T: FromBytes + IntoBytes + KnownLayout + Immutable> Pinned<T> {
    /// An all-zero value on the heap.
    #[must_use]
    pub fn new_zeroed() -> Self {
        Pinned(
            T::new_box_zeroed().unwrap_or_else(|_| {
                alloc::alloc::handle_alloc_error(core::alloc::Layout::new::<T>())
            }),
        )
    }
}

impl<T> Deref for Pinned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Pinned<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

// SAFETY: a Box owns its heap value: moving the Box moves only the pointer, the value is
// reachable only through it, and `IntoBytes + FromBytes` make every byte of it a valid `u8`
// and any bytes the device writes a valid `T`.
unsafe impl<T: FromBytes + IntoBytes + KnownLayout + Immutable> Part for Pinned<T> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.0.as_mut_bytes()
    }
}

/// A request's buffers, lent to a device by an [`OwnedQueue`](super::OwnedQueue).
///
/// # Safety
/// An implementer guarantees that `lend` passes slices with the same addresses, lengths and
/// order on every call for the life of the value, into memory the value owns that does not
/// move when the value moves and that nothing else reaches; and that `lent_len` is the sum of
/// their lengths.
pub unsafe trait Lend {
    /// Calls `f` with the slices the device reads and the slices it writes.
    fn lend<R>(&mut self, f: impl for<'a> FnOnce(&'a [&'a [u8]], &'a mut [&'a mut [u8]]) -> R)
    -> R;
    /// Bytes lent in all: the most a device may report as used.
    fn lent_len(&self) -> usize;
}

/// One buffer the device writes (a receive buffer, an event buffer).
pub struct DeviceWrites<P>(pub P);

// SAFETY: one slice, the part's own, which `Part` keeps in place.
unsafe impl<P: Part> Lend for DeviceWrites<P> {
    #[inline]
    fn lend<R>(
        &mut self,
        f: impl for<'a> FnOnce(&'a [&'a [u8]], &'a mut [&'a mut [u8]]) -> R,
    ) -> R {
        f(&[], &mut [self.0.bytes_mut()])
    }
    fn lent_len(&self) -> usize {
        self.0.bytes().len()
    }
}

/// The first `len` bytes of a buffer, which the device reads (a frame to send).
pub struct DeviceReads<P> {
    part: P,
    len: usize,
}

impl<P: Part> DeviceReads<P> {
    /// Lends `part[..len]` (all of it if `len` is longer).
    pub fn new(part: P, len: usize) -> Self {
        let len = len.min(part.bytes().len());
        Self { part, len }
    }

    /// The buffer back.
    pub fn into_part(self) -> P {
        self.part
    }
}

// SAFETY: one slice of the part, whose length is fixed at construction (`len` is private).
unsafe impl<P: Part> Lend for DeviceReads<P> {
    #[inline]
    fn lend<R>(
        &mut self,
        f: impl for<'a> FnOnce(&'a [&'a [u8]], &'a mut [&'a mut [u8]]) -> R,
    ) -> R {
        f(&[&self.part.bytes()[..self.len]], &mut [])
    }
    fn lent_len(&self) -> usize {
        self.len
    }
}

/// Which way an [`Exchange`]'s data buffer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    /// The device reads the data (a write command).
    ToDevice,
    /// The device writes the data (a read command).
    FromDevice,
}

/// A header whose first `READABLE_LEN` bytes the device reads (the request) and whose rest it
/// writes (the response), with a data buffer in one direction; an empty data buffer is not
/// lent (virtio 1.2 §2.7.4: device-readable descriptors come before device-writable ones).
///
/// The split is a constant of the type, not a field: a request header's length is fixed by
/// its layout (`size_of` of the wire struct), and with the header's own length known too (a
/// [`Pinned`] value's), the split's bounds check and the empty-part checks fold away on every
/// add and pop.
pub struct Exchange<P, D, const READABLE_LEN: usize> {
    header: P,
    data: D,
    direction: DataDirection,
}

impl<P: Part, D: Part, const READABLE_LEN: usize> Exchange<P, D, READABLE_LEN> {
    /// Lends `header[..READABLE_LEN]` for reading, the rest of it for writing, and `data` in
    /// `direction`. A `READABLE_LEN` beyond the header makes all of it readable.
    #[inline]
    pub fn new(header: P, data: D, direction: DataDirection) -> Self {
        Self {
            header,
            data,
            direction,
        }
    }

    /// The header, as the device left it.
    pub fn header(&self) -> &P {
        &self.header
    }

    /// The data buffer, as the device left it.
    pub fn data(&self) -> &[u8] {
        self.data.bytes()
    }

    /// Bytes the device reads and writes of the data buffer: `(out, in)`.
    #[inline]
    pub fn data_lengths(&self) -> (u32, u32) {
        let len = self.data.bytes().len() as u32;
        match self.direction {
            DataDirection::ToDevice => (len, 0),
            DataDirection::FromDevice => (0, len),
        }
    }

    /// The header and the data buffer back.
    #[inline]
    pub fn into_parts(self) -> (P, D) {
        (self.header, self.data)
    }
}

// SAFETY: the slices are the header's split at `READABLE_LEN` (or none of it writable, for a
// shorter header) and the data's, in an order fixed by private fields that never change after
// construction; `Part` keeps the header's length the same on every call, so the split is too.
unsafe impl<P: Part, D: Part, const READABLE_LEN: usize> Lend for Exchange<P, D, READABLE_LEN> {
    #[inline]
    fn lend<R>(
        &mut self,
        f: impl for<'a> FnOnce(&'a [&'a [u8]], &'a mut [&'a mut [u8]]) -> R,
    ) -> R {
        let header = self.header.bytes_mut();
        let split = READABLE_LEN.min(header.len());
        let (request, response) = header.split_at_mut(split);
        let data = self.data.bytes_mut();
        match (data.is_empty(), self.direction) {
            (true, _) => f(&[&*request], &mut [response]),
            (false, DataDirection::ToDevice) => f(&[&*request, &*data], &mut [response]),
            (false, DataDirection::FromDevice) => f(&[&*request], &mut [response, data]),
        }
    }
    fn lent_len(&self) -> usize {
        self.header.bytes().len() + self.data.bytes().len()
    }
}

/// Lends nothing: the data buffer of a request without data.
pub struct NoData;

// SAFETY: the empty slice has no bytes to keep in place.
unsafe impl Part for NoData {
    #[inline]
    fn bytes(&self) -> &[u8] {
        &[]
    }
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut []
    }
}
