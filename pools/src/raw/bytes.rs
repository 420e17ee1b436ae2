//! [`Bytes`], the bounds-checked view of block memory every pool reads and writes through.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::Page;

/// A bounds-checked view of `len_bytes` of block memory, valid while the page it came from is
/// borrowed (see the module documentation).
#[derive(Clone, Copy)]
pub struct Bytes<'page> {
    // Set only here and by `Page::bytes`, where the range is a page's own.
    pub(super) base: NonNull<u8>,
    pub(super) len_bytes: usize,
    pub(super) page: PhantomData<&'page Page>,
}

impl<'page> Bytes<'page> {
    /// A view of `len_bytes` at `base`.
    ///
    /// # Safety
    /// The caller guarantees that `base..base + len_bytes` is valid for reads and writes for
    /// `'page`, and that nothing reaches those bytes from another thread meanwhile except a
    /// device (so the caller owns them, or the pool that owns them holds its lock).
    pub unsafe fn from_raw_parts(base: NonNull<u8>, len_bytes: usize) -> Self {
        Self {
            base,
            len_bytes,
            page: PhantomData,
        }
    }

    /// CPU address of the first byte.
    #[inline]
    pub fn ptr(self) -> NonNull<u8> {
        self.base
    }

    /// Length of the view in bytes.
    #[inline]
    pub fn len_bytes(self) -> usize {
        self.len_bytes
    }

    /// The `len_bytes` from `offset` on, if they lie inside this view.
    #[inline]
    pub fn sub(self, offset: usize, len_bytes: usize) -> Option<Self> {
        let end = offset.checked_add(len_bytes)?;
        if end > self.len_bytes {
            return None;
        }
        // SAFETY: `offset <= end <= self.len_bytes`, inside the range this view is valid for,
        // so the address is in bounds of the same allocation and not null.
        let base = unsafe { self.base.add(offset) };
        Some(Self {
            base,
            len_bytes,
            page: PhantomData,
        })
    }

    /// Writes `byte` over the whole view.
    pub fn fill(self, byte: u8) {
        for i in 0..self.len_bytes {
            // SAFETY: `i < len_bytes`, inside the view; volatile, as the device may look.
            unsafe { self.base.as_ptr().add(i).write_volatile(byte) };
        }
    }

    /// The offset of the first byte that is not `byte`.
    pub fn first_not(self, byte: u8) -> Option<usize> {
        // SAFETY: `i < len_bytes`, inside the view.
        (0..self.len_bytes).find(|&i| unsafe { self.base.as_ptr().add(i).read_volatile() } != byte)
    }

    /// The address of `N` bytes at `offset`; panics naming the offset if they do not fit.
    #[inline]
    fn at<const N: usize>(self, offset: usize) -> *mut u8 {
        match offset.checked_add(N) {
            Some(end) if end <= self.len_bytes => {
                // SAFETY: `offset + N <= len_bytes`, inside the view.
                unsafe { self.base.as_ptr().add(offset) }
            }
            _ => out_of_view(offset, N, self.len_bytes),
        }
    }

    /// Reads a native-endian `u32` at `offset` (unaligned). Panics if it does not fit.
    #[inline]
    pub fn read_u32(self, offset: usize) -> u32 {
        // SAFETY: `at` gives 4 bytes inside the view; `read_unaligned` needs no alignment.
        unsafe { self.at::<4>(offset).cast::<u32>().read_unaligned() }
    }

    /// Writes a native-endian `u32` at `offset` (unaligned). Panics if it does not fit.
    #[inline]
    pub fn write_u32(self, offset: usize, value: u32) {
        // SAFETY: `at` gives 4 bytes inside the view; `write_unaligned` needs no alignment.
        unsafe { self.at::<4>(offset).cast::<u32>().write_unaligned(value) }
    }

    /// Reads a native-endian `u64` at `offset` (unaligned). Panics if it does not fit.
    #[inline]
    pub fn read_u64(self, offset: usize) -> u64 {
        // SAFETY: `at` gives 8 bytes inside the view; `read_unaligned` needs no alignment.
        unsafe { self.at::<8>(offset).cast::<u64>().read_unaligned() }
    }

    /// Writes a native-endian `u64` at `offset` (unaligned). Panics if it does not fit.
    #[inline]
    pub fn write_u64(self, offset: usize, value: u64) {
        // SAFETY: `at` gives 8 bytes inside the view; `write_unaligned` needs no alignment.
        unsafe { self.at::<8>(offset).cast::<u64>().write_unaligned(value) }
    }

    /// Copies `data` in at `offset`; `false` (and no write) if it does not fit.
    pub fn copy_in(self, offset: usize, data: &[u8]) -> bool {
        let Some(dst) = self.sub(offset, data.len()) else {
            return false;
        };
        // SAFETY: `dst` is inside the view; `data` is a live slice of ordinary memory, which
        // block memory never overlaps.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst.base.as_ptr(), data.len()) };
        true
    }

    /// Copies `out.len()` bytes from `offset` into `out`; `false` (and no read) if out of range.
    pub fn copy_out(self, offset: usize, out: &mut [u8]) -> bool {
        let Some(src) = self.sub(offset, out.len()) else {
            return false;
        };
        // SAFETY: `src` is inside the view; `out` is a live exclusive slice of ordinary memory.
        unsafe { core::ptr::copy_nonoverlapping(src.base.as_ptr(), out.as_mut_ptr(), out.len()) };
        true
    }
}

#[cold]
#[inline(never)]
#[track_caller]
pub(super) fn out_of_view(offset: usize, len: usize, view_len: usize) -> ! {
    panic!("pools::raw: {len} bytes at offset {offset} outside a {view_len}-byte view (pool bug)")
}
