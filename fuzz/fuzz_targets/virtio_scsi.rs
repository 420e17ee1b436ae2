#![no_main]
//! virtio-scsi against a fake transport that lies: any device configuration, any used-ring
//! entry (id and length), any response header (response code, status, sense length,
//! residual), events with any payload, held requests, aborts and resets, interleaved with
//! submissions and polls.
//!
//! Beyond "no panic": a completion only for a tag in flight and never twice, each with its
//! own buffers at their own length; a residual never beyond the data buffer and a sense
//! length never beyond the sense buffer; an `Ok` abort or a confirmed reset hands the buffers
//! back, and nothing completes after a reset.
use arbitrary::Arbitrary;
use drivers::delay::CountingDelay;
use drivers::virtio_scsi::host::VirtioScsiHost;
use drivers::virtio_scsi::wire::{Config, Event};
use libfuzzer_sys::fuzz_target;
use scsi::host::ScsiHost;
use scsi::wire::{CdbBytes, Tag};
use sensepool_fuzz::commands::{Sense, command};
use sensepool_fuzz::ledger::{Ledger, direction};
use sensepool_fuzz::virtio_fake::{FakeScsi, HeapHal};
use zerocopy::FromBytes;

type Host = VirtioScsiHost<HeapHal, FakeScsi, CountingDelay, Sense, 64>;

const CAN_QUEUE: u16 = 16;

#[derive(Arbitrary, Debug)]
enum Op {
    Submit { write: bool, blocks: u8, target: u8 },
    Poll,
    InjectUsed(u32, u32),
    Bonus(u32),
    Hold(bool),
    Abort(u8),
    Lie(Vec<u8>),
    Event([u8; 16]),
    Reset,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Replaces the fake's configuration space when given (40 bytes, virtio 1.2 §5.6.4).
    config: Option<[u8; 36]>,
    ops: Vec<Op>,
}

fn rw10(op: u8, blocks: u16) -> CdbBytes {
    let b = blocks.to_be_bytes();
    CdbBytes::from_slice(&[op, 0, 0, 0, 0, 0, 0, b[0], b[1], 0]).unwrap()
}

fuzz_target!(|input: Input| {
    let fake = FakeScsi::new();
    if let Some(raw) = input.config {
        let mut bytes = [0u8; 36];
        bytes.copy_from_slice(&raw);
        if let Ok((config, _)) = Config::read_from_prefix(&bytes) {
            fake.state().config = config;
        }
    }
    // A configuration the driver refuses is an error, never a panic.
    let Ok(mut host) = Host::new(
        fake.clone(),
        CountingDelay::default(),
        usize::from(CAN_QUEUE),
    ) else {
        return;
    };
    let mut ledger = Ledger::default();
    for op in input.ops.into_iter().take(80) {
        match op {
            Op::Submit {
                write,
                blocks,
                target,
            } => {
                let Some(tag) = ledger.free_tag(CAN_QUEUE) else {
                    continue;
                };
                let blocks = u16::from(blocks % 17);
                let len = usize::from(blocks) * 512;
                let cdb = rw10(if write { 0x2A } else { 0x28 }, blocks);
                let cmd = command(
                    Tag(tag),
                    u16::from(target % 4),
                    cdb,
                    direction(blocks, write),
                    vec![0x5A; len],
                );
                match host.queue_command(cmd) {
                    Ok(()) => ledger.submitted(tag, len),
                    Err(refused) => {
                        assert_eq!(refused.buffers.data.len(), len, "refused: its own buffer")
                    }
                }
            }
            Op::Poll => {
                let mut done = Vec::new();
                host.poll(&mut done);
                ledger.settle(done);
            }
            Op::InjectUsed(id, len) => fake.state().inject_used.push((id, len)),
            Op::Bonus(bonus) => fake.state().used_len_bonus = bonus,
            Op::Hold(hold) => {
                fake.state().hold = hold;
                if !hold {
                    fake.state().release_held();
                }
            }
            Op::Abort(pick) => {
                let tag = u16::from(pick) % CAN_QUEUE;
                if let Ok(back) = host.abort(Tag(tag)) {
                    ledger.aborted(tag, back);
                }
            }
            Op::Lie(bytes) => fake.state().lie_responses.push_back(bytes),
            Op::Event(raw) => {
                if let Ok((event, _)) = Event::read_from_prefix(&raw[..]) {
                    fake.state().fire_event(event);
                }
                let mut events = Vec::new();
                host.poll_events(&mut events);
            }
            Op::Reset => {
                let mut returned = Vec::new();
                if host.reset(&mut returned).is_ok() {
                    ledger.reset(returned);
                }
            }
        }
    }
    // A final reset drops everything; nothing may complete afterwards.
    let mut returned = Vec::new();
    if host.reset(&mut returned).is_ok() {
        ledger.reset(returned);
        fake.state().hold = false;
        fake.state().release_held();
        let mut done = Vec::new();
        host.poll(&mut done);
        assert!(done.is_empty(), "completions after reset: {done:?}");
    }
});
