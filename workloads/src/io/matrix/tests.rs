//! The matrix on the host, one test per pressure mode, every sense mode in each: reserve sizes,
//! stall verdicts and failed-command counts (never timings).

use super::*;
use pools::host::HostBacking;
use scsi::clock::ManualClock;
use scsi::sense_alloc::SenseMode;

/// Rounds per matrix: every mode takes every position once.
const ROUNDS: u32 = MATRIX_MODES.len() as u32;
/// Commands per round.
const IOS: u64 = 600;

fn matrix(words: &str, pressure: &str) -> Vec<Cell> {
    let params = WorkloadParams::parse(&alloc::format!(
        "can_queue=256 iodepth=32 ios=600 stall_ms=5 {words}"
    ))
    .unwrap();
    let pressure = PressureMode::parse(pressure).unwrap();
    let backing = HostBacking::new();
    run_matrix(
        &params,
        pressure,
        &MATRIX_MODES,
        &backing,
        ManualClock::new(1000),
        ROUNDS,
    )
    .unwrap()
}

fn cell<'a>(cells: &'a [Cell], mode: &str) -> &'a Cell {
    cells
        .iter()
        .find(|c| alloc::format!("{}", c.mode) == mode)
        .unwrap()
}

#[test]
fn without_pressure_every_mode_completes_and_holds_its_reserve() {
    let cells = matrix("", "none");
    let want_bytes = [0, 96, 192, 288, 384, 1536, 256 * 96, 256 * 96, 96];
    for (c, bytes) in cells.iter().zip(want_bytes) {
        assert_eq!(c.verdict, Verdict::Ok, "{}", c.mode);
        assert_eq!(
            (c.rounds, c.ios, c.failed),
            (ROUNDS, 9 * IOS, 0),
            "{}",
            c.mode
        );
        assert_eq!(c.reserve_bytes, bytes, "{}", c.mode);
        assert_eq!(c.waits, 0, "{}", c.mode);
    }
    assert_eq!(cell(&cells, "pertag").reserve_hits, 9 * IOS);
    // Whole pages: a reserve of one or sixteen 96-byte buffers pins one 4 KiB slab page,
    // a can_queue of 256 pins 8.
    for (mode, pages) in [
        ("mempool:1", 1),
        ("mempool:16", 1),
        ("backup", 1),
        ("pertag", 8),
    ] {
        assert_eq!(cell(&cells, mode).pinned_pages, pages, "{mode}");
    }
    assert_eq!(cell(&cells, "slab").pinned_pages, 0);
    let json = serde_json::to_string(&cell(&cells, "mempool:2").result("host", "none")).unwrap();
    for field in [
        "\"scenario\":\"none\"",
        "\"pressure\":\"none\"",
        "\"elements_per_step\":1",
        "\"sense_mode\":\"mempool:2\"",
        "\"reserve_entries\":2",
        "\"verdict\":\"OK\"",
        "\"reserve_bytes\":192",
        "\"pinned_pages\":1",
        "\"failed\":0",
    ] {
        assert!(json.contains(field), "{field} missing from {json}");
    }
}

/// The deadlock a mempool exists for, in steady state: with the magazine drained, every free
/// page taken and the neighbour holding every free object, a host without a reserve stalls
/// once its commands in flight have completed; one reserved element per forward step keeps
/// I/O moving with no failed command, and the reserve is what carries it (far more than N
/// hits per round: the pinned page's free objects went to the neighbour).
#[test]
fn under_writeback_slab_stalls_in_steady_state_and_one_element_suffices() {
    let cells = matrix("rw=randwrite ndelay=20000", "writeback");
    let slab = cell(&cells, "slab");
    let Verdict::Stall(stall) = slab.verdict else {
        panic!("slab did not stall: {slab:?}");
    };
    assert!(
        stall.completed > 0,
        "pressure came in steady state: {stall:?}"
    );
    assert!(
        stall.parked > 0 && stall.parked == stall.outstanding,
        "{stall:?}"
    );
    assert_eq!(stall.element_moves, 0);
    assert_eq!(slab.failed, 0, "the stalled commands finish once relieved");
    for mode in [
        "mempool:1",
        "mempool:2",
        "mempool:3",
        "mempool:4",
        "mempool:16",
        "pertag",
        "prealloc",
        "backup",
    ] {
        let c = cell(&cells, mode);
        assert_eq!(c.verdict, Verdict::Ok, "{mode}: {c:?}");
        assert_eq!((c.ios, c.failed), (9 * IOS, 0), "{mode}");
    }
    let one = cell(&cells, "mempool:1");
    assert!(one.reserve_hits > u64::from(ROUNDS) * 10, "{one:?}");
}

