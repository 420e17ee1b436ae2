//! Model-based check of the midlayer's central promise: under any mix of delays, injected
//! timeouts, recovered errors, unit attentions and medium errors, every submitted command
//! completes exactly once, and nothing (tag, sense buffer, target slot) is left behind.

mod common;

use common::*;
use proptest::prelude::*;
use scsi::midlayer::Request;
use scsi::target::{OPT_MEDIUM_ERR, OPT_RECOVERED_ERR, OPT_TIMEOUT, OPT_UNIT_ATTENTION};
use scsi::wire::{BlockCount, Cdb, Lba};

#[derive(Debug, Clone)]
enum Op {
    Submit {
        lba: u64,
        blocks: u32,
        write: bool,
    },
    /// `true`: through `poll_with`, which hands commands over as it finds them.
    Poll(bool),
    Advance(u64),
    /// Change the completion delay while commands are in flight.
    Delay(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..16384, 1u32..16, any::<bool>()).prop_map(|(lba, blocks, write)| Op::Submit { lba, blocks, write }),
        3 => any::<bool>().prop_map(Op::Poll),
        1 => (0u64..3_000_000).prop_map(Op::Advance),
        1 => prop_oneof![Just(0u64), 1u64..200_000].prop_map(Op::Delay),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_command_completes_exactly_once(
        delay_us in prop_oneof![Just(0u64), 1u64..500],
        every_nth in -3i32..8,
        opts in prop_oneof![
            Just(0u32), Just(OPT_TIMEOUT), Just(OPT_RECOVERED_ERR), Just(OPT_UNIT_ATTENTION),
            Just(OPT_MEDIUM_ERR), Just(OPT_TIMEOUT | OPT_RECOVERED_ERR | OPT_UNIT_ATTENTION),
        ],
        max_queue in 2u16..40,
        fake_rw in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let fake_rw = u8::from(fake_rw);
        let mut stack = stack(&format!("delay=0 fake_rw={fake_rw} max_queue={max_queue}"));
        let (_, disk) = scan_one(&mut stack);
        stack.host_mut().set_delay_ns(delay_us * 1000);
        stack.host_mut().set_injection(every_nth, opts);
        let mut seen = vec![0u32; ops.len()];
        let mut submitted = Vec::new();
        let mut done = Vec::new();
        let mut scratch = Vec::new();
        for (id, op) in ops.iter().enumerate() {
            match *op {
                Op::Submit { lba, blocks, write } => {
                    let lba = lba.min(disk.blocks - u64::from(blocks));
                    let cdb = if write { Cdb::write(Lba(lba), BlockCount(blocks)) } else { Cdb::read(Lba(lba), BlockCount(blocks)) };
                    let mut request = Request::new(disk.device, cdb, vec![0u8; blocks as usize * 512]);
                    request.user_data = id as u64;
                    request.timeout_ns = 2_000_000;
                    request.retries = 2;
                    if stack.submit(request).is_ok() {
                        submitted.push(id);
                    }
                }
                Op::Poll(false) => { stack.poll(&mut done); }
                Op::Poll(true) => {
                    let before = done.len();
                    let found = stack.poll_with(&mut scratch, |_, d| done.push(d));
                    prop_assert_eq!(found, done.len() - before);
                    prop_assert!(scratch.is_empty(), "poll_with left {} in its scratch", scratch.len());
                }
                Op::Advance(ns) => stack.clock().advance(ns),
                Op::Delay(ns) => stack.host_mut().set_delay_ns(ns),
            }
        }
        // Drain: time moves until everything has come back (timeouts included).
        let mut rounds = 0;
        while stack.outstanding() > 0 {
            stack.poll(&mut done);
            stack.clock().advance(100_000);
            rounds += 1;
            prop_assert!(rounds < 100_000, "stuck with {} outstanding", stack.outstanding());
        }
        for d in &done {
            seen[d.user_data as usize] += 1;
        }
        for &id in &submitted {
            prop_assert_eq!(seen[id], 1, "command {} completed {} times", id, seen[id]);
        }
        prop_assert_eq!(done.len(), submitted.len());
        assert_quiescent(&stack);
    }
}
