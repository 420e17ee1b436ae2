#![no_main]
//! The firmware's topology tables: SRAT and SLIT through the kernel's own parsers, the MADT
//! through `check_madt` and then the `acpi` crate's entry walker (which trusts the
//! lengths the check accepted), and all three into `Topology::build`.
//!
//! Beyond "no panic": an accepted table's entries all lie inside it (the walker never reads
//! past the table: AddressSanitizer checks every byte, as the table sits alone in its own heap
//! allocation); a refused one names the table and an offset inside it; the topology has the
//! boot CPU first with dense indices, at least one node, a distance for every pair of nodes
//! (10 on the diagonal), nodes below the node count, and a fallback order that is a
//! permutation of the nodes.
use std::pin::Pin;

use acpi::madt::{Madt, MadtEntry};
use libfuzzer_sys::fuzz_target;
use sensepool_fuzz::bytes::Script;
use sensepool_fuzz::platform::topology::tables::madt::check_madt;
use sensepool_fuzz::platform::topology::tables::slit::parse_slit;
use sensepool_fuzz::platform::topology::tables::srat::parse_srat;
use sensepool_fuzz::platform::topology::tables::TableError;
use sensepool_fuzz::platform::topology::{MadtCpu, Topology};

/// The input, framed so seeds can be real tables: the boot CPU's APIC id, a flags byte (bit
/// 0: write each table's real length into its header, so most inputs get past the length
/// check to the subtables; bits 1 and 2: an SRAT, a SLIT), then the MADT, SRAT and SLIT, each
/// behind a little-endian `u16` length (the last one takes the rest).
struct Input {
    bsp_apic_id: u8,
    fix_lengths: bool,
    madt: Vec<u8>,
    srat: Option<Vec<u8>>,
    slit: Option<Vec<u8>>,
}

impl Input {
    fn parse(data: &[u8]) -> Self {
        let mut script = Script::new(data);
        let bsp_apic_id = script.u8();
        let flags = script.u8();
        let mut table = |last: bool| {
            let len = if last {
                usize::MAX
            } else {
                usize::from(script.u16())
            };
            script.take(len).to_vec()
        };
        let madt = table(false);
        let srat = table(false);
        let slit = table(true);
        Input {
            bsp_apic_id,
            fix_lengths: flags & 1 != 0,
            madt,
            srat: (flags & 2 != 0).then_some(srat),
            slit: (flags & 4 != 0).then_some(slit),
        }
    }
}

fn fix(sig: &[u8; 4], mut table: Vec<u8>, fix_lengths: bool) -> Vec<u8> {
    if fix_lengths && table.len() >= 8 {
        table[..4].copy_from_slice(sig);
        let len = table.len() as u32;
        table[4..8].copy_from_slice(&len.to_le_bytes());
    }
    table
}

fn check_error(err: &TableError, table: &str, len: usize) {
    let text = err.to_string();
    assert!(text.starts_with(table), "{text}: names its table");
    if let TableError::BadSubtable { offset, .. } = err {
        assert!(*offset < len, "{text}: offset inside the table");
    }
}

/// The MADT's processors, walked the way the kernel's `acpi::discover` does.
fn madt_cpus(bytes: &[u8]) -> Option<Vec<MadtCpu>> {
    if let Err(err) = check_madt(bytes) {
        check_error(&err, "APIC", bytes.len());
        return None;
    }
    let declared = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    // Exactly the declared bytes in their own allocation: a read past them is caught.
    let table: Box<[u8]> = bytes[..declared].into();
    // SAFETY: `Madt` is `repr(C, packed)` (alignment 1) and `table` holds at least its 44
    // bytes (`check_madt` checked the length); the walker reads `header.length` bytes,
    // which is `table.len()`.
    let madt = unsafe { Pin::new_unchecked(&*(table.as_ptr() as *const Madt)) };
    let mut cpus = Vec::new();
    for entry in madt.entries() {
        match entry {
            MadtEntry::LocalApic(lapic) => cpus.push(MadtCpu {
                apic_id: u32::from(lapic.apic_id),
                usable: lapic.flags & 0b11 != 0,
            }),
            MadtEntry::LocalX2Apic(x2apic) => cpus.push(MadtCpu {
                apic_id: x2apic.x2apic_id,
                usable: x2apic.flags & 0b11 != 0,
            }),
            _ => {}
        }
    }
    Some(cpus)
}

fuzz_target!(|data: &[u8]| {
    let input = Input::parse(data);
    let madt = fix(b"APIC", input.madt, input.fix_lengths);
    let cpus = madt_cpus(&madt).unwrap_or_default();
    let srat = input
        .srat
        .map(|t| fix(b"SRAT", t, input.fix_lengths))
        .and_then(|bytes| {
            parse_srat(&bytes)
                .map_err(|err| check_error(&err, "SRAT", bytes.len()))
                .ok()
        });
    let slit = input
        .slit
        .map(|t| fix(b"SLIT", t, input.fix_lengths))
        .and_then(|bytes| {
            let slit = parse_slit(&bytes)
                .map_err(|err| check_error(&err, "SLIT", bytes.len()))
                .ok()?;
            assert_eq!(
                slit.distance.len(),
                slit.localities * slit.localities,
                "a square matrix"
            );
            Some(slit)
        });
    let bsp = u32::from(input.bsp_apic_id);
    let topology = Topology::build(bsp, &cpus, srat.as_ref(), slit.as_ref());
    assert_eq!(topology.cpus[0].apic_id, bsp, "the boot CPU first");
    for (index, cpu) in topology.cpus.iter().enumerate() {
        assert_eq!(cpu.index, index, "dense indices");
        assert!(
            cpu.node.0 < topology.nodes,
            "CPU on node {} of {}",
            cpu.node.0,
            topology.nodes
        );
    }
    assert!(topology.nodes >= 1);
    for range in &topology.memory {
        assert!(range.node.0 < topology.nodes);
        // An SRAT entry at the very top (base 2^64 - 1) saturates to an empty range, which
        // covers nothing; a range never runs backwards.
        assert!(range.range.start <= range.range.end, "{range:?}");
    }
    let nodes: Vec<_> = (0..topology.nodes.min(64)).map(pools::NodeId).collect();
    for &from in &nodes {
        assert_eq!(topology.distance(from, from), 10, "local distance");
        let mut order = topology.fallback_order(from);
        assert_eq!(order[0], from, "a node falls back to itself first");
        order.sort();
        assert_eq!(
            order.len(),
            usize::from(topology.nodes),
            "fallback covers every node"
        );
        order.dedup();
        assert_eq!(
            order.len(),
            usize::from(topology.nodes),
            "fallback order is a permutation"
        );
    }
    let ram = [sensepool_fuzz::memory::memmap::PhysRange {
        start: 0x10_0000,
        end: 0x1_4000_0000,
    }];
    let pieces = topology.split_by_node(&ram);
    let covered: u64 = pieces.iter().map(|p| p.range.len_bytes()).sum();
    assert_eq!(
        covered,
        ram[0].len_bytes(),
        "split_by_node keeps every byte"
    );
});