/// `multi:K`: each forward step needs K elements from the pool, all or nothing. A reserve
/// of fewer than K cannot complete a step once the slab gives nothing: commands take what
/// the reserve has and give it back, again and again (LIVELOCK). K elements suffice. (The
/// give-back itself is tested in the midlayer: this loop alone happens never to interleave
/// two partial takers.)
#[test]
fn multi_k_needs_k_reserved_elements_and_a_partial_take_is_given_back() {
    for k in [2usize, 3] {
        let cells = matrix("rw=randwrite ndelay=20000", &alloc::format!("multi:{k}"));
        for c in &cells {
            let enough = match c.mode {
                SenseMode::Mempool(n) => n >= k,
                SenseMode::Pertag | SenseMode::Prealloc => true,
                SenseMode::Slab | SenseMode::Backup => false,
            };
            if enough {
                assert_eq!(c.verdict, Verdict::Ok, "multi:{k} {}: {c:?}", c.mode);
                assert_eq!((c.ios, c.failed), (9 * IOS, 0), "multi:{k} {}", c.mode);
            } else {
                assert!(
                    matches!(c.verdict, Verdict::Stall(_) | Verdict::Livelock(_)),
                    "multi:{k} {}: {c:?}",
                    c.mode
                );
            }
            if matches!(c.mode, SenseMode::Mempool(n) if n < k) {
                assert!(matches!(c.verdict, Verdict::Livelock(_)), "{c:?}");
                assert!(c.partial_takes > 0);
            }
        }
        assert_eq!(cell(&cells, "pertag").reserve_entries(), 256 * k);
    }
}

/// Every allocation failing (failslab at P = 1): only what the reserve holds moves.
#[test]
fn with_every_allocation_failing_only_a_reserve_keeps_io_moving() {
    let cells = matrix("ndelay=20000", "fail:1");
    assert!(matches!(cell(&cells, "slab").verdict, Verdict::Stall(_)));
    for c in cells.iter().filter(|c| c.mode != SenseMode::Slab) {
        assert_eq!(c.verdict, Verdict::Ok, "{}: {c:?}", c.mode);
        assert_eq!((c.ios, c.failed), (9 * IOS, 0), "{}", c.mode);
    }
    assert!(cell(&cells, "slab").budget.allocs_injected > 0);
}

#[test]
fn a_random_failure_rate_repeats_with_the_seed() {
    // A command parked at p = 0.5 retries every 3 ms (blk-mq's resource delay) when nothing
    // else completes: the watchdog must allow several retries.
    let a = matrix("seed=5 stall_ms=100", "fail:0.5");
    let b = matrix("seed=5 stall_ms=100", "fail:0.5");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.verdict, Verdict::Ok, "{}: {x:?}", x.mode);
        assert_eq!(x.budget, y.budget, "{}", x.mode);
    }
}

/// `fail:P` is drawn per object allocation (failslab), so a warm per-CPU magazine does not
/// hide it: at P = 0.5 the slab-only host waits, and a reserve serves some allocations.
/// (Against the old per-page-refill draw this failed: 0 waits, 0 reserve hits.)
#[test]
fn a_failure_rate_reaches_allocations_served_by_a_warm_magazine() {
    let cells = matrix("", "fail:0.5");
    assert!(cell(&cells, "slab").waits > 0, "{:?}", cell(&cells, "slab"));
    assert!(cell(&cells, "mempool:1").reserve_hits > 0);
}

