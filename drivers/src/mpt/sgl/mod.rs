//! Scatter-gather lists with chain frames: the part of MPT that the chain pool exists for.
//!
//! A SCSI_IO_REQUEST frame has room for a few 64-bit simple elements after its 48-byte
//! header. A longer list ends the frame with a *chain element* that points to a chain frame
//! from the chain pool; that frame holds more simple elements and, if needed, another chain
//! element, and so on, at most `MaxChainDepth` chain frames deep. The layout rules, which
//! QEMU's `mptsas_build_sgl` walks the same way:
//! - the request header's `ChainOffset` gives, in dwords, where the first chain element is;
//! - the simple element just before a chain element carries `LAST_ELEMENT` (that is what
//!   tells the IOC to follow the chain);
//! - a chain element's `NextChainOffset` says where the next chain element sits inside the
//!   frame it points to, and its length is the bytes of elements in that frame;
//! - the final element carries `LAST_ELEMENT | END_OF_BUFFER | END_OF_LIST`.
//!
//! [`SglLayout`] does the arithmetic (elements per frame, chains needed, the maximum list),
//! [`build()`] writes a list, [`decode()`] walks one back the way the IOC does, and
//! [`ChainPoolSizing`] sizes the pool the mpt3sas way.

pub mod build;
pub mod decode;

use crate::dma::DmaMemory;

use super::mpi::scsi_io::SCSI_IO_SGL_OFFSET;
use super::mpi::sge::SGE64_LEN_BYTES;

pub use build::build;
pub use decode::{DecodeError, decode};

/// Errors building a scatter-gather list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SglError {
    /// More segments than `MaxChainDepth` chain frames can describe.
    #[error(
        "{segments} segments need {chains_needed} chain frames; the IOC allows {max_chain_depth} ({max_segments} segments)"
    )]
    TooManySegments {
        /// Segments asked for.
        segments: usize,
        /// Chain frames they would need.
        chains_needed: usize,
        /// The limit.
        max_chain_depth: usize,
        /// Most segments that fit.
        max_segments: usize,
    },
    /// A segment longer than one simple element can carry (16 MiB - 1).
    #[error("segment {index} is {len_bytes} bytes; one SGE carries at most 16777215")]
    SegmentTooLong {
        /// Which segment.
        index: usize,
        /// Its length.
        len_bytes: u32,
    },
    /// A zero-length segment (the IOC rejects one that does not end the list).
    #[error("segment {index} is empty")]
    EmptySegment {
        /// Which segment.
        index: usize,
    },
    /// The chain pool ran dry. A value, not a panic: the caller may retry later.
    #[error("chain pool exhausted after {allocated} of {needed} chain frames")]
    ChainPoolExhausted {
        /// Frames obtained before running dry (all returned).
        allocated: usize,
        /// Frames needed.
        needed: usize,
    },
    /// The pool handed out a frame of the wrong size.
    #[error("chain frame of {len_bytes} bytes, layout wants {want_bytes}")]
    ChainFrameSize {
        /// What the pool gave.
        len_bytes: usize,
        /// What the layout needs.
        want_bytes: usize,
    },
    /// A DMA write failed.
    #[error(transparent)]
    Dma(#[from] crate::dma::OutOfBounds),
}

/// Where chain frames come from: the mpt3sas "chain pool". In the kernel this is a
/// `pools` scalable dmapool of `frame_size` blocks; host tests use a fake with fake bus
/// addresses. A frame handle goes back to its pool when dropped.
pub trait ChainPool {
    /// One chain frame: device-visible memory of the layout's frame size.
    type Frame: DmaMemory;
    /// Takes one frame, or `None` if the pool is exhausted.
    fn alloc_frame(&mut self) -> Option<Self::Frame>;
}

/// Largest frame [`SglLayout`] accepts: offsets are bytes of dwords, so 255 * 4 bytes.
pub const MAX_FRAME_BYTES: usize = 1020;

/// Frame geometry for 64-bit SGLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SglLayout {
    frame_size_bytes: usize,
    main_slots: usize,
    chain_slots: usize,
    max_chain_depth: usize,
}

