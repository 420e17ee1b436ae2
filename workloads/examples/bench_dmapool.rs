//! Host benchmark of the dmapool algorithms on the mpt3sas chain-pool pattern.
//!
//! `cargo run --release -p workloads --example bench_dmapool -- [--quick] [--n 1000,4000,...]
//! [--reps N] [--pairs N] [--impl legacy,scalable,inblock,vec]`
//!
//! Runs `workloads::dmapool_bench` — the same code the guest kernel runs — over a pre-faulted arena so
//! that page-allocation cost does not blur the comparison. Implementations alternate within
//! each repetition, so every comparison comes from one run, and every implementation runs the
//! same number of repetitions at every n. After all repetitions it prints
//! one `RESULT {json}` line per (implementation, n) on stdout with the *minimum* over the
//! repetitions (the estimate least disturbed by other load on a shared machine) and the
//! median beside it; progress goes to stderr.
//!
//! Implementations: `legacy`, `scalable`, `inblock` (each taking the pool lock per
//! operation, like Linux), `scalable-nolock` / `inblock-nolock` (the algorithm alone, through
//! `DmaPool::get_mut`), and for alloc+free pairs the `vec` and `vec-locked` references.

use std::time::Instant;

use pools::dmapool::{DefaultRawMutex, InBlock, Legacy, Scalable, SideStack};
use pools::host::HostArena;
use protocol::result::result_line;
use workloads::dmapool_bench::{
    self as bench, CHAIN_ALIGN, CHAIN_COUNT, CHAIN_SIZE, Clock, FillDrain, Locking, MinOfReps,
    PairResult,
};

struct HostClock(Instant);

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// The host counts no instructions: windows are not marked.
impl protocol::window::CountedWindows for HostClock {}

