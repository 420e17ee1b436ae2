//! Instruction-count markers, which live in the guest↔host contract ([`protocol::insn_marker`])
//! so that the Hermit build of the workloads (`hermit/app`) brackets its windows with the same
//! instructions.

pub use protocol::insn_marker::{Counted, begin, empty, end, notify, poll, publish};
