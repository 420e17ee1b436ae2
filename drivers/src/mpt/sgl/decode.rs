//! Walking an SGL back into segments, the way the IOC does.
//!
//! The fake IOC uses this to find the data of a request, and the builder's tests use it to
//! prove the encoding: build, decode, compare. It accepts what QEMU's `mptsas_build_sgl`
//! accepts (simple 32/64-bit elements, chain elements found through `ChainOffset`) and is
//! stricter where QEMU is silent: a list that runs off its frame, exceeds the chain depth,
//! or mixes directions is an error.

use alloc::vec;
use alloc::vec::Vec;

use crate::dma::{DmaAddr, Segment};

use super::super::mpi::scsi_io::SCSI_IO_SGL_OFFSET;
use super::super::mpi::sge::flags;

/// What is wrong with an SGL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// An element where a simple element must be is of another type.
    #[error("element at byte {offset} of container {container} has type {element_type:#x}")]
    NotSimple {
        /// Container: 0 = request frame, n = n-th chain frame.
        container: usize,
        /// Byte offset inside it.
        offset: usize,
        /// Type bits found.
        element_type: u32,
    },
    /// `LAST_ELEMENT` without `END_OF_LIST`, but nothing to chain to.
    #[error("list ends in container {container} without END_OF_LIST and no chain")]
    MissingChain {
        /// Container.
        container: usize,
    },
    /// The element at a chain offset is not a chain element.
    #[error("no chain element at dword {offset_dwords} of container {container}")]
    NotChain {
        /// Container.
        container: usize,
        /// Chain offset, dwords.
        offset_dwords: u8,
    },
    /// An element runs past its container.
    #[error("element at byte {offset} overruns container {container} of {len_bytes} bytes")]
    Overrun {
        /// Container.
        container: usize,
        /// Offset.
        offset: usize,
        /// Container size.
        len_bytes: usize,
    },
    /// More chain frames than allowed.
    #[error("more than {max_chain_depth} chain frames")]
    TooDeep {
        /// The limit.
        max_chain_depth: usize,
    },
    /// A zero-length element that does not end the list.
    #[error("empty element that does not end the list in container {container}")]
    EmptyElement {
        /// Container.
        container: usize,
    },
    /// Elements disagree on the transfer direction.
    #[error("elements disagree on direction")]
    MixedDirection,
    /// Reading a chain frame failed.
    #[error("cannot read chain frame at {addr:?}")]
    Unreadable {
        /// Its address.
        addr: DmaAddr,
    },
}

/// A decoded SGL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The data segments, in order.
    pub segments: Vec<Segment>,
    /// Chain frames followed.
    pub chain_frames: usize,
    /// `Some(true)` if elements say host-to-IOC, `Some(false)` IOC-to-host, `None` if
    /// there was no data element.
    pub host_to_ioc: Option<bool>,
}

/// Decodes the SGL of the request frame `frame` (header included) whose header says
/// `chain_offset_dwords`. `read` fetches chain frames by bus address.
pub fn decode(
    frame: &[u8],
    chain_offset_dwords: u8,
    max_chain_depth: usize,
    mut read: impl FnMut(DmaAddr, &mut [u8]) -> bool,
) -> Result<Decoded, DecodeError> {
    let mut container = frame.to_vec();
    let mut index = 0usize;
    let mut pos = SCSI_IO_SGL_OFFSET;
    let mut chain_at = chain_offset_dwords;
    let mut out = Decoded {
        segments: Vec::new(),
        chain_frames: 0,
        host_to_ioc: None,
    };
    loop {
        let word = dword(&container, pos).ok_or(DecodeError::Overrun {
            container: index,
            offset: pos,
            len_bytes: container.len(),
        })?;
        if word & flags::ELEMENT_TYPE_MASK != flags::SIMPLE_ELEMENT {
            return Err(DecodeError::NotSimple {
                container: index,
                offset: pos,
                element_type: word & flags::ELEMENT_TYPE_MASK,
            });
        }
        let (addr, size) = address(&container, pos, word).ok_or(DecodeError::Overrun {
            container: index,
            offset: pos,
            len_bytes: container.len(),
        })?;
        let len = word & flags::LENGTH_MASK;
        let ends = word & (flags::END_OF_LIST | flags::END_OF_BUFFER) != 0;
        if len == 0 && !ends {
            return Err(DecodeError::EmptyElement { container: index });
        }
        if len > 0 {
            let dir = word & flags::HOST_TO_IOC != 0;
            if *out.host_to_ioc.get_or_insert(dir) != dir {
                return Err(DecodeError::MixedDirection);
            }
            out.segments.push(Segment {
                addr: DmaAddr(addr),
                len_bytes: len,
            });
        }
        if word & flags::END_OF_LIST != 0 {
            return Ok(out);
        }
        if word & flags::LAST_ELEMENT == 0 {
            pos += size;
            continue;
        }
        if chain_at == 0 {
            return Err(DecodeError::MissingChain { container: index });
        }
        let at = usize::from(chain_at) * 4;
        let chain = dword(&container, at)
            .filter(|w| w & flags::ELEMENT_TYPE_MASK == flags::CHAIN_ELEMENT)
            .ok_or(DecodeError::NotChain {
                container: index,
                offset_dwords: chain_at,
            })?;
        let (next_addr, _) = address(&container, at, chain).ok_or(DecodeError::Overrun {
            container: index,
            offset: at,
            len_bytes: container.len(),
        })?;
        out.chain_frames += 1;
        if out.chain_frames > max_chain_depth {
            return Err(DecodeError::TooDeep { max_chain_depth });
        }
        let len_bytes = (chain & flags::CHAIN_LENGTH_MASK) as usize;
        container = vec![0; len_bytes];
        if !read(DmaAddr(next_addr), &mut container) {
            return Err(DecodeError::Unreadable {
                addr: DmaAddr(next_addr),
            });
        }
        chain_at = ((chain & flags::CHAIN_OFFSET_MASK) >> flags::CHAIN_OFFSET_SHIFT) as u8;
        index += 1;
        pos = 0;
    }
}

fn dword(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The element's address and size in bytes.
fn address(bytes: &[u8], at: usize, word: u32) -> Option<(u64, usize)> {
    if word & flags::ADDRESSING_64 != 0 {
        let lo = u64::from(dword(bytes, at + 4)?);
        let hi = u64::from(dword(bytes, at + 8)?);
        Some((hi << 32 | lo, 12))
    } else {
        Some((u64::from(dword(bytes, at + 4)?), 8))
    }
}