struct Args {
    impls: Vec<String>,
    sweep: Vec<usize>,
    reps: usize,
    pairs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut quick = false;
    let (mut sweep, mut reps, mut pairs) = (None, None, None);
    let mut impls: Vec<String> = ["legacy", "scalable", "inblock", "vec"]
        .map(String::from)
        .to_vec();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, text: String| {
            text.trim()
                .parse::<usize>()
                .map_err(|e| format!("{name} {text}: {e}"))
        };
        match arg.as_str() {
            "--quick" => quick = true,
            "--n" => {
                let list = value("--n")?;
                sweep = Some(
                    list.split(',')
                        .map(|s| number("--n", s.to_string()))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            "--reps" => reps = Some(number("--reps", value("--reps")?)?.max(1)),
            "--pairs" => pairs = Some(number("--pairs", value("--pairs")?)?),
            "--impl" => impls = value("--impl")?.split(',').map(str::to_string).collect(),
            "--bench" => {} // passed by `cargo bench`-style runners
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let default_sweep = if quick {
        vec![1000, 16_000, CHAIN_COUNT]
    } else {
        vec![1000, 4000, 16_000, 64_000, 128_000, CHAIN_COUNT]
    };
    Ok(Args {
        impls,
        sweep: sweep.unwrap_or(default_sweep),
        reps: reps.unwrap_or(if quick { 3 } else { 5 }),
        pairs: pairs.unwrap_or(if quick { 2_000_000 } else { 10_000_000 }),
    })
}

type ScalableAlgo<'a> = Scalable<&'a HostArena, SideStack>;
type InBlockAlgo<'a> = Scalable<&'a HostArena, InBlock>;
type LegacyAlgo<'a> = Legacy<&'a HostArena>;

/// The `RESULT` line of the minimum over repetitions, with the median and count beside it.
fn summarize(name: &str, runs: &[FillDrain]) -> String {
    let bench_name = if name.ends_with("-nolock") {
        "dmapool_nolock"
    } else {
        "dmapool"
    };
    let summary = MinOfReps::of(runs).expect("a result has at least one run");
    result_line(&summary.result(bench_name, name, "host"))
}

fn main() {
    let args = parse_args().unwrap_or_else(|error| {
        eprintln!("bench_dmapool: {error}");
        std::process::exit(2);
    });
    let clock = HostClock(Instant::now());
    let max_n = args.sweep.iter().copied().max().unwrap_or(0);
    // Pages for max_n blocks of 128 B: 32 to a 4 KiB page, 31 in the pre-6.4 layout (legacy),
    // plus slack.
    let arena = HostArena::new((max_n / 31 + 64) * 4096);
    let mut slots = Vec::new();
    let mut results: Vec<(String, usize, Vec<FillDrain>)> = Vec::new();
    // Every implementation runs `reps` times at every n, so that minima and medians compare
    // like with like (legacy's O(n²) free loop makes the sweep take seconds per repetition).
    for rep in 0..args.reps {
        for &n in &args.sweep {
            // Rotate the order so that no implementation always runs on a warmer cache: over
            // three repetitions each takes every position (the guest's workload does the same).
            let mut order = ["legacy", "scalable", "inblock"];
            stats::order::rotate(&mut order, rep);
            for which in order {
                if !args.impls.iter().any(|i| i == which) {
                    continue;
                }
                for locking in [Locking::PerOp, Locking::None] {
                    if which == "legacy" && locking == Locking::None {
                        continue;
                    }
                    assert!(arena.reset(), "arena has outstanding chunks");
                    let (size, align) = (CHAIN_SIZE, CHAIN_ALIGN);
                    let outcome = match which {
                        "legacy" => bench::fill_drain_with::<LegacyAlgo, DefaultRawMutex>(
                            &clock, &arena, n, size, align, &mut slots, locking,
                        ),
                        "inblock" => bench::fill_drain_with::<InBlockAlgo, DefaultRawMutex>(
                            &clock, &arena, n, size, align, &mut slots, locking,
                        ),
                        _ => bench::fill_drain_with::<ScalableAlgo, DefaultRawMutex>(
                            &clock, &arena, n, size, align, &mut slots, locking,
                        ),
                    };
                    let name = match locking {
                        Locking::PerOp => which.to_string(),
                        Locking::None => format!("{which}-nolock"),
                    };
                    match outcome {
                        Ok(r) => {
                            eprintln!(
                                "rep {rep} {name:>15} n={n:>7}: alloc {:>9.2} ns/op ({:>9.3} ms)  free {:>11.2} ns/op ({:>10.3} ms)",
                                r.alloc_ns_per_op,
                                r.alloc_total_ms,
                                r.free_ns_per_op,
                                r.free_total_ms
                            );
                            match results.iter_mut().find(|(k, m, _)| *k == name && *m == n) {
                                Some((_, _, runs)) => runs.push(r),
                                None => results.push((name, n, vec![r])),
                            }
                        }
                        Err(error) => eprintln!("{name} n={n}: {error}"),
                    }
                }
            }
        }
    }
    results.sort_by_key(|(name, n, _)| (*n, name.clone()));
    for (name, _, runs) in &results {
        println!("{}", summarize(name, runs));
    }
    pairs(&args, &clock, &arena, max_n.clamp(1024, CHAIN_COUNT));
}

/// Alloc+free pairs on a warm pool, against `Vec` pop/push with and without the same lock.
fn pairs(args: &Args, clock: &HostClock, arena: &HostArena, live: usize) {
    let mut best: Vec<PairResult> = Vec::new();
    for rep in 0..args.reps {
        for which in ["scalable", "inblock", "legacy", "vec", "vec-locked"] {
            if !args.impls.iter().any(|i| which.starts_with(i.as_str())) {
                continue;
            }
            assert!(arena.reset(), "arena has outstanding chunks");
            let outcome = match which {
                "scalable" => bench::alloc_free_pairs::<ScalableAlgo, DefaultRawMutex>(
                    clock, arena, live, args.pairs,
                ),
                "inblock" => bench::alloc_free_pairs::<InBlockAlgo, DefaultRawMutex>(
                    clock, arena, live, args.pairs,
                ),
                // Legacy pairs walk from the newest page; cheap here, but keep it short.
                "legacy" => bench::alloc_free_pairs::<LegacyAlgo, DefaultRawMutex>(
                    clock,
                    arena,
                    live,
                    args.pairs / 100,
                ),
                "vec" => Ok(bench::vec_pairs(clock, live, args.pairs)),
                _ => Ok(bench::vec_locked_pairs::<DefaultRawMutex>(
                    clock, live, args.pairs,
                )),
            };
            match outcome {
                Ok(r) => {
                    eprintln!(
                        "pairs rep {rep} {:>10} live={}: {:.2} ns/pair",
                        r.impl_name, r.live, r.ns_per_pair
                    );
                    match best.iter_mut().find(|b| b.impl_name == r.impl_name) {
                        Some(b) if r.ns_per_pair < b.ns_per_pair => *b = r,
                        Some(_) => {}
                        None => best.push(r),
                    }
                }
                Err(error) => eprintln!("pairs {which}: {error}"),
            }
        }
    }
    for r in best {
        println!("{}", result_line(&r.result("host", "min")));
    }
}
