//! The sense-reserve matrix on the host: every sense mode (`slab`, `mempool:1/2/3/4/16`,
//! `pertag`, `prealloc`, `backup`) under each scenario, side by side in one process, rounds
//! rotated (`workloads::io::run_matrix`, the code the guest runs too), on both slab caches (or
//! the one `sense_slab=` names). The `eh` cases run on a manual clock with Linux's own 30 s
//! timeouts (unless `eh_scale=` divides them), where a timeout costs polls, not time; the
//! others on the host's clock. Prints one table per case and a `RESULT` line per cell.
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
use protocol::result::result_line;
use scsi::clock::ManualClock;
use support::{StdClock, args};
use workloads::io::{
    Case, Cell, MATRIX_MODES, PressureMode, WorkloadError, WorkloadParams, run_matrix,
    sense_reserve_cases, sense_reserve_defaults, table_header,
};

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
    for slab in params.matrix_slabs.clone() {
        let mut params = params.clone();
        params.sense_slab = slab;
        for case in sense_reserve_cases(&params) {
            let cells = run_case(&case, &modes, &backing, rounds).unwrap_or_else(|e| {
                eprintln!("sense_reserve: {} {}: {e}", slab.name(), case.name);
                std::process::exit(1)
            });
            println!(
                "case {}: sense_slab={} {}",
                case.name,
                slab.name(),
                table_header()
            );
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
}

/// One case: the `eh` ones on a manual clock (1 ms per idle poll), so Linux's 30 s timeouts
/// cost polls; the others on the host's clock.
fn run_case(
    case: &Case,
    modes: &[scsi::sense_alloc::SenseMode],
    backing: &HostBacking,
    rounds: u32,
) -> Result<Vec<Cell>, WorkloadError> {
    let (params, pressure) = (&case.params, case.pressure);
    if let PressureMode::Eh { .. } = pressure {
        let clock = ManualClock::new(1_000_000);
        return run_matrix(params, pressure, modes, backing, clock, rounds);
    }
    run_matrix(params, pressure, modes, backing, StdClock::new(), rounds)
}
