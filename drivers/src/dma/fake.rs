//! An in-memory "bus" for host tests: regions with fake bus addresses that a fake device
//! reads and writes by address, with every access bounds-checked against the region it
//! falls in. Dropping a region unmaps it, so a device that uses memory after the driver
//! freed it gets an error instead of silently succeeding.

use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::{DmaAddr, DmaMemory, OutOfBounds, check_range};

#[derive(Debug)]
struct Space {
    regions: BTreeMap<u64, Vec<u8>>,
    next: u64,
}

/// A shared fake bus address space. Clones share the same memory.
#[derive(Debug, Clone)]
pub struct FakeDmaSpace(Rc<RefCell<Space>>);

/// A fake device touched memory no live region covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("fake DMA of {len_bytes} bytes at {:#x} hits no mapped region", addr.0)]
pub struct Unmapped {
    /// Bus address of the access.
    pub addr: DmaAddr,
    /// Length of the access.
    pub len_bytes: usize,
}

impl FakeDmaSpace {
    /// A space whose first region starts at `base` (pick one above 4 GiB to exercise the
    /// high-address paths).
    #[must_use]
    pub fn new(base: DmaAddr) -> Self {
        Self(Rc::new(RefCell::new(Space {
            regions: BTreeMap::new(),
            next: base.0,
        })))
    }

    /// Maps a zeroed region of `len` bytes aligned to `align` (a power of two), separated
    /// from its neighbours by an unmapped guard gap.
    #[must_use]
    pub fn alloc(&self, len: usize, align: u64) -> FakeRegion {
        let mut space = self.0.borrow_mut();
        let align = align.max(1);
        let base = space.next.div_ceil(align) * align;
        space.next = base + len as u64 + 4096;
        space.regions.insert(base, vec![0; len]);
        FakeRegion {
            space: self.clone(),
            base,
            len,
        }
    }

    fn with_range<R>(
        &self,
        addr: DmaAddr,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, Unmapped> {
        let mut space = self.0.borrow_mut();
        let unmapped = Unmapped {
            addr,
            len_bytes: len,
        };
        let (&base, bytes) = space
            .regions
            .range_mut(..=addr.0)
            .next_back()
            .ok_or(unmapped)?;
        let offset = usize::try_from(addr.0 - base).map_err(|_| unmapped)?;
        let end = offset.checked_add(len).ok_or(unmapped)?;
        let slice = bytes.get_mut(offset..end).ok_or(unmapped)?;
        Ok(f(slice))
    }

    /// The device reads `out.len()` bytes at `addr`.
    pub fn read(&self, addr: DmaAddr, out: &mut [u8]) -> Result<(), Unmapped> {
        self.with_range(addr, out.len(), |bytes| out.copy_from_slice(bytes))
    }

    /// The device writes `data` at `addr`.
    pub fn write(&self, addr: DmaAddr, data: &[u8]) -> Result<(), Unmapped> {
        self.with_range(addr, data.len(), |bytes| bytes.copy_from_slice(data))
    }

    /// Number of live regions (for leak checks).
    #[must_use]
    pub fn live_regions(&self) -> usize {
        self.0.borrow().regions.len()
    }
}

impl super::DmaAlloc for FakeDmaSpace {
    type Region = FakeRegion;
    fn alloc(&mut self, len_bytes: usize, align: usize) -> Option<FakeRegion> {
        Some(FakeDmaSpace::alloc(self, len_bytes, align as u64))
    }
}

/// A region of a [`FakeDmaSpace`]; unmapped on drop.
#[derive(Debug)]
pub struct FakeRegion {
    space: FakeDmaSpace,
    base: u64,
    len: usize,
}

impl FakeRegion {
    /// A copy of the whole region's bytes.
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        self.read_at(0, &mut out)
            .expect("whole region is in bounds");
        out
    }
}

impl Drop for FakeRegion {
    fn drop(&mut self) {
        self.space.0.borrow_mut().regions.remove(&self.base);
    }
}

impl DmaMemory for FakeRegion {
    fn bus_addr(&self) -> DmaAddr {
        DmaAddr(self.base)
    }

    fn len_bytes(&self) -> usize {
        self.len
    }

    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), OutOfBounds> {
        check_range(offset, bytes.len(), self.len)?;
        self.space
            .write(DmaAddr(self.base + offset as u64), bytes)
            .expect("a live region is mapped");
        Ok(())
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        check_range(offset, out.len(), self.len)?;
        self.space
            .read(DmaAddr(self.base + offset as u64), out)
            .expect("a live region is mapped");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_are_bounds_checked_and_dropped_regions_unmap() {
        let space = FakeDmaSpace::new(DmaAddr(0x1_0000_0000));
        let mut region = space.alloc(64, 64);
        assert!(region.write_at(60, &[1, 2, 3, 4]).is_ok());
        assert!(region.write_at(61, &[1, 2, 3, 4]).is_err());
        let addr = region.bus_addr();
        let mut four = [0; 4];
        space.read(DmaAddr(addr.0 + 60), &mut four).unwrap();
        assert_eq!(four, [1, 2, 3, 4]);
        assert!(
            space.read(DmaAddr(addr.0 + 62), &mut four).is_err(),
            "crosses the region end"
        );
        drop(region);
        assert_eq!(
            space.read(addr, &mut four),
            Err(Unmapped { addr, len_bytes: 4 })
        );
    }
}
