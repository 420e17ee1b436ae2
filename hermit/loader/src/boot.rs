//! Places the application, describes the machine to it and jumps in.

use alloc::alloc::{Layout, alloc_zeroed};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::convert::Infallible;
use core::mem::MaybeUninit;
use core::num::{NonZeroU16, NonZeroU64};

use hermit_entry::boot_info::{BootInfo, HardwareInfo, PlatformInfo, RawBootInfo};
use hermit_entry::elf::KernelObject;
use pvh::start_info::{PhysRange, StartInfo, StartInfoError};

use crate::console::println;
use crate::fdt::{self, FdtError};
use crate::tsc;
use pit::tsc::CalibrationError;

/// Hermit places its image on 2 MiB boundaries and maps RAM in 2 MiB pages.
const LARGE_PAGE_BYTES: u64 = 2 * 1024 * 1024;
/// The end of the stub's identity map: the image must lie below it.
const IDENTITY_MAP_END: u64 = 4 << 30;
/// Hermit 0.11's `KERNEL_STACK_SIZE`: its `_start` moves the stack pointer it is given up by
/// this much (less a marker) before using it, so the pointer must be the stack's lowest byte.
const HERMIT_BOOT_STACK_BYTES: usize = 0x8000;
const COM1: u16 = 0x3F8;

/// Why the loader stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// The PVH start info could not be used.
    #[error(transparent)]
    StartInfo(#[from] StartInfoError),
    /// QEMU was started without `-initrd`.
    #[error("no module in hvm_start_info: pass the Hermit application ELF with -initrd")]
    NoModule,
    /// The module is not where the loader can read it.
    #[error(
        "the application module at {start:#x}..{end:#x} is outside the identity map 2 MiB..4 GiB"
    )]
    ModuleUnmapped {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
    /// The module is not a Hermit application.
    #[error("the -initrd module is not a Hermit application: {0}")]
    Elf(alloc::string::String),
    /// No usable RAM can hold the image.
    #[error(
        "no RAM for the {len_bytes} B Hermit image below 4 GiB clear of the loader and the module"
    )]
    NoRoom {
        /// Bytes the image needs.
        len_bytes: u64,
    },
    /// The device tree could not be built.
    #[error(transparent)]
    Fdt(#[from] FdtError),
    /// The TSC rate could not be measured.
    #[error("TSC calibration against PIT channel 2: {0}")]
    Tsc(CalibrationError),
}

unsafe extern "C" {
    static __loader_end: u8;
}

/// Where the image goes: a fixed-address image where it is linked, a relocatable one on the
/// first 2 MiB boundary above the loader (or above the module) that lies in RAM.
fn place(
    image_len: u64,
    fixed: Option<u64>,
    module: PhysRange,
    ram: &[PhysRange],
) -> Result<PhysRange, LoaderError> {
    let loader_end = core::ptr::addr_of!(__loader_end) as u64;
    let reserved = [
        PhysRange {
            start: 0,
            end: loader_end,
        },
        module,
    ];
    let candidates = match fixed {
        Some(start) => [Some(start), None],
        None => [
            loader_end.checked_next_multiple_of(LARGE_PAGE_BYTES),
            module.end.checked_next_multiple_of(LARGE_PAGE_BYTES),
        ],
    };
    candidates
        .into_iter()
        .flatten()
        .filter_map(|start| {
            Some(PhysRange {
                start,
                end: start.checked_add(image_len)?,
            })
        })
        .find(|range| {
            range.end <= IDENTITY_MAP_END
                && reserved.iter().all(|taken| !taken.overlaps(range))
                && ram.iter().any(|ram| ram.contains(range))
        })
        .ok_or(LoaderError::NoRoom {
            len_bytes: image_len,
        })
}