impl SglLayout {
    /// Layout for request and chain frames of `frame_size_bytes` (a multiple of 4, at most
    /// 1020 so offsets fit a byte of dwords) with at most `max_chain_depth` chain frames.
    /// Each frame must hold at least two elements, so a chain can always make progress.
    pub fn new(frame_size_bytes: usize, max_chain_depth: usize) -> Result<Self, super::MptError> {
        let bad = |value: usize| super::MptError::BadConfig {
            what: "frame_size_bytes",
            value: value as u64,
        };
        if frame_size_bytes % 4 != 0 || frame_size_bytes > MAX_FRAME_BYTES {
            return Err(bad(frame_size_bytes));
        }
        let main_slots = frame_size_bytes.saturating_sub(SCSI_IO_SGL_OFFSET) / SGE64_LEN_BYTES;
        let chain_slots = frame_size_bytes / SGE64_LEN_BYTES;
        if main_slots < 2 || chain_slots < 2 {
            return Err(bad(frame_size_bytes));
        }
        Ok(Self {
            frame_size_bytes,
            main_slots,
            chain_slots,
            max_chain_depth,
        })
    }

    /// Request and chain frame size.
    #[must_use]
    pub const fn frame_size_bytes(&self) -> usize {
        self.frame_size_bytes
    }

    /// Elements that fit in the request frame after the header.
    #[must_use]
    pub const fn main_slots(&self) -> usize {
        self.main_slots
    }

    /// Elements that fit in one chain frame.
    #[must_use]
    pub const fn chain_slots(&self) -> usize {
        self.chain_slots
    }

    /// Chain frames allowed per request.
    #[must_use]
    pub const fn max_chain_depth(&self) -> usize {
        self.max_chain_depth
    }

    /// Chain frames needed for `segments` simple elements (no limit applied).
    #[must_use]
    pub fn chains_needed(&self, segments: usize) -> usize {
        if segments <= self.main_slots {
            return 0;
        }
        // The request frame gives up one slot to the chain element. Every chain frame but
        // the last does too; the last holds up to chain_slots simple elements.
        let mut remaining = segments - (self.main_slots - 1);
        let mut chains = 1;
        while remaining > self.chain_slots {
            remaining -= self.chain_slots - 1;
            chains += 1;
        }
        chains
    }

    /// Most segments one request can carry: the IOC's sg_tablesize.
    #[must_use]
    pub fn max_segments(&self) -> usize {
        match self.max_chain_depth {
            0 => self.main_slots,
            depth => {
                (self.main_slots - 1) + (depth - 1) * (self.chain_slots - 1) + self.chain_slots
            }
        }
    }
}

/// The chain pool size, computed the way mpt3sas does: enough chain frames for every
/// request slot to carry a maximal list at once, preallocated at init.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainPoolSizing {
    /// Chain frames one maximal request needs.
    pub chains_per_io: usize,
    /// Frames in the pool: `chains_per_io * can_queue`.
    pub frames: usize,
    /// Block size of the pool.
    pub frame_size_bytes: usize,
    /// Bytes in the pool.
    pub total_bytes: usize,
}

impl ChainPoolSizing {
    /// Sizes the pool for `can_queue` requests of up to `sg_tablesize` segments (clamped to
    /// the layout's maximum).
    #[must_use]
    pub fn new(layout: &SglLayout, sg_tablesize: usize, can_queue: usize) -> Self {
        let chains_per_io = layout.chains_needed(sg_tablesize.min(layout.max_segments()));
        let frames = chains_per_io.saturating_mul(can_queue);
        Self {
            chains_per_io,
            frames,
            frame_size_bytes: layout.frame_size_bytes,
            total_bytes: frames.saturating_mul(layout.frame_size_bytes),
        }
    }
}

#[cfg(test)]
mod tests;

/// The kernel's chain pool: a `pools` dmapool borrowed for the adapter's life. Blocks are
/// `DmaBlock`s, which go back to the pool when the request that used them completes.
impl<'pool, A: pools::PoolAlgorithm, R: lock_api::RawMutex> ChainPool
    for &'pool pools::DmaPool<A, R>
{
    type Frame = pools::DmaBlock<'pool, A, R>;

    fn alloc_frame(&mut self) -> Option<Self::Frame> {
        self.alloc().ok()
    }
}

/// Creates nothing and frees nothing: touches `sizing.frames` blocks of `pool` once so its
/// pages exist before the first I/O (dmapool pages are never freed before destroy), the
/// mpt3sas "preallocated at init" behaviour. Returns how many blocks it obtained.
pub fn preallocate<A: pools::PoolAlgorithm, R: lock_api::RawMutex>(
    pool: &pools::DmaPool<A, R>,
    sizing: &ChainPoolSizing,
) -> usize {
    let mut blocks = alloc::vec::Vec::with_capacity(sizing.frames);
    while blocks.len() < sizing.frames {
        match pool.alloc_raw() {
            Ok(block) => blocks.push(block),
            Err(_) => break,
        }
    }
    let got = blocks.len();
    for block in blocks {
        if let Err(error) = pool.free_raw(block) {
            log::error!("chain pool preallocation: {error}");
        }
    }
    got
}
