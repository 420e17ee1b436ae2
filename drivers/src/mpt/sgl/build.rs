//! Writing a 64-bit SGL into a request frame and chain frames.

use alloc::vec::Vec;

use super::MAX_FRAME_BYTES;

use scsi::host::DataDirection;
use zerocopy::IntoBytes;

use crate::dma::{DmaMemory, Segment};

use super::super::mpi::scsi_io::SCSI_IO_SGL_OFFSET;
use super::super::mpi::sge::{MAX_SIMPLE_LEN_BYTES, SGE64_LEN_BYTES, Sge64, flags};
use super::{ChainPool, SglError, SglLayout};

/// Builds the SGL for `segments`.
///
/// `main_frame` is the CPU copy of the whole request frame (`layout.frame_size_bytes()`
/// long); the elements go in from offset 0x30. Chain frames come from `pool` and are
/// pushed onto `chains`, which the caller keeps until the request completes (dropping them
/// returns them to the pool). Returns the request's `ChainOffset` in dwords (0 if no
/// chain). On error nothing is pushed onto `chains`, and frames taken are already returned.
pub fn build<P: ChainPool>(
    layout: &SglLayout,
    segments: &[Segment],
    direction: DataDirection,
    main_frame: &mut [u8],
    pool: &mut P,
    chains: &mut Vec<P::Frame>,
) -> Result<u8, SglError> {
    // Every simple element repeats the direction; a no-data command has no elements.
    let dir = match direction {
        DataDirection::None | DataDirection::FromDevice => 0,
        DataDirection::ToDevice => flags::HOST_TO_IOC,
    };
    if main_frame.len() < layout.frame_size_bytes() {
        return Err(SglError::Dma(crate::dma::OutOfBounds {
            offset: 0,
            len_bytes: layout.frame_size_bytes(),
            region_len_bytes: main_frame.len(),
        }));
    }
    if let Some(element) = single_element(segments, direction) {
        // No data, or the common command's one segment: one simple element in the request
        // frame ending the list, no chain (what the general path below writes for it, without
        // its loops).
        put(main_frame, SCSI_IO_SGL_OFFSET, element?);
        return Ok(0);
    }
    for (index, segment) in segments.iter().enumerate() {
        check_segment(index, segment)?;
    }
    let needed = layout.chains_needed(segments.len());
    if needed > layout.max_chain_depth() {
        return Err(SglError::TooManySegments {
            segments: segments.len(),
            chains_needed: needed,
            max_chain_depth: layout.max_chain_depth(),
            max_segments: layout.max_segments(),
        });
    }

    // Take every frame first, so a dry pool fails before anything is written. They go
    // straight onto `chains`; on failure the ones taken are dropped (returned) again.
    let first = chains.len();
    for allocated in 0..needed {
        match pool.alloc_frame() {
            Some(frame) if frame.len_bytes() >= layout.frame_size_bytes() => chains.push(frame),
            other => {
                let len_bytes = other.as_ref().map(DmaMemory::len_bytes);
                chains.truncate(first);
                return Err(match len_bytes {
                    Some(len_bytes) => SglError::ChainFrameSize {
                        len_bytes,
                        want_bytes: layout.frame_size_bytes(),
                    },
                    None => SglError::ChainPoolExhausted { allocated, needed },
                });
            }
        }
    }
    let frames = &mut chains[first..];

    // Simple elements in chain frame `index`: all but the last give a slot to the next
    // chain element; the last takes what is left.
    let main_count = if needed == 0 {
        segments.len()
    } else {
        layout.main_slots() - 1
    };
    let per_chain = layout.chain_slots() - 1;
    let count_in = |index: usize| {
        if index + 1 == needed {
            segments.len() - main_count - per_chain * index
        } else {
            per_chain
        }
    };

    let (main_part, mut rest) = segments.split_at(main_count);
    write_simples(
        main_frame,
        SCSI_IO_SGL_OFFSET,
        main_part,
        dir,
        rest.is_empty(),
    );
    let mut chain_offset_dwords = 0u8;
    if needed > 0 {
        let at = SCSI_IO_SGL_OFFSET + main_count * SGE64_LEN_BYTES;
        chain_offset_dwords = (at / 4) as u8;
        put(
            main_frame,
            at,
            chain_element(&frames[0], count_in(0), needed > 1),
        );
    }
    let mut scratch = [0u8; MAX_FRAME_BYTES];
    let scratch = &mut scratch[..layout.frame_size_bytes()];
    for index in 0..needed {
        scratch.fill(0);
        let (part, after) = rest.split_at(count_in(index));
        rest = after;
        let last_frame = index + 1 == needed;
        write_simples(scratch, 0, part, dir, last_frame);
        if !last_frame {
            let next = chain_element(&frames[index + 1], count_in(index + 1), index + 2 < needed);
            put(scratch, part.len() * SGE64_LEN_BYTES, next);
        }
        if let Err(error) = frames[index].write_at(0, scratch) {
            chains.truncate(first);
            return Err(error.into());
        }
    }
    Ok(chain_offset_dwords)
}

