//! Everything that touches the x86-64 machine directly: boot stub, descriptor tables, paging,
//! exception entry and reporting, the PVH start info, the UART, the TSC/PIT clock, the CMOS clock, RDRAND and the
//! generator behind getrandom, QEMU's fw_cfg ports and the debug-exit port. Only built for the bare-metal target; the rest of the kernel sees small safe
//! functions.

pub mod apic;
pub mod boot;
pub mod exit;
pub mod fault;
pub mod fw_cfg;
pub mod gdt;
pub mod idle;
pub mod idt;
pub mod insn_marker;
pub mod irq;
pub mod paging;
pub mod pvh;
pub mod random;
pub mod rtc;
pub mod serial;
pub mod time;
pub mod trampoline;
