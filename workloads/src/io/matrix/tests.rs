//! The matrix on the host, one test per pressure mode, every sense mode in each and both slab
//! caches where it matters: reserve sizes, stall verdicts, failed-command counts and stalls in
//! virtual seconds on the manual clock (never timings). Pressure is Linux's: per-CPU caches
//! keep their frees, nothing shrinks the cache, a competing allocator takes pages.

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

/// Write-back with Linux's rules, the worst case of the race for a freed page (the competitor
/// takes every page as it comes free): no mode stalls, and no reserve is touched. A host's
/// buffers go back to its CPU's cache at completion and serve its next commands, so in steady
/// state it needs no new page; the competitor did take every free page. (Under the earlier
/// model, which drained the per-CPU cache and shrank the cache on every pass and let a
/// neighbour take each free object, `slab` stalled here and `mempool:1` carried the queue.)
#[test]
fn under_writeback_a_host_recycles_its_own_frees_and_touches_no_reserve() {
    for (slab, batch) in [("slab", ""), ("slub", ""), ("slab", "batch_complete=1")] {
        let cells = matrix(
            &alloc::format!("rw=randwrite ndelay=20000 sense_slab={slab} {batch}"),
            "writeback",
        );
        for c in &cells {
            let case = (slab, batch, c.mode);
            assert_eq!(c.verdict, Verdict::Ok, "{case:?}: {c:?}");
            assert_eq!((c.ios, c.failed, c.waits), (9 * IOS, 0, 0), "{case:?}");
            assert!(
                c.budget.competed_pages > 0,
                "{case:?}: the competitor took pages"
            );
            if !matches!(c.mode, SenseMode::Pertag | SenseMode::Prealloc) {
                assert_eq!(c.reserve_hits, 0, "{case:?}");
            }
        }
    }
}

/// `multi:K` with Linux's rules: a step's K objects come from the host's CPU cache like its
/// sense buffer, so every mode completes with no partial take, whatever K and the reserve.
/// (The earlier model's livelocks of `mempool:N` with N < K needed the emptied cache.)
#[test]
fn multi_k_steps_are_served_from_the_cpu_cache() {
    for k in [2usize, 3] {
        let cells = matrix("rw=randwrite ndelay=20000", &alloc::format!("multi:{k}"));
        for c in &cells {
            let case = (k, c.mode);
            assert_eq!(c.verdict, Verdict::Ok, "{case:?}: {c:?}");
            assert_eq!(
                (c.ios, c.failed, c.partial_takes),
                (9 * IOS, 0, 0),
                "{case:?}"
            );
        }
        assert_eq!(cell(&cells, "pertag").reserve_entries(), 256 * k);
    }
}

