//! Describing a command's data buffer to a device: [`DataMapper`].
//!
//! The host owns a command's data buffer while the device may use it (it moved in with the
//! command), so the buffer stays in place until the command completes. In
//! the kernel memory is identity-mapped, so a buffer's bus address is its CPU address and
//! [`IdentityMapper`] only has to cut it into segments. On the host the fake devices live
//! in a `fake::FakeDmaSpace`, so `BounceMapper` (feature `fake`) copies
//! through DMA regions there, the way a bounce-buffering IOMMU-less platform would.

use alloc::vec::Vec;

use scsi::host::DataDirection;

use super::{DmaAddr, Segment};

/// Turns a data buffer into device segments and back.
pub trait DataMapper {
    /// What must be kept until the command completes.
    type Mapping;
    /// Appends segments of at most `segment_bytes` covering `data` to `segments`.
    /// `None` if the buffer cannot be mapped now (no bounce memory: the caller retries).
    fn map(
        &mut self,
        data: &[u8],
        direction: DataDirection,
        segment_bytes: usize,
        segments: &mut Vec<Segment>,
    ) -> Option<Self::Mapping>;
    /// The common command's shortcut: `data` as one segment of at most `segment_bytes`, when
    /// this mapper can say so without [`Self::map`] and its `Vec`. `None` maps nothing and
    /// sends the caller to `map` (what the provided method always does).
    #[inline]
    fn map_single(
        &mut self,
        data: &[u8],
        direction: DataDirection,
        segment_bytes: usize,
    ) -> Option<(Self::Mapping, Segment)> {
        let _ = (data, direction, segment_bytes);
        None
    }
    /// Ends the mapping. `data` is the command's buffer when the command completed (the
    /// mapper may copy device-written bytes into it), `None` when it was dropped.
    fn unmap(&mut self, mapping: Self::Mapping, data: Option<&mut [u8]>, direction: DataDirection);
}

/// Bus address = CPU address (the kernel's identity map).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityMapper;

impl DataMapper for IdentityMapper {
    type Mapping = ();

    #[inline]
    fn map(
        &mut self,
        data: &[u8],
        _direction: DataDirection,
        segment_bytes: usize,
        segments: &mut Vec<Segment>,
    ) -> Option<()> {
        let base = data.as_ptr().addr() as u64;
        // The common command: one segment (or none), without the chunking loop.
        if data.len() <= segment_bytes.max(1) {
            if !data.is_empty() {
                segments.push(Segment {
                    addr: DmaAddr(base),
                    len_bytes: data.len() as u32,
                });
            }
            return Some(());
        }
        let mut offset = 0usize;
        for chunk in data.chunks(segment_bytes.max(1)) {
            segments.push(Segment {
                addr: DmaAddr(base + offset as u64),
                len_bytes: chunk.len() as u32,
            });
            offset += chunk.len();
        }
        Some(())
    }

    /// Any non-empty buffer of at most `segment_bytes`: its address and length.
    #[inline]
    fn map_single(
        &mut self,
        data: &[u8],
        _direction: DataDirection,
        segment_bytes: usize,
    ) -> Option<((), Segment)> {
        if data.is_empty() || data.len() > segment_bytes {
            return None;
        }
        let segment = Segment {
            addr: DmaAddr(data.as_ptr().addr() as u64),
            len_bytes: data.len() as u32,
        };
        Some(((), segment))
    }

    #[inline]
    fn unmap(&mut self, _mapping: (), _data: Option<&mut [u8]>, _direction: DataDirection) {}
}

#[cfg(any(test, feature = "fake"))]
pub use bounce::BounceMapper;

#[cfg(any(test, feature = "fake"))]
mod bounce {
    use alloc::vec::Vec;

    use super::super::fake::{FakeDmaSpace, FakeRegion};
    use super::super::{DmaMemory, Segment};
    use super::{DataDirection, DataMapper};

    /// Copies through a fresh [`FakeRegion`] per command.
    #[derive(Debug, Clone)]
    pub struct BounceMapper {
        /// Where bounce regions come from (the fake device's memory).
        pub space: FakeDmaSpace,
    }

    impl DataMapper for BounceMapper {
        type Mapping = Option<FakeRegion>;

        fn map(
            &mut self,
            data: &[u8],
            direction: DataDirection,
            segment_bytes: usize,
            segments: &mut Vec<Segment>,
        ) -> Option<Self::Mapping> {
            if data.is_empty() {
                return Some(None);
            }
            let mut region = self.space.alloc(data.len(), 4096);
            if direction == DataDirection::ToDevice {
                region.write_at(0, data).ok()?;
            }
            let base = region.bus_addr();
            let mut offset = 0u64;
            for chunk in data.chunks(segment_bytes.max(1)) {
                segments.push(Segment {
                    addr: base.offset(offset),
                    len_bytes: chunk.len() as u32,
                });
                offset += chunk.len() as u64;
            }
            Some(Some(region))
        }

        /// A buffer of one segment bounced as `map` bounces it, so host tests drive the
        /// host's one-segment path as the kernel's identity mapping does.
        fn map_single(
            &mut self,
            data: &[u8],
            direction: DataDirection,
            segment_bytes: usize,
        ) -> Option<(Self::Mapping, Segment)> {
            if data.is_empty() || data.len() > segment_bytes {
                return None;
            }
            let mut segments = Vec::new();
            let mapping = self.map(data, direction, segment_bytes, &mut segments)?;
            Some((mapping, *segments.first()?))
        }

        fn unmap(
            &mut self,
            mapping: Self::Mapping,
            data: Option<&mut [u8]>,
            direction: DataDirection,
        ) {
            if let (Some(region), Some(data), DataDirection::FromDevice) =
                (mapping, data, direction)
            {
                let len = data.len().min(region.len_bytes());
                let _ = region.read_at(0, &mut data[..len]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::{DataDirection, DataMapper, IdentityMapper};
    use crate::dma::{DmaAddr, Segment};

    #[test]
    fn identity_map_single_is_map_for_one_segment_and_declines_the_rest() {
        let data = vec![7u8; 4096];
        let mut segments = Vec::new();
        IdentityMapper
            .map(&data, DataDirection::FromDevice, 4096, &mut segments)
            .expect("maps");
        let single = IdentityMapper.map_single(&data, DataDirection::FromDevice, 4096);
        assert_eq!(single.map(|(_, s)| s), Some(segments[0]));
        assert_eq!(
            segments[0],
            Segment {
                addr: DmaAddr(data.as_ptr().addr() as u64),
                len_bytes: 4096,
            }
        );
        assert!(
            IdentityMapper
                .map_single(&data, DataDirection::ToDevice, 4095)
                .is_none()
        );
        assert!(
            IdentityMapper
                .map_single(&[], DataDirection::None, 4096)
                .is_none()
        );
    }
}
