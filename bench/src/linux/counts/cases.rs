//! The cases `bench linux --count-insns` counts on both sides, and how many I/Os a Linux boot
//! runs.

use super::super::run::{self, Group, Plan};
use crate::device::Device;
use crate::device::matrix::{Cell, IoMode};

/// One case counted on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Counted {
    /// The Linux boot (machine and modules) the case runs in.
    pub group: Group,
    /// The table key ([`run::case_key`]).
    pub key: String,
    /// The Linux guest's case word (`harness/linux/init.sh`).
    pub linux_case: String,
    /// Our kernel's workload for the same case.
    pub ours: Ours,
}

/// sensepool's side of a counted case.
#[derive(Clone, Debug, PartialEq)]
pub enum Ours {
    /// `workload=fake-rw` with these arguments (profile `default`).
    FakeRw(String),
    /// `workload=device` with these arguments (profile `virtio-scsi-null`).
    Device(String),
}

/// The counted cases of `groups` (scsi_debug and virtio; the others have none), in boot order.
/// `sense` is our fake-rw's `sense=` (its default, `mempool:2`, when `None`).
pub fn cases(groups: &[Group], plan: &Plan, sense: Option<&str>) -> Vec<Counted> {
    let sense = sense.map_or(String::new(), |mode| format!(" sense={mode}"));
    let mut cases = Vec::new();
    if groups.contains(&Group::ScsiDebug) {
        cases.push(Counted {
            group: Group::ScsiDebug,
            key: run::case_key("scsi_debug", 4096, run::IODEPTH.into(), 1),
            linux_case: "fio:scsi_debug:4096:1:libaio".into(),
            ours: Ours::FakeRw(format!(
                "workload=fake-rw runtime={}s bs=4096 iodepth={} numjobs=1{sense}",
                plan.runtime_secs,
                run::IODEPTH
            )),
        });
    }
    if groups.contains(&Group::Virtio) {
        for iodepth in [run::IODEPTH, 1] {
            let cell = Cell {
                os: harness::guest::Os::Ours,
                device: Device::VirtioScsi,
                io_mode: IoMode::Irq,
                iodepth,
                numjobs: 1,
            };
            cases.push(Counted {
                group: Group::Virtio,
                key: run::case_key("virtio", 4096, iodepth.into(), 1),
                linux_case: format!("fio:virtio:4096:1:libaio:{iodepth}"),
                ours: Ours::Device(cell.kernel_args(&format!("{}s", plan.runtime_secs))),
            });
        }
    }
    cases
}

/// The two I/O counts of the Linux boots.
pub fn number_ios(quick: bool) -> [u64; 2] {
    // The extra I/Os must dwarf what varies between two boots (timer ticks, the scan's
    // timing): 30k I/Os of about 10k instructions each against a few tens of millions.
    if quick {
        [10_000, 40_000]
    } else {
        [20_000, 120_000]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_is_counted_at_both_depths_and_only_when_its_case_runs() {
        let plan = Plan {
            reps: 1,
            runtime_secs: 1,
            dmapool_n: 1,
            quick: true,
        };
        let keys = |groups: &[Group]| -> Vec<String> {
            cases(groups, &plan, None)
                .into_iter()
                .map(|c| c.key)
                .collect()
        };
        assert_eq!(
            keys(&[Group::Virtio, Group::ScsiDebug]),
            [
                "scsi_debug randread bs=4096 qd32 j1",
                "virtio-scsi randread bs=4096 qd32 j1",
                "virtio-scsi randread bs=4096 qd1 j1",
            ]
        );
        assert!(keys(&[Group::Dmapool, Group::Sense]).is_empty());
        let qd1 = &cases(&[Group::Virtio], &plan, None)[1];
        assert_eq!(qd1.linux_case, "fio:virtio:4096:1:libaio:1");
        assert_eq!(
            qd1.ours,
            Ours::Device(
                "workload=device rw=randread bs=4k iodepth=1 numjobs=1 io_mode=irq runtime=1s"
                    .into()
            )
        );
    }
}
