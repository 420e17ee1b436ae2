//! The cells of the device matrix, the order a round boots them in, and what the rounds add up
//! to: per-cell medians with their min–max spread and the ratios within a round.
//!
//! Pure logic over typed runs ([`DeviceRun`]), so the rotation and the statistics are
//! host-tested.

use super::Device;
use super::record::{DeviceRecord, DeviceRun};
use harness::guest::Os;
use stats::order;

/// How the guest waits for completions (the kernel's `io_mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IoMode {
    /// Busy-poll the completion queue.
    Poll,
    /// Enable the completion interrupt and halt until it arrives.
    Irq,
    /// Poll for `poll_us=` after submitting, then halt on the interrupt.
    Hybrid,
}

impl IoMode {
    /// The value of the guest's `io_mode=` key.
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Poll => "poll",
            IoMode::Irq => "irq",
            IoMode::Hybrid => "hybrid",
        }
    }
}

/// All three, in table order.
pub const IO_MODES: [IoMode; 3] = [IoMode::Poll, IoMode::Irq, IoMode::Hybrid];
/// The iodepths measured.
pub const IODEPTHS: [u32; 2] = [1, 32];
/// The job counts measured; every cell boots with [`SMP`] vCPUs so the two are comparable.
pub const NUMJOBS: [u32; 2] = [1, 2];
/// vCPUs of every boot.
pub const SMP: u32 = 2;

/// One configuration of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The kernel the cell boots (`--os`).
    pub os: Os,
    pub device: Device,
    pub io_mode: IoMode,
    pub iodepth: u32,
    pub numjobs: u32,
}

impl Cell {
    /// The guest command line of this cell.
    pub fn kernel_args(&self, runtime: &str) -> String {
        format!(
            "workload=device rw=randread bs=4k iodepth={} numjobs={} io_mode={} runtime={runtime}",
            self.iodepth,
            self.numjobs,
            self.io_mode.name()
        )
    }

    /// `hermit ` for a cell on Hermit, nothing on our kernel (the labels before `--os`).
    pub fn kernel_prefix(&self) -> String {
        match self.os {
            Os::Ours => String::new(),
            os => format!("{os} "),
        }
    }

    /// `virtio-scsi irq qd32 j2` on our kernel, `hermit virtio-scsi irq qd32 j2` on Hermit.
    pub fn label(&self) -> String {
        format!(
            "{}{} {} qd{} j{}",
            self.kernel_prefix(),
            self.device.name(),
            self.io_mode.name(),
            self.iodepth,
            self.numjobs
        )
    }

    /// Whether `run` was booted in this cell.
    pub fn matches(&self, run: &DeviceRun) -> bool {
        run.cell()
            == (
                self.os,
                self.device.name(),
                self.io_mode.name(),
                u64::from(self.iodepth),
                u64::from(self.numjobs),
            )
    }

    /// The same cell with another io_mode or job count.
    pub fn with(&self, io_mode: IoMode, numjobs: u32) -> Cell {
        Cell {
            io_mode,
            numjobs,
            ..*self
        }
    }

    /// The same cell on another kernel.
    pub fn on(&self, os: Os) -> Cell {
        Cell { os, ..*self }
    }
}

/// The comparison groups: one per (device, iodepth), holding its io_mode × numjobs × kernel
/// cells. Ratios (numjobs, io_mode, Hermit / ours) are taken inside a group, so a round boots a
/// group's cells back to back.
pub fn groups(devices: &[Device], io_modes: &[IoMode], oses: &[Os]) -> Vec<Vec<Cell>> {
    let mut groups = Vec::new();
    for &device in devices {
        for iodepth in IODEPTHS {
            let mut group = Vec::new();
            for &io_mode in io_modes {
                for numjobs in NUMJOBS {
                    for &os in oses {
                        group.push(Cell {
                            os,
                            device,
                            io_mode,
                            iodepth,
                            numjobs,
                        });
                    }
                }
            }
            groups.push(group);
        }
    }
    groups
}

/// The boot order of round `round`: the groups rotated by `round`, and inside each group its
/// cells rotated by `round`, so over as many rounds as a group has cells every cell takes every
/// position (drift within a round, a build starting on the shared host, biases no cell).
pub fn round_order(groups: &[Vec<Cell>], round: usize) -> Vec<Cell> {
    order::rotated(groups.len(), round)
        .flat_map(|index| {
            let group = &groups[index];
            order::rotated(group.len(), round).map(move |position| group[position])
        })
        .collect()
}

/// Median, minimum and maximum of some positive figures ([`stats::Spread`]).
pub type Spread = stats::Spread<f64>;

