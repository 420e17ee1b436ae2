//! Page tables: the boot identity map, extended on demand.
//!
//! The boot stub (`pvh::entry!`) maps the first 2 MiB with 4 KiB pages and the rest of the first
//! 4 GiB with 2 MiB pages, all write-back. Everything here keeps the
//! identity (virt == phys), so a physical address is usable as a pointer once it is mapped, and
//! DMA addresses equal CPU addresses. [`map_mmio`] maps device registers (PCI BARs), also above
//! 4 GiB where SeaBIOS may place 64-bit BARs, as uncached (PCD|PWT), no-execute pages: whole
//! 2 MiB pages where the range covers them, 4 KiB pages at the ragged ends, splitting a 2 MiB
//! page into a 4 KiB table when only part of it must change. New table pages come from the DMA
//! frame allocator, which lies inside the identity map: boot hands its page allocator to
//! [`set_table_frames`] once the frames exist, so this module names no allocator (the memory
//! module sits above arch, and its per-node choice reads the CPU's per-CPU data).

use core::sync::atomic::{AtomicU64, Ordering};

use spin::Once;
use spin::mutex::SpinMutex;
use x86_64::registers::control::Cr3;

const PRESENT: u64 = 1;
const WRITABLE: u64 = 1 << 1;
const WRITE_THROUGH: u64 = 1 << 3;
const CACHE_DISABLE: u64 = 1 << 4;
const HUGE: u64 = 1 << 7;
const NO_EXECUTE: u64 = 1 << 63;
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
const PAGE_4K: u64 = 4096;
const PAGE_2M: u64 = 2 << 20;
/// Physical addresses are at most 52 bits (Intel SDM Vol. 3A §4.1.4).
const MAX_PHYS: u64 = 1 << 52;

/// Why a mapping request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PagingError {
    /// The range is empty, wraps, or exceeds the 52-bit physical address space.
    #[error("cannot map {len_bytes} bytes at {phys:#x}")]
    BadRange {
        /// Start of the range.
        phys: u64,
        /// Length requested.
        len_bytes: u64,
    },
    /// No frame was left for a new page table.
    #[error("out of frames for page tables")]
    NoFrames,
}

static LOCK: SpinMutex<()> = SpinMutex::new(());
/// Where new table pages come from: a zeroed page inside the identity map, or `None` when none
/// is left. Until boot sets it, a new table fails with [`PagingError::NoFrames`].
static TABLE_FRAMES: Once<fn() -> Option<u64>> = Once::new();
/// Page-table pages allocated after boot, for the boot summary.
static TABLE_PAGES: AtomicU64 = AtomicU64::new(0);

fn table(phys: u64) -> *mut u64 {
    phys as *mut u64
}

/// Entry `index` of the table at `table_phys`.
///
/// # Safety
/// `table_phys` must be a live page table in the identity map and the caller must hold `LOCK`.
unsafe fn entry(table_phys: u64, index: u64) -> *mut u64 {
    // SAFETY: index < 512 by construction of every caller (9-bit fields), the table is a page.
    unsafe { table(table_phys).add((index & 511) as usize) }
}

/// Sets where new table pages come from (once; later calls are ignored): `zeroed_page` returns
/// a zeroed, identity-mapped page that is the page tables' from then on, or `None` when out of
/// frames.
pub fn set_table_frames(zeroed_page: fn() -> Option<u64>) {
    TABLE_FRAMES.call_once(|| zeroed_page);
}

fn new_table() -> Result<u64, PagingError> {
    let zeroed_page = TABLE_FRAMES.get().ok_or(PagingError::NoFrames)?;
    let phys = zeroed_page().ok_or(PagingError::NoFrames)?;
    TABLE_PAGES.fetch_add(1, Ordering::Relaxed);
    Ok(phys)
}

