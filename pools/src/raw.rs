//! The one place in `pools` that reads and writes block memory, and reaches behind a lock.
//!
//! Block memory is shared with devices, so the pool treats it as untrusted: it only ever
//! *writes* poison and (in the in-block designs) free-list links there, and the scalable pool
//! reads nothing back. The Linux models read their links back as Linux does: legacy
//! range-checks them; in-block trusts them (as Linux 6.4 does) except in debug mode. All accesses are volatile so that the
//! compiler makes no assumption about bytes a device may change behind its back.

use core::ptr::NonNull;

/// Fills `len` bytes at `ptr` with `byte`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+len` is valid for writes and owned by the pool
/// (a free block, or a block being handed out).
pub(crate) unsafe fn fill(ptr: NonNull<u8>, len: usize, byte: u8) {
    for i in 0..len {
        // SAFETY: `i < len` and the caller guarantees the whole range is writable.
        unsafe { ptr.as_ptr().add(i).write_volatile(byte) };
    }
}

/// Returns the offset of the first byte in `ptr..ptr+len` that is not `byte`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+len` is valid for reads.
pub(crate) unsafe fn first_not(ptr: NonNull<u8>, len: usize, byte: u8) -> Option<usize> {
    // SAFETY: `i < len` and the caller guarantees the whole range is readable.
    (0..len).find(|&i| unsafe { ptr.as_ptr().add(i).read_volatile() } != byte)
}

/// Reads a native-endian `u64` from the (possibly unaligned) address `ptr`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+8` is valid for reads.
pub(crate) unsafe fn read_u64(ptr: NonNull<u8>) -> u64 {
    // SAFETY: the caller guarantees 8 readable bytes; `read_unaligned` has no alignment need.
    unsafe { ptr.as_ptr().cast::<u64>().read_unaligned() }
}

/// Writes a native-endian `u64` to the (possibly unaligned) address `ptr`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+8` is valid for writes and owned by the pool.
pub(crate) unsafe fn write_u64(ptr: NonNull<u8>, value: u64) {
    // SAFETY: the caller guarantees 8 writable bytes; `write_unaligned` has no alignment need.
    unsafe { ptr.as_ptr().cast::<u64>().write_unaligned(value) }
}

/// Reads a native-endian `u32` from the (possibly unaligned) address `ptr`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+4` is valid for reads.
pub(crate) unsafe fn read_u32(ptr: NonNull<u8>) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes; `read_unaligned` has no alignment need.
    unsafe { ptr.as_ptr().cast::<u32>().read_unaligned() }
}

/// Writes a native-endian `u32` to the (possibly unaligned) address `ptr`.
///
/// # Safety
/// The caller guarantees that `ptr..ptr+4` is valid for writes and owned by the pool.
pub(crate) unsafe fn write_u32(ptr: NonNull<u8>, value: u32) {
    // SAFETY: the caller guarantees 4 writable bytes; `write_unaligned` has no alignment need.
    unsafe { ptr.as_ptr().cast::<u32>().write_unaligned(value) }
}

/// Copies `src` to `dst`.
///
/// # Safety
/// The caller guarantees that `dst..dst+src.len()` is valid for writes, owned by the caller,
/// and does not overlap `src`.
pub(crate) unsafe fn copy_in(dst: NonNull<u8>, src: &[u8]) {
    // SAFETY: the caller guarantees the destination range; `src` is a live slice.
    unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_ptr(), src.len()) }
}

/// Copies `dst.len()` bytes from `src` into `dst`.
///
/// # Safety
/// The caller guarantees that `src..src+dst.len()` is valid for reads and does not overlap `dst`.
pub(crate) unsafe fn copy_out(src: NonNull<u8>, dst: &mut [u8]) {
    // SAFETY: the caller guarantees the source range; `dst` is a live exclusive slice.
    unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) }
}

/// The pointer `offset` bytes after `base`.
///
/// # Safety
/// The caller guarantees that `base + offset` stays inside the allocation `base` points into.
pub(crate) unsafe fn at(base: NonNull<u8>, offset: usize) -> NonNull<u8> {
    // SAFETY: in bounds of the same allocation by the caller's promise, hence non-null.
    unsafe { base.add(offset) }
}

/// The raw lock of `mutex`, to read a counting lock's counters (acquisitions, contention) while
/// others may hold it: a pool's `raw_lock()`, and the kernel's own lock statistics.
///
/// `Mutex::raw` is unsafe only because the caller could unlock a lock it does not hold;
/// `RawMutex::unlock` is itself an unsafe fn, so safe code given `&R` can only lock (and must
/// then unlock through that same unsafe call) or read state. This is the one place that
/// argument is made.
pub fn raw_lock<R: lock_api::RawMutex, T: ?Sized>(mutex: &lock_api::Mutex<R, T>) -> &R {
    // SAFETY: see above: handing out `&R` grants no unlock without another unsafe call.
    unsafe { mutex.raw() }
}
