//! The command ledger the adapter targets (`virtio_scsi`, `mpt_replies`) keep against the host
//! under test: which tags are in flight, which submission each carries, and the checks every
//! completion, abort and reset must pass whatever the fake device said.

use std::collections::BTreeSet;

use scsi::host::{CmdBuffers, Completed, DataDirection};
use scsi::wire::Tag;

use crate::commands::{Sense, Submissions};

/// The sense buffer every submission carries, in bytes.
const SENSE_BYTES: usize = 96;

/// What the target submitted and what came back.
#[derive(Default)]
pub struct Ledger {
    buffers: Submissions,
    in_flight: BTreeSet<u16>,
    completed: BTreeSet<usize>,
}

impl Ledger {
    /// The lowest of `tags` tags not in flight.
    pub fn free_tag(&self, tags: u16) -> Option<u16> {
        (0..tags).find(|tag| !self.in_flight.contains(tag))
    }

    /// The host accepted a command on `tag` with a `data_len`-byte buffer.
    pub fn submitted(&mut self, tag: u16, data_len: usize) {
        self.in_flight.insert(tag);
        let index = self.buffers.add(data_len);
        self.buffers.current.insert(tag, index);
    }

    /// Checks each completion: a tag in flight, completed once, with its own buffers, a residual
    /// within its data buffer and a sense length within its sense buffer.
    pub fn settle(&mut self, done: Vec<Completed<Sense>>) {
        for c in done {
            let tag = c.completion.tag.0;
            assert!(
                self.in_flight.remove(&tag),
                "completion for tag {tag} not in flight: {c:?}"
            );
            let index = *self
                .buffers
                .current
                .get(&tag)
                .expect("tag carries a submission");
            let len = self.buffers.data_len[index];
            assert!(
                c.completion.residual_bytes as usize <= len,
                "residual {} beyond the {len}-byte buffer",
                c.completion.residual_bytes
            );
            assert!(
                usize::from(c.completion.sense_len) <= SENSE_BYTES,
                "sense_len {}",
                c.completion.sense_len
            );
            let submission = self.buffers.complete(c);
            assert!(
                self.completed.insert(submission),
                "submission {submission} completed twice"
            );
        }
    }

    /// The host said an abort of `tag` succeeded and handed `back` its buffers.
    pub fn aborted(&mut self, tag: u16, back: CmdBuffers<Sense>) {
        assert!(
            self.in_flight.remove(&tag),
            "abort Ok for tag {tag} not in flight"
        );
        let submission = self.buffers.end(Tag(tag), Some(back));
        assert!(
            self.completed.insert(submission),
            "aborted after it completed"
        );
    }

    /// A confirmed reset returned `returned`: every buffer comes back and nothing stays in
    /// flight.
    pub fn reset(&mut self, returned: Vec<Completed<Sense>>) {
        for c in &returned {
            assert!(
                c.buffers.is_some(),
                "a confirmed reset hands every buffer back"
            );
        }
        self.settle(returned);
        assert!(
            self.in_flight.is_empty(),
            "tags the reset did not hand back: {:?}",
            self.in_flight
        );
    }

    /// Whether any command is still in flight, and which.
    pub fn in_flight(&self) -> &BTreeSet<u16> {
        &self.in_flight
    }
}

/// The data direction of a READ/WRITE of `blocks` blocks.
pub fn direction(blocks: u16, write: bool) -> DataDirection {
    match (blocks, write) {
        (0, _) => DataDirection::None,
        (_, true) => DataDirection::ToDevice,
        (_, false) => DataDirection::FromDevice,
    }
}