/// Loads the application named by the start info at `start_info` and enters it.
pub fn boot(start_info: u64) -> Result<Infallible, LoaderError> {
    // SAFETY: `start_info` is the %ebx value QEMU's PVH loader passed; nothing has reused the
    // memory it describes (the loader allocates only from its own .bss).
    let info = unsafe { StartInfo::read(start_info) }?;
    let module = info.modules.first().ok_or(LoaderError::NoModule)?.range()?;
    let ram: Vec<PhysRange> = info.ram().collect();
    if module.start < LARGE_PAGE_BYTES || module.end > IDENTITY_MAP_END {
        return Err(LoaderError::ModuleUnmapped {
            start: module.start,
            end: module.end,
        });
    }
    // SAFETY: the module range lies inside the stub's identity map (checked above) and QEMU
    // wrote the file there; nothing writes it while this slice lives (the image goes elsewhere).
    let elf = unsafe {
        core::slice::from_raw_parts(
            module.start as *const u8,
            (module.end - module.start) as usize,
        )
    };
    let object = KernelObject::parse(elf).map_err(|e| LoaderError::Elf(alloc::format!("{e}")))?;
    let image_len = object.mem_size() as u64;
    let range = place(image_len, object.start_addr(), module, &ram)?;
    println!(
        "hermit-loader: {} B application at {:#x}..{:#x}, placed at {:#x}..{:#x}",
        module.end - module.start,
        module.start,
        module.end,
        range.start,
        range.end
    );
    // SAFETY: `place` chose RAM inside the identity map that overlaps neither the loader nor
    // the module, so this is the only reference to it.
    let memory = unsafe {
        core::slice::from_raw_parts_mut(range.start as *mut MaybeUninit<u8>, image_len as usize)
    };
    let loaded = object.load_kernel(memory, range.start);

    let tsc_khz = tsc::khz().map_err(LoaderError::Tsc)?;
    println!("hermit-loader: TSC {tsc_khz} kHz (PIT channel 2), handed to Hermit as /hermit,tsc");
    let cmdline = info.cmdline.strip_suffix(b"\0").unwrap_or(info.cmdline);
    let bootargs = fdt::bootargs(cmdline)?;
    let blob = Box::leak(fdt::build(&ram, tsc_khz, &bootargs)?.into_boxed_slice());
    let boot_info = BootInfo {
        hardware_info: HardwareInfo {
            phys_addr_range: 0..0,
            serial_port_base: NonZeroU16::new(COM1),
            device_tree: NonZeroU64::new(blob.as_ptr() as u64),
        },
        load_info: loaded.load_info,
        platform_info: PlatformInfo::Fdt,
    };
    let raw: &'static RawBootInfo = Box::leak(Box::new(RawBootInfo::from(boot_info)));
    // SAFETY: a non-zero size; the block is leaked, so it stays Hermit's boot stack.
    let stack = unsafe {
        alloc_zeroed(Layout::from_size_align(HERMIT_BOOT_STACK_BYTES, 4096).expect("valid layout"))
    };
    if stack.is_null() {
        panic!("the loader heap cannot hold Hermit's boot stack");
    }
    // SAFETY: everything read from the first MiB (start info, memory map, command line, module
    // list) has been copied into `info`, `ram`, `bootargs`, the device tree and the loader heap;
    // `info.cmdline`, which borrows the line in place, is not read after this.
    unsafe { pvh::unmap_first_mib() };
    println!(
        "hermit-loader: entering Hermit at {:#x} (bootargs \"{bootargs}\")",
        loaded.entry_point
    );
    // SAFETY: the image is loaded and relocated; `raw`, the device tree and the stack are leaked
    // loader memory below the image, which Hermit never allocates; the entry point follows
    // `hermit_entry::Entry` (boot info in rdi, CPU 0 in esi) and takes the stack's lowest byte.
    unsafe {
        core::arch::asm!(
            "mov rsp, {stack}",
            "jmp {entry}",
            stack = in(reg) stack,
            entry = in(reg) loaded.entry_point,
            in("rdi") raw,
            in("rsi") 0u64,
            options(noreturn)
        )
    }
}
