//! An IOC that does not come back from a reset, against `MptHost`: the message-unit reset
//! never reaches READY, the IOC faults again after IOC_INIT, or the doorbell handshake
//! times out. The host must say so (`reset` returns `Err`, or the outstanding commands
//! complete once with `HostError::ResetFailed`), leak everything the IOC may still write
//! (chain frames stay out of the pool, bounce buffers and frame arrays stay mapped), and
//! be dead afterwards: new commands complete with `HostError::Dead`, abort and reset fail,
//! poll finds nothing, and no register is touched. The fake is then woken up and runs the
//! requests it kept, to show they land in memory that is still there.

mod commands;
mod mpt_rig;

use commands::{Sense, Submissions, command};
use mpt_rig::*;

use drivers::delay::CountingDelay;
use drivers::dma::fake::{FakeDmaSpace, FakeRegion};
use drivers::dma::mapping::BounceMapper;
use drivers::mpt::fake::FakeIoc;
use drivers::mpt::host::MptHost;
use drivers::mpt::regs::{MptRegisters, REPLY_FIFO_EMPTY, Register};
use scsi::host::{DataDirection, HostCompletion, HostError, QueueError, ScsiHost};
use scsi::wire::{CdbBytes, Tag};

type Host = MptHost<FakeIoc, CountingDelay, FakeRegion, Pool, BounceMapper, Sense>;

/// How the IOC fails to come back.
#[derive(Debug, Clone, Copy)]
enum Wedge {
    NeverReady,
    FaultAfterInit,
    SilentDoorbell,
}

const WEDGES: [Wedge; 3] = [
    Wedge::NeverReady,
    Wedge::FaultAfterInit,
    Wedge::SilentDoorbell,
];

struct Bench {
    space: FakeDmaSpace,
    ioc: FakeIoc,
    host: Host,
    buffers: Submissions,
}

fn bench() -> Bench {
    let Rig { space, ioc, mpt } = rig();
    let mut memory = space.clone();
    let host = MptHost::new(
        mpt,
        BounceMapper {
            space: space.clone(),
        },
        &mut memory,
    )
    .expect("host");
    Bench {
        space,
        ioc,
        host,
        buffers: Submissions::default(),
    }
}

impl Bench {
    /// READ(10) of `blocks` blocks from target 0 (128 blocks need chain frames).
    fn submit(&mut self, tag: u16, blocks: u16) -> Result<(), QueueError> {
        let len = usize::from(blocks) * 512;
        let cdb = CdbBytes::from_slice(&rw10(0x28, 1, blocks)).expect("cdb");
        let direction = if blocks == 0 {
            DataDirection::None
        } else {
            DataDirection::FromDevice
        };
        let cmd = command(Tag(tag), 0, cdb, direction, vec![0; len]);
        match self.host.queue_command(cmd) {
            Ok(()) => {
                let index = self.buffers.add(len);
                self.buffers.current.insert(tag, index);
                Ok(())
            }
            Err(refused) => Err(refused.error),
        }
    }

    /// Polls; each command's buffers must come back with it, except after a failed reset.
    fn poll(&mut self) -> Vec<HostCompletion> {
        let mut done = Vec::new();
        self.host.poll(&mut done);
        done.into_iter()
            .map(|c| {
                let completion = c.completion;
                let leaked = completion.host_error == Some(HostError::ResetFailed);
                assert_eq!(c.buffers.is_none(), leaked, "{completion:?}");
                self.buffers.complete(c);
                completion
            })
            .collect()
    }

    /// Three commands stuck in the IOC, two of them holding chain frames; returns the
    /// chain frames out of the pool.
    fn stuck_commands(&mut self) -> usize {
        self.ioc.model().hold_scsi_io = true;
        self.submit(0, 128).expect("queued");
        self.submit(1, 128).expect("queued");
        self.submit(2, 0).expect("queued");
        assert!(self.poll().is_empty(), "the IOC holds them");
        let chains = self.host.adapter().chain_pool().live.get();
        assert!(chains >= 2, "the big reads hold chain frames: {chains}");
        chains
    }

    fn wedge(&mut self, how: Wedge) {
        let mut model = self.ioc.model();
        match how {
            Wedge::NeverReady => model.stuck_in_reset = true,
            Wedge::FaultAfterInit => model.fault_after_init = Some(0x1234),
            Wedge::SilentDoorbell => model.doorbell_silent = true,
        }
    }

