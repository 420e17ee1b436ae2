//! The console lines a boot prints about itself rather than about a workload: `BOOT {json}`
//! ([`BootResult`], once a boot reaches its first workload) and `TEST-LIST {json}`
//! ([`TestListEntry`], one per entry of the kernel's test table on a `test=list` boot).

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// The `BOOT` line: what the boot found and how long it took to reach the first workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootResult {
    /// The kernel's crate version.
    pub kernel: String,
    /// Guest TSC time from reset to the first workload, to the microsecond.
    pub tsc_ms_to_first_workload: f64,
    /// From the PVH entry stub to the first Rust code, to the microsecond.
    pub stub_to_rust_ms: f64,
    /// The calibrated TSC rate.
    pub tsc_hz: u64,
    /// RAM the firmware's memory map reports.
    pub ram_mib: u64,
    /// RAM given to the heap.
    pub heap_mib: u64,
    /// RAM set aside for DMA frames.
    pub dma_mib: u64,
    /// CPUs online (the BSP included).
    pub cpus_online: u64,
    /// NUMA nodes.
    pub nodes: u64,
    /// Time the application processors took to come online, to the microsecond.
    pub ap_bringup_ms: f64,
    /// PCI functions found.
    pub pci_functions: u64,
}

/// One `TEST-LIST` line: a guest test of the kernel's table and how it must end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestListEntry {
    /// The name `test=` takes.
    pub name: String,
    /// `pass`, or the report prefix the boot must end with (`FAULT #PF`, `PANIC `).
    pub expect: String,
}

/// `{tag} {json}`: a machine line other than `RESULT` (`BOOT`, `TEST-LIST`, `VERIFY-PLAN`),
/// or, should serialization fail, a line saying so that no reader takes for one.
pub fn tagged_line(tag: &str, value: &impl Serialize) -> String {
    match serde_json::to_string(value) {
        Ok(json) => alloc::format!("{tag} {json}"),
        Err(error) => alloc::format!("{tag}-ERROR: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    /// The line as the kernel built it by hand before it was typed.
    const OLD_BOOT: &str = r#"{"kernel":"0.1.0","tsc_ms_to_first_workload":12.345,"stub_to_rust_ms":0.012,"tsc_hz":2400000000,"ram_mib":512,"heap_mib":64,"dma_mib":32,"cpus_online":2,"nodes":1,"ap_bringup_ms":1.500,"pci_functions":7}"#;

    #[test]
    fn the_hand_built_boot_line_reads_and_prints_in_its_order() {
        let boot: BootResult = serde_json::from_str(OLD_BOOT).unwrap();
        assert_eq!(boot.cpus_online, 2);
        assert_eq!(boot.tsc_ms_to_first_workload, 12.345);
        let line = tagged_line("BOOT", &boot);
        assert!(
            line.starts_with(r#"BOOT {"kernel":"0.1.0","tsc_ms_to_first_workload":12.345,"#),
            "{line}"
        );
        assert!(
            line.ends_with(r#""ap_bringup_ms":1.5,"pci_functions":7}"#),
            "{line}"
        );
        let missing = OLD_BOOT.replace(r#""cpus_online":2,"#, "");
        let error = serde_json::from_str::<BootResult>(&missing)
            .unwrap_err()
            .to_string();
        assert!(error.contains("cpus_online"), "{error}");
    }

    #[test]
    fn a_test_list_line_reads_back() {
        let entry = TestListEntry {
            name: "fault-pf".into(),
            expect: "FAULT #PF".into(),
        };
        let line = tagged_line("TEST-LIST", &entry);
        assert_eq!(
            line,
            r#"TEST-LIST {"name":"fault-pf","expect":"FAULT #PF"}"#
        );
        let json = line.strip_prefix("TEST-LIST ").unwrap();
        assert_eq!(serde_json::from_str::<TestListEntry>(json).unwrap(), entry);
    }
}
