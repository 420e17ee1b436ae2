//! The machine's CPU and NUMA topology, built from the ACPI MADT, SRAT and SLIT.
//!
//! Pure logic, host-tested: the guest's `acpi` module reads the tables and hands the entries to
//! [`Topology::build`]. CPUs get dense indices with the bootstrap processor first (index 0) and
//! the others in MADT order, which is the order Linux brings them up in. ACPI proximity domains
//! are arbitrary 32-bit numbers; nodes are their dense renumbering in ascending order (QEMU's
//! `-numa node,nodeid=N` gives domain N, so node N). Without an SRAT the machine is one node.
//! Memory that no SRAT entry covers is put on node 0, and a CPU without an affinity entry too,
//! as Linux does with `NUMA_NO_NODE` fallbacks.

#[cfg(target_os = "none")]
pub mod report;
pub mod tables;

use alloc::vec::Vec;

use pools::NodeId;

use crate::memory::memmap::PhysRange;
pub use tables::slit::Slit;
pub use tables::srat::Srat;

/// Most CPUs the kernel starts (per-CPU tables are sized by it).
pub const MAX_CPUS: usize = 64;
/// xAPIC can address APIC ids 0..=254 (255 is broadcast).
const MAX_XAPIC_ID: u32 = 254;
/// ACPI's distance between a node and itself, and the default between two nodes without SLIT.
const LOCAL_DISTANCE: u8 = 10;
const REMOTE_DISTANCE: u8 = 20;

/// A processor entry from the MADT (Local APIC, type 0, or Local x2APIC, type 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MadtCpu {
    /// Local APIC id.
    pub apic_id: u32,
    /// Flags bit 0 (enabled) or bit 1 (online capable): the CPU may be started.
    pub usable: bool,
}

/// One CPU the kernel will run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    /// Dense index; 0 is the bootstrap processor.
    pub index: usize,
    /// Local APIC id.
    pub apic_id: u32,
    /// NUMA node.
    pub node: NodeId,
}

/// A CPU found in the MADT that will not be started, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkippedCpu {
    /// Local APIC id.
    pub apic_id: u32,
    /// Why.
    pub reason: &'static str,
}

/// A physical range on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeRange {
    /// The node.
    pub node: NodeId,
    /// The range.
    pub range: PhysRange,
}

/// CPUs, nodes, node memory and distances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// CPUs to run on, index order.
    pub cpus: Vec<Cpu>,
    /// CPUs that will not be started.
    pub skipped: Vec<SkippedCpu>,
    /// Enabled SRAT memory ranges, by start address.
    pub memory: Vec<NodeRange>,
    /// Number of nodes (at least 1).
    pub nodes: u16,
    /// `nodes x nodes` distances (SLIT, or 10/20 without one).
    distance: Vec<u8>,
    /// Whether an SRAT described the nodes.
    pub from_srat: bool,
}

impl Topology {
    /// One CPU, one node: what a machine without usable ACPI tables gets.
    pub fn single(bsp_apic_id: u32) -> Self {
        Self::build(bsp_apic_id, &[], None, None)
    }

    /// Builds the topology from the SRAT and SLIT as parsed (`None`: the firmware has none).
    ///
    /// A refused SRAT drops only the NUMA layout, as Linux's `bad_srat()` does: the CPUs still
    /// come from the MADT, all on one node, and the SLIT goes too (its localities are the
    /// SRAT's proximity domains). A refused SLIT leaves the default distances.
    pub fn from_tables(
        bsp_apic_id: u32,
        madt: &[MadtCpu],
        srat: Option<Result<Srat, tables::TableError>>,
        slit: Option<Result<Slit, tables::TableError>>,
    ) -> Self {
        let srat = match srat {
            Some(Ok(srat)) => Some(srat),
            Some(Err(err)) => {
                log::warn!("acpi: SRAT not used ({err}): one NUMA node, CPUs from the MADT");
                return Self::build(bsp_apic_id, madt, None, None);
            }
            None => None,
        };
        let slit = match slit {
            Some(Ok(slit)) => Some(slit),
            Some(Err(err)) => {
                log::warn!("acpi: ignoring the SLIT: {err}");
                None
            }
            None => None,
        };
        Self::build(bsp_apic_id, madt, srat.as_ref(), slit.as_ref())
    }