/// A figure of a measured run (IOPS, a latency, `busy_pct`, QEMU's host CPUs).
pub type Figure = fn(&DeviceRecord) -> Option<f64>;

/// The run's IOPS.
pub fn iops(r: &DeviceRecord) -> Option<f64> {
    Some(r.result.io.iops as f64)
}

/// How busy the guest's CPUs were over the job, %.
pub fn busy_pct(r: &DeviceRecord) -> Option<f64> {
    Some(r.result.io.busy_pct)
}

/// The host CPUs QEMU used over the job.
pub fn qemu_host_cpus(r: &DeviceRecord) -> Option<f64> {
    r.qemu_host_cpus
}

/// The guest's working instructions per I/O (a counted run).
pub fn insns_per_op(r: &DeviceRecord) -> Option<f64> {
    r.insns.insns_per_op
}

/// Its instructions per I/O while waiting (a counted run).
pub fn insns_waiting_per_op(r: &DeviceRecord) -> Option<f64> {
    r.insns.insns_waiting_per_op
}

/// Doorbell writes per I/O (a counted run).
pub fn notifies_per_op(r: &DeviceRecord) -> Option<f64> {
    r.insns.notifies_per_op
}

/// MMIO accesses and port instructions per I/O, working and waiting (a run counted with the
/// plugin's `io=on`).
pub fn device_accesses_per_op(r: &DeviceRecord) -> Option<f64> {
    let i = &r.insns;
    Some(i.mmio_per_op? + i.mmio_waiting_per_op? + i.pio_per_op? + i.pio_waiting_per_op?)
}

/// Completion interrupts per I/O.
pub fn irqs_per_op(r: &DeviceRecord) -> Option<f64> {
    let io = &r.result.io;
    let ops = io.ios + io.errors;
    (ops > 0).then(|| io.irq.irq_interrupts as f64 / ops as f64)
}

/// The successful runs of `cell`.
pub fn runs<'a>(runs: &'a [DeviceRun], cell: &'a Cell) -> impl Iterator<Item = &'a DeviceRecord> {
    runs.iter()
        .filter(move |run| cell.matches(run))
        .filter_map(DeviceRun::measured)
}

/// `figure` over the successful runs of `cell`.
pub fn spread(all: &[DeviceRun], cell: &Cell, figure: Figure) -> Option<Spread> {
    benchkit::finite_spread(runs(all, cell).filter_map(figure))
}

