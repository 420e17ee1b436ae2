//! `MptHost` under the shared completion-wait policy (`drivers::irq::Waiter`), against the fake
//! IOC signalling the way QEMU's mptsas does. The interrupt source is what the kernel gives the
//! IOC: one MSI vector whose count is the messages the IOC sent, and whose mask is MSI Enable
//! (mptsas has no per-vector mask). Halting lets the IOC run what it holds, on a manual clock.
//!
//! Covered: replies complete while the CPU is halted and each raises one counted interrupt; a
//! lost interrupt is recovered by the safety timer and counted; a spurious one is counted and
//! costs one poll; a storm (the IOC signalling whatever its mask) is detected, MSI is turned
//! off, and the commands still complete by timed polling; busy polling never unmasks the reply
//! interrupt.

mod commands;
mod mpt_rig;

use std::cell::Cell;
use std::rc::Rc;
use std::vec::Vec;

use commands::{Sense, command};
use mpt_rig::*;

use drivers::delay::CountingDelay;
use drivers::dma::fake::FakeRegion;
use drivers::dma::mapping::BounceMapper;
use drivers::irq::{
    CompletionWait, Idle, InterruptSource, IoMode, IrqStats, WaitConfig, Waiter, Woken,
};
use drivers::mpt::fake::FakeIoc;
use drivers::mpt::host::MptHost;
use scsi::host::{DataDirection, HostInterrupt, ScsiHost};
use scsi::wire::{CdbBytes, Tag};

type Host = MptHost<FakeIoc, CountingDelay, FakeRegion, Pool, BounceMapper, Sense>;

/// The IOC's MSI vector on a manual clock. A halt runs the IOC (unless `stall_halts` says to
/// keep it holding its requests for that many more halts), then ends at the first message or at
/// the deadline.
struct MsiVector {
    ioc: FakeIoc,
    now_ns: Rc<Cell<u64>>,
    /// Halts during which the IOC keeps holding its requests.
    stall_halts: Rc<Cell<u32>>,
    /// Halts at which the IOC sends a message with nothing behind it (then holds its requests).
    spurious_halts: Rc<Cell<u32>>,
}

impl InterruptSource for MsiVector {
    fn count(&self) -> u64 {
        self.ioc.model().msi.sent
    }

    fn now_ns(&self) -> u64 {
        self.now_ns.get()
    }

    fn wait(&mut self, seen: u64, deadline_ns: u64) -> Woken {
        let mut model = self.ioc.model();
        if self.spurious_halts.get() > 0 {
            self.spurious_halts.set(self.spurious_halts.get() - 1);
            model.raise_spurious();
        } else if self.stall_halts.get() > 0 {
            self.stall_halts.set(self.stall_halts.get() - 1);
        } else {
            model.hold_requests = false;
            model.run();
        }
        // A storming IOC has always signalled again by now.
        model.take_interrupt();
        let count = model.msi.sent;
        let now = self.now_ns.get();
        self.now_ns.set(if count != seen {
            now + 1_000
        } else {
            deadline_ns.max(now)
        });
        Woken {
            count,
            now_ns: self.now_ns.get(),
        }
    }

    fn set_masked(&mut self, masked: bool) {
        // What the kernel does for MSI without per-vector masking: MSI Enable off.
        self.ioc.model().msi.enabled = !masked;
    }
}

struct Bench {
    ioc: FakeIoc,
    host: Host,
    waiter: Waiter<MsiVector>,
    now_ns: Rc<Cell<u64>>,
    stall_halts: Rc<Cell<u32>>,
    spurious_halts: Rc<Cell<u32>>,
}

fn bench(mode: IoMode, routed: bool) -> Bench {
    let Rig { space, ioc, mpt } = rig();
    let mut memory = space.clone();
    let mut host = MptHost::new(mpt, BounceMapper { space }, &mut memory).expect("host");
    host.set_interrupt_routed(routed);
    {
        let mut model = ioc.model();
        model.msi.enabled = routed;
        model.hold_requests = true;
    }
    let now_ns = Rc::new(Cell::new(0));
    let stall_halts = Rc::new(Cell::new(0));
    let spurious_halts = Rc::new(Cell::new(0));
    let source = MsiVector {
        ioc: ioc.clone(),
        now_ns: now_ns.clone(),
        stall_halts: stall_halts.clone(),
        spurious_halts: spurious_halts.clone(),
    };
    let waiter = Waiter::new(mode, source, WaitConfig::default());
    Bench {
        ioc,
        host,
        waiter,
        now_ns,
        stall_halts,
        spurious_halts,
    }
}

impl Bench {
    /// Queues `count` TEST UNIT READYs to target 0.
    fn submit(&mut self, count: u16) {
        for tag in 0..count {
            let cdb = CdbBytes::from_slice(&[0; 6]).expect("cdb");
            let cmd = command(Tag(tag), 0, cdb, DataDirection::None, Vec::new());
            assert!(self.host.queue_command(cmd).is_ok());
        }
    }

