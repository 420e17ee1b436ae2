//! `cargo xtask bench NAME`: which scenario benchmarks there are, as the command line names
//! them, and the one dispatch from a name to its module's `run`.

use harness::error::Result;

/// One scenario benchmark with its options.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Random 4 KiB reads at iodepth 1 and 32 through virtio-scsi and/or the LSI SAS1068 to a
    /// QEMU null-co disk (IOPS, mean and p99 latency).
    Device(crate::device::Options),
    /// The mpt3sas chain-pool pattern on the legacy and scalable dmapool.
    Dmapool(crate::dmapool::Options),
    /// fio-style random I/O through the midlayer to scsi_debug with fake_rw=1 (IOPS, latency,
    /// sense allocator statistics; numjobs 1 and 2 at --smp 2 for the scaling factor).
    FakeRw(crate::fake_rw::Options),
    /// The same workloads on stock Debian kernels (6.1 and 6.12) beside sensepool's, in the same
    /// QEMU: scsi_debug fake_rw and virtio-scsi with fio, and the mpt3sas dmapool pattern.
    Linux(crate::linux::Options),
    /// Sense buffers from slab vs mempool:2 vs prealloc (can_queue=1519), alternating.
    SenseReserve(crate::sense_reserve::Options),
    /// A dmapool alloc/free storm from every CPU: one shared pool vs per-node pools in the
    /// numa2x2, numa2, numa4x1 and numa1x4 profiles, with each pool's lock contention.
    Numa(crate::numa::Options),
    /// Sequential and random 4 KiB (and 1 MiB) reads from the host through the guest's NBD
    /// server over QEMU user networking (informational).
    Nbd(crate::nbd::Options),
}

/// Runs the benchmark `command` names; its table, JSON and plot are its module's.
pub fn run(command: &Command) -> Result<()> {
    match command {
        Command::Device(options) => crate::device::run(options),
        Command::Dmapool(options) => crate::dmapool::run(options),
        Command::FakeRw(options) if crate::fake_rw::compares_kernels(options) => {
            crate::fake_rw_os::run(options)
        }
        Command::FakeRw(options) if options.sense.is_some() => crate::fake_rw_modes::run(options),
        Command::FakeRw(options) => crate::fake_rw::run(options),
        Command::Linux(options) => crate::linux::run(options),
        Command::SenseReserve(options) => crate::sense_reserve::run(options),
        Command::Numa(options) => crate::numa::run(options),
        Command::Nbd(options) => crate::nbd::run(options),
    }
}