/// `shared:H`: one reserve for two hosts. Host A's H commands, issued as the pressure starts,
/// take the pool's reserve elements and hold them through their error handling; host B (the
/// write-back job, with nothing in flight at that moment: its queue completed as one batch)
/// then finds the reserve empty. A reserve of the pool's size N ≤ H stalls B for as long as A
/// holds (the whole round here); N = H + 1 keeps B moving. Per-host reserves (`backup`,
/// `pertag`, `prealloc`) never couple the hosts. (With each host given its own `mempool:N`
/// instead of one shared pool, this failed: `mempool:1` was OK for B.)
#[test]
fn a_shared_reserve_needs_one_element_per_holder_in_error_handling_plus_one() {
    for holders in [1usize, 2] {
        let scenario = alloc::format!("shared:{holders}");
        let cells = matrix("rw=randwrite ndelay=20000", &scenario);
        for c in &cells {
            let enough = match c.mode {
                SenseMode::Mempool(n) => n > holders,
                SenseMode::Pertag | SenseMode::Prealloc | SenseMode::Backup => true,
                SenseMode::Slab => false,
            };
            if enough {
                assert_eq!(c.verdict, Verdict::Ok, "{scenario} {}: {c:?}", c.mode);
                assert_eq!((c.ios, c.failed), (9 * IOS, 0), "{scenario} {}", c.mode);
            } else {
                let Verdict::Stall(stall) = c.verdict else {
                    panic!("{scenario} {}: B did not stall: {c:?}", c.mode);
                };
                assert!(stall.completed > 0, "steady state first: {stall:?}");
                assert_eq!(c.failed, 0, "B's commands finish once relieved");
            }
            if let SenseMode::Mempool(n) = c.mode {
                assert_eq!(
                    c.held_by_other_host,
                    holders.min(n),
                    "{scenario} {}",
                    c.mode
                );
            }
        }
        assert_eq!(cell(&cells, "mempool:16").reserve_bytes, 16 * 96);
    }
}

fn eh_matrix(scenario: &str) -> Vec<Cell> {
    let mut params =
        WorkloadParams::parse("can_queue=256 iodepth=32 ios=600 stall_ms=5 ndelay=20000").unwrap();
    params.pressure = Some(PressureMode::parse(scenario).unwrap());
    let case = sense_reserve_cases(&params).remove(0);
    let backing = HostBacking::new();
    let clock = ManualClock::new(1000);
    run_matrix(
        &case.params,
        case.pressure,
        &MATRIX_MODES,
        &backing,
        clock,
        ROUNDS,
    )
    .unwrap()
}

/// `eh`: every 1000th command times out under write-back pressure, and recovering it takes a
/// second buffer from the pool while the command keeps its own. With one reserved element
/// (`mempool:1`, `backup`) the failing command holds it and recovery waits for another that
/// no one can free: STALL. Two suffice. `eh:reuse` is what Linux does (`scsi_eh_prep_cmnd`
/// reuses the command's own buffer): there one element is enough.
#[test]
fn recovery_that_takes_a_second_buffer_needs_two_reserved_elements() {
    let cells = eh_matrix("eh");
    for c in &cells {
        match c.mode {
            SenseMode::Slab => assert!(matches!(c.verdict, Verdict::Stall(_)), "{c:?}"),
            SenseMode::Mempool(1) | SenseMode::Backup => {
                let Verdict::Stall(stall) = c.verdict else {
                    panic!("eh {}: no stall: {c:?}", c.mode);
                };
                assert_eq!(stall.element_moves, 0, "{c:?}");
                assert!(c.recovery_waits > 0 && c.timeouts > 0, "{c:?}");
            }
            _ => {
                assert_eq!(c.verdict, Verdict::Ok, "eh {}: {c:?}", c.mode);
                assert_eq!((c.ios, c.failed), (9 * IOS, 0), "eh {}", c.mode);
                assert!(c.timeouts > 0, "eh {}: nothing timed out", c.mode);
            }
        }
    }
    for c in &eh_matrix("eh:reuse") {
        if c.mode == SenseMode::Slab {
            assert!(matches!(c.verdict, Verdict::Stall(_)), "{c:?}");
        } else {
            assert_eq!(c.verdict, Verdict::Ok, "eh:reuse {}: {c:?}", c.mode);
            assert_eq!((c.ios, c.failed, c.recovery_waits), (9 * IOS, 0, 0));
            assert!(c.timeouts > 0, "eh:reuse {}: nothing timed out", c.mode);
        }
    }
}

