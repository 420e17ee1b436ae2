//! The fake_rw loop end to end on scsi_debug: exact counts, injected errors, timeouts and
//! rejected jobs.

use super::*;
use scsi::clock::{Clock, ManualClock};
use scsi::sense_alloc::HeapSense;
use scsi::target::ScsiDebugParams;

#[test]
fn exact_counts_with_an_ios_limit() {
    let params = WorkloadParams::parse("ios=5000 iodepth=8 numjobs=3 rw=randrw bs=4k").unwrap();
    let report = run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)).unwrap();
    assert_eq!(report.ios, 5000);
    assert_eq!(report.reads + report.writes, 5000);
    assert!(report.reads > 1000 && report.writes > 1000);
    assert_eq!(report.errors, 0);
    assert_eq!(report.sense.slab_allocs + report.sense.reserve_hits, 5000);
    assert_eq!(report.latency.count(), 5000);
    // Every member, in order (the manual clock never advances, so the times are 0).
    assert_eq!(
        serde_json::to_string(&report.result("host")).unwrap(),
        concat!(
            r#"{"where":"host","rw":"randrw","numjobs":3,"iodepth":8,"bs":4096,"sense_mode":"mempool:2",""#,
            r#"ios":5000,"reads":2563,"writes":2437,"errors":0,"recovered":0,"elapsed_ns":0,"iops":0,"lat"#,
            r#"_mean_ns":0,"lat_p50_ns":0,"lat_p90_ns":0,"lat_p99_ns":0,"lat_p999_ns":0,"lat_p9999_ns":0,"lat_max_ns":0,"lat_min_ns":0,"lat_stddev_ns":0,"lat_bins":[{"floor_ns":0,"count":5000}],"sense_slab_allocs":5000,"sense_reserve_hits":0,"#,
            r#""sense_waits":0,"reserve_bytes":192,"sense_in_use_bytes":0,"retries":0,"timeouts":0,"io_mode":"poll","#,
            r#""irq_interrupts":0,"irq_spurious":0,"irq_safety_recoveries":0,"irq_lost":0,"irq_storms":0,"irq_halts":0,"halted_ns":0,"busy_pct":100.0}"#,
        )
    );
}

#[test]
fn injected_recovered_errors_fill_sense_and_still_count() {
    // Injection on READ/WRITE lives in the response function, which fake_rw=1 skips (Linux).
    let params =
        WorkloadParams::parse("ios=1000 iodepth=4 every_nth=10 opts=8 sense=prealloc fake_rw=0")
            .unwrap();
    let report = run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)).unwrap();
    assert_eq!(report.ios, 1000);
    assert_eq!(report.recovered, 100);
    assert_eq!(
        report.sense.reserve_hits, 1000,
        "prealloc serves every command from its list"
    );
}

#[test]
fn injected_timeouts_are_aborted_and_every_command_completes_once() {
    let params =
        WorkloadParams::parse("ios=400 iodepth=4 every_nth=100 opts=4 timeout=2ms fake_rw=0")
            .unwrap();
    let target = ScsiDebug::new(params.target.clone(), ManualClock::new(1000));
    let mut stack = Midlayer::new(
        target,
        HeapSense::new(),
        params.sense,
        ManualClock::new(1000),
    )
    .unwrap();
    let disk = stack.scan().luns[0].disk.unwrap();
    let report = run(&mut stack, &disk, &params.job).unwrap();
    let swallowed = stack.host().stats().injected_timeouts;
    assert!(swallowed > 0);
    assert_eq!(report.midlayer.timeouts, swallowed);
    assert_eq!(report.ios + report.errors, 400);
    assert_eq!(report.midlayer.completed, 400);
    assert_eq!(stack.outstanding(), 0);
    assert_eq!(report.sense.in_use, 0);
}

/// Linux scsi_debug: with fake_rw=1, READ/WRITE `goto fini` before `fake_timeout()` and the
/// `resp_*` function, so every_nth/opts injection does not reach data commands.
#[test]
fn fake_rw_skips_injection_on_data_commands_as_linux_does() {
    for opts in ["opts=8", "opts=4", "opts=2"] {
        let text = alloc::format!("ios=2000 iodepth=4 every_nth=10 {opts} rw=randrw timeout=2ms");
        let params = WorkloadParams::parse(&text).unwrap();
        let report = run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)).unwrap();
        assert_eq!(
            (report.ios, report.recovered, report.errors),
            (2000, 0, 0),
            "{text}"
        );
        assert_eq!(report.midlayer.timeouts, 0, "{text}");
        let params = WorkloadParams::parse(&alloc::format!("{text} fake_rw=0")).unwrap();
        let report = run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)).unwrap();
        let injected = report.recovered + report.errors + report.midlayer.timeouts;
        assert!(
            injected > 0,
            "{text} fake_rw=0 injected nothing: {report:?}"
        );
    }
}

