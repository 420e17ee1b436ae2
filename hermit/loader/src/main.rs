//! hermit-loader: boots a Hermit (hermit-kernel 0.11) application ELF under QEMU.
//!
//! QEMU loads this ELF through PVH (`-kernel`, like the sensepool kernel) and the application
//! ELF as the first PVH module (`-initrd`). The loader does what Hermit's own loader (v0.5.4)
//! does on Multiboot, on PVH instead:
//!
//! 1. the stub ([`entry`]) enters long mode with page tables Hermit can extend;
//! 2. `pvh::start_info` reads the e820 map, the `-append` line and the module from
//!    `hvm_start_info` (the kernel's reader too);
//! 3. `hermit_entry::elf` parses the application, which must carry Hermit's entry-version note,
//!    and relocates it into RAM above the loader and clear of the module;
//! 4. [`tsc`] measures the TSC rate against PIT channel 2, and [`fdt`] builds the device tree
//!    (memory, that rate as `/hermit,tsc`, bootargs);
//! 5. it hands Hermit a `RawBootInfo` (serial port 0x3F8, the device tree, the image range) and
//!    jumps to the entry point with a fresh stack, as `hermit_entry::Entry` specifies.
//!
//! Any failure is one line on COM1 and the failure exit code; the loader never hangs.
#![cfg_attr(target_os = "none", no_std, no_main)]
#![deny(unsafe_code)]

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "hermit-loader is a bare-metal image for QEMU; boot it with `cargo xtask run --os hermit`."
    );
    std::process::exit(2);
}

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the module's memory, the relocated image and the jump into the Hermit kernel"
)]
mod boot;
#[cfg(target_os = "none")]
#[expect(unsafe_code, reason = "COM1's ports and the isa-debug-exit port")]
#[macro_use]
mod console;
#[cfg(target_os = "none")]
mod entry;
#[cfg(target_os = "none")]
mod fdt;
#[cfg(target_os = "none")]
#[expect(unsafe_code, reason = "the bump allocator is the `GlobalAlloc`")]
mod heap;
#[cfg(target_os = "none")]
mod tsc;

/// Entered from the boot stub ([`entry`]) in 64-bit mode with the PVH start-info address.
#[cfg(target_os = "none")]
extern "C" fn loader_main(start_info: u32) -> ! {
    console::init();
    match boot::boot(u64::from(start_info)) {
        Ok(never) => match never {},
        Err(error) => {
            console::println!("hermit-loader: FAILED: {error}");
            console::exit_failure()
        }
    }
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    match info.location() {
        Some(at) => console::println!(
            "\nhermit-loader: PANIC at {}:{}: {}",
            at.file(),
            at.line(),
            info.message()
        ),
        None => console::println!("\nhermit-loader: PANIC: {}", info.message()),
    }
    console::exit_failure()
}
