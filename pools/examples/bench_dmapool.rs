//! Host benchmark of the dmapool algorithms on the mpt3sas chain-pool pattern.
//!
//! `cargo run --release -p pools --example bench_dmapool -- [--quick] [--n 1000,4096,...]
//! [--reps N] [--pairs N] [--impl legacy,scalable,inblock,vec]`
//!
//! Prints one `RESULT {json}` line per measurement on stdout (read by `cargo xtask bench
//! dmapool`) and human-readable progress on stderr. Implementations alternate within each
//! repetition so that every comparison comes from the same run.

use std::time::Instant;

use pools::bench::{self, CHAIN_ALIGN, CHAIN_COUNT, CHAIN_SIZE, Clock, Locking};
use pools::dmapool::{DefaultRawMutex, InBlock, Legacy, Scalable, SideStack};
use pools::host::HostArena;

struct HostClock(Instant);

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

struct Args {
    impls: Vec<String>,
    sweep: Vec<usize>,
    reps: usize,
    pairs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut quick = false;
    let mut sweep = None;
    let mut reps = None;
    let mut pairs = None;
    let mut impls = vec![
        "legacy".to_string(),
        "scalable".to_string(),
        "inblock".to_string(),
        "vec".to_string(),
    ];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => quick = true,
            "--n" => {
                let list = value("--n")?;
                let parsed: Result<Vec<usize>, _> =
                    list.split(',').map(|s| s.trim().parse()).collect();
                sweep = Some(parsed.map_err(|e| format!("--n {list}: {e}"))?);
            }
            "--reps" => {
                reps = Some(
                    value("--reps")?
                        .parse()
                        .map_err(|e| format!("--reps: {e}"))?,
                )
            }
            "--pairs" => {
                pairs = Some(
                    value("--pairs")?
                        .parse()
                        .map_err(|e| format!("--pairs: {e}"))?,
                )
            }
            "--impl" => impls = value("--impl")?.split(',').map(str::to_string).collect(),
            "--bench" => {} // passed by `cargo bench`-style runners
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let default_sweep = if quick {
        vec![1000, 16_384, CHAIN_COUNT]
    } else {
        vec![1000, 4096, 16_384, 65_536, 131_072, CHAIN_COUNT]
    };
    Ok(Args {
        impls,
        sweep: sweep.unwrap_or(default_sweep),
        reps: reps.unwrap_or(if quick { 1 } else { 3 }),
        pairs: pairs.unwrap_or(if quick { 1_000_000 } else { 10_000_000 }),
    })
}

type ScalableAlgo<'a> = Scalable<&'a HostArena, SideStack>;
type InBlockAlgo<'a> = Scalable<&'a HostArena, InBlock>;
type LegacyAlgo<'a> = Legacy<&'a HostArena>;

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("bench_dmapool: {error}");
            std::process::exit(2);
        }
    };
    let clock = HostClock(Instant::now());
    let max_n = args.sweep.iter().copied().max().unwrap_or(0);
    // Pages for max_n blocks of 128 B at 4 KiB each, plus slack.
    let arena = HostArena::new((max_n / 32 + 64) * 4096);
    let mut slots = Vec::new();
    let run = |which: &str, n: usize, slots: &mut Vec<_>, locking: Locking| {
        assert!(arena.reset(), "arena has outstanding chunks");
        let (size, align) = (CHAIN_SIZE, CHAIN_ALIGN);
        let result = match which {
            "legacy" => bench::fill_drain_with::<LegacyAlgo, DefaultRawMutex>(
                &clock, &arena, n, size, align, slots, locking,
            ),
            "inblock" => bench::fill_drain_with::<InBlockAlgo, DefaultRawMutex>(
                &clock, &arena, n, size, align, slots, locking,
            ),
            _ => bench::fill_drain_with::<ScalableAlgo, DefaultRawMutex>(
                &clock, &arena, n, size, align, slots, locking,
            ),
        };
        let (bench_name, tag) = match locking {
            Locking::PerOp => ("dmapool", ""),
            Locking::None => ("dmapool_nolock", " (no lock)"),
        };
        match result {
            Ok(r) => {
                eprintln!(
                    "{:>8} n={:>7}: alloc {:>9.2} ns/op ({:>9.3} ms)  free {:>11.2} ns/op ({:>10.3} ms){tag}",
                    r.impl_name,
                    r.n,
                    r.alloc_ns_per_op,
                    r.alloc_total_ms,
                    r.free_ns_per_op,
                    r.free_total_ms
                );
                println!("RESULT {}", r.to_json_as(bench_name, "host"));
            }
            Err(error) => eprintln!("{which} n={n}: {error}"),
        }
    };
    for rep in 0..args.reps {
        for &n in &args.sweep {
            // Alternate the order so neither side always runs on a warmer cache.
            let order: [&str; 3] = if rep % 2 == 0 {
                ["legacy", "scalable", "inblock"]
            } else {
                ["inblock", "scalable", "legacy"]
            };
            for which in order {
                if !args.impls.iter().any(|i| i == which)
                    || (which == "legacy" && !legacy_runs(n, rep))
                {
                    continue;
                }
                run(which, n, &mut slots, Locking::PerOp);
                if which != "legacy" {
                    run(which, n, &mut slots, Locking::None);
                }
            }
        }
    }
    let live = max_n.clamp(1024, CHAIN_COUNT);
    for rep in 0..args.reps {
        for which in ["scalable", "inblock", "legacy", "vec", "vec-locked"] {
            if !args.impls.iter().any(|i| which.starts_with(i.as_str())) {
                continue;
            }
            assert!(arena.reset(), "arena has outstanding chunks");
            let result = match which {
                "scalable" => bench::alloc_free_pairs::<ScalableAlgo, DefaultRawMutex>(
                    &clock, &arena, live, args.pairs,
                ),
                "inblock" => bench::alloc_free_pairs::<InBlockAlgo, DefaultRawMutex>(
                    &clock, &arena, live, args.pairs,
                ),
                // Legacy pairs walk from the newest page; cheap here, but keep it short.
                "legacy" => bench::alloc_free_pairs::<LegacyAlgo, DefaultRawMutex>(
                    &clock,
                    &arena,
                    live,
                    args.pairs / 100,
                ),
                "vec" => Ok(bench::vec_pairs(&clock, live, args.pairs)),
                _ => Ok(bench::vec_locked_pairs::<DefaultRawMutex>(
                    &clock, live, args.pairs,
                )),
            };
            match result {
                Ok(r) => {
                    eprintln!(
                        "pairs rep {rep} {:>8} live={}: {:.2} ns/pair",
                        r.impl_name, r.live, r.ns_per_pair
                    );
                    println!("RESULT {}", r.to_json("host"));
                }
                Err(error) => eprintln!("pairs {which}: {error}"),
            }
        }
    }
}

/// Legacy's free loop is O(n²): the big middle points run once, n=373959 twice.
fn legacy_runs(n: usize, rep: usize) -> bool {
    rep == 0 || n <= 16_384 || (n == CHAIN_COUNT && rep == 1)
}