    /// Everything a dead host must refuse, and that it touches no register doing so.
    fn assert_dead(&mut self, chains: usize) {
        assert!(self.host.is_dead());
        assert!(self.host.adapter().is_dead());
        let (resets, pending) = {
            let model = self.ioc.model();
            (model.resets, model.pending_requests())
        };
        // A live host would read this bogus reply and reset the IOC; a dead one reads nothing.
        self.ioc.model().inject_replies.push_back(0x0000_0042);
        assert!(self.poll().is_empty(), "a dead host polls nothing");
        assert_eq!(self.ioc.model().inject_replies.len(), 1, "reply FIFO read");
        assert_eq!(
            self.submit(7, 8),
            Ok(()),
            "a dead host still takes a command"
        );
        let done = self.poll();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].tag, Tag(7));
        assert_eq!(done[0].host_error, Some(HostError::Dead));
        assert!(self.poll().is_empty(), "completed exactly once");
        assert!(self.host.abort(Tag(0)).is_err());
        assert!(self.host.reset(&mut Vec::new()).is_err());
        assert_eq!(self.ioc.model().resets, resets, "no reset of a dead IOC");
        assert_eq!(
            self.ioc.model().pending_requests(),
            pending,
            "nothing posted"
        );
        assert_eq!(
            self.host.adapter().chain_pool().live.get(),
            chains,
            "chain frames the IOC may read stay out of the pool"
        );
    }

    /// Drops the host, then lets the fake IOC run what it kept: every write must land in
    /// memory that is still mapped, and the chain frames are never returned to the pool.
    fn drop_and_wake(self, chains: usize) {
        let Bench {
            space, ioc, host, ..
        } = self;
        let live = host.adapter().chain_pool().live.clone();
        let (resets, walked) = {
            let model = ioc.model();
            (model.resets, model.chain_frames_walked)
        };
        drop(host);
        assert_eq!(
            ioc.model().resets,
            resets,
            "dropping a dead host resets nothing"
        );
        assert_eq!(live.get(), chains, "chain frames went back to the pool");
        let kept = ioc.model().pending_requests();
        {
            let mut model = ioc.model();
            model.revive();
            model.hold_scsi_io = false;
        }
        let mut regs = ioc.clone();
        while regs.read32(Register::ReplyFifo) != REPLY_FIFO_EMPTY {}
        let model = ioc.model();
        assert_eq!(model.dma_errors, 0, "the IOC touched freed memory");
        if kept > 0 {
            assert!(
                model.chain_frames_walked > walked,
                "it read the leaked chains"
            );
        }
        assert_eq!(model.pending_requests(), 0);
        drop(model);
        assert!(space.live_regions() > 0);
    }
}

#[test]
fn a_reset_the_ioc_never_finishes_is_an_error_and_the_host_dies() {
    for how in WEDGES {
        let mut bench = bench();
        let chains = bench.stuck_commands();
        bench.wedge(how);
        let mut returned = Vec::new();
        assert!(
            bench.host.reset(&mut returned).is_err(),
            "{how:?}: reset must fail"
        );
        assert!(returned.is_empty(), "{how:?}: the IOC may still write them");
        assert!(
            bench.poll().is_empty(),
            "{how:?}: reset drops them; the midlayer fails them"
        );
        bench.assert_dead(chains);
        bench.drop_and_wake(chains);
    }
}

#[test]
fn a_failed_recovery_in_poll_completes_outstanding_commands_once_with_reset_failed() {
    for how in WEDGES {
        let mut bench = bench();
        let chains = bench.stuck_commands();
        bench.wedge(how);
        // A reply nobody owns makes the host reset the IOC, which does not come back.
        bench.ioc.model().inject_replies.push_back(0x0000_0042);
        let mut done = bench.poll();
        done.sort_by_key(|c| c.tag.0);
        let tags: Vec<u16> = done.iter().map(|c| c.tag.0).collect();
        assert_eq!(tags, [0, 1, 2], "{how:?}");
        assert!(
            done.iter()
                .all(|c| c.host_error == Some(HostError::ResetFailed)),
            "{how:?}: {done:?}"
        );
        bench.assert_dead(chains);
        bench.drop_and_wake(chains);
    }
}

#[test]
fn a_failed_recovery_during_abort_fails_the_abort_and_every_command_once() {
    let mut bench = bench();
    let chains = bench.stuck_commands();
    bench.wedge(Wedge::NeverReady);
    bench.ioc.model().inject_replies.push_back(0x0000_0042);
    assert!(bench.host.abort(Tag(1)).is_err());
    let mut done = bench.poll();
    done.sort_by_key(|c| c.tag.0);
    let tags: Vec<u16> = done.iter().map(|c| c.tag.0).collect();
    assert_eq!(tags, [0, 1, 2]);
    assert!(
        done.iter()
            .all(|c| c.host_error == Some(HostError::ResetFailed))
    );
    bench.assert_dead(chains);
    bench.drop_and_wake(chains);
}

#[test]
fn the_host_survives_a_reset_the_ioc_finishes() {
    let mut bench = bench();
    bench.stuck_commands();
    let mut returned = Vec::new();
    assert_eq!(
        bench.host.reset(&mut returned).map(|()| returned.len()),
        Ok(3)
    );
    assert!(
        returned.iter().all(|c| c.buffers.is_some()),
        "all handed back"
    );
    assert!(!bench.host.is_dead());
    assert_eq!(bench.host.adapter().chain_pool().live.get(), 0);
    bench.ioc.model().hold_scsi_io = false;
    bench.submit(4, 8).expect("queued");
    let done = bench.poll();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].host_error, None);
}