/// Every allocation failing (failslab at P = 1): only what the reserve holds moves, on either
/// slab cache. This verdict is the earlier model's too: an allocation that fails outright is
/// what a reserve is for.
#[test]
fn with_every_allocation_failing_only_a_reserve_keeps_io_moving() {
    for slab in ["slab", "slub"] {
        let cells = matrix(&alloc::format!("ndelay=20000 sense_slab={slab}"), "fail:1");
        assert!(
            matches!(cell(&cells, "slab").verdict, Verdict::Stall(_)),
            "{slab}"
        );
        for c in cells.iter().filter(|c| c.mode != SenseMode::Slab) {
            assert_eq!(c.verdict, Verdict::Ok, "{slab} {}: {c:?}", c.mode);
            assert_eq!((c.ios, c.failed), (9 * IOS, 0), "{slab} {}", c.mode);
        }
        assert!(cell(&cells, "slab").budget.allocs_injected > 0);
    }
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

/// `shared:H`: one sense cache and one pool for two hosts on one CPU, host A's H commands in
/// error handling for the whole round, each holding its element. Host B completes in every
/// mode: its frees go to the CPU cache both allocate from, and with A holding only H of them
/// B always finds one. (The earlier model stalled B in `mempool:N` for N <= H.)
#[test]
fn a_shared_cache_keeps_host_b_moving_while_host_a_holds_elements() {
    for holders in [1usize, 2] {
        let scenario = alloc::format!("shared:{holders}");
        let cells = matrix("rw=randwrite ndelay=20000", &scenario);
        for c in &cells {
            assert_eq!(c.verdict, Verdict::Ok, "{scenario} {}: {c:?}", c.mode);
            assert_eq!((c.ios, c.failed), (9 * IOS, 0), "{scenario} {}", c.mode);
            assert_eq!(c.held_by_other_host, holders, "{scenario} {}", c.mode);
        }
        assert_eq!(cell(&cells, "mempool:16").reserve_bytes, 16 * 96);
    }
}

/// `scenario` (`eh` or `eh:reuse`) with Linux's error-handling timeouts (30 s per command,
/// 10 s for the handler's own) over `eh_scale` in `words`, on a manual clock that moves 1 ms
/// per idle poll: 30 s cost thirty thousand polls.
fn eh_matrix(scenario: &str, words: &str) -> Vec<Cell> {
    let mut params = WorkloadParams::parse(&alloc::format!(
        "can_queue=256 iodepth=32 ios=600 stall_ms=5 ndelay=20000 {words}"
    ))
    .unwrap();
    params.pressure = Some(PressureMode::parse(scenario).unwrap());
    let case = sense_reserve_cases(&params).remove(0);
    let backing = HostBacking::new();
    let clock = ManualClock::new(1_000_000);
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

/// `eh` and `eh:reuse` with Linux's error handling: an injected timeout holds its command (and
/// its buffer) for the 30 s timeout, then the asynchronous abort and a retry finish it. Every
/// mode completes, whether recovery takes a second buffer or not: the CPU cache has it. The
/// writer's longest stall is the timeout, in every mode: at the end of a round it waits for
/// that last write (as an fsync would), whatever the reserve. (The earlier model's `eh`
/// verdicts, `mempool:1` and `backup` stalled, needed the emptied cache; its 3 ms timeout hid
/// the 30 s.)
#[test]
fn with_linux_timeouts_the_stall_is_the_timeout_whatever_the_reserve() {
    for scenario in ["eh", "eh:reuse"] {
        for c in &eh_matrix(scenario, "") {
            let case = (scenario, c.mode);
            assert_eq!(c.verdict, Verdict::Ok, "{case:?}: {c:?}");
            assert_eq!(
                (c.ios, c.failed, c.recovery_waits),
                (9 * IOS, 0, 0),
                "{case:?}"
            );
            assert_eq!(c.timeout_ns, 30_000_000_000, "{case:?}");
            assert!(c.timeouts > 0, "{case:?}: nothing timed out");
            let stall_s = c.longest_stall_ns / 1_000_000_000;
            assert!((30..34).contains(&stall_s), "{case:?}: {stall_s} s");
        }
    }
}

/// A row states the scale of its own timeouts: `eh_scale=` divides only the `eh` cases', so a
/// write-back row of the same run keeps Linux's 30 s and says 1; and it says how many pages
/// the competing allocator took.
#[test]
fn only_the_eh_rows_state_a_scaled_timeout() {
    let mut params =
        WorkloadParams::parse("can_queue=256 iodepth=32 ios=600 stall_ms=5 eh_scale=1000").unwrap();
    params.pressure = Some(PressureMode::parse("writeback").unwrap());
    let case = sense_reserve_cases(&params).remove(0);
    let modes = [SenseMode::Slab];
    let clock = ManualClock::new(1000);
    let cells = run_matrix(
        &case.params,
        case.pressure,
        &modes,
        &HostBacking::new(),
        clock,
        1,
    )
    .unwrap();
    let row = cells[0].result("host", &case.name);
    assert_eq!((row.timeout_ns, row.timeout_scale), (30_000_000_000, 1));
    assert!(row.competed_pages > 0, "{row:?}");
}

/// The scale the guest runs with: `eh_scale=1000` makes the timeout 30 ms, and the stall
/// follows it.
#[test]
fn a_scaled_timeout_scales_the_stall() {
    let cells = eh_matrix("eh:reuse", "eh_scale=1000");
    let c = cell(&cells, "mempool:2");
    assert_eq!((c.timeout_ns, c.timeout_scale), (30_000_000, 1000));
    assert!(
        (30_000_000..34_000_000).contains(&c.longest_stall_ns),
        "{c:?}"
    );
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

impl protocol::window::CountedWindows for SlotClock {
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

impl protocol::window::CountedWindows for TscLike {}

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

/// Completions that trickle in (a clock that moves with every read, as the guest's TSC does)
/// and completions that come together (`batch_complete=1`, the earlier model's worst case)
/// give the same verdicts under Linux's rules: neither needs a reserve, since a host's frees
/// stay in its CPU's cache either way. (Before, batched completions stalled `slab` under
/// write-back and livelocked `mempool:1` under `multi:2`.)
#[test]
fn trickling_or_batched_completions_both_recycle_a_hosts_own_frees() {
    for pressure in ["writeback", "multi:2"] {
        for batch in ["", "batch_complete=1"] {
            for c in tsc_matrix(batch, pressure) {
                let case = (pressure, batch, c.mode);
                assert_eq!(c.verdict, Verdict::Ok, "{case:?}: {c:?}");
                assert_eq!(
                    (c.ios, c.failed, c.reserve_hits),
                    (2 * IOS, 0, 0),
                    "{case:?}"
                );
            }
        }
    }
}

/// `eh` (recovery takes a buffer of its own) with batched completions and rounds long enough
/// for many commands, the case that starved recovery in the earlier model: no longer. The
/// host stops dispatching while it recovers (`SHOST_RECOVERY`), so a freed buffer is not taken
/// by a parked command first, and its CPU cache has buffers anyway; every injected timeout is
/// recovered.
#[test]
fn a_recovery_that_needs_a_buffer_does_not_starve() {
    let mut params = WorkloadParams::parse(
        "can_queue=256 iodepth=32 runtime=20ms stall_ms=500 ndelay=10000 batch_complete=1 eh_scale=1000",
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
    for c in &cells {
        assert_eq!(c.verdict, Verdict::Ok, "{}: {c:?}", c.mode);
        assert_eq!(c.failed, 0, "{}", c.mode);
        assert!(c.timeouts >= 1, "{}: {c:?}", c.mode);
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
