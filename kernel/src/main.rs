//! sensepool's kernel: the OS library (`os`) with the lab on it. This binary is the PVH entry
//! and the [`os::App`] that runs after boot: the command line ([`cmdline`]: every key, the
//! OS's own included), the workloads ([`workload`]: fake-rw, the sense-reserve matrix, dmapool,
//! numa, verify, device, nbd, sense-cost) and the guest test runner ([`tests`], `test=`). The
//! OS knows none of them; they reach the OS through its public modules.
//!
//! On the host this crate builds as a stub binary so the workspace's `cargo test` and
//! `cargo clippy` work; its pure modules (command line, verify plan) are unit-tested there.
#![cfg_attr(target_os = "none", no_std, no_main)]
// On the host only the pure modules below are built, and only their unit tests use them. `allow`,
// not `expect`: the lint fires for the host binary but not for its test build, so `expect` would
// itself warn there.
#![cfg_attr(
    not(target_os = "none"),
    allow(
        dead_code,
        reason = "the pure modules are used by the guest build and by tests"
    )
)]
#![deny(unsafe_code)]

extern crate alloc;

mod cmdline;
mod workload;

#[cfg(target_os = "none")]
mod tests;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "sensepool's kernel is a bare-metal image for QEMU; build and boot it with `cargo xtask run`."
    );
    std::process::exit(2);
}

#[cfg(target_os = "none")]
pvh::entry!(
    main = kernel_main,
    stack_bytes = os::arch::boot::BOOT_STACK_BYTES
);

/// The OS heap as this binary's allocator (`os::memory::heap` says why the binary names it).
#[cfg(target_os = "none")]
#[global_allocator]
static HEAP: os::memory::heap::Heap = os::memory::heap::Heap;

/// Entered from the boot stub in 64-bit mode with the PVH start-info address.
#[cfg(target_os = "none")]
extern "C" fn kernel_main(start_info: u32) -> ! {
    os::start(start_info, &mut Lab::default())
}

/// The lab on the OS: what the command line selected, once read.
#[cfg(target_os = "none")]
#[derive(Default)]
struct Lab {
    cmdline: Option<cmdline::Cmdline>,
}

#[cfg(target_os = "none")]
impl os::App for Lab {
    type Error = cmdline::CmdlineError;

    fn configure(&mut self, window: &[u8]) -> Result<os::BootConfig, cmdline::CmdlineError> {
        let names = tests::names();
        let parsed =
            cmdline::boot_line(window).and_then(|line| cmdline::Cmdline::parse(line, &names))?;
        let config = parsed.boot_config();
        self.cmdline = Some(parsed);
        Ok(config)
    }

    fn run(&mut self) -> os::arch::exit::ExitCode {
        let Some(cmdline) = &self.cmdline else {
            return os::arch::exit::ExitCode::Failure;
        };
        match &cmdline.tests {
            Some(selection) => tests::run(selection),
            None => workload::run(cmdline),
        }
    }
}
