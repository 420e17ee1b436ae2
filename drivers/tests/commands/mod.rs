//! Commands for the tests that drive a host directly. Each command's buffers move into the
//! host with it and come back in its completion, from a successful abort or from a successful
//! reset; [`Submissions`] remembers which submission each tag carries and how long its data
//! buffer was, so a test can check that exactly that buffer came back, exactly once. It keeps
//! every buffer handed back for the whole test: a fake device that lies about completion (a
//! used entry for a request it still holds) may write one later, and keeping them alive keeps
//! the *test* memory-safe while it checks the driver.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

use std::collections::BTreeMap;

use scsi::host::{CmdBuffers, Completed, DataDirection, ScsiCmd};
use scsi::wire::{CdbBytes, Lun, Tag};

/// The heap sense buffer the tests' commands carry.
pub type Sense = Box<[u8; 96]>;

/// A command for `tag` at `target`, LUN 0, carrying `data` and a fresh sense buffer.
pub fn command(
    tag: Tag,
    target: u16,
    cdb: CdbBytes,
    direction: DataDirection,
    data: Vec<u8>,
) -> ScsiCmd<Sense> {
    ScsiCmd {
        tag,
        target,
        lun: Lun(0),
        cdb,
        direction,
        buffers: CmdBuffers {
            data,
            sense: Box::new([0; 96]),
        },
    }
}

/// Which submission each tag carries now, and each submission's data length.
#[derive(Default)]
pub struct Submissions {
    pub data_len: Vec<usize>,
    /// Tag → index into `data_len`.
    pub current: BTreeMap<u16, usize>,
    /// Every buffer handed back (see the module docs).
    pub kept: Vec<CmdBuffers<Sense>>,
}

impl Submissions {
    /// Records a new submission of `data_len` bytes; returns its index.
    pub fn add(&mut self, data_len: usize) -> usize {
        self.data_len.push(data_len);
        self.data_len.len() - 1
    }

    /// The submission `tag` carried, which ended with `buffers` handed back (`None`: leaked
    /// by the host). Panics if the tag carried none, or the buffers are not its own.
    pub fn end(&mut self, tag: Tag, buffers: Option<CmdBuffers<Sense>>) -> usize {
        let index = self
            .current
            .remove(&tag.0)
            .expect("tag carries a submission");
        if let Some(buffers) = buffers {
            assert_eq!(
                buffers.data.len(),
                self.data_len[index],
                "its own data buffer"
            );
            self.kept.push(buffers);
        }
        index
    }

    /// [`Self::end`] for a completion.
    pub fn complete(&mut self, completed: Completed<Sense>) -> usize {
        self.end(completed.completion.tag, completed.buffers)
    }
}