/// Records the counted windows' slots, as the guest's instruction-count markers see them.
#[derive(Clone)]
struct SlotClock {
    inner: ManualClock,
    slots: alloc::rc::Rc<core::cell::RefCell<alloc::collections::BTreeSet<u8>>>,
}

impl scsi::clock::Clock for SlotClock {
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn relax(&self) {
        self.inner.relax();
    }
}

impl crate::window::CountedWindows for SlotClock {
    fn window_begin(&self, slot: u8) {
        self.slots.borrow_mut().insert(slot);
    }
}

/// Under `shared`, a `mempool:N` host's own allocator runs in `slab` mode over the pool's
/// reserve, but its counted windows are the cell's (`--count-insns` joins them by slot): they
/// all went to `slab`'s slot before the hooks named it.
#[test]
fn a_shared_pool_cell_counts_in_its_own_slot() {
    let clock = SlotClock {
        inner: ManualClock::new(1000),
        slots: Default::default(),
    };
    let params = WorkloadParams::parse("can_queue=64 iodepth=8 ios=100 stall_ms=5").unwrap();
    let modes = [SenseMode::Slab, SenseMode::Mempool(2)];
    let pressure = PressureMode::Shared { holders: 1 };
    let backing = HostBacking::new();
    run_matrix(&params, pressure, &modes, &backing, clock.clone(), 1).unwrap();
    let slots: Vec<u8> = clock.slots.borrow().iter().copied().collect();
    assert_eq!(
        slots,
        [SenseMode::Slab.slot(), SenseMode::Mempool(2).slot()]
    );
}

/// A clock that moves on every read, as the guest's TSC does: commands submitted one after
/// another get due times apart, so completions come over several polls.
#[derive(Clone)]
struct TscLike {
    inner: ManualClock,
    per_read_ns: u64,
}

impl scsi::clock::Clock for TscLike {
    fn now_ns(&self) -> u64 {
        self.inner.advance(self.per_read_ns);
        self.inner.now_ns()
    }
    fn relax(&self) {
        self.inner.relax();
    }
}

impl crate::window::CountedWindows for TscLike {}

fn tsc_matrix(words: &str, pressure: &str) -> Vec<Cell> {
    let params = WorkloadParams::parse(&alloc::format!(
        "can_queue=256 iodepth=32 ios=600 stall_ms=5 rw=randwrite ndelay=20000 {words}"
    ))
    .unwrap();
    let clock = TscLike {
        inner: ManualClock::new(1000),
        per_read_ns: 100,
    };
    let modes = [SenseMode::Slab, SenseMode::Mempool(1)];
    let pressure = PressureMode::parse(pressure).unwrap();
    run_matrix(&params, pressure, &modes, &HostBacking::new(), clock, 2).unwrap()
}

