//! Host tests of the topology built from synthetic ACPI tables.

use super::tables::build;
use super::tables::slit::parse_slit;
use super::tables::srat::parse_srat;
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

/// A malformed SRAT drops the NUMA layout only, as Linux's `bad_srat()` does: every MADT CPU
/// is kept, on one node, and the SLIT (whose localities are the SRAT's domains) goes with it.
#[test]
fn a_bad_srat_keeps_the_madt_cpus_on_one_node() {
    let (_, slit) = qemu_numa2();
    let mut bad = build::srat(&[build::cpu(0, 0, true), build::cpu(1, 1, true)]);
    bad.push(0);
    bad.push(0); // a subtable that claims zero bytes
    let len = bad.len() as u32;
    bad[4..8].copy_from_slice(&len.to_le_bytes());
    let srat = parse_srat(&bad);
    assert!(srat.is_err(), "the test table must be refused");
    let topology = Topology::from_tables(0, &madt(&[0, 1, 2, 3]), Some(srat), Some(Ok(slit)));
    assert_eq!(topology.cpus.len(), 4);
    assert_eq!(topology.nodes, 1);
    assert!(topology.cpus.iter().all(|cpu| cpu.node == NodeId(0)));
    assert!(!topology.from_srat);
}
