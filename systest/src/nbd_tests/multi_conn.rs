//! Real multi-connection clients: two `nbdcopy` runs copy the whole export at once with 4
//! connections each (nbdcopy's default when the server advertises `NBD_FLAG_CAN_MULTI_CONN`;
//! asked for explicitly here), while `nbdinfo --can multi-conn` and `qemu-img info` ask the
//! server beside them. Both copies must be whole and equal: 10 connections at once, none
//! refused, none left without a greeting.

use harness::nbd_guest::NbdGuest;
use std::process::Command;
use std::time::Instant;

use super::tools::{ensure_libnbd_tools, run_tool};

/// Connections per nbdcopy run.
const CONNECTIONS: u32 = 4;
const RUNS: usize = 2;

pub fn two_nbdcopy_runs(nbd: &NbdGuest) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let dir = harness::workspace::output_dir("nbd").map_err(|e| e.to_string())?;
    let copies: Vec<_> = (0..RUNS)
        .map(|i| dir.join(format!("multi-conn-{i}.raw")))
        .collect();
    for copy in &copies {
        let _ = std::fs::remove_file(copy);
    }
    let start = Instant::now();
    let (copied, can, info) = std::thread::scope(|scope| {
        let runs: Vec<_> = copies
            .iter()
            .map(|copy| {
                scope.spawn(move || {
                    run_tool(
                        Command::new("nbdcopy")
                            .arg(format!("--connections={CONNECTIONS}"))
                            .arg(nbd.nbd_uri())
                            .arg(copy),
                    )
                })
            })
            .collect();
        // nbdinfo --can exits 0 when the export can, 2 when it cannot.
        let can = run_tool(
            Command::new("nbdinfo")
                .args(["--can", "multi-conn"])
                .arg(nbd.nbd_uri()),
        );
        let info = run_tool(Command::new("qemu-img").arg("info").arg(nbd.nbd_uri()));
        let copied: Vec<Result<String, String>> = runs
            .into_iter()
            .map(|run| run.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect();
        (copied, can, info)
    });
    let seconds = start.elapsed().as_secs_f64();
    for (i, result) in copied.iter().enumerate() {
        result
            .as_ref()
            .map_err(|e| format!("nbdcopy run {i}: {e}"))?;
    }
    can.map_err(|e| format!("nbdinfo --can multi-conn: {e}"))?;
    let info = info.map_err(|e| format!("qemu-img info beside the copies: {e}"))?;
    if !info.contains("virtual size: 64 MiB") {
        return Err(format!("qemu-img info beside the copies: {info}"));
    }
    let first = std::fs::read(&copies[0]).map_err(|e| e.to_string())?;
    let second = std::fs::read(&copies[1]).map_err(|e| e.to_string())?;
    if first.len() != 64 << 20 || first != second {
        return Err(format!(
            "copies of {} B and {} B differ",
            first.len(),
            second.len()
        ));
    }
    for copy in &copies {
        let _ = std::fs::remove_file(copy);
    }
    Ok(format!(
        "{RUNS} nbdcopy runs x {CONNECTIONS} connections copied 64 MiB each in {seconds:.1} s, equal; multi-conn advertised; qemu-img info answered beside them"
    ))
}
