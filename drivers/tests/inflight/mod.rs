//! The command buffers a host driver finds through `scsi::host::InFlight`, as the midlayer keeps
//! them, for the tests that drive a host directly: [`Buffers`] holds every submission's data and
//! sense buffer for the whole test (a device that lies about completion may still write one
//! later; keeping them alive keeps the *test* memory-safe while it checks the driver), and
//! [`NoBuffers`] is for calls that carry none (aborts, resets, events).

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

use std::collections::BTreeMap;

use scsi::host::InFlight;
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;

/// Buffers of every submission ever made, and which submission each tag carries now.
#[derive(Default)]
pub struct Buffers {
    pub data: Vec<Vec<u8>>,
    #[expect(
        clippy::vec_box,
        reason = "SenseStorage is implemented for Box<[u8; 96]>, the midlayer's heap sense buffer"
    )]
    pub sense: Vec<Box<[u8; 96]>>,
    /// Tag → index into `data` and `sense`.
    pub current: BTreeMap<u16, usize>,
}

impl InFlight for Buffers {
    fn sense_mut(&mut self, tag: Tag) -> Option<&mut dyn SenseStorage> {
        let index = *self.current.get(&tag.0)?;
        Some(&mut self.sense[index])
    }
    fn data_mut(&mut self, tag: Tag) -> Option<&mut [u8]> {
        let index = *self.current.get(&tag.0)?;
        Some(&mut self.data[index])
    }
}

/// No command has buffers.
pub struct NoBuffers;

impl InFlight for NoBuffers {
    fn sense_mut(&mut self, _tag: Tag) -> Option<&mut dyn SenseStorage> {
        None
    }
    fn data_mut(&mut self, _tag: Tag) -> Option<&mut [u8]> {
        None
    }
}