    /// Builds the topology. `bsp_apic_id` is the running CPU's APIC id (from the LAPIC).
    pub fn build(
        bsp_apic_id: u32,
        madt: &[MadtCpu],
        srat: Option<&Srat>,
        slit: Option<&Slit>,
    ) -> Self {
        let domains = Domains::from_srat(srat);
        let (cpus, skipped) = cpus_from_madt(bsp_apic_id, madt, &domains);
        let memory = domains.memory();
        let nodes = domains.ids.len().clamp(1, usize::from(u16::MAX)) as u16;
        let distance = domains.distances(usize::from(nodes), slit);
        Topology {
            cpus,
            skipped,
            memory,
            nodes,
            distance,
            from_srat: srat.is_some_and(|srat| !srat.memory.is_empty() || !srat.cpus.is_empty()),
        }
    }

    /// Keeps the first `max` CPUs (the boot CPU always) and moves the rest to `skipped`, as
    /// Linux's `maxcpus=` does.
    pub fn limit_cpus(&mut self, max: usize) {
        let keep = max.max(1);
        if self.cpus.len() > keep {
            for cpu in self.cpus.drain(keep..) {
                self.skipped.push(SkippedCpu {
                    apic_id: cpu.apic_id,
                    reason: "beyond maxcpus=",
                });
            }
        }
    }

    /// The node of a CPU by APIC id.
    pub fn node_of_apic(&self, apic_id: u32) -> Option<NodeId> {
        self.cpus
            .iter()
            .find(|cpu| cpu.apic_id == apic_id)
            .map(|cpu| cpu.node)
    }

    /// The node whose SRAT memory contains `addr` (node 0 for memory no entry covers).
    pub fn node_of_addr(&self, addr: u64) -> NodeId {
        self.memory
            .iter()
            .find(|r| (r.range.start..r.range.end).contains(&addr))
            .map_or(NodeId(0), |r| r.node)
    }

    /// ACPI distance from `from` to `to` (10 = local); 255 for a node that does not exist.
    pub fn distance(&self, from: NodeId, to: NodeId) -> u8 {
        let n = usize::from(self.nodes);
        let (from, to) = (usize::from(from.0), usize::from(to.0));
        if from >= n || to >= n {
            return u8::MAX;
        }
        self.distance[from * n + to]
    }

    /// Every node, `node` first, then the others nearest first (ties by number): the order a
    /// node-local allocation falls back in.
    pub fn fallback_order(&self, node: NodeId) -> Vec<NodeId> {
        let mut order: Vec<NodeId> = (0..self.nodes).map(NodeId).collect();
        order.sort_by_key(|&other| (other != node, self.distance(node, other), other));
        order
    }

    /// Cuts `ranges` at node boundaries and labels each piece with its node.
    pub fn split_by_node(&self, ranges: &[PhysRange]) -> Vec<NodeRange> {
        let mut pieces = Vec::new();
        for range in ranges {
            let mut at = range.start;
            while at < range.end {
                let (node, end) = match self
                    .memory
                    .iter()
                    .find(|r| (r.range.start..r.range.end).contains(&at))
                {
                    Some(r) => (r.node, r.range.end.min(range.end)),
                    None => {
                        let next = self
                            .memory
                            .iter()
                            .map(|r| r.range.start)
                            .filter(|&start| start > at)
                            .min()
                            .unwrap_or(range.end);
                        (NodeId(0), next.min(range.end))
                    }
                };
                pieces.push(NodeRange {
                    node,
                    range: PhysRange { start: at, end },
                });
                at = end;
            }
        }
        pieces
    }
}

/// The SRAT's proximity domains, sorted: node `i` is the `i`-th domain that an enabled CPU or
/// memory entry names (one node, 0, without a SRAT).
struct Domains<'a> {
    srat: Option<&'a Srat>,
    ids: Vec<u32>,
}

