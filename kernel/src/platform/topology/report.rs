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
    let mut nodes = Vec::new();
    for node in (0..topology.nodes).map(NodeId) {
        let cpus: Vec<String> = topology
            .cpus
            .iter()
            .filter(|cpu| cpu.node == node)
            .map(|cpu| alloc::format!("{}", cpu.index))
            .collect();
        let memory: u64 = if topology.from_srat {
            topology
                .memory
                .iter()
                .filter(|range| range.node == node)
                .map(|range| range.range.len_bytes())
                .sum()
        } else {
            ram_bytes
        };
        let dma: u64 = layout
            .dma
            .iter()
            .filter(|(owner, _)| *owner == node)
            .map(|(_, range)| range.len_bytes())
            .sum();
        for range in topology.memory.iter().filter(|range| range.node == node) {
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
        nodes.push(alloc::format!(
            "{node} cpus={} mem_mib={} dma_mib={}",
            if cpus.is_empty() {
                String::from("-")
            } else {
                cpus.join(",")
            },
            memory / MIB,
            dma / MIB
        ));
    }
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
