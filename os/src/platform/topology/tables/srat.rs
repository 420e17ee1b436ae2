//! The SRAT (ACPI 6.5 §5.2.16): which proximity domain each processor and memory range is in.
//! Used subtables: Processor Local APIC Affinity (type 0, 16 bytes), Memory Affinity (type 1,
//! 40 bytes) and Processor Local x2APIC Affinity (type 2, 24 bytes); the others (GICC, GIC ITS,
//! generic initiator, ...) are skipped.
//!
//! Proximity domains are arbitrary 32-bit numbers, and the topology turns each distinct one into
//! a node with a row and a column of its distance matrix. The table's size bounds the number of
//! entries, not that matrix: 65,535 one-CPU entries (1 MiB of SRAT) would ask for a 4 GiB
//! matrix. So an SRAT naming more than [`MAX_NODES`] domains is refused, as Linux refuses one
//! with more than `MAX_NUMNODES` ("SRAT: Too many proximity domains") and runs as one node.

use alloc::vec::Vec;

use super::{SRAT_ENTRIES_AT, TableError, subtables, table_body, u32_at, u64_at};

/// Most NUMA nodes (distinct proximity domains in enabled SRAT entries): Linux's
/// `MAX_NUMNODES` on x86-64 with its default `CONFIG_NODES_SHIFT` of 6.
pub const MAX_NODES: usize = 64;

/// One processor affinity entry (types 0 and 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuAffinity {
    /// Local APIC id (xAPIC: 8 bits; x2APIC: 32 bits).
    pub apic_id: u32,
    /// ACPI proximity domain.
    pub domain: u32,
    /// Flags bit 0.
    pub enabled: bool,
}

/// One memory affinity entry (type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryAffinity {
    /// First byte.
    pub base: u64,
    /// Length in bytes.
    pub len_bytes: u64,
    /// ACPI proximity domain.
    pub domain: u32,
    /// Flags bit 0.
    pub enabled: bool,
    /// Flags bit 1.
    pub hot_pluggable: bool,
}

/// The parts of the SRAT this kernel uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Srat {
    /// Processor affinities in table order.
    pub cpus: Vec<CpuAffinity>,
    /// Memory affinities in table order.
    pub memory: Vec<MemoryAffinity>,
}

/// Parses an SRAT (the whole table, header included).
pub fn parse_srat(bytes: &[u8]) -> Result<Srat, TableError> {
    let body = table_body("SRAT", bytes, SRAT_ENTRIES_AT)?;
    let mut srat = Srat::default();
    let mut domains = Domains::default();
    for entry in subtables("SRAT", body, SRAT_ENTRIES_AT) {
        let (offset, entry_type, sub) = entry?;
        let bad = TableError::BadSubtable {
            table: "SRAT",
            offset,
            entry_type,
            len: sub.len() as u8,
        };
        match entry_type {
            0 | 2 => {
                let decode = if entry_type == 0 {
                    processor_affinity
                } else {
                    x2apic_affinity
                };
                let cpu = decode(sub).ok_or(bad)?;
                domains.note(cpu.domain, cpu.enabled)?;
                srat.cpus.push(cpu);
            }
            1 => {
                let memory = memory_affinity(sub).ok_or(bad)?;
                domains.note(memory.domain, memory.enabled)?;
                srat.memory.push(memory);
            }
            _ => {}
        }
    }
    Ok(srat)
}

/// A Processor Local APIC/SAPIC Affinity structure (type 0, 16 bytes; ACPI 6.5 §5.2.16.1):
/// the domain's low byte at 2, its high bytes at 9..12. `None` when it is too short.
fn processor_affinity(sub: &[u8]) -> Option<CpuAffinity> {
    if sub.len() < 16 {
        return None;
    }
    Some(CpuAffinity {
        apic_id: u32::from(sub[3]),
        domain: u32::from(sub[2])
            | u32::from(sub[9]) << 8
            | u32::from(sub[10]) << 16
            | u32::from(sub[11]) << 24,
        enabled: u32_at(sub, 4) & 1 != 0,
    })
}

/// A Memory Affinity structure (type 1, 40 bytes; ACPI 6.5 §5.2.16.2). `None` when it is too
/// short.
fn memory_affinity(sub: &[u8]) -> Option<MemoryAffinity> {
    if sub.len() < 40 {
        return None;
    }
    let flags = u32_at(sub, 28);
    Some(MemoryAffinity {
        base: u64_at(sub, 8),
        len_bytes: u64_at(sub, 16),
        domain: u32_at(sub, 2),
        enabled: flags & 1 != 0,
        hot_pluggable: flags & 2 != 0,
    })
}

