//! A bitmap page-frame allocator: the physical memory under every DMA pool in the guest.
//!
//! One bit per 4 KiB frame over one contiguous physical range (set = in use). Allocation is
//! lowest-address first: the scan starts at a hint below which no frame is free and skips full
//! 64-frame words, so the common one-page request of a dmapool growing is O(1) amortised and
//! contiguous runs for larger chunks are found without a separate free-list structure.
//! Lowest-first reuses the frames freed last time (as Linux's per-CPU page lists hand back
//! hot pages) instead of walking through all of memory as next-fit does; under QEMU that also
//! matters because the host backs guest RAM lazily, so a frame's first touch costs a host
//! page fault. Alignment is in *physical*
//! terms, because a device sees physical addresses. Frees are checked: a run that is not fully
//! allocated, or lies outside the range, is refused with an error and changes nothing.
//!
//! This module is pure bookkeeping (host-tested); `dma.rs` wraps it in a lock and implements
//! the `pools` crate's `Backing` trait over identity-mapped frames.

use alloc::vec;
use alloc::vec::Vec;

use crate::memory::memmap::{PAGE_BYTES, PhysRange};

/// Why a free was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The run is not inside the managed range or not page-aligned.
    #[error("frames at {phys:#x} (+{frames}) are not managed by this allocator")]
    Foreign {
        /// First byte of the run.
        phys: u64,
        /// Frames in the run.
        frames: usize,
    },
    /// Some frame of the run is not allocated (double free or wrong length).
    #[error("frame {phys:#x} is not allocated (double free?)")]
    NotAllocated {
        /// The first free frame found in the run.
        phys: u64,
    },
}

/// Frame bookkeeping for one physical range.
#[derive(Debug)]
pub struct FrameBitmap {
    base: u64,
    frames: usize,
    words: Vec<u64>,
    /// No frame below this index is free.
    lowest_free: usize,
    free: usize,
}

