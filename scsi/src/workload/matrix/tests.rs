//! The matrix on the host, one test per pressure mode, every sense mode in each: reserve sizes,
//! stall verdicts and failed-command counts (never timings).

use super::*;
use crate::clock::ManualClock;
use pools::host::HostBacking;

fn matrix(words: &str, pressure: &str) -> Vec<Cell> {
    let params = WorkloadParams::parse(&alloc::format!(
        "can_queue=256 iodepth=32 ios=3000 stall_ms=20 {words}"
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
        7,
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
    let want_bytes = [0, 96, 192, 384, 1536, 256 * 96, 256 * 96];
    for (c, bytes) in cells.iter().zip(want_bytes) {
        assert_eq!(c.verdict, Verdict::Ok, "{}", c.mode);
        assert_eq!((c.rounds, c.ios, c.failed), (7, 7 * 3000, 0), "{}", c.mode);
        assert_eq!(c.reserve_bytes, bytes, "{}", c.mode);
        assert_eq!(c.waits, 0, "{}", c.mode);
    }
    assert_eq!(cell(&cells, "pertag").reserve_hits, 7 * 3000);
    let json = cell(&cells, "mempool:2").to_json("host", "none");
    for field in [
        "\"pressure\":\"none\"",
        "\"sense_mode\":\"mempool:2\"",
        "\"reserve_entries\":2",
        "\"verdict\":\"OK\"",
        "\"reserve_bytes\":192",
        "\"failed\":0",
    ] {
        assert!(json.contains(field), "{field} missing from {json}");
    }
}

/// The deadlock a mempool exists for: the slab's pages reclaimed while idle, every free page
/// taken, memory back only as writes complete. `slab` is caught by the watchdog (a verdict,
/// not a hang); every reserve keeps I/O moving with no failed command.
#[test]
fn under_writeback_slab_stalls_and_every_reserve_completes() {
    let cells = matrix("rw=randwrite", "writeback");
    let slab = cell(&cells, "slab");
    let Verdict::Stall(stall) = slab.verdict else {
        panic!("slab did not stall: {slab:?}");
    };
    assert_eq!(stall.completed, 0);
    assert!(
        stall.parked > 0 && stall.parked == stall.outstanding,
        "{stall:?}"
    );
    assert!(slab.budget.refills_no_memory > 0);
    assert_eq!(
        slab.failed, 0,
        "the stalled commands finish once the pressure is relieved"
    );
    for mode in [
        "mempool:1",
        "mempool:2",
        "mempool:4",
        "mempool:16",
        "pertag",
        "prealloc",
    ] {
        let c = cell(&cells, mode);
        assert_eq!(c.verdict, Verdict::Ok, "{mode}: {c:?}");
        assert_eq!((c.ios, c.failed), (7 * 3000, 0), "{mode}");
    }
    assert!(cell(&cells, "mempool:1").budget.given_back > 0);
}

/// Every refill failing: a slab that kept a page from the scan still serves the objects on it,
/// so nothing stalls; the failures are counted.
#[test]
fn with_every_refill_failing_the_reserve_and_the_warm_slab_keep_io_moving() {
    let cells = matrix("iodepth=64", "fail:1");
    for c in &cells {
        assert_eq!(c.verdict, Verdict::Ok, "{}: {c:?}", c.mode);
        assert_eq!((c.ios, c.failed), (7 * 3000, 0), "{}", c.mode);
    }
    assert!(cell(&cells, "slab").budget.refills_injected > 0);
}

#[test]
fn a_random_failure_rate_repeats_with_the_seed() {
    let a = matrix("seed=5", "fail:0.5");
    let b = matrix("seed=5", "fail:0.5");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.verdict, Verdict::Ok);
        assert_eq!(x.budget, y.budget, "{}", x.mode);
    }
}