/// A Processor Local x2APIC Affinity structure (type 2, 24 bytes; ACPI 6.5 §5.2.16.3). `None`
/// when it is too short.
fn x2apic_affinity(sub: &[u8]) -> Option<CpuAffinity> {
    if sub.len() < 24 {
        return None;
    }
    Some(CpuAffinity {
        apic_id: u32_at(sub, 8),
        domain: u32_at(sub, 4),
        enabled: u32_at(sub, 12) & 1 != 0,
    })
}

/// The distinct domains of enabled entries seen so far, sorted; refuses one past [`MAX_NODES`].
#[derive(Default)]
struct Domains(Vec<u32>);

impl Domains {
    fn note(&mut self, domain: u32, enabled: bool) -> Result<(), TableError> {
        if let (true, Err(at)) = (enabled, self.0.binary_search(&domain)) {
            if self.0.len() == MAX_NODES {
                return Err(TableError::TooManyDomains {
                    domain,
                    max: MAX_NODES,
                });
            }
            self.0.insert(at, domain);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::build::*;
    use super::*;

    #[test]
    fn srat_cpus_and_memory() {
        let mut x2 = alloc::vec![2, 24, 0, 0];
        x2.extend_from_slice(&7u32.to_le_bytes());
        x2.extend_from_slice(&300u32.to_le_bytes());
        x2.extend_from_slice(&1u32.to_le_bytes());
        x2.extend_from_slice(&[0; 8]);
        let bytes = srat(&[
            cpu(0, 0, true),
            cpu(1, 0x0102_0301, true),
            memory(0, 0xa_0000, 0, true),
            memory(0x1000_0000, 0x1000_0000, 1, true),
            alloc::vec![3, 8, 0, 0, 0, 0, 0, 0], // unknown type: skipped
            x2,
        ]);
        let parsed = parse_srat(&bytes).unwrap();
        assert_eq!(
            parsed.cpus,
            [
                CpuAffinity {
                    apic_id: 0,
                    domain: 0,
                    enabled: true
                },
                CpuAffinity {
                    apic_id: 1,
                    domain: 0x0102_0301,
                    enabled: true
                },
                CpuAffinity {
                    apic_id: 300,
                    domain: 7,
                    enabled: true
                },
            ]
        );
        assert_eq!(parsed.memory.len(), 2);
        assert_eq!(parsed.memory[1].base, 0x1000_0000);
        assert_eq!(parsed.memory[1].len_bytes, 0x1000_0000);
        assert_eq!(parsed.memory[1].domain, 1);
        assert!(parsed.memory[1].enabled && !parsed.memory[1].hot_pluggable);
    }

    #[test]
    fn bad_subtables_are_errors() {
        let zero_len = srat(&[alloc::vec![1, 0]]);
        assert!(matches!(
            parse_srat(&zero_len),
            Err(TableError::BadSubtable {
                offset: 48,
                len: 0,
                ..
            })
        ));
        let short_memory = srat(&[alloc::vec![1, 8, 0, 0, 0, 0, 0, 0]]);
        assert!(matches!(
            parse_srat(&short_memory),
            Err(TableError::BadSubtable { entry_type: 1, .. })
        ));
        let mut overrun = srat(&[cpu(0, 0, true)]);
        overrun[49] = 40;
        assert!(parse_srat(&overrun).is_err());
        let mut lying = srat(&[]);
        lying[4] = 200;
        assert!(matches!(
            parse_srat(&lying),
            Err(TableError::Truncated { .. })
        ));
        assert!(parse_srat(&[0; 10]).is_err());
    }

    /// Distinct proximity domains become nodes, each with a row and a column of the topology's
    /// distance matrix, and the table's size does not bound them: 65,535 one-CPU entries (1 MiB)
    /// would ask for a 4 GiB matrix. One domain past `MAX_NODES` is refused; a domain named
    /// again and the domains of disabled entries are not counted.
    #[test]
    fn more_domains_than_nodes_are_an_error() {
        let max = MAX_NODES as u32;
        let mut entries: Vec<Vec<u8>> = (0..max).map(|d| cpu(0, d * 1000, true)).collect();
        entries.push(memory(0, 1 << 20, 0, true));
        entries.push(cpu(1, 5_000_000, false));
        entries.push(memory(1 << 20, 1 << 20, 6_000_000, false));
        let parsed = parse_srat(&srat(&entries)).unwrap();
        assert_eq!(parsed.cpus.len(), MAX_NODES + 1);
        entries.push(memory(2 << 20, 1 << 20, 7_000_000, true));
        let err = parse_srat(&srat(&entries)).unwrap_err();
        assert_eq!(
            err,
            TableError::TooManyDomains {
                domain: 7_000_000,
                max: MAX_NODES
            }
        );
        assert!(
            err.to_string()
                .starts_with("SRAT: proximity domain 7000000"),
            "{err}"
        );
        let wide: Vec<Vec<u8>> = (0..=u32::from(u16::MAX)).map(|d| cpu(0, d, true)).collect();
        assert!(parse_srat(&srat(&wide)).is_err());
    }
}