#[test]
fn rejects_impossible_jobs() {
    let params = WorkloadParams::parse("iodepth=200 can_queue=192").unwrap();
    assert!(matches!(
        run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)),
        Err(WorkloadError::TooDeep {
            in_flight: 200,
            can_queue: 192
        })
    ));
    // Fields written directly, past the parser: typed errors, not a division by zero or an
    // underflowing last LBA.
    for (key, set) in [
        (
            "sector_size",
            (|t| t.sector_size = 0) as fn(&mut ScsiDebugParams),
        ),
        ("sector_size", |t| t.sector_size = 513),
        ("dev_size_mb", |t| t.dev_size_mb = 0),
    ] {
        let mut params = WorkloadParams::default();
        set(&mut params.target);
        assert!(
            matches!(
                run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)),
                Err(WorkloadError::Target(ParamError::BadValue { key: k, .. })) if k == key
            ),
            "{key}"
        );
    }
    let params = WorkloadParams::parse("bs=1000").unwrap();
    assert!(matches!(
        run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)),
        Err(WorkloadError::BlockSize { .. })
    ));
}

/// A disk whose block length is 0 (a device's reply the midlayer passed on) is refused before
/// any command, not divided by.
#[test]
fn a_disk_with_zero_block_length_is_refused() {
    let params = WorkloadParams::parse("ios=1 dev_size_mb=1").unwrap();
    let clock = ManualClock::new(1000);
    let target = ScsiDebug::try_new(params.target.clone(), clock.clone()).unwrap();
    let mut stack = Midlayer::new(target, HeapSense::new(), params.sense, clock).unwrap();
    let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
    let bogus = Disk {
        block_len: 0,
        ..disk
    };
    let submitted = stack.stats().submitted;
    assert!(matches!(
        run(&mut stack, &bogus, &params.job),
        Err(WorkloadError::BlockSize { block_len: 0, .. })
    ));
    assert_eq!(stack.outstanding(), 0);
    assert_eq!(stack.stats().submitted, submitted, "no command was sent");
}

#[test]
fn an_absurd_sense_reserve_is_an_error() {
    // The kernel command line reaches the mempool unchanged; its reserve array cannot be
    // allocated, which is an error naming the size, not a capacity-overflow panic.
    let params = WorkloadParams::parse("sense=mempool:18446744073709551615 ios=10").unwrap();
    assert!(matches!(
        run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000)),
        Err(WorkloadError::Reserve(ReserveFailed {
            wanted: usize::MAX,
            have: 0
        }))
    ));
}

/// A completion wait that pretends to halt: one relax step of "halted" time per idle call.
struct PretendHalt {
    clock: ManualClock,
    stats: scsi::wait::IrqStats,
}

impl scsi::wait::CompletionWait for PretendHalt {
    fn io_mode(&self) -> scsi::wait::IoMode {
        scsi::wait::IoMode::Irq
    }
    fn completed(&mut self, _found: usize, _device: &mut dyn scsi::host::CompletionInterrupt) {
        self.stats.interrupts += 1;
    }
    fn idle(&mut self, device: &mut dyn scsi::host::CompletionInterrupt) -> scsi::wait::Idle {
        // scsi_debug has no completion interrupt: the trait's default says so.
        assert_eq!(
            device.enable_completion_interrupt(),
            scsi::host::InterruptArm::Unsupported
        );
        let before = self.clock.now_ns();
        self.clock.relax();
        self.stats.halts += 1;
        self.stats.halted_ns += self.clock.now_ns() - before;
        scsi::wait::Idle::Waited
    }
    fn stats(&self) -> scsi::wait::IrqStats {
        self.stats
    }
}

