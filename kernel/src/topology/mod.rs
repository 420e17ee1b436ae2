//! The machine's CPU and NUMA topology, built from the ACPI MADT, SRAT and SLIT.
//!
//! Pure logic, host-tested: the guest's `acpi` module reads the tables and hands the entries to
//! [`Topology::build`]. CPUs get dense indices with the bootstrap processor first (index 0) and
//! the others in MADT order, which is the order Linux brings them up in. ACPI proximity domains
//! are arbitrary 32-bit numbers; nodes are their dense renumbering in ascending order (QEMU's
//! `-numa node,nodeid=N` gives domain N, so node N). Without an SRAT the machine is one node.
//! Memory that no SRAT entry covers is put on node 0, and a CPU without an affinity entry too,
//! as Linux does with `NUMA_NO_NODE` fallbacks.

pub mod tables;

use alloc::vec::Vec;

use pools::NodeId;

use crate::memmap::PhysRange;
pub use tables::{Slit, Srat};

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

    /// Builds the topology. `bsp_apic_id` is the running CPU's APIC id (from the LAPIC).
    pub fn build(
        bsp_apic_id: u32,
        madt: &[MadtCpu],
        srat: Option<&Srat>,
        slit: Option<&Slit>,
    ) -> Self {
        let mut domains: Vec<u32> = srat
            .map(|srat| {
                let cpus = srat.cpus.iter().filter(|c| c.enabled).map(|c| c.domain);
                let memory = srat.memory.iter().filter(|m| m.enabled).map(|m| m.domain);
                cpus.chain(memory).collect()
            })
            .unwrap_or_default();
        domains.sort_unstable();
        domains.dedup();
        let node_of_domain = |domain: u32| {
            domains
                .binary_search(&domain)
                .map_or(NodeId(0), |index| NodeId(index as u16))
        };
        let node_of_apic = |apic_id: u32| {
            srat.and_then(|srat| {
                srat.cpus
                    .iter()
                    .find(|c| c.enabled && c.apic_id == apic_id)
                    .map(|c| node_of_domain(c.domain))
            })
            .unwrap_or(NodeId(0))
        };

        let mut cpus = alloc::vec![Cpu {
            index: 0,
            apic_id: bsp_apic_id,
            node: node_of_apic(bsp_apic_id),
        }];
        let mut skipped = Vec::new();
        for entry in madt.iter().filter(|entry| entry.apic_id != bsp_apic_id) {
            let reason = if !entry.usable {
                Some("disabled in the MADT")
            } else if entry.apic_id > MAX_XAPIC_ID {
                Some("x2APIC id, not addressable in xAPIC mode")
            } else if cpus.iter().any(|cpu| cpu.apic_id == entry.apic_id) {
                Some("duplicate APIC id in the MADT")
            } else if cpus.len() >= MAX_CPUS {
                Some("more CPUs than MAX_CPUS")
            } else {
                None
            };
            match reason {
                Some(reason) => skipped.push(SkippedCpu {
                    apic_id: entry.apic_id,
                    reason,
                }),
                None => cpus.push(Cpu {
                    index: cpus.len(),
                    apic_id: entry.apic_id,
                    node: node_of_apic(entry.apic_id),
                }),
            }
        }

        let mut memory: Vec<NodeRange> = srat
            .map(|srat| {
                srat.memory
                    .iter()
                    .filter(|m| m.enabled && m.len_bytes > 0)
                    .map(|m| NodeRange {
                        node: node_of_domain(m.domain),
                        range: PhysRange {
                            start: m.base,
                            end: m.base.saturating_add(m.len_bytes),
                        },
                    })
                    .collect()
            })
            .unwrap_or_default();
        memory.sort_unstable_by_key(|r| r.range.start);

        let nodes = domains.len().clamp(1, usize::from(u16::MAX)) as u16;
        let n = usize::from(nodes);
        let mut distance = alloc::vec![REMOTE_DISTANCE; n * n];
        for i in 0..n {
            distance[i * n + i] = LOCAL_DISTANCE;
        }
        if let Some(slit) = slit {
            for (i, &from) in domains.iter().enumerate() {
                for (j, &to) in domains.iter().enumerate() {
                    let (from, to) = (from as usize, to as usize);
                    if from < slit.localities && to < slit.localities {
                        distance[i * n + j] = slit.distance[from * slit.localities + to];
                    }
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::tables::{build, parse_slit, parse_srat};
    use super::*;

    const MIB: u64 = 1 << 20;

    fn madt(ids: &[u32]) -> Vec<MadtCpu> {
        ids.iter()
            .map(|&apic_id| MadtCpu {
                apic_id,
                usable: true,
            })
            .collect()
    }

    /// What QEMU builds for `-smp 2 -numa node,nodeid=0,cpus=0 -numa node,nodeid=1,cpus=1`
    /// with 256 MiB per node (the low 640 KiB is its own SRAT entry).
    fn qemu_numa2() -> (Srat, Slit) {
        let srat = parse_srat(&build::srat(&[
            build::cpu(0, 0, true),
            build::cpu(1, 1, true),
            build::memory(0, 0xa_0000, 0, true),
            build::memory(0x10_0000, 256 * MIB - 0x10_0000, 0, true),
            build::memory(256 * MIB, 256 * MIB, 1, true),
            build::memory(0, 0, 0, false),
        ]))
        .unwrap();
        let slit = parse_slit(&build::slit(2, &[10, 21, 21, 10])).unwrap();
        (srat, slit)
    }

    #[test]
    fn without_srat_everything_is_node_0() {
        let topology = Topology::build(0, &madt(&[0, 1, 2, 3]), None, None);
        assert_eq!(topology.nodes, 1);
        assert_eq!(topology.cpus.len(), 4);
        assert!(topology.cpus.iter().all(|cpu| cpu.node == NodeId(0)));
        assert_eq!(topology.node_of_addr(0x1234_5678), NodeId(0));
        assert!(!topology.from_srat);
        assert_eq!(Topology::single(5).cpus[0].apic_id, 5);
    }

    #[test]
    fn bsp_first_then_madt_order_and_skips_named() {
        let mut entries = madt(&[3, 0, 1, 300, 1]);
        entries.push(MadtCpu {
            apic_id: 7,
            usable: false,
        });
        let topology = Topology::build(1, &entries, None, None);
        let ids: Vec<u32> = topology.cpus.iter().map(|cpu| cpu.apic_id).collect();
        assert_eq!(ids, [1, 3, 0]);
        assert_eq!(
            topology.cpus.iter().map(|c| c.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let skipped: Vec<u32> = topology.skipped.iter().map(|s| s.apic_id).collect();
        assert_eq!(skipped, [300, 7]);
        let mut limited = topology.clone();
        limited.limit_cpus(2);
        assert_eq!(limited.cpus.len(), 2);
        assert_eq!(limited.skipped.last().map(|s| s.apic_id), Some(0));
        limited.limit_cpus(0);
        assert_eq!(limited.cpus.len(), 1, "the boot CPU always stays");
    }

    #[test]
    fn qemu_two_nodes() {
        let (srat, slit) = qemu_numa2();
        let topology = Topology::build(0, &madt(&[0, 1]), Some(&srat), Some(&slit));
        assert_eq!(topology.nodes, 2);
        assert!(topology.from_srat);
        assert_eq!(topology.node_of_apic(0), Some(NodeId(0)));
        assert_eq!(topology.node_of_apic(1), Some(NodeId(1)));
        assert_eq!(topology.node_of_addr(300 * MIB), NodeId(1));
        assert_eq!(topology.node_of_addr(2 * MIB), NodeId(0));
        assert_eq!(topology.distance(NodeId(0), NodeId(1)), 21);
        assert_eq!(topology.distance(NodeId(1), NodeId(1)), 10);
        assert_eq!(topology.distance(NodeId(2), NodeId(1)), 255);
        assert_eq!(topology.fallback_order(NodeId(1)), [NodeId(1), NodeId(0)]);
        // Usable RAM as the kernel sees it, split where node 1 begins.
        let usable = [
            PhysRange {
                start: 0x1000,
                end: 0x9_f000,
            },
            PhysRange {
                start: 0x20_0000,
                end: 512 * MIB - 0x2_0000,
            },
        ];
        let pieces = topology.split_by_node(&usable);
        assert_eq!(
            pieces,
            [
                NodeRange {
                    node: NodeId(0),
                    range: usable[0]
                },
                NodeRange {
                    node: NodeId(0),
                    range: PhysRange {
                        start: 0x20_0000,
                        end: 256 * MIB
                    }
                },
                NodeRange {
                    node: NodeId(1),
                    range: PhysRange {
                        start: 256 * MIB,
                        end: 512 * MIB - 0x2_0000
                    }
                },
            ]
        );
    }

    #[test]
    fn sparse_domains_are_renumbered_and_gaps_go_to_node_0() {
        let srat = parse_srat(&build::srat(&[
            build::cpu(0, 8, true),
            build::cpu(2, 3, true),
            build::memory(64 * MIB, 64 * MIB, 8, true),
            build::memory(128 * MIB, 64 * MIB, 3, true),
        ]))
        .unwrap();
        let slit = parse_slit(&build::slit(9, &[10; 81])).unwrap();
        let topology = Topology::build(2, &madt(&[0, 2]), Some(&srat), Some(&slit));
        assert_eq!(topology.nodes, 2);
        assert_eq!(
            topology.node_of_apic(2),
            Some(NodeId(0)),
            "domain 3 -> node 0"
        );
        assert_eq!(
            topology.node_of_apic(0),
            Some(NodeId(1)),
            "domain 8 -> node 1"
        );
        assert_eq!(topology.distance(NodeId(0), NodeId(1)), 10, "from the SLIT");
        let pieces = topology.split_by_node(&[PhysRange {
            start: 0,
            end: 256 * MIB,
        }]);
        let summary: Vec<(u16, u64, u64)> = pieces
            .iter()
            .map(|p| (p.node.0, p.range.start / MIB, p.range.end / MIB))
            .collect();
        assert_eq!(
            summary,
            [(0, 0, 64), (1, 64, 128), (0, 128, 192), (0, 192, 256)]
        );
    }

    #[test]
    fn fallback_prefers_the_nearest_node() {
        let srat = parse_srat(&build::srat(&[
            build::memory(0, MIB, 0, true),
            build::memory(MIB, MIB, 1, true),
            build::memory(2 * MIB, MIB, 2, true),
        ]))
        .unwrap();
        let slit = parse_slit(&build::slit(3, &[10, 30, 20, 30, 10, 20, 20, 20, 10])).unwrap();
        let topology = Topology::build(0, &[], Some(&srat), Some(&slit));
        assert_eq!(
            topology.fallback_order(NodeId(0)),
            [NodeId(0), NodeId(2), NodeId(1)]
        );
        assert_eq!(
            topology.fallback_order(NodeId(2)),
            [NodeId(2), NodeId(0), NodeId(1)]
        );
    }
}
