//! The sense-reserve matrix on the host: every sense mode (`slab`, `mempool:1/2/3/4/16`,
//! `pertag`, `prealloc`, `backup`) under each scenario, side by side in one process, rounds
//! rotated (`workloads::io::run_matrix`, the code the guest runs too). Prints one table per
//! case and a `RESULT` line per cell.
//!
//! ```text
//! cargo run --release -p workloads --example sense_reserve -- rounds=7 runtime=100ms
//! ```

#[expect(
    dead_code,
    reason = "the sense slab helpers serve the fake_rw example; this one builds its own over a page budget"
)]
mod support;

use pools::host::HostBacking;
use support::{StdClock, args};
use workloads::io::{
    MATRIX_MODES, WorkloadParams, run_matrix, sense_reserve_cases, sense_reserve_defaults,
    table_header,
};
use workloads::result::result_line;

fn main() {
    let mut rounds = None;
    let mut rest = Vec::new();
    for word in args() {
        match word.strip_prefix("rounds=") {
            Some(n) => rounds = Some(n.parse().expect("rounds=N")),
            None => rest.push(word),
        }
    }
    let params = WorkloadParams::parse(&rest.join(" ")).unwrap_or_else(|e| {
        eprintln!("sense_reserve: {e}");
        std::process::exit(2)
    });
    let params = sense_reserve_defaults(params);
    let modes = params.sense_modes.clone().unwrap_or(MATRIX_MODES.to_vec());
    let rounds = rounds.unwrap_or(modes.len() as u32);
    let backing = HostBacking::new();
    for case in sense_reserve_cases(&params) {
        let cells = run_matrix(
            &case.params,
            case.pressure,
            &modes,
            &backing,
            StdClock::new(),
            rounds,
        )
        .unwrap_or_else(|e| {
            eprintln!("sense_reserve: {}: {e}", case.name);
            std::process::exit(1)
        });
        println!("case {}: {}", case.name, table_header());
        for cell in &cells {
            for line in cell.table_row().lines() {
                println!("case {}: {line}", case.name);
            }
        }
        for cell in &cells {
            println!("{}", result_line(&cell.result("host", &case.name)));
        }
    }
}