#[test]
fn the_loop_waits_through_the_installed_policy_and_reports_it() {
    let params = WorkloadParams::parse("ios=200 iodepth=4 ndelay=50000").unwrap();
    let clock = ManualClock::new(1000);
    let target = ScsiDebug::try_new(params.target.clone(), clock.clone()).unwrap();
    let mut stack = Midlayer::new(target, HeapSense::new(), params.sense, clock.clone()).unwrap();
    let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
    // Idle time before the run is not the run's.
    let mut wait = PretendHalt {
        clock: clock.clone(),
        stats: scsi::wait::IrqStats::default(),
    };
    wait.stats.halted_ns = 123_456;
    stack.set_completion_wait(alloc::boxed::Box::new(wait));
    let report = run(&mut stack, &disk, &params.job).unwrap();
    assert_eq!(report.ios, 200);
    assert_eq!(report.io_mode, scsi::wait::IoMode::Irq);
    // Every empty poll went to the policy (scsi_debug has no interrupt: it said so).
    assert!(report.irq.halts > 0);
    assert_eq!(report.irq.halted_ns, report.irq.halts * 1000);
    assert!(report.irq.interrupts > 0);
    // The manual clock moves only in the policy's pretend halts: the run was all halted.
    assert_eq!(report.irq.halted_ns, report.elapsed_ns);
    assert_eq!(report.busy_pct(), 0.0);
    let json = serde_json::to_string(&report.result("host")).unwrap();
    assert!(json.contains(r#""io_mode":"irq""#), "{json}");
    assert!(
        json.contains(&format!(r#""halted_ns":{}"#, report.irq.halted_ns)),
        "{json}"
    );
}

/// Once all but the last of `ios` commands completed, moves the clock past one timeout sweep
/// and then, at the top of the next pass, `gap_ns` forward: the guest's vCPU descheduled by a
/// busy host while only an injected timeout is out, so the TSC jumps past both its deadline
/// and the stall watchdog.
struct Descheduled {
    clock: ManualClock,
    ios: u64,
    gap_ns: u64,
    completed: u64,
    stamped: bool,
    jumped: bool,
}

/// Longer than the midlayer's sweep interval at a 50 ms timeout (6.25 ms).
const SWEEP_PAST_NS: u64 = 10_000_000;

impl<A> Hooks<A> for Descheduled {
    fn tick(&mut self, _slab: &A) {
        if self.completed + 1 != self.ios || self.jumped {
            return;
        }
        if !self.stamped {
            // First past one timeout sweep, so the swallowed command has its deadline (as
            // in the guest, where it was out for most of a 20 ms round).
            self.stamped = true;
            self.clock.advance(SWEEP_PAST_NS);
        } else {
            self.jumped = true;
            self.clock.advance(self.gap_ns);
        }
    }
    fn completed(&mut self, _write: bool) {
        self.completed += 1;
    }
}

/// `eh+batch`'s lone LIVELOCK (`mempool:16`, 650 ms into a round, 1 outstanding, none
/// parked): the stall watchdog judged the first poll after a gap in which the loop did not
/// run. That poll's timeout sweep recovers the swallowed command (taking and giving back the
/// recovery buffer: the "element moves") and parks its retry, but finds no completion, so the
/// watchdog fired before the retry was issued. A recovery is progress: the retry completes.
#[test]
fn a_recovery_after_a_gap_in_polling_is_progress_not_a_stall() {
    use scsi::target::OPT_TIMEOUT;
    const IOS: u64 = 600;
    for recovery_buffer in [true, false] {
        let params = WorkloadParams::parse(
            "ios=600 iodepth=4 timeout=50ms stall_ms=500 ndelay=10000 batch_complete=1 \
             fake_rw=0 sense=mempool:16 rw=randwrite",
        )
        .unwrap();
        let clock = ManualClock::new(1000);
        let target = ScsiDebug::new(params.target.clone(), clock.clone());
        let mut stack =
            Midlayer::new(target, HeapSense::new(), params.sense, clock.clone()).unwrap();
        stack.set_recovery_buffer(recovery_buffer);
        let disk = stack.scan().luns[0].disk.unwrap();
        // One command swallowed, the 500th of the job: the last one out.
        stack.host_mut().set_injection(500, OPT_TIMEOUT);
        let mut hooks = Descheduled {
            clock: clock.clone(),
            ios: IOS,
            gap_ns: 650_000_000,
            completed: 0,
            stamped: false,
            jumped: false,
        };
        let report = run_with(&mut stack, &disk, &params.job, &mut hooks).unwrap();
        assert!(hooks.jumped, "recovery buffer {recovery_buffer}");
        assert_eq!(
            (
                report.stall,
                report.ios,
                report.errors,
                report.midlayer.timeouts
            ),
            (None, IOS, 0, 1),
            "recovery buffer {recovery_buffer}"
        );
    }
}

/// scsi_debug behind a doorbell that is rung only by `commit`: counts the polls that found
/// commands queued but not yet committed (whose doorbell a batching host rings inside the poll).
struct Doorbell<H> {
    inner: H,
    uncommitted: usize,
    polls_before_commit: usize,
    commits: usize,
}

impl<H: scsi::host::ScsiHost<S>, S> scsi::host::ScsiHost<S> for Doorbell<H> {
    fn template(&self) -> scsi::host::HostTemplate {
        self.inner.template()
    }
    fn queue_command(&mut self, cmd: scsi::host::ScsiCmd<S>) -> Result<(), scsi::host::Refused<S>> {
        self.uncommitted += 1;
        self.inner.queue_command(cmd)
    }
    fn commit(&mut self) {
        self.commits += 1;
        self.uncommitted = 0;
    }
    fn poll(&mut self, done: &mut alloc::vec::Vec<scsi::host::Completed<S>>) -> usize {
        if self.uncommitted > 0 {
            self.polls_before_commit += 1;
        }
        self.inner.poll(done)
    }
    fn abort(
        &mut self,
        tag: scsi::wire::Tag,
    ) -> Result<scsi::host::CmdBuffers<S>, scsi::host::AbortFailed> {
        self.inner.abort(tag)
    }
    fn reset(
        &mut self,
        returned: &mut alloc::vec::Vec<scsi::host::Completed<S>>,
    ) -> Result<(), scsi::host::HostResetFailed> {
        self.inner.reset(returned)
    }
}

/// The loop commits each submit pass before it polls, as blk-mq ends a batch with
/// `commit_rqs`: a batching host's doorbell is submission's work, never rung inside a poll
/// (which, finding nothing, the instruction count would file as waiting).
#[test]
fn the_loop_commits_each_submit_pass_before_it_polls() {
    for iodepth in [1, 8] {
        let params =
            WorkloadParams::parse(&format!("ios=300 iodepth={iodepth} ndelay=20000")).unwrap();
        let clock = ManualClock::new(1000);
        let target = ScsiDebug::try_new(params.target.clone(), clock.clone()).unwrap();
        let host = Doorbell {
            inner: target,
            uncommitted: 0,
            polls_before_commit: 0,
            commits: 0,
        };
        let mut stack = Midlayer::new(host, HeapSense::new(), params.sense, clock).unwrap();
        let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
        // The scan's own commands are the midlayer's, started by its polls.
        let host = stack.host_mut();
        (host.uncommitted, host.polls_before_commit) = (0, 0);
        let report = run(&mut stack, &disk, &params.job).unwrap();
        assert_eq!(report.ios, 300, "iodepth {iodepth}");
        let host = stack.host_mut();
        assert_eq!(host.polls_before_commit, 0, "iodepth {iodepth}");
        // One commit per pass that submitted, not one per command or per empty pass.
        assert!(
            host.commits > 0 && host.commits <= 300,
            "iodepth {iodepth}: {}",
            host.commits
        );
    }
}

/// A clock whose ticks are not nanoseconds (three per ns, from another origin), as the guest's
/// TSC is not: the loop keeps its times in ticks and reports nanoseconds.
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

impl protocol::window::CountedWindows for ThreeTicksPerNs {}

/// `runtime=`, the stall watchdog (`stall_ms=`), the elapsed time, the longest stall and the
/// latencies are nanoseconds with a clock whose ticks are not.
#[test]
fn the_loop_reports_nanoseconds_with_a_clock_whose_ticks_are_not() {
    let params = WorkloadParams::parse("runtime=2ms iodepth=1 ndelay=10000").unwrap();
    let clock = ThreeTicksPerNs(ManualClock::new(1000));
    let report = run_fake_rw(&params, HeapSense::new(), clock).unwrap();
    assert!(
        (2_000_000..2_100_000).contains(&report.elapsed_ns),
        "{}",
        report.elapsed_ns
    );
    let max = report.latency.max_ns();
    assert!((10_000..12_000).contains(&max), "{max}");
    let params = WorkloadParams::parse("ios=4 iodepth=4 ndelay=20000000 stall_ms=5").unwrap();
    let clock = ThreeTicksPerNs(ManualClock::new(1000));
    let report = run_fake_rw(&params, HeapSense::new(), clock).unwrap();
    let stall = report.stall.expect("the watchdog fired");
    assert!((5_000_000..5_010_000).contains(&stall.at_ns), "{stall:?}");
    assert!(
        (19_000_000..21_000_000).contains(&report.longest_stall_ns),
        "{}",
        report.longest_stall_ns
    );
}