impl<'a> Domains<'a> {
    fn from_srat(srat: Option<&'a Srat>) -> Self {
        let mut ids: Vec<u32> = srat
            .map(|srat| {
                let cpus = srat.cpus.iter().filter(|c| c.enabled).map(|c| c.domain);
                let memory = srat.memory.iter().filter(|m| m.enabled).map(|m| m.domain);
                cpus.chain(memory).collect()
            })
            .unwrap_or_default();
        ids.sort_unstable();
        ids.dedup();
        Domains { srat, ids }
    }

    fn node_of_domain(&self, domain: u32) -> NodeId {
        self.ids
            .binary_search(&domain)
            .map_or(NodeId(0), |index| NodeId(index as u16))
    }

    /// The node of the CPU with `apic_id`, node 0 when the SRAT does not place it.
    fn node_of_apic(&self, apic_id: u32) -> NodeId {
        self.srat
            .and_then(|srat| {
                srat.cpus
                    .iter()
                    .find(|c| c.enabled && c.apic_id == apic_id)
                    .map(|c| self.node_of_domain(c.domain))
            })
            .unwrap_or(NodeId(0))
    }

    /// The SRAT's enabled, non-empty memory ranges with their nodes, sorted by address.
    fn memory(&self) -> Vec<NodeRange> {
        let mut memory: Vec<NodeRange> = self
            .srat
            .map(|srat| {
                srat.memory
                    .iter()
                    .filter(|m| m.enabled && m.len_bytes > 0)
                    .map(|m| NodeRange {
                        node: self.node_of_domain(m.domain),
                        range: PhysRange {
                            start: m.base,
                            end: m.base.saturating_add(m.len_bytes),
                        },
                    })
                    .collect()
            })
            .unwrap_or_default();
        memory.sort_unstable_by_key(|r| r.range.start);
        memory
    }

    /// The `nodes` x `nodes` distance matrix: the SLIT's entries for the domains it covers,
    /// Linux's defaults (10 local, 20 remote) for the rest.
    fn distances(&self, nodes: usize, slit: Option<&Slit>) -> Vec<u8> {
        let mut distance = alloc::vec![REMOTE_DISTANCE; nodes * nodes];
        for i in 0..nodes {
            distance[i * nodes + i] = LOCAL_DISTANCE;
        }
        let Some(slit) = slit else {
            return distance;
        };
        for (i, &from) in self.ids.iter().enumerate() {
            for (j, &to) in self.ids.iter().enumerate() {
                let (from, to) = (from as usize, to as usize);
                if from < slit.localities && to < slit.localities {
                    distance[i * nodes + j] = slit.distance[from * slit.localities + to];
                }
            }
        }
        distance
    }
}

/// The boot CPU first, then every MADT entry that can be started, in MADT order; the others
/// with why they are left out.
fn cpus_from_madt(
    bsp_apic_id: u32,
    madt: &[MadtCpu],
    domains: &Domains<'_>,
) -> (Vec<Cpu>, Vec<SkippedCpu>) {
    let mut cpus = alloc::vec![Cpu {
        index: 0,
        apic_id: bsp_apic_id,
        node: domains.node_of_apic(bsp_apic_id),
    }];
    let mut skipped = Vec::new();
    for entry in madt.iter().filter(|entry| entry.apic_id != bsp_apic_id) {
        match skip_reason(entry, &cpus) {
            Some(reason) => skipped.push(SkippedCpu {
                apic_id: entry.apic_id,
                reason,
            }),
            None => cpus.push(Cpu {
                index: cpus.len(),
                apic_id: entry.apic_id,
                node: domains.node_of_apic(entry.apic_id),
            }),
        }
    }
    (cpus, skipped)
}

/// Why `entry` cannot join the CPUs taken so far, or `None` when it can.
fn skip_reason(entry: &MadtCpu, cpus: &[Cpu]) -> Option<&'static str> {
    if !entry.usable {
        Some("disabled in the MADT")
    } else if entry.apic_id > MAX_XAPIC_ID {
        Some("x2APIC id, not addressable in xAPIC mode")
    } else if cpus.iter().any(|cpu| cpu.apic_id == entry.apic_id) {
        Some("duplicate APIC id in the MADT")
    } else if cpus.len() >= MAX_CPUS {
        Some("more CPUs than MAX_CPUS")
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
