//! numa results as xtask keeps them: the guest's line ([`protocol::result::NumaResult`], what
//! the kernel prints), read once into a [`Run`] with what xtask adds around a boot (the profile,
//! the host CPUs QEMU got, the instruction counts, whose `insns_ratio` is `insns_per_op` over
//! the shared mode's line of the same kind and boot). Reading a line fails, naming the field,
//! when the guest and xtask disagree; the tables' columns are checked against it by a test.

use protocol::result::NumaResult;

use benchkit::Run;

/// One `workload=numa` line of a boot and xtask's notes on it.
pub type NumaRecord = Run<NumaResult>;

/// Whether `a` and `b` come from the same boot (profile and block size).
pub fn same_boot(a: &NumaRecord, b: &NumaRecord) -> bool {
    a.context.profile == b.context.profile && a.result.size() == b.result.size()
}