/// Why the guest and the host model disagreed, and `batch_complete` closing the gap. On a
/// clock that moves with every read (the guest's TSC) completions trickle in, so when the
/// pressure starts the host still has commands in flight, and each one's free goes to a
/// command parked on the same host in the same poll: `slab` keeps moving under write-back.
/// When the device completes its queue together (`batch_complete=1`) the host has nothing in
/// flight as the pressure starts, and the host model's worst case returns: `slab` stalls,
/// `mempool:1` carries the queue, and under `multi:2` `mempool:1` livelocks.
#[test]
fn trickling_completions_recycle_a_hosts_own_frees_and_batched_ones_do_not() {
    for pressure in ["writeback", "multi:2"] {
        for c in tsc_matrix("", pressure) {
            assert_eq!(
                c.verdict,
                Verdict::Ok,
                "trickling {pressure} {}: {c:?}",
                c.mode
            );
            assert_eq!((c.ios, c.failed), (2 * IOS, 0), "{pressure} {}", c.mode);
        }
    }
    let writeback = tsc_matrix("batch_complete=1", "writeback");
    assert!(
        matches!(cell(&writeback, "slab").verdict, Verdict::Stall(_)),
        "{:?}",
        cell(&writeback, "slab")
    );
    let one = cell(&writeback, "mempool:1");
    assert_eq!(
        (one.verdict, one.ios, one.failed),
        (Verdict::Ok, 2 * IOS, 0)
    );
    assert!(one.reserve_hits > 2 * 32, "{one:?}");
    let multi = tsc_matrix("batch_complete=1", "multi:2");
    let one = cell(&multi, "mempool:1");
    assert!(matches!(one.verdict, Verdict::Livelock(_)), "{one:?}");
}

/// `eh` in the worst case, over rounds long enough for many commands: recovery that needs a
/// buffer of its own starves. The midlayer retries parked commands before it sweeps for
/// timeouts, so each element a batch of completions frees goes to a parked command, and the
/// timed-out command waits with its own element still held. The next injected timeout (every
/// 1000th command) takes another element, and `mempool:N` stops once N commands sit timed out:
/// with batched completions no reserve size is enough while new commands keep coming. (Linux
/// stops dispatching to a host in recovery, `SHOST_RECOVERY`; this midlayer does not.)
#[test]
fn a_recovery_that_needs_a_buffer_starves_behind_parked_commands() {
    let mut params = WorkloadParams::parse(
        "can_queue=256 iodepth=32 runtime=20ms stall_ms=500 ndelay=10000 batch_complete=1",
    )
    .unwrap();
    params.pressure = Some(PressureMode::parse("eh").unwrap());
    let case = sense_reserve_cases(&params).remove(0);
    let clock = TscLike {
        inner: ManualClock::new(1000),
        per_read_ns: 100,
    };
    let modes = [SenseMode::Mempool(1), SenseMode::Mempool(2)];
    let cells = run_matrix(
        &case.params,
        case.pressure,
        &modes,
        &HostBacking::new(),
        clock,
        2,
    )
    .unwrap();
    for (c, n) in cells.iter().zip([1u64, 2]) {
        let Verdict::Stall(stall) = c.verdict else {
            panic!("{}: no stall: {c:?}", c.mode);
        };
        assert_eq!(
            c.timeouts, n,
            "{}: one element per timed-out command",
            c.mode
        );
        assert_eq!(stall.completed, 999 * n, "{}: {stall:?}", c.mode);
        assert_eq!(stall.outstanding - stall.parked, n as usize, "{stall:?}");
        assert!(c.recovery_waits > 0, "{c:?}");
    }
}

/// `sense_pad=1:2` takes one chunk more from the backing than the same run without it, and
/// gives it back with the case.
#[test]
fn sense_pad_takes_one_chunk_and_gives_it_back() {
    let chunks = |words: &str| {
        let backing = HostBacking::new();
        let params = WorkloadParams::parse(&alloc::format!(
            "can_queue=64 iodepth=8 ios=50 stall_ms=5 {words}"
        ))
        .unwrap();
        let modes = [SenseMode::Mempool(2), SenseMode::Mempool(2)];
        let clock = ManualClock::new(1000);
        run_matrix(&params, PressureMode::None, &modes, &backing, clock, 2).unwrap();
        (backing.allocated(), backing.outstanding())
    };
    let (plain, padded) = (chunks(""), chunks("sense_pad=1:2"));
    assert_eq!(padded.0, plain.0 + 1, "{plain:?} {padded:?}");
    assert_eq!((plain.1, padded.1), (0, 0));
}
