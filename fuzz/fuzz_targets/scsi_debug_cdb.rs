#![no_main]
//! The scsi_debug target's CDB dispatch: any CDB (up to 16 bytes taken, longer refused), any target and LUN, any data
//! direction and buffer length, any data-out bytes, with aborts, resets, delays and error
//! injection in between.
//!
//! Beyond "no panic": every command the target took completes exactly once (by a poll, an
//! `Ok` abort or a reset) and hands back its own buffer at its own length; a residual never
//! exceeds the buffer; a sense length never exceeds the 96-byte buffer, and CHECK CONDITION
//! carries sense that parses; `Cdb::parse` agrees with what it was given.
use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scsi::clock::ManualClock;
use scsi::host::{CmdBuffers, Completed, DataDirection, ScsiCmd, ScsiHost};
use scsi::target::ScsiDebug;
use scsi::wire::{CdbBytes, Lun, MAX_CDB_LEN, SCSI_SENSE_BUFFERSIZE, Sense, Tag};

type Buffer = Box<[u8; SCSI_SENSE_BUFFERSIZE]>;

/// Small stores, so an input costs microseconds; the parameters still vary what matters to
/// the dispatch (sector size, LUN count, fake_rw, unmap support).
const PARAMS: [&str; 4] = [
    "dev_size_mb=1",
    "dev_size_mb=1 sector_size=4096 max_luns=2 num_tgts=2",
    "fake_rw=1 dev_size_mb=1",
    "dev_size_mb=2 dsense=1 tur_ms_to_ready=1",
];

#[derive(Arbitrary, Debug)]
enum Op {
    Command {
        cdb: Vec<u8>,
        target: u8,
        lun: u16,
        direction: u8,
        len_bytes: u16,
        fill: u8,
    },
    Poll,
    Advance(u16),
    Abort(u8),
    Reset,
    Inject {
        every_nth: i8,
        opts: u8,
    },
    Delay(u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    params: u8,
    ops: Vec<Op>,
}

/// What the test remembers about a command in flight: its data length.
#[derive(Default)]
struct Ledger {
    in_flight: BTreeMap<u16, usize>,
    completions: u64,
}

impl Ledger {
    fn settle(&mut self, done: Vec<Completed<Buffer>>) {
        for c in done {
            let tag = c.completion.tag.0;
            let len = self
                .in_flight
                .remove(&tag)
                .unwrap_or_else(|| panic!("completion for tag {tag} not in flight (or twice)"));
            let buffers = c.buffers.expect("scsi_debug never leaks buffers");
            check_returned(&buffers, len);
            assert!(
                c.completion.residual_bytes as usize <= len,
                "residual {} beyond the {len}-byte buffer",
                c.completion.residual_bytes
            );
            let sense_len = usize::from(c.completion.sense_len);
            assert!(sense_len <= SCSI_SENSE_BUFFERSIZE, "sense_len {sense_len}");
            if c.completion.status == 0x02 && c.completion.host_error.is_none() {
                assert!(sense_len > 0, "CHECK CONDITION without sense");
                Sense::parse(&buffers.sense[..sense_len]).unwrap_or_else(|e| {
                    panic!("CHECK CONDITION with sense that does not parse: {e}")
                });
            }
            self.completions += 1;
        }
    }
}

fn check_returned(buffers: &CmdBuffers<Buffer>, len: usize) {
    assert_eq!(
        buffers.data.len(),
        len,
        "its own data buffer, at its own length"
    );
}

fuzz_target!(|input: Input| {
    let clock = ManualClock::new(1_000);
    let params = PARAMS[usize::from(input.params) % PARAMS.len()];
    let mut target: ScsiDebug<ManualClock, Buffer> =
        ScsiDebug::from_params(params, clock.clone()).expect("valid parameters");
    let mut ledger = Ledger::default();
    for op in input.ops.into_iter().take(64) {
        match op {
            Op::Command {
                cdb,
                target: id,
                lun,
                direction,
                len_bytes,
                fill,
            } => {
                let Ok(cdb_bytes) = CdbBytes::from_slice(&cdb) else {
                    assert!(
                        cdb.is_empty() || cdb.len() > MAX_CDB_LEN,
                        "a {}-byte CDB refused",
                        cdb.len()
                    );
                    continue;
                };
                assert_eq!(cdb_bytes.as_slice(), &cdb[..]);
                if let Ok(parsed) = scsi::wire::Cdb::parse(&cdb) {
                    assert_eq!(parsed.opcode(), cdb[0], "parse keeps the opcode");
                }
                let Some(tag) = (0..u16::MAX).find(|t| !ledger.in_flight.contains_key(t)) else {
                    continue;
                };
                let len = usize::from(len_bytes) % (64 * 1024 + 1);
                let direction = match direction % 3 {
                    0 => DataDirection::None,
                    1 => DataDirection::FromDevice,
                    _ => DataDirection::ToDevice,
                };
                let cmd = ScsiCmd {
                    tag: Tag(tag),
                    target: u16::from(id % 4),
                    lun: Lun(u64::from(lun)),
                    cdb: cdb_bytes,
                    direction,
                    buffers: CmdBuffers {
                        data: vec![fill; len],
                        sense: Box::new([0; 96]),
                    },
                };
                match target.queue_command(cmd) {
                    Ok(()) => {
                        ledger.in_flight.insert(tag, len);
                    }
                    Err(refused) => check_returned(&refused.buffers, len),
                }
            }
            Op::Poll => {
                let mut done = Vec::new();
                let count = target.poll(&mut done);
                assert_eq!(count, done.len(), "poll's count matches what it pushed");
                ledger.settle(done);
            }
            Op::Advance(us) => clock.advance(u64::from(us) * 1_000),
            Op::Abort(pick) => {
                let Some(&tag) = ledger.in_flight.keys().nth(usize::from(pick)) else {
                    continue;
                };
                if let Ok(buffers) = target.abort(Tag(tag)) {
                    let len = ledger.in_flight.remove(&tag).expect("in flight");
                    check_returned(&buffers, len);
                }
            }
            Op::Reset => {
                let mut returned = Vec::new();
                target.reset(&mut returned).expect("scsi_debug resets");
                ledger.settle(returned);
                assert!(
                    ledger.in_flight.is_empty(),
                    "a reset hands every command back"
                );
            }
            Op::Inject { every_nth, opts } => {
                target.set_injection(i32::from(every_nth), u32::from(opts))
            }
            Op::Delay(us) => target.set_delay_ns(u64::from(us) * 1_000),
        }
        assert_eq!(
            target.outstanding(),
            ledger.in_flight.len(),
            "outstanding matches the ledger"
        );
    }
    // Drain: commands swallowed by an injected timeout only come back through a reset.
    clock.advance(u64::from(u32::MAX));
    let mut done = Vec::new();
    target.poll(&mut done);
    ledger.settle(done);
    let mut returned = Vec::new();
    target.reset(&mut returned).expect("scsi_debug resets");
    ledger.settle(returned);
    assert!(
        ledger.in_flight.is_empty(),
        "never completed: {:?}",
        ledger.in_flight
    );
});
