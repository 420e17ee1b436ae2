//! A sense-reserve cell as xtask keeps it: the guest's own type
//! ([`protocol::result::SenseReserveResult`], what the kernel and the host example print), read
//! once from its line into a [`Run`] with what xtask adds around a boot (the accelerator, the
//! instruction counts). Reading a line fails, naming the field, when the guest and xtask
//! disagree; the table's columns are checked against the type by a test.

use protocol::result::{CellVerdict, SenseReserveResult};

use benchkit::Run;

/// One cell of the matrix and xtask's notes on it.
pub type SenseReserveRecord = Run<SenseReserveResult>;

/// What the verdicts and figures ask of a cell.
pub trait Cell {
    /// The case's name.
    fn case(&self) -> &str;
    /// The sense mode's name.
    fn mode(&self) -> &str;
    /// The slab cache under the sense allocator (`slab` or `slub`).
    fn slab(&self) -> &str;
    /// How the cell ended.
    fn verdict(&self) -> CellVerdict;
    /// It ran to the end of every round with no failed command.
    fn completes(&self) -> bool;
}

impl Cell for SenseReserveRecord {
    fn case(&self) -> &str {
        &self.result.case
    }

    fn mode(&self) -> &str {
        &self.result.sense_mode
    }

    fn slab(&self) -> &str {
        &self.result.sense_slab
    }

    fn verdict(&self) -> CellVerdict {
        self.result.verdict
    }

    fn completes(&self) -> bool {
        self.result.verdict == CellVerdict::Ok && self.result.failed == 0
    }
}
