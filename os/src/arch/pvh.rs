//! The PVH `hvm_start_info` block (Xen public header `arch-x86/hvm/start_info.h`).
//!
//! The loader leaves it, the e820 table and the command line in low memory. The `pvh` crate
//! decodes them and reads them in place through the identity map, for the Hermit loader too;
//! `occupied` lists their ranges so the memory carving never hands them out.

pub use ::pvh::start_info::StartInfo;