/// The SGL of a command with at most one segment, which is one simple element ending the list
/// (LAST_ELEMENT | END_OF_BUFFER | END_OF_LIST), written in the request frame right after
/// the header; `None` for two or more segments, which need [`build`]. MPI wants an SGL even
/// without data: a no-data command gets one zero-length element. The segment is checked as
/// `build` checks it (not empty, under 16 MiB). A request frame always has room for it
/// ([`SglLayout::new`] wants at least two elements there).
#[inline]
pub fn single_element(
    segments: &[Segment],
    direction: DataDirection,
) -> Option<Result<Sge64, SglError>> {
    let dir = match direction {
        DataDirection::None | DataDirection::FromDevice => 0,
        DataDirection::ToDevice => flags::HOST_TO_IOC,
    };
    let end = flags::LAST_ELEMENT | flags::END_OF_BUFFER | flags::END_OF_LIST | dir;
    match segments {
        [] => Some(Ok(Sge64::simple(0, 0, end))),
        [segment] => Some(
            check_segment(0, segment)
                .map(|()| Sge64::simple(segment.addr.0, segment.len_bytes, end)),
        ),
        _ => None,
    }
}

/// Refuses a segment one simple element cannot carry (empty, or 16 MiB or longer).
#[inline]
fn check_segment(index: usize, segment: &Segment) -> Result<(), SglError> {
    if segment.len_bytes == 0 {
        return Err(SglError::EmptySegment { index });
    }
    if segment.len_bytes > MAX_SIMPLE_LEN_BYTES {
        return Err(SglError::SegmentTooLong {
            index,
            len_bytes: segment.len_bytes,
        });
    }
    Ok(())
}

/// A chain element pointing at `frame`, which holds `simples` simple elements followed,
/// if `has_chain`, by its own chain element.
fn chain_element<F: DmaMemory>(frame: &F, simples: usize, has_chain: bool) -> Sge64 {
    let elements = simples + usize::from(has_chain);
    let next_offset = if has_chain {
        (simples * SGE64_LEN_BYTES / 4) as u8
    } else {
        0
    };
    Sge64::chain(
        frame.bus_addr().0,
        (elements * SGE64_LEN_BYTES) as u16,
        next_offset,
    )
}

fn write_simples(buf: &mut [u8], at: usize, segments: &[Segment], dir: u32, ends_list: bool) {
    let count = segments.len();
    for (k, segment) in segments.iter().enumerate() {
        let mut extra = dir;
        if k + 1 == count {
            extra |= flags::LAST_ELEMENT;
            if ends_list {
                extra |= flags::END_OF_BUFFER | flags::END_OF_LIST;
            }
        }
        put(
            buf,
            at + k * SGE64_LEN_BYTES,
            Sge64::simple(segment.addr.0, segment.len_bytes, extra),
        );
    }
}

fn put(buf: &mut [u8], at: usize, sge: Sge64) {
    buf[at..at + SGE64_LEN_BYTES].copy_from_slice(sge.as_bytes());
}
