//! What the shared workload code needs from the machine, on Hermit: a nanosecond clock, coherent
//! memory chunks for the sense slab, and the way out of QEMU.
//!
//! - [`TscClock`]: Hermit's public clock (`sys_clock_gettime(CLOCK_MONOTONIC)`) counts whole
//!   microseconds, too coarse for per-command latency, and derives them from Hermit's own TSC
//!   estimate, which under TCG on a loaded host was seen 2x off from one boot to the next. So
//!   the TSC is calibrated against PIT channel 2 exactly as the sensepool kernel does it, and
//!   read directly. Its windows carry the instruction-count markers.
//! - [`HeapBacking`]: chunks from Hermit's heap (the global allocator), each within one page so
//!   it is physically contiguous (a longer chunk is refused: the sense slab asks for 4 KiB); the bus address is `hermit::mm::virtual_to_physical` of its
//!   first byte. fake-rw never lets a device touch them.
//! - [`exit`]: the same isa-debug-exit codes as the sensepool kernel (0x10 success, 0x11
//!   failure), so xtask judges both guests alike; Hermit's own `sys_exit` writes other values.

use alloc::alloc::{Layout, alloc_zeroed, dealloc};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use pools::BackingError;
use pools::backing::{Backing, Chunk, DmaAddr, NodeId};
use pools::insn_marker;

const PAGE_BYTES: usize = 4096;
const PIT_HZ: u64 = 1_193_182;
/// One calibration window (5 ms); the median of three windows is kept.
const CALIBRATION_MS: u64 = 5;
const CALIBRATION_WINDOWS: usize = 3;

fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects and is allowed in ring 0, where Hermit runs us.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn outb(port: u16, value: u8) {
    // SAFETY: only the PIT (0x42, 0x43) and its gate (0x61) are written, by calibration alone;
    // port writes have no memory effects.
    unsafe {
        core::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack))
    };
}

fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`; reading the PIT's latched counter or the gate has no memory effects.
    unsafe {
        core::arch::asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack))
    };
    value
}

/// Latches and reads PIT channel 2's counter: `(count, tsc before, tsc after)`.
fn read_count() -> (u16, u64, u64) {
    let before = rdtsc();
    outb(0x43, 0x80);
    let low = inb(0x42);
    let high = inb(0x42);
    (u16::from_le_bytes([low, high]), before, rdtsc())
}

/// The counter and the TSC at the same instant, from the tightest of several reads.
fn tight_sample() -> (u16, u64) {
    let mut best = read_count();
    for _ in 0..8 {
        let sample = read_count();
        if sample.2 - sample.1 < best.2 - best.1 {
            best = sample;
        }
    }
    (best.0, best.1 + (best.2 - best.1) / 2)
}

/// TSC ticks per second from calibration (0 before [`TscClock::calibrate`]).
static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// The TSC at calibration: time 0.
static EPOCH_TSC: AtomicU64 = AtomicU64::new(0);

/// The workload clock: the calibrated TSC, in nanoseconds since calibration.
#[derive(Clone, Copy, Debug, Default)]
pub struct TscClock;

impl TscClock {
    /// Measures the TSC rate against PIT channel 2 the way the sensepool kernel does
    /// (`kernel/src/arch/time.rs`, after Linux's `quick_pit_calibrate`): each end of a window
    /// reads the latched counter between two TSC reads and keeps the tightest bracket, so a
    /// Hermit timer interrupt or a host preemption inside a bracket is discarded with it.
    /// Returns the rate in Hz.
    pub fn calibrate() -> u64 {
        let gate = inb(0x61);
        outb(0x61, (gate & !0x02) | 0x01); // gate channel 2 on, speaker off
        outb(0x43, 0xB0); // channel 2, lobyte/hibyte, mode 0, binary
        outb(0x42, 0xff);
        outb(0x42, 0xff); // count down from 65535 (55 ms): no wrap inside a window
        let latch = PIT_HZ * CALIBRATION_MS / 1000;
        let mut rates = [0u64; CALIBRATION_WINDOWS];
        for rate in &mut rates {
            let (start_count, start_tsc) = tight_sample();
            let mut count = start_count;
            while u64::from(start_count.wrapping_sub(count)) < latch {
                count = read_count().0;
            }
            let (end_count, end_tsc) = tight_sample();
            let ticks = u64::from(start_count.wrapping_sub(end_count)).max(1);
            *rate = (end_tsc - start_tsc) * PIT_HZ / ticks;
        }
        rates.sort_unstable();
        let hz = rates[CALIBRATION_WINDOWS / 2].max(1);
        TSC_HZ.store(hz, Ordering::Relaxed);
        EPOCH_TSC.store(rdtsc(), Ordering::Relaxed);
        hz
    }
}

impl scsi::clock::Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        let ticks = rdtsc().wrapping_sub(EPOCH_TSC.load(Ordering::Relaxed));
        let hz = TSC_HZ.load(Ordering::Relaxed).max(1);
        (u128::from(ticks) * 1_000_000_000 / u128::from(hz)) as u64
    }
    #[inline]
    fn window_begin(&self, slot: u8) {
        insn_marker::begin(slot);
    }
    #[inline]
    fn window_end(&self, slot: u8) {
        insn_marker::end(slot);
    }
}

/// Coherent chunks from Hermit's heap. See the [module docs](self).
#[derive(Debug, Default)]
pub struct HeapBacking;

// SAFETY: every chunk is a live heap block of `len_bytes` (zeroed) aligned as asked, at most a
// page long and page-aligned, so physically contiguous; it is freed only by `free_chunk` with the
// layout it was allocated with.
unsafe impl Backing for HeapBacking {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        let unsupported = BackingError::Unsupported {
            len_bytes,
            align_bytes,
        };
        if len_bytes == 0 || len_bytes > PAGE_BYTES || !align_bytes.is_power_of_two() {
            return Err(unsupported);
        }
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        let layout = Layout::from_size_align(len_bytes, PAGE_BYTES).map_err(|_| unsupported)?;
        // SAFETY: the layout has a non-zero size.
        let cpu = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or(exhausted.clone())?;
        let virt = hermit::mm::VirtAddr::new(cpu.as_ptr() as u64);
        let Some(phys) = hermit::mm::virtual_to_physical(virt) else {
            // SAFETY: allocated just above with this layout.
            unsafe { dealloc(cpu.as_ptr(), layout) };
            return Err(exhausted);
        };
        Ok(Chunk {
            cpu,
            dma: DmaAddr(phys.as_u64()),
            len_bytes,
            node: None,
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let layout = Layout::from_size_align(chunk.len_bytes, PAGE_BYTES)
            .unwrap_or_else(|_| unreachable!("alloc_chunk checked this layout"));
        // SAFETY: the caller returns a chunk `alloc_chunk` made, with its length unchanged.
        unsafe { dealloc(chunk.cpu.as_ptr(), layout) };
    }
}

/// The guest's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// QEMU exits with status 33.
    Success = 0x10,
    /// QEMU exits with status 35.
    Failure = 0x11,
}

/// Ends QEMU with `code`; without a debug-exit device, leaves through Hermit's own exit.
pub fn exit(code: ExitCode) -> ! {
    // SAFETY: port 0xf4 is the isa-debug-exit device; writing it ends the VM (or is ignored).
    unsafe {
        core::arch::asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code as u32, options(nomem, nostack));
    }
    hermit::syscalls::sys_exit(i32::from(code != ExitCode::Success))
}