/// `figure` of `top` over `figure` of `bottom`, taken within each round that measured both.
pub fn ratio(all: &[DeviceRun], top: &Cell, bottom: &Cell, figure: Figure) -> Option<Spread> {
    let in_round =
        |cell: &Cell, round: u32| runs(all, cell).find(|r| r.round == round).and_then(figure);
    let mut rounds: Vec<u32> = runs(all, top).map(|r| r.round).collect();
    rounds.dedup();
    let pairs = rounds
        .into_iter()
        .filter_map(|round| Some((in_round(top, round)?, in_round(bottom, round)?)));
    benchkit::finite_spread(stats::ratios(pairs))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::device::record::FailedRun;

    fn cell(device: Device, io_mode: IoMode, iodepth: u32, numjobs: u32) -> Cell {
        Cell {
            os: Os::Ours,
            device,
            io_mode,
            iodepth,
            numjobs,
        }
    }

    #[test]
    fn the_matrix_has_every_combination_once() {
        let groups = groups(
            &[Device::VirtioScsi, Device::Mptsas],
            &IO_MODES,
            &[Os::Ours],
        );
        let cells: Vec<Cell> = groups.iter().flatten().copied().collect();
        assert_eq!(cells.len(), 2 * 3 * 2 * 2);
        for (index, a) in cells.iter().enumerate() {
            assert!(!cells[index + 1..].contains(a), "{a:?} twice");
        }
        assert_eq!(
            cells[0].kernel_args("2s"),
            "workload=device rw=randread bs=4k iodepth=1 numjobs=1 io_mode=poll runtime=2s"
        );
    }

    #[test]
    fn both_kernels_share_each_group_and_take_turns_first() {
        let groups = groups(&[Device::VirtioScsi], &IO_MODES, &[Os::Ours, Os::Hermit]);
        assert_eq!(groups.len(), 2, "one group per iodepth");
        let cells: Vec<Cell> = groups.iter().flatten().copied().collect();
        assert_eq!(cells.len(), 2 * 3 * 2 * 2);
        for cell in cells.iter().filter(|c| c.os == Os::Ours) {
            assert!(cells.contains(&cell.on(Os::Hermit)), "{cell:?} on Hermit");
        }
        let hermit = cells.iter().find(|c| c.os == Os::Hermit).unwrap();
        assert_eq!(hermit.label(), "hermit virtio-scsi poll qd1 j1");
        assert_eq!(hermit.on(Os::Ours).label(), "virtio-scsi poll qd1 j1");
        assert_eq!(
            hermit.kernel_args("2s"),
            hermit.on(Os::Ours).kernel_args("2s")
        );
        // Which kernel boots a cell first changes from one round to the next.
        let first = |round| {
            let order = round_order(&groups, round);
            let position = |os| order.iter().position(|c| *c == hermit.on(os)).unwrap();
            position(Os::Ours) < position(Os::Hermit)
        };
        assert_ne!(first(0), first(1));
    }

    #[test]
    fn rotation_moves_every_cell_through_every_position() {
        let groups = groups(
            &[Device::VirtioScsi, Device::Mptsas],
            &IO_MODES,
            &[Os::Ours],
        );
        let group_len = groups[0].len();
        let orders: Vec<Vec<Cell>> = (0..group_len).map(|r| round_order(&groups, r)).collect();
        for order in &orders {
            assert_eq!(order.len(), 24, "each round boots every cell once");
            for cell in groups.iter().flatten() {
                assert_eq!(order.iter().filter(|c| *c == cell).count(), 1);
            }
        }
        // Within its group, a cell's position takes every value over group_len rounds.
        for cell in &groups[0] {
            let mut positions: Vec<usize> = orders
                .iter()
                .map(|order| order.iter().position(|c| c == cell).unwrap() % group_len)
                .collect();
            positions.sort_unstable();
            assert_eq!(positions, (0..group_len).collect::<Vec<_>>());
        }
        // A group's cells stay back to back.
        let first = round_order(&groups, 1);
        let key = |c: &Cell| (c.device, c.iodepth);
        assert!(
            first
                .chunks(group_len)
                .all(|chunk| chunk.iter().all(|c| key(c) == key(&chunk[0])))
        );
    }

    #[test]
    fn spreads_take_the_middle_and_the_ends() {
        let s = benchkit::finite_spread([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.count), (2.0, 1.0, 3.0, 3));
        assert_eq!(benchkit::finite_spread([4.0, 1.0]).unwrap().median, 2.5);
        assert_eq!(benchkit::finite_spread([f64::NAN]), None);
        assert_eq!(benchkit::finite_spread([]), None);
    }

    /// A measured run of `cell` in `round` with `iops`.
    pub fn measured(cell: &Cell, round: u32, iops: u64) -> DeviceRun {
        let mut record = DeviceRecord {
            os: cell.os,
            round,
            smp: SMP,
            ..DeviceRecord::default()
        };
        record.result.device = cell.device.name().into();
        record.result.io.io_mode = cell.io_mode.name().into();
        record.result.io.iodepth = u64::from(cell.iodepth);
        record.result.io.numjobs = u64::from(cell.numjobs);
        record.result.io.iops = iops;
        DeviceRun::Measured(Box::new(record))
    }

    /// A failed boot of `cell` in `round`.
    pub fn failed(cell: &Cell, round: u32) -> DeviceRun {
        DeviceRun::Failed(FailedRun {
            os: cell.os,
            error: "guest failed".into(),
            device: cell.device.name().into(),
            io_mode: cell.io_mode.name().into(),
            iodepth: u64::from(cell.iodepth),
            numjobs: u64::from(cell.numjobs),
            round,
            ..FailedRun::default()
        })
    }

    fn iops(record: &DeviceRecord) -> Option<f64> {
        Some(record.result.io.iops as f64)
    }

    #[test]
    fn ratios_pair_runs_of_the_same_round_and_skip_failures() {
        let one = cell(Device::VirtioScsi, IoMode::Irq, 32, 1);
        let two = one.with(IoMode::Irq, 2);
        let mut records: Vec<DeviceRun> = [
            (one, 0, 100),
            (two, 0, 180),
            (one, 1, 50),
            (two, 1, 100),
            (two, 2, 999), // no numjobs=1 partner in round 2
        ]
        .iter()
        .map(|(c, round, iops)| measured(c, *round, *iops))
        .collect();
        records.push(failed(&one.with(IoMode::Poll, 1), 1));
        let r = ratio(&records, &two, &one, iops).unwrap();
        assert_eq!((r.count, r.min, r.max), (2, 1.8, 2.0));
        assert!((r.median - 1.9).abs() < 1e-12);
        assert_eq!(spread(&records, &two, iops).unwrap().count, 3);
        assert_eq!(spread(&records, &one.with(IoMode::Poll, 1), iops), None);
    }
}
