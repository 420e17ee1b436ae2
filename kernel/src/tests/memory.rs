//! Heap and DMA-frame tests.

use alloc::string::String;
use alloc::vec::Vec;

use pools::backing::{Backing, DmaAddr};
use workloads::Rng;

use super::ensure;

/// Many random-sized allocations with fill patterns, freed in random order; a few large ones;
/// contents checked before every free and the heap back at its starting usage at the end.
pub fn heap_stress() -> Result<(), String> {
    let (start_used, claimed) = os::memory::heap::usage();
    let mut rng = Rng::new(0x5e05e);
    let mut live: Vec<Vec<u8>> = Vec::new();
    for round in 0..20_000u64 {
        if live.len() < 512 && rng.below(3) != 0 {
            let len = match rng.below(100) {
                0 => 64 * 1024 + rng.below(1 << 20) as usize,
                1..=10 => 4096 + rng.below(16 * 1024) as usize,
                _ => 1 + rng.below(256) as usize,
            };
            let tag = (round % 251) as u8;
            let mut block = Vec::with_capacity(len);
            block.resize(len, tag);
            live.push(block);
        } else if !live.is_empty() {
            let block = live.swap_remove(rng.below(live.len() as u64) as usize);
            let tag = block[0];
            ensure!(
                block.iter().all(|&b| b == tag),
                "heap block of {} bytes corrupted",
                block.len()
            );
        }
    }
    let big: Vec<u64> = (0..(4u64 << 20) / 8).collect();
    ensure!(
        big.iter().enumerate().all(|(i, &v)| v == i as u64),
        "4 MiB vector corrupted"
    );
    drop(big);
    drop(live);
    let (end_used, _) = os::memory::heap::usage();
    ensure!(
        end_used == start_used,
        "heap usage {start_used} -> {end_used} bytes: leak (of {claimed})"
    );
    Ok(())
}

/// Frames from the DMA allocator: aligned, zeroed, dma == cpu, and given back.
pub fn dma_frames() -> Result<(), String> {
    let frames = os::memory::dma::frames().ok_or("no DMA frame allocator")?;
    let (free_before, _) = frames.usage();
    let mut chunks = Vec::new();
    for (len, align) in [
        (1, 16),
        (4096, 4096),
        (5000, 4096),
        (64 * 1024, 64 * 1024),
        (2 << 20, 2 << 20),
    ] {
        let chunk = frames
            .alloc_chunk(len, align, None)
            .map_err(|err| alloc::format!("{err}"))?;
        let cpu = chunk.cpu.as_ptr() as u64;
        ensure!(
            chunk.dma == DmaAddr(cpu),
            "dma {} != cpu {cpu:#x}",
            chunk.dma
        );
        ensure!(
            cpu % align as u64 == 0,
            "chunk {cpu:#x} not aligned to {align}"
        );
        ensure!(
            chunk.len_bytes >= len,
            "chunk of {} bytes for {len}",
            chunk.len_bytes
        );
        // SAFETY: the chunk is ours, `len_bytes` long and identity mapped.
        let bytes = unsafe { core::slice::from_raw_parts_mut(chunk.cpu.as_ptr(), chunk.len_bytes) };
        ensure!(
            bytes.iter().all(|&b| b == 0),
            "chunk at {cpu:#x} not zeroed"
        );
        bytes.fill(0xa9);
        chunks.push(chunk);
    }
    ensure!(
        frames.usage().0 < free_before,
        "allocations did not reduce free frames"
    );
    let too_big = frames.alloc_chunk(usize::MAX / 2, 4096, None);
    ensure!(too_big.is_err(), "an impossible chunk was granted");
    ensure!(
        frames.alloc_chunk(4096, 3, None).is_err(),
        "alignment 3 was accepted"
    );
    for chunk in chunks {
        // SAFETY: each chunk came from this allocator and is freed once; no pointer is kept.
        unsafe { frames.free_chunk(chunk) };
    }
    ensure!(
        frames.usage().0 == free_before,
        "frames leaked: {} -> {}",
        free_before,
        frames.usage().0
    );
    Ok(())
}
