#![no_main]
//! The PVH start info block (`pvh::start_info`, which the kernel and the Hermit loader share),
//! its e820 map and module list, then the kernel's carving of usable RAM out of them.
//!
//! Input: the 56-byte `hvm_start_info` block, the block's address, the command line's length,
//! then map entries (24 bytes each). Beyond "no panic": an error names its field; the ranges
//! the loader's data occupies never wrap (`start <= end`, exactly as long as described); the
//! usable RAM is page-aligned, sorted, disjoint, inside what e820 calls RAM, and outside every
//! non-RAM entry and every occupied range.
use libfuzzer_sys::fuzz_target;
use sensepool_fuzz::bytes::Script;
use pvh::start_info::{
    E820Entry, E820Kind, Header, MEMMAP_ENTRY_BYTES, PhysRange, START_INFO_BYTES, decode_memmap,
    decode_modules,
};
use sensepool_fuzz::memory::memmap::{PAGE_BYTES, usable_ram};

fn overlaps(a: &PhysRange, start: u64, end: u64) -> bool {
    a.start < end && start < a.end
}

fuzz_target!(|data: &[u8]| {
    if data.len() < START_INFO_BYTES {
        return;
    }
    let (block, rest) = data.split_at(START_INFO_BYTES);
    let block: &[u8; START_INFO_BYTES] = block.try_into().unwrap();
    let mut script = Script::new(rest);
    let addr = u64::from(script.u32()) | u64::from(script.u32()) << 32;
    let cmdline_bytes = u64::from(script.u16());
    let entries = script.take(usize::MAX);
    let header = match Header::decode(addr, block) {
        Ok(header) => header,
        Err(err) => {
            assert!(
                err.to_string().contains("hvm_start_info"),
                "an error names its block: {err}"
            );
            return;
        }
    };
    let occupied = match header.occupied(addr, cmdline_bytes) {
        Ok(occupied) => occupied,
        Err(err) => {
            let text = err.to_string();
            assert!(
                text.contains("paddr") || text.contains("start info"),
                "an error names its field: {text}"
            );
            return;
        }
    };
    let lens = [
        START_INFO_BYTES as u64,
        header.memmap_bytes(),
        cmdline_bytes,
    ];
    for (range, len) in occupied.iter().zip(lens) {
        assert!(range.start <= range.end, "occupied range wraps: {range:?}");
        assert_eq!(
            range.len_bytes(),
            len,
            "occupied range as long as described"
        );
    }
    let available = entries.len() - entries.len() % MEMMAP_ENTRY_BYTES;
    let read = available.min(header.memmap_bytes() as usize);
    let map: Vec<E820Entry> = decode_memmap(&entries[..read]).collect();
    assert_eq!(map.len(), read / MEMMAP_ENTRY_BYTES);
    // The same bytes as a module list (the Hermit loader's `-initrd`): a module's range is
    // exactly as long as described, or an error naming it.
    for module in decode_modules(entries) {
        match module.range() {
            Ok(range) => assert_eq!(range.len_bytes(), module.len_bytes),
            Err(err) => assert!(err.to_string().contains("module paddr"), "{err}"),
        }
    }
    if let Err(err) = header.modlist() {
        assert!(err.to_string().contains("modlist_paddr"), "{err}");
    }
    for entry in &map {
        let _ = entry.to_string();
    }
    let usable = usable_ram(&map, &occupied);
    for pair in usable.windows(2) {
        assert!(
            pair[0].end < pair[1].start,
            "sorted, disjoint, not adjacent-merged: {pair:?}"
        );
    }
    for range in &usable {
        assert!(range.start < range.end, "empty range {range:?}");
        assert!(
            range.start % PAGE_BYTES == 0 && range.end % PAGE_BYTES == 0,
            "unaligned {range:?}"
        );
        // Inside RAM: every page is covered by some RAM entry.
        let mut at = range.start;
        while at < range.end {
            let Some(next) = map
                .iter()
                .filter(|e| e.kind == E820Kind::Ram && e.start <= at && at < e.end())
                .map(|e| e.end())
                .max()
            else {
                panic!("{range:?} is not RAM at {at:#x}");
            };
            at = next;
        }
        // An empty entry (length 0) covers nothing.
        for entry in map
            .iter()
            .filter(|e| e.kind != E820Kind::Ram && e.len_bytes > 0)
        {
            assert!(
                !overlaps(range, entry.start, entry.end()),
                "{range:?} overlaps {entry}"
            );
        }
        for hole in occupied.iter().filter(|hole| hole.start < hole.end) {
            assert!(
                !overlaps(range, hole.start, hole.end),
                "{range:?} overlaps occupied {hole:?}"
            );
        }
    }
});
