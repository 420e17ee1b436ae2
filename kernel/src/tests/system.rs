//! Tests of the boot path: clock, PCI, the command-line parser in the guest, MMIO mapping.

use alloc::string::{String, ToString};

use super::ensure;
use crate::cmdline::{Cmdline, CmdlineError};
use os::arch::{paging, time};

/// The machine came up: calibrated clock that moves forward, PCI devices, heap and frames.
pub fn boot() -> Result<(), String> {
    ensure!(
        time::tsc_hz() > 1_000_000,
        "TSC rate {} Hz is implausible",
        time::tsc_hz()
    );
    let (first, second) = (time::now_ns(), time::now_ns());
    ensure!(
        first > 0 && second >= first,
        "clock not monotonic: {first} then {second}"
    );
    ensure!(
        os::platform::pci::config::devices().count() > 0,
        "no PCI devices found"
    );
    let frames = os::memory::dma::frames().ok_or("no DMA frame allocator")?;
    ensure!(frames.usage().0 > 0, "no free DMA frames");
    Ok(())
}

/// The parser rejects bad values by name in the guest too (same code as the host tests).
pub fn cmdline_errors() -> Result<(), String> {
    let names = super::names();
    let cases = [
        ("n=banana", "key 'n': bad value 'banana'"),
        ("bogus=1", "key 'bogus': unknown key"),
        ("impl=fast", "key 'impl': bad value 'fast'"),
        ("test=nosuch", "key 'test': bad value 'nosuch'"),
        ("n=1 n=2", "key 'n': given more than once"),
        (
            "iodepth=32 qd=1",
            "key 'qd': given more than once (also as 'iodepth')",
        ),
        (
            "nbd_port=2000 stats_port=2000",
            "key 'stats_port': bad value",
        ),
    ];
    for (line, expected) in cases {
        match Cmdline::parse(line, &names) {
            Ok(parsed) => return Err(alloc::format!("'{line}' parsed as {parsed:?}")),
            Err(err) => {
                let text = err.to_string();
                ensure!(
                    text.starts_with(expected),
                    "'{line}' gave '{text}', expected '{expected}...'"
                );
            }
        }
    }
    let parsed =
        Cmdline::parse("n=4k impl=both", &names).map_err(|err: CmdlineError| err.to_string())?;
    ensure!(parsed.n == 4096, "n=4k parsed as {}", parsed.n);
    Ok(())
}

/// BARs can be mapped, including above 4 GiB where the boot map ends.
pub fn mmio_map() -> Result<(), String> {
    let tables_before = paging::table_pages();
    // 32 GiB + 12 KiB: a ragged range that needs a new PDPT entry, PD and 4 KiB table.
    let high = 0x8_0000_1000;
    let virt = paging::map_mmio(high, 0x3000).map_err(|err| err.to_string())?;
    ensure!(
        virt as u64 == high,
        "map_mmio({high:#x}) returned {virt:p}, not the identity"
    );
    // SAFETY: just mapped; nothing is there, so QEMU reads back all-ones or zeroes, no fault.
    let _ = unsafe { virt.cast::<u32>().read_volatile() };
    ensure!(
        paging::table_pages() > tables_before,
        "no page table was added for {high:#x}"
    );
    // A real BAR, if the machine has a memory BAR (virtio, mptsas, VGA...).
    let bar = os::platform::pci::config::devices()
        .flat_map(|function| function.bars.iter().flatten())
        .find_map(|bar| match *bar {
            os::platform::pci::Bar::Memory {
                addr, len_bytes, ..
            } if addr != 0 => Some((addr, len_bytes)),
            _ => None,
        });
    if let Some((addr, len_bytes)) = bar {
        let virt = paging::map_mmio(addr, len_bytes).map_err(|err| err.to_string())?;
        // SAFETY: the BAR was just mapped uncached; a 32-bit read of register 0 has no effect on
        // memory (device side effects on the first register are acceptable in a test boot).
        let _ = unsafe { virt.cast::<u32>().read_volatile() };
    }
    ensure!(
        paging::map_mmio(u64::MAX - 10, 100).is_err(),
        "a wrapping range was accepted"
    );
    Ok(())
}
