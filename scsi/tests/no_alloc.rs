//! The per-command path allocates nothing: in steady state a command's data and sense buffers
//! move from the request into the midlayer's slot, into the host, back with the completion and
//! out in the `Done`, and every vector on the way keeps its capacity. A counting global
//! allocator checks it over a run of fake_rw reads through scsi_debug, with sense buffers from
//! the `prealloc` list (the heap "slab" of the tests would allocate per command by design;
//! the kernel's slab cache does not).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use scsi::midlayer::{Done, Request};
use scsi::sense_alloc::SenseMode;
use scsi::wire::{BlockCount, Cdb, Lba};

/// The system allocator, counting each thread's allocations: only the test's own thread is
/// measured (the test harness's threads allocate whenever they like).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: a thread being torn down may still allocate; it is not measured.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations_so_far() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds GlobalAlloc's contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's obligations for `layout` pass through unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as in dealloc; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Keeps `depth` reads in flight for `commands` completions, reusing each `Done`'s buffer.
fn run(stack: &mut Stack, disk: &scsi::midlayer::Disk, depth: usize, commands: u64) {
    let mut buffers: Vec<Vec<u8>> = (0..depth).map(|_| vec![0u8; 4096]).collect();
    let mut done: Vec<Done> = Vec::with_capacity(depth);
    let mut completed = 0u64;
    let mut lba = 0u64;
    while completed < commands {
        while let Some(data) = buffers.pop() {
            lba = (lba + 8) % (disk.blocks - 8);
            let request = Request::new(disk.device, Cdb::read(Lba(lba), BlockCount(8)), data);
            if let Err(rejected) = stack.submit(request) {
                buffers.push(rejected.request.data);
                break;
            }
        }
        stack.poll(&mut done);
        for d in done.drain(..) {
            assert!(d.result.is_ok(), "{:?}", d.result);
            buffers.push(d.data);
            completed += 1;
        }
    }
}

/// Allocations made by `run` for `commands` completions.
fn allocations(stack: &mut Stack, disk: &scsi::midlayer::Disk, commands: u64) -> u64 {
    let before = allocations_so_far();
    run(stack, disk, 32, commands);
    allocations_so_far() - before
}

#[test]
fn steady_state_io_allocates_nothing() {
    let mut stack = stack_with("delay=0 fake_rw=1 max_queue=32", SenseMode::Prealloc);
    let (_, disk) = scan_one(&mut stack);
    run(&mut stack, &disk, 32, 1_000);
    // `run` allocates its own buffers and vectors once; the commands add nothing.
    let short = allocations(&mut stack, &disk, 1_000);
    let long = allocations(&mut stack, &disk, 20_000);
    assert_eq!(
        long,
        short,
        "19000 more commands made {} allocations",
        long - short
    );
}