impl FrameBitmap {
    /// Manages `range` (page-aligned), all frames free.
    pub fn new(range: PhysRange) -> Self {
        let frames = usize::try_from(range.len_bytes() / PAGE_BYTES).unwrap_or(0);
        let mut words = vec![0u64; frames.div_ceil(64)];
        // Bits past the end are permanently "used" so scans never return them.
        if frames % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last = !0u64 << (frames % 64);
            }
        }
        FrameBitmap {
            base: range.start,
            frames,
            words,
            lowest_free: 0,
            free: frames,
        }
    }

    /// Frames managed in total.
    pub fn total_frames(&self) -> usize {
        self.frames
    }

    /// Frames currently free.
    pub fn free_frames(&self) -> usize {
        self.free
    }

    /// The managed range.
    #[cfg(test)]
    pub fn range(&self) -> PhysRange {
        PhysRange {
            start: self.base,
            end: self.base + self.frames as u64 * PAGE_BYTES,
        }
    }

    fn is_used(&self, index: usize) -> bool {
        self.words[index / 64] & (1 << (index % 64)) != 0
    }

    fn set(&mut self, index: usize, used: bool) {
        let bit = 1u64 << (index % 64);
        if used {
            self.words[index / 64] |= bit;
        } else {
            self.words[index / 64] &= !bit;
        }
    }

    /// Allocates `count` contiguous frames whose first byte is aligned to `align_bytes` (a power
    /// of two; values below a page mean page alignment). Returns the physical address, or `None`
    /// when no such run is free.
    pub fn alloc(&mut self, count: usize, align_bytes: u64) -> Option<u64> {
        if count == 0 || count > self.free || !align_bytes.is_power_of_two() {
            return None;
        }
        let align = align_bytes.max(PAGE_BYTES);
        let found = self.scan(self.lowest_free, self.frames, count, align)?;
        for index in found..found + count {
            self.set(index, true);
        }
        self.free -= count;
        // A run that started at the lowest free frame leaves none free below its end; one
        // further up (alignment, or a hole too short) leaves the hint where it was.
        if found == self.lowest_free {
            self.lowest_free = found + count;
        }
        Some(self.base + found as u64 * PAGE_BYTES)
    }

    /// First aligned free run of `count` frames starting in `[from, to)`.
    fn scan(&self, from: usize, to: usize, count: usize, align: u64) -> Option<usize> {
        let mut index = self.align_index(from, align)?;
        while index < to && index + count <= self.frames {
            if self.words[index / 64] == !0u64 {
                index = self.align_index((index / 64 + 1) * 64, align)?;
                continue;
            }
            match (index..index + count).find(|&i| self.is_used(i)) {
                None => return Some(index),
                Some(used) => index = self.align_index(used + 1, align)?,
            }
        }
        None
    }

    /// The smallest index `>= index` whose physical address is a multiple of `align`.
    fn align_index(&self, index: usize, align: u64) -> Option<usize> {
        let phys = self.base.checked_add(index as u64 * PAGE_BYTES)?;
        let aligned = phys.checked_next_multiple_of(align)?;
        usize::try_from((aligned - self.base) / PAGE_BYTES).ok()
    }

    /// Frees `count` frames at `phys`, which must be exactly an allocated run (or part of one).
    pub fn free(&mut self, phys: u64, count: usize) -> Result<(), FrameError> {
        let foreign = FrameError::Foreign {
            phys,
            frames: count,
        };
        if phys < self.base || (phys - self.base) % PAGE_BYTES != 0 {
            return Err(foreign);
        }
        let first = usize::try_from((phys - self.base) / PAGE_BYTES).map_err(|_| foreign)?;
        if count == 0 || first.checked_add(count).is_none_or(|end| end > self.frames) {
            return Err(foreign);
        }
        if let Some(unused) = (first..first + count).find(|&i| !self.is_used(i)) {
            return Err(FrameError::NotAllocated {
                phys: self.base + unused as u64 * PAGE_BYTES,
            });
        }
        for index in first..first + count {
            self.set(index, false);
        }
        self.free += count;
        self.lowest_free = self.lowest_free.min(first);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bitmap(frames: u64) -> FrameBitmap {
        FrameBitmap::new(PhysRange {
            start: 0x20_1000,
            end: 0x20_1000 + frames * PAGE_BYTES,
        })
    }

    #[test]
    fn single_frames_come_out_in_order_and_exhaust_cleanly() {
        let mut frames = bitmap(70);
        let got: Vec<u64> = (0..70).map(|_| frames.alloc(1, 1).unwrap()).collect();
        assert_eq!(got[0], 0x20_1000);
        assert_eq!(got[69], 0x20_1000 + 69 * PAGE_BYTES);
        assert_eq!(frames.alloc(1, 1), None);
        assert_eq!(frames.free_frames(), 0);
        frames.free(got[10], 1).unwrap();
        frames.free(got[40], 1).unwrap();
        assert_eq!(frames.alloc(1, 1), Some(got[10]), "the lowest hole first");
        assert_eq!(frames.alloc(1, 1), Some(got[40]));
        assert_eq!(frames.alloc(1, 1), None);
    }

    #[test]
    fn freed_frames_are_reused_lowest_first() {
        let mut frames = bitmap(300);
        let first: Vec<u64> = (0..100).map(|_| frames.alloc(1, 1).unwrap()).collect();
        for &phys in first.iter().rev() {
            frames.free(phys, 1).unwrap();
        }
        let again: Vec<u64> = (0..100).map(|_| frames.alloc(1, 1).unwrap()).collect();
        assert_eq!(again, first, "a refill takes the same (warm) frames again");
        // A hole too short for a run is skipped but stays available to one frame.
        frames.free(again[5], 1).unwrap();
        let run = frames.alloc(2, 1).unwrap();
        assert!(run > again[99]);
        assert_eq!(frames.alloc(1, 1), Some(again[5]));
    }

    #[test]
    fn alignment_is_physical() {
        let mut frames = bitmap(1024);
        let run = frames.alloc(4, 1 << 16).unwrap();
        assert_eq!(run % (1 << 16), 0);
        assert_eq!(frames.alloc(16, 2 << 20), Some(0x40_0000));
        assert_eq!(
            frames.alloc(1, 8 << 20),
            None,
            "no 8 MiB-aligned frame in [0x201000, 0x601000)"
        );
    }

    #[test]
    fn misuse_is_refused_and_changes_nothing() {
        let mut frames = bitmap(8);
        let a = frames.alloc(2, 1).unwrap();
        assert_eq!(
            frames.free(a + 2 * PAGE_BYTES, 1),
            Err(FrameError::NotAllocated {
                phys: a + 2 * PAGE_BYTES
            })
        );
        assert_eq!(
            frames.free(a + 1, 1),
            Err(FrameError::Foreign {
                phys: a + 1,
                frames: 1
            })
        );
        assert_eq!(
            frames.free(0x1000, 1),
            Err(FrameError::Foreign {
                phys: 0x1000,
                frames: 1
            })
        );
        assert_eq!(
            frames.free(a, 100),
            Err(FrameError::Foreign {
                phys: a,
                frames: 100
            })
        );
        assert_eq!(frames.free_frames(), 6);
        frames.free(a, 2).unwrap();
        assert!(matches!(
            frames.free(a, 2),
            Err(FrameError::NotAllocated { .. })
        ));
        assert_eq!(frames.free_frames(), 8);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random alloc/free sequences against a model: runs never overlap, stay inside the
        /// range, honour alignment, and the free count matches.
        #[test]
        fn model_based(ops in proptest::collection::vec((any::<bool>(), 1usize..6, 0u32..5, any::<prop::sample::Index>()), 1..200)) {
            let mut frames = bitmap(200);
            let mut live: Vec<(u64, usize)> = Vec::new();
            for (alloc, count, align_log, pick) in ops {
                if alloc || live.is_empty() {
                    let align = PAGE_BYTES << align_log;
                    if let Some(phys) = frames.alloc(count, align) {
                        prop_assert_eq!(phys % align, 0);
                        let end = phys + count as u64 * PAGE_BYTES;
                        prop_assert!(phys >= frames.range().start && end <= frames.range().end);
                        for &(other, n) in &live {
                            prop_assert!(end <= other || phys >= other + n as u64 * PAGE_BYTES);
                        }
                        live.push((phys, count));
                    }
                } else {
                    let (phys, count) = live.swap_remove(pick.index(live.len()));
                    prop_assert_eq!(frames.free(phys, count), Ok(()));
                }
                let used: usize = live.iter().map(|&(_, n)| n).sum();
                prop_assert_eq!(frames.free_frames(), 200 - used);
            }
        }
    }
}