    /// The workload loop's shape: poll; on nothing, let the policy spin or halt. Each pass
    /// costs a microsecond of the manual clock, and a spin lets the IOC run (it works in the
    /// background while the CPU polls too). Returns the completions and the passes taken.
    fn run_until(&mut self, want: usize, max_passes: usize) -> (usize, usize) {
        let mut done = Vec::new();
        for pass in 0..max_passes {
            if done.len() >= want {
                return (done.len(), pass);
            }
            self.now_ns.set(self.now_ns.get() + 1_000);
            let found = self.host.poll(&mut done);
            if found > 0 {
                self.waiter
                    .completed(found, &mut HostInterrupt::new(&mut self.host));
                continue;
            }
            let idle = self.waiter.idle(&mut HostInterrupt::new(&mut self.host));
            if idle == Idle::Spin {
                let mut model = self.ioc.model();
                model.hold_requests = false;
                model.run();
            }
        }
        (done.len(), max_passes)
    }

    fn stats(&self) -> IrqStats {
        self.waiter.stats()
    }
}

#[test]
fn in_irq_mode_replies_complete_while_halted_one_interrupt_each() {
    let mut bench = bench(IoMode::Irq, true);
    bench.submit(4);
    let (done, _) = bench.run_until(4, 100);
    assert_eq!(done, 4);
    let stats = bench.stats();
    assert_eq!(stats.interrupts, 4, "QEMU's mptsas signals once per reply");
    assert_eq!((stats.spurious, stats.lost, stats.storms), (0, 0, 0));
    assert!(stats.halts >= 1 && stats.halted_ns > 0);
    assert!(
        !bench.host.adapter().reply_interrupt_armed(),
        "masked again once the loop polls"
    );
}

#[test]
fn busy_polling_never_unmasks_the_reply_interrupt() {
    let mut bench = bench(IoMode::Poll, true);
    bench.submit(4);
    assert_eq!(bench.run_until(4, 100).0, 4);
    assert_eq!(bench.stats(), IrqStats::default());
    assert_eq!(bench.ioc.model().msi.sent, 0);
    assert_eq!(bench.host.adapter().stats().interrupt_arms, 0);
}

#[test]
fn without_a_routed_interrupt_irq_mode_busy_polls() {
    let mut bench = bench(IoMode::Irq, false);
    bench.submit(2);
    assert_eq!(bench.run_until(2, 100).0, 2);
    assert_eq!(
        bench.stats().halts,
        0,
        "never halts on an interrupt that cannot come"
    );
    assert_eq!(bench.host.adapter().stats().interrupt_arms, 0);
}

#[test]
fn a_lost_interrupt_is_recovered_by_the_safety_timer_and_counted() {
    let mut bench = bench(IoMode::Irq, true);
    bench.ioc.model().msi.lose_next = 1;
    bench.submit(1);
    assert_eq!(bench.run_until(1, 100).0, 1);
    assert_eq!(bench.stats().lost, 0, "not yet: the message may still land");
    // Confirmed once the next halt, with nothing else to do, ends on the safety timer too.
    for _ in 0..2 {
        let _ = bench.waiter.idle(&mut HostInterrupt::new(&mut bench.host));
    }
    let stats = bench.stats();
    assert_eq!(stats.lost, 1);
    assert_eq!(stats.safety_recoveries, 1);
    assert_eq!(stats.interrupts, 0);
    assert!(
        stats.halted_ns >= WaitConfig::default().safety_ns,
        "the halt lasted until the safety timer"
    );
    assert_eq!(bench.ioc.model().msi.lost, 1);
}

#[test]
fn a_spurious_interrupt_costs_one_poll_and_is_counted() {
    let mut bench = bench(IoMode::Irq, true);
    bench.spurious_halts.set(1);
    bench.submit(2);
    assert_eq!(bench.run_until(2, 100).0, 2);
    let stats = bench.stats();
    assert_eq!(stats.spurious, 1);
    assert_eq!(stats.interrupts, 3, "one spurious, one per reply");
    assert_eq!(stats.lost, 0);
}

#[test]
fn a_storm_is_masked_reported_and_the_commands_still_complete() {
    let mut bench = bench(IoMode::Irq, true);
    bench.ioc.model().msi.storm = true;
    // The IOC sits on the command for 200 halts while it storms.
    bench.stall_halts.set(200);
    bench.submit(1);
    let (done, passes) = bench.run_until(1, 10_000);
    assert_eq!(done, 1, "no hang: completed after {passes} passes");
    let stats = bench.stats();
    assert!(stats.storms >= 1, "storm detected: {stats:?}");
    assert!(
        stats.interrupts > WaitConfig::default().storm_interrupts,
        "{stats:?}"
    );
    assert!(
        !bench.ioc.model().msi.enabled,
        "MSI turned off while the storm is masked"
    );
}
