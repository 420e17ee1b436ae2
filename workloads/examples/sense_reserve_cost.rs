//! The cost of a sense reserve at scale (`workloads::idle_cost`): what `pertag`, `mempool:2`,
//! `slab` and `backup` pin on an idle machine of {1, 16, 256} hosts × {1, 64} hardware queues ×
//! can_queue {128, 1519, 10107}, every host sharing one sense cache, over both slab caches,
//! with tags per hardware queue and host-wide. Each cell runs on its own `LazyArena`, so the
//! host commits none of the object memory it counts. Prints one `RESULT` line per row.
//!
//! ```text
//! cargo run --release -p workloads --example sense_reserve_cost -- \
//!     [slabs=slab,slub] [modes=pertag,mempool:2,slab,backup] [hosts=1,16,256] \
//!     [hw_queues=1,64] [can_queue=128,1519,10107] [iodepth=32]
//! ```

use pools::host::LazyArena;
use protocol::result::result_line;
use scsi::sense_alloc::SenseMode;
use workloads::idle_cost::{
    COST_CAN_QUEUE, COST_HOSTS, COST_HW_QUEUES, COST_IODEPTH, COST_MODES, IdleCost, Scale,
    cost_result, idle_cost,
};
use workloads::io::SenseSlab;

struct Args {
    slabs: Vec<SenseSlab>,
    modes: Vec<SenseMode>,
    hosts: Vec<usize>,
    hw_queues: Vec<usize>,
    can_queue: Vec<usize>,
    iodepth: usize,
}

/// A comma-separated list of `key=`, each read by `one`; an error names the key and the value.
fn list<T>(key: &str, text: &str, one: impl Fn(&str) -> Option<T>) -> Vec<T> {
    let values: Option<Vec<T>> = text.split(',').map(&one).collect();
    match values {
        Some(values) if !values.is_empty() => values,
        _ => fail(&format!("{key}={text}: not a list of valid values")),
    }
}

fn count(text: &str) -> Option<usize> {
    text.parse().ok().filter(|&n| (1..=1 << 20).contains(&n))
}

fn fail(message: &str) -> ! {
    eprintln!("sense_reserve_cost: {message}");
    std::process::exit(2)
}

fn parse() -> Args {
    let mut args = Args {
        slabs: vec![SenseSlab::Slab, SenseSlab::Slub],
        modes: COST_MODES.to_vec(),
        hosts: COST_HOSTS.to_vec(),
        hw_queues: COST_HW_QUEUES.to_vec(),
        can_queue: COST_CAN_QUEUE.to_vec(),
        iodepth: COST_IODEPTH,
    };
    for word in std::env::args().skip(1) {
        let Some((key, value)) = word.split_once('=') else {
            fail(&format!("`{word}` is not key=value"));
        };
        match key {
            "slabs" => {
                args.slabs = list(key, value, |s| match s {
                    "slab" => Some(SenseSlab::Slab),
                    "slub" => Some(SenseSlab::Slub),
                    _ => None,
                })
            }
            "modes" => args.modes = list(key, value, |s| SenseMode::parse(s).ok()),
            "hosts" => args.hosts = list(key, value, count),
            "hw_queues" => args.hw_queues = list(key, value, count),
            "can_queue" => args.can_queue = list(key, value, |s| count(s).filter(|&n| n <= 65_535)),
            "iodepth" => args.iodepth = list(key, value, count)[0],
            _ => fail(&format!("unknown key `{key}`")),
        }
    }
    args
}

/// One machine on an arena of its own; returns its cost and the address space it mapped.
fn machine(mode: SenseMode, slab: SenseSlab, scale: &Scale) -> (IdleCost, usize) {
    let arena = LazyArena::new();
    let cost = idle_cost(mode, slab, scale, &arena).unwrap_or_else(|error| {
        fail(&format!("{} {mode} {scale:?}: {error}", slab.name()));
    });
    (cost, arena.reserved_bytes())
}

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn main() {
    let args = parse();
    let mut mapped = 0;
    for &slab in &args.slabs {
        for &mode in &args.modes {
            for &hosts in &args.hosts {
                for &hw_queues in &args.hw_queues {
                    for &can_queue in &args.can_queue {
                        let scale = |host_tagset| Scale {
                            hosts,
                            hw_queues,
                            can_queue,
                            host_tagset,
                            iodepth: args.iodepth,
                        };
                        let (per_queue, host_tagset) = (scale(false), scale(true));
                        let (a, mapped_a) = machine(mode, slab, &per_queue);
                        let (b, mapped_b) = machine(mode, slab, &host_tagset);
                        mapped = mapped.max(mapped_a).max(mapped_b);
                        let row = cost_result(mode, slab, (&per_queue, &a), (&host_tagset, &b));
                        println!("{}", result_line(&row));
                    }
                }
            }
        }
    }
    println!(
        "idle cost: at most {} MiB of address space mapped for one machine; peak resident set of this run {} MiB",
        mapped >> 20,
        peak_resident_bytes().map_or("unknown".into(), |b| (b >> 20).to_string())
    );
}
