//! White-box tests of the midlayer's private steps.

use super::*;
use crate::clock::ManualClock;
use crate::sense_alloc::HeapSense;
use crate::target::{ScsiDebug, ScsiDebugParams};

/// `multi:2` on `mempool:2` with the slab failing: another holder has one of the two
/// reserved elements, so a command's take gets one and fails on the second. It must give
/// that one back: when the other holder frees its element the reserve is whole again and the
/// next command takes both. A take that kept its partial element would leave two commands
/// holding one element each and nothing in flight to free one, forever (seen failing with
/// the give-back removed from `take_elements`).
#[test]
fn a_partial_take_is_given_back_before_the_command_parks() {
    let target = ScsiDebug::try_new(ScsiDebugParams::default(), ManualClock::new(1000)).unwrap();
    let mut stack = Midlayer::new(
        target,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(1000),
    )
    .unwrap();
    stack.set_elements_per_command(2).unwrap();
    stack.sense.slab().set_failing(true);
    let other_holder = stack.sense.alloc().expect("a reserved element");
    assert!(
        !stack.take_elements(Tag(0)),
        "one element cannot make a step"
    );
    assert_eq!(stack.stats.partial_takes, 1);
    assert_eq!(stack.sense_stats().reserve_held, 1, "given back");
    stack.sense.free(other_holder);
    assert!(
        stack.take_elements(Tag(1)),
        "the whole reserve serves the next command"
    );
    assert_eq!(stack.slots[1].extra.len(), 1);
}

/// Error handling that needs a buffer of its own (`set_recovery_buffer`): the timed-out
/// command holds the only reserved element, so recovery cannot start and the command stays
/// in flight, past its deadline, for as long as nothing frees a buffer. Linux's way (the
/// failed command's own buffer reused, the default) aborts and retries it. (Seen failing
/// before the sweep took the recovery buffer: the abort ran.)
#[test]
fn recovery_that_needs_a_second_buffer_waits_while_the_command_keeps_its_own() {
    for (needs_buffer, reserve) in [(true, 1), (false, 1), (true, 2)] {
        let clock = ManualClock::new(1000);
        // Answers at once, well inside the command's 1 ms (the default jiffy would not be).
        let params = ScsiDebugParams {
            delay: 0,
            ..ScsiDebugParams::default()
        };
        let target = ScsiDebug::try_new(params, clock.clone()).unwrap();
        let mut stack = Midlayer::new(
            target,
            HeapSense::new(),
            SenseMode::Mempool(reserve),
            clock.clone(),
        )
        .unwrap();
        stack.set_recovery_buffer(needs_buffer);
        let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
        stack
            .host_mut()
            .set_injection(1, crate::target::OPT_TIMEOUT);
        stack.sense.slab().set_failing(true);
        let mut request = Request::new(
            disk.device,
            crate::wire::Cdb::read(crate::wire::Lba(0), crate::wire::BlockCount(1)),
            alloc::vec![0u8; disk.block_len as usize],
        );
        request.timeout_ns = 1_000_000;
        stack.submit(request).unwrap();
        let mut out = Vec::new();
        for _ in 0..50_000 {
            stack.poll(&mut out);
            stack.idle();
            if stack.stats.aborts > 0 {
                // Aborted: the retry is answered.
                stack.host_mut().set_injection(0, 0);
            }
        }
        let case = (needs_buffer, reserve);
        if needs_buffer && reserve == 1 {
            assert_eq!(stack.stats.aborts, 0, "{case:?}");
            assert!(stack.stats.recovery_waits > 0, "{case:?}");
            assert_eq!(stack.slots[0].state, SlotState::InFlight);
            assert!(
                stack.in_recovery(),
                "{case:?}: nothing is dispatched meanwhile"
            );
        } else {
            assert!(stack.stats.aborts > 0, "{case:?}");
            assert_eq!(stack.stats.recovery_waits, 0, "{case:?}");
            assert_eq!(out.len(), 1, "{case:?}");
            assert!(out[0].result.is_ok(), "{case:?}: {:?}", out[0].result);
            assert_eq!(
                stack.sense_stats().in_use,
                0,
                "{case:?}: the recovery buffer went back"
            );
        }
    }
}

/// `pertag` with a recovery buffer: the buffer recovery borrows comes back to the tag it came
/// from, so once the timed-out command completed (however it ended) every tag has its buffer
/// again. (Taken and
/// given back untagged, it went to the first empty slot, the in-flight command's, and that
/// command's own buffer then went to the slab: one buffer lost per recovery, which the guest
/// bench's reserve-size check caught.)
#[test]
fn a_pertag_recovery_buffer_goes_back_to_its_own_tag() {
    let clock = ManualClock::new(1000);
    let target = ScsiDebug::try_new(ScsiDebugParams::default(), clock.clone()).unwrap();
    let mut stack = Midlayer::new(target, HeapSense::new(), SenseMode::Pertag, clock).unwrap();
    let can_queue = usize::from(stack.template().can_queue);
    stack.set_recovery_buffer(true);
    let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
    stack
        .host_mut()
        .set_injection(1, crate::target::OPT_TIMEOUT);
    let mut request = Request::new(
        disk.device,
        crate::wire::Cdb::read(crate::wire::Lba(0), crate::wire::BlockCount(1)),
        alloc::vec![0u8; disk.block_len as usize],
    );
    request.timeout_ns = 1_000_000;
    stack.submit(request).unwrap();
    let mut out = Vec::new();
    while stack.stats.aborts == 0 {
        stack.poll(&mut out);
        stack.idle();
    }
    stack.host_mut().set_injection(0, 0);
    while out.is_empty() {
        stack.poll(&mut out);
        stack.idle();
    }
    assert_eq!(stack.sense_stats().reserve_held, can_queue);
    assert_eq!(stack.sense_stats().in_use, 0);
}

