//! The topology report printed at boot: one log line per CPU brought up, one per node (CPUs,
//! SRAT memory, DMA frames), the distance matrix, and two machine-readable lines at column 0:
//!
//! ```text
//! SMP: 2 of 2 CPUs online (AP bring-up 1.234 ms)
//! NUMA: 2 nodes (SRAT): node0 cpus=0 mem_mib=256 dma_mib=127; node1 cpus=1 mem_mib=256 dma_mib=128
//! ```
//!
//! Guest tests match their prefixes (`SMP: 2 of 2 CPUs online`, `NUMA: 2 nodes`).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use pools::NodeId;

use crate::memory::layout::Layout;
use crate::platform::console::println;
use crate::platform::smp::{ApOutcome, StartReport};
use crate::platform::topology::Topology;

const MIB: u64 = 1 << 20;

/// Logs the report; see the [module docs](self). `ram_bytes` (all e820 RAM) stands for node 0's
/// memory when there is no SRAT.
pub fn log(topology: &Topology, layout: &Layout, report: &StartReport, ram_bytes: u64) {
    log_cpus(topology, report);
    let nodes: Vec<String> = (0..topology.nodes)
        .map(NodeId)
        .map(|node| log_node(topology, layout, ram_bytes, node))
        .collect();
    println!(
        "SMP: {} of {} CPUs online (AP bring-up {}.{:03} ms)",
        report.online(),
        topology.cpus.len(),
        report.total_ns / 1_000_000,
        report.total_ns / 1000 % 1000
    );
    println!(
        "NUMA: {} node{} ({}): {}",
        topology.nodes,
        if topology.nodes == 1 { "" } else { "s" },
        if topology.from_srat {
            "SRAT"
        } else {
            "no SRAT"
        },
        nodes.join("; ")
    );
}

/// One line per CPU left out and per application processor started.
fn log_cpus(topology: &Topology, report: &StartReport) {
    for skipped in &topology.skipped {
        log::warn!(
            "smp: APIC id {} not used: {}",
            skipped.apic_id,
            skipped.reason
        );
    }
    for &(index, apic_id, outcome) in &report.aps {
        match outcome {
            ApOutcome::Online { ns } => log::info!(
                "smp: CPU {index} (APIC id {apic_id}) online, {} us after INIT",
                ns / 1000
            ),
            ApOutcome::Failed(reason) => {
                log::error!("smp: CPU {index} (APIC id {apic_id}) OFFLINE: {reason}")
            }
        }
    }
}

/// Logs `node`'s memory ranges, CPUs, DMA frames and distances, and returns its part of the
/// `NUMA:` line (`node0 cpus=0 mem_mib=256 dma_mib=127`).
fn log_node(topology: &Topology, layout: &Layout, ram_bytes: u64, node: NodeId) -> String {
    let cpus: Vec<String> = topology
        .cpus
        .iter()
        .filter(|cpu| cpu.node == node)
        .map(|cpu| alloc::format!("{}", cpu.index))
        .collect();
    let node_memory = || topology.memory.iter().filter(|range| range.node == node);
    let memory: u64 = if topology.from_srat {
        node_memory().map(|range| range.range.len_bytes()).sum()
    } else {
        ram_bytes
    };
    let dma: u64 = layout
        .dma
        .iter()
        .filter(|(owner, _)| *owner == node)
        .map(|(_, range)| range.len_bytes())
        .sum();
    for range in node_memory() {
        log::info!(
            "NUMA: {node}: memory {:#x}-{:#x} ({} KiB)",
            range.range.start,
            range.range.end,
            range.range.len_bytes() / 1024
        );
    }
    let mut distances = String::new();
    for other in (0..topology.nodes).map(NodeId) {
        let _ = write!(distances, " {}", topology.distance(node, other));
    }
    log::info!(
        "NUMA: {node}: CPUs [{}], DMA frames {} MiB, distances{distances}",
        cpus.join(","),
        dma / MIB
    );
    let cpu_list = if cpus.is_empty() {
        String::from("-")
    } else {
        cpus.join(",")
    };
    alloc::format!(
        "{node} cpus={cpu_list} mem_mib={} dma_mib={}",
        memory / MIB,
        dma / MIB
    )
}