/// The next-level table behind `slot`, created if empty, split from a 2 MiB page if huge.
///
/// # Safety
/// `slot` must point to a PML4, PDPT or PD entry of the live tables, with `LOCK` held.
unsafe fn next_level(slot: *mut u64, level_is_pd: bool) -> Result<u64, PagingError> {
    // SAFETY: the caller guarantees `slot` is a live entry and that we hold the lock.
    let value = unsafe { slot.read_volatile() };
    if value & PRESENT != 0 && value & HUGE == 0 {
        return Ok(value & ADDR_MASK);
    }
    let fresh = new_table()?;
    if value & PRESENT != 0 && level_is_pd {
        // Split a 2 MiB page into 512 4 KiB pages with the same attributes.
        let base = value & ADDR_MASK & !(PAGE_2M - 1);
        let flags = value & !(ADDR_MASK | HUGE);
        for index in 0..512 {
            // SAFETY: `fresh` is a new, zeroed table page in the identity map.
            unsafe { entry(fresh, index).write_volatile((base + index * PAGE_4K) | flags) };
        }
    }
    // SAFETY: as above; the new table is complete before it becomes reachable.
    unsafe { slot.write_volatile(fresh | PRESENT | WRITABLE) };
    Ok(fresh)
}

/// The PD entry covering `addr`, creating the PDPT and PD on the way.
///
/// # Safety
/// `LOCK` must be held.
unsafe fn pd_slot(addr: u64) -> Result<*mut u64, PagingError> {
    let pml4 = Cr3::read().0.start_address().as_u64();
    // SAFETY: CR3 names the live PML4; each level returned by `next_level` is a live table.
    unsafe {
        let pdpt = next_level(entry(pml4, addr >> 39), false)?;
        let pd = next_level(entry(pdpt, addr >> 30), false)?;
        Ok(entry(pd, addr >> 21))
    }
}

/// Sets the 4 KiB entry for `addr` to `value` (0 unmaps), splitting as needed.
///
/// # Safety
/// `LOCK` must be held; `value` must not remap memory the kernel relies on.
unsafe fn set_4k(addr: u64, value: u64) -> Result<(), PagingError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let pt = next_level(pd_slot(addr)?, true)?;
        entry(pt, addr >> 12).write_volatile(value);
    }
    Ok(())
}

fn flush_all() {
    let (frame, flags) = Cr3::read();
    // SAFETY: reloading CR3 with its own value only flushes the TLB.
    unsafe { Cr3::write(frame, flags) };
}

/// Maps `[phys, phys + len_bytes)` uncached and no-execute at the same virtual address and
/// returns that address. Pages already mapped are remapped with the MMIO attributes.
pub fn map_mmio(phys: u64, len_bytes: u64) -> Result<*mut u8, PagingError> {
    let bad = PagingError::BadRange { phys, len_bytes };
    let end = phys
        .checked_add(len_bytes)
        .filter(|&end| len_bytes > 0 && end <= MAX_PHYS)
        .ok_or(bad)?;
    let flags = PRESENT | WRITABLE | WRITE_THROUGH | CACHE_DISABLE | NO_EXECUTE;
    let _guard = LOCK.lock();
    let mut addr = phys & !(PAGE_4K - 1);
    let end = end.next_multiple_of(PAGE_4K);
    while addr < end {
        if addr % PAGE_2M == 0 && end - addr >= PAGE_2M {
            // SAFETY: we hold the lock; the slot is a live PD entry; the new entry maps device
            // memory at its own address, which no Rust object occupies.
            unsafe { pd_slot(addr)?.write_volatile(addr | flags | HUGE) };
            addr += PAGE_2M;
        } else {
            // SAFETY: as above, for one 4 KiB page.
            unsafe { set_4k(addr, addr | flags)? };
            addr += PAGE_4K;
        }
    }
    flush_all();
    Ok(phys as *mut u8)
}

/// Unmaps the boot stack's guard page so an overflow faults (and is reported via the double
/// fault's IST stack) instead of silently overwriting the page directories below it.
pub fn init() -> Result<(), PagingError> {
    let guard = pvh::boot_stack_guard_page();
    let _lock = LOCK.lock();
    // SAFETY: the guard page is reserved padding that nothing uses.
    unsafe { set_4k(guard, 0)? };
    flush_all();
    Ok(())
}

/// Unmaps the 4 KiB page at `addr` (a stack guard page) so any access faults.
///
/// # Safety
/// Nothing may use the page, now or later: it must be reserved padding the caller owns.
pub unsafe fn unmap_page(addr: u64) -> Result<(), PagingError> {
    let _lock = LOCK.lock();
    // SAFETY: we hold the lock; the caller guarantees the page is unused padding.
    unsafe { set_4k(addr & !(PAGE_4K - 1), 0)? };
    flush_all();
    Ok(())
}

/// Page-table pages allocated since boot.
pub fn table_pages() -> u64 {
    TABLE_PAGES.load(Ordering::Relaxed)
}