/// A completion-wait policy that only records what the midlayer tells it.
struct Recorder {
    prompt: bool,
    /// `completed` calls, the completions they reported, `idle` calls.
    calls: alloc::sync::Arc<[core::sync::atomic::AtomicUsize; 3]>,
}

impl CompletionWait for Recorder {
    fn io_mode(&self) -> IoMode {
        IoMode::Irq
    }
    fn completed(&mut self, found: usize, _device: &mut dyn crate::host::CompletionInterrupt) {
        use core::sync::atomic::Ordering::Relaxed;
        self.calls[0].fetch_add(1, Relaxed);
        self.calls[1].fetch_add(found, Relaxed);
    }
    fn idle(&mut self, _device: &mut dyn crate::host::CompletionInterrupt) -> Idle {
        self.calls[2].fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        Idle::Spin
    }
    fn prompt(&self) -> bool {
        self.prompt
    }
    fn stats(&self) -> IrqStats {
        IrqStats::default()
    }
}

/// A policy that does not ask for prompt reports hears of the completions of several busy
/// polls once, as their sum, just before the loop idles; one that asks hears of every poll
/// that found some, and nothing more at the idle.
#[test]
fn busy_polls_are_reported_to_the_wait_policy_as_it_asks() {
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    for prompt in [false, true] {
        let clock = ManualClock::new(1000);
        let params = ScsiDebugParams {
            delay: 0,
            ..ScsiDebugParams::default()
        };
        let target = ScsiDebug::try_new(params, clock.clone()).unwrap();
        let mut stack = Midlayer::new(target, HeapSense::new(), SenseMode::Pertag, clock).unwrap();
        let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
        let calls = alloc::sync::Arc::new([const { AtomicUsize::new(0) }; 3]);
        stack.set_completion_wait(Box::new(Recorder {
            prompt,
            calls: calls.clone(),
        }));
        let mut out = Vec::new();
        for batch in [3, 2] {
            for _ in 0..batch {
                let request = Request::new(
                    disk.device,
                    crate::wire::Cdb::read(crate::wire::Lba(0), crate::wire::BlockCount(1)),
                    alloc::vec![0u8; disk.block_len as usize],
                );
                stack.submit(request).unwrap();
            }
            assert_eq!(stack.poll(&mut out), batch);
        }
        let seen = |i: usize| calls[i].load(Relaxed);
        if prompt {
            assert_eq!((seen(0), seen(1)), (2, 5), "each busy poll, at once");
        } else {
            assert_eq!((seen(0), seen(1)), (0, 0), "nothing until the loop idles");
        }
        assert_eq!(stack.poll(&mut out), 0);
        stack.idle();
        assert_eq!(seen(2), 1);
        if prompt {
            assert_eq!((seen(0), seen(1)), (2, 5), "nothing more at the idle");
        } else {
            assert_eq!((seen(0), seen(1)), (1, 5), "their sum, before the idle");
        }
        stack.idle();
        assert_eq!(
            (seen(0), seen(2)),
            (1 + usize::from(prompt), 2),
            "reported once"
        );
    }
}

/// A clock whose ticks are not nanoseconds (three per ns, from another origin), as the guest's
/// TSC is not: the midlayer keeps the poll's reading and the sweep's schedule in ticks and its
/// deadlines in ns, so a mix-up of the two would time a command out three times too early or
/// too late.
#[derive(Clone)]
struct ThreeTicksPerNs(ManualClock);

impl Clock for ThreeTicksPerNs {
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
    fn now_ticks(&self) -> u64 {
        1_000_000_007 + 3 * self.0.now_ns()
    }
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ticks / 3
    }
    fn ns_to_ticks(&self, ns: u64) -> u64 {
        ns.saturating_mul(3)
    }
    fn relax(&self) {
        self.0.relax();
    }
}

/// A swallowed command with a 1 ms timeout times out between 1 ms and 1 ms plus two sweep
/// intervals (an eighth each) after it was submitted, whatever the clock's ticks are.
#[test]
fn a_timeout_fires_on_time_with_a_clock_whose_ticks_are_not_nanoseconds() {
    use crate::target::OPT_TIMEOUT;
    use crate::wire::{BlockCount, Cdb, Lba};
    let clock = ManualClock::new(0);
    let params = ScsiDebugParams {
        delay: 0,
        ..ScsiDebugParams::default()
    };
    let target = ScsiDebug::try_new(params, clock.clone()).unwrap();
    let mut stack = Midlayer::new(
        target,
        HeapSense::new(),
        SenseMode::Slab,
        ThreeTicksPerNs(clock.clone()),
    )
    .unwrap();
    let device = stack.add_device(0, Lun(0));
    stack.host_mut().set_injection(-1, OPT_TIMEOUT);
    let mut request = Request::new(device, Cdb::read(Lba(0), BlockCount(1)), vec![0; 512]);
    request.timeout_ns = 1_000_000;
    stack.submit(request).unwrap();
    let mut out = Vec::new();
    let mut timed_out_at_ns = None;
    for _ in 0..1000 {
        stack.poll(&mut out);
        if stack.stats().timeouts > 0 {
            timed_out_at_ns = Some(clock.now_ns());
            break;
        }
        clock.advance(10_000);
    }
    let at_ns = timed_out_at_ns.expect("the command timed out within 10 ms");
    assert!(
        (1_000_000..=1_250_000).contains(&at_ns),
        "timed out at {at_ns} ns"
    );
}
