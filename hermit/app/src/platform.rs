//! What the shared workload code needs from the machine, on Hermit: a nanosecond clock, coherent
//! memory chunks for the sense slab, and the way out of QEMU.
//!
//! - [`TscClock`]: Hermit's public clock (`sys_clock_gettime(CLOCK_MONOTONIC)`) counts whole
//!   microseconds, too coarse for per-command latency, and scales the TSC by Hermit's own rate
//!   estimate. So the application measures the TSC rate itself against PIT channel 2
//!   (`pit::tsc`, as the sensepool kernel and the loader do) and reads the TSC directly:
//!   its figures depend on no estimate of Hermit's. [`check_hermit_clock`] then compares the
//!   rate Hermit assumes with that measurement. Its windows carry the instruction-count markers.
//! - [`HeapBacking`]: chunks from Hermit's heap (the global allocator), power-of-two sized and
//!   aligned so each lies inside one 2 MiB heap page and is physically contiguous (checked
//!   page by page; a chunk over 2 MiB is refused); the bus address is
//!   `hermit::mm::virtual_to_physical` of its first byte. The sense slab, the SAS1068's frames
//!   and its chain pool take their memory here.
//! - [`exit`]: the same isa-debug-exit codes as the sensepool kernel (0x10 success, 0x11
//!   failure), so xtask judges both guests alike; Hermit's own `sys_exit` writes other values.

use alloc::alloc::{Layout, alloc_zeroed, dealloc};
use alloc::format;
use alloc::string::String;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use pit::rdtsc;
use pit::tsc::{self, CalibrationError};
use pools::BackingError;
use pools::backing::{Backing, Chunk, DmaAddr, NodeId};

const PAGE_BYTES: usize = 4096;

/// Nanoseconds per TSC cycle in 32.32 fixed point (0 before [`TscClock::calibrate`]): the
/// sensepool kernel's conversion, one multiply and no division per clock read, so the two
/// kernels' instructions per I/O compare like for like.
static NS_PER_CYCLE_FP32: AtomicU64 = AtomicU64::new(0);
/// The TSC at calibration: time 0.
static EPOCH_TSC: AtomicU64 = AtomicU64::new(0);

/// The workload clock: the calibrated TSC, in nanoseconds since calibration.
#[derive(Clone, Copy, Debug, Default)]
pub struct TscClock;

impl TscClock {
    /// Measures the TSC rate against PIT channel 2 and makes the current TSC time 0. Returns
    /// the rate in Hz.
    pub fn calibrate() -> Result<u64, CalibrationError> {
        let hz = tsc::calibrate_hz(&mut pit::Channel2)?;
        NS_PER_CYCLE_FP32.store(
            ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
            Ordering::Relaxed,
        );
        EPOCH_TSC.store(rdtsc(), Ordering::Relaxed);
        Ok(hz)
    }
}

/// How far Hermit's own TSC rate may lie from the PIT measurement, in parts per million: 1 %.
/// Hermit keeps whole MHz (0.05 % at 2 GHz) and two PIT calibrations agree within 0.1 %; its
/// own interrupt-timed estimate was seen 25 % and 1200 % off under TCG.
pub const HERMIT_CLOCK_TOLERANCE_PPM: u64 = 10_000;

/// Hermit's rate (`sys_get_processor_frequency`, which scales its microsecond clock, sleeps
/// and timer deadlines) against `measured_hz`: `Err` with a line naming both when they differ
/// by more than [`HERMIT_CLOCK_TOLERANCE_PPM`].
pub fn check_hermit_clock(measured_hz: u64) -> Result<u64, String> {
    let hermit_hz = u64::from(hermit::syscalls::sys_get_processor_frequency()) * 1_000_000;
    let off_ppm = hermit_hz.abs_diff(measured_hz) * 1_000_000 / measured_hz.max(1);
    if off_ppm > HERMIT_CLOCK_TOLERANCE_PPM {
        return Err(format!(
            "Hermit's clock assumes {} MHz but PIT channel 2 measures {} kHz ({}.{:02} % off): \
             Hermit's microsecond clock, sleeps and timers are off by as much",
            hermit_hz / 1_000_000,
            measured_hz / 1000,
            off_ppm / 10_000,
            off_ppm / 100 % 100
        ));
    }
    Ok(hermit_hz)
}

impl scsi::clock::Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        let cycles = rdtsc().wrapping_sub(EPOCH_TSC.load(Ordering::Relaxed));
        ((u128::from(cycles) * u128::from(NS_PER_CYCLE_FP32.load(Ordering::Relaxed))) >> 32) as u64
    }
}

// The workloads' timed windows: an instruction-count marker at each end.
protocol::insn_marked_windows!(TscClock);

/// Calibrates [`TscClock`] and checks Hermit's rate against it ([`check_hermit_clock`]):
/// `(measured, Hermit's)` in Hz, or `None` after a `{workload}: FAILED: …` line.
pub fn start_clock(workload: &str) -> Option<(u64, u64)> {
    let tsc_hz = match TscClock::calibrate() {
        Ok(hz) => hz,
        Err(error) => {
            hermit::println!("{workload}: FAILED: TSC calibration against PIT channel 2: {error}");
            return None;
        }
    };
    match check_hermit_clock(tsc_hz) {
        Ok(hermit_hz) => Some((tsc_hz, hermit_hz)),
        Err(line) => {
            hermit::println!("{workload}: FAILED: {line}");
            None
        }
    }
}

/// Coherent chunks from Hermit's heap. See the [module docs](self).
#[derive(Debug, Default, Clone, Copy)]
pub struct HeapBacking;

/// Hermit's heap page: physical contiguity ends at its boundaries.
const LARGE_PAGE_BYTES: usize = 2 << 20;

/// The heap layout of a chunk of `len_bytes`: power-of-two sized and aligned, at least a
/// page, so it never crosses a 2 MiB page; `None` for 0 or past [`LARGE_PAGE_BYTES`]. It
/// depends on the length alone, so `free_chunk` finds it again.
fn chunk_layout(len_bytes: usize) -> Option<Layout> {
    if len_bytes == 0 {
        return None;
    }
    let size = len_bytes.max(PAGE_BYTES).checked_next_power_of_two()?;
    if size > LARGE_PAGE_BYTES {
        return None;
    }
    Layout::from_size_align(size, size).ok()
}

// SAFETY: every chunk is a live heap block of at least `len_bytes` (zeroed), aligned as asked,
// inside one 2 MiB page and checked physically contiguous page by page, so its bus address
// covers all of it; it is freed only by `free_chunk` with the layout it was allocated with.
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
        let layout = chunk_layout(len_bytes).ok_or(unsupported.clone())?;
        // The block is aligned to its size: a larger alignment is not on offer.
        if !align_bytes.is_power_of_two() || align_bytes > layout.align() {
            return Err(unsupported);
        }
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        // SAFETY: the layout has a non-zero size.
        let cpu = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or(exhausted.clone())?;
        let Some(phys) = crate::hal::contiguous(cpu.as_ptr().addr(), layout.size()) else {
            // SAFETY: allocated just above with this layout.
            unsafe { dealloc(cpu.as_ptr(), layout) };
            return Err(exhausted);
        };
        Ok(Chunk {
            cpu,
            dma: DmaAddr(phys),
            len_bytes,
            node: None,
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let Some(layout) = chunk_layout(chunk.len_bytes) else {
            log::error!(
                "heap backing: a chunk of {} B cannot be ours",
                chunk.len_bytes
            );
            return;
        };
        // SAFETY: the caller returns a chunk `alloc_chunk` made, with its length unchanged, so
        // this is the layout it was allocated with.
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
