//! How long building an MPT scatter-gather list takes, with and without chain frames, on
//! a real `pools` scalable dmapool as the chain pool (the frames are taken and returned
//! inside the measured loop, as a request's would be).
//!
//! Run: `cargo bench -p drivers --bench sgl`.

use divan::Bencher;
use drivers::dma::{DmaAddr, Segment};
use drivers::mpt::sgl::{SglLayout, build};
use pools::host::HostBacking;
use scsi::host::DataDirection;

fn main() {
    divan::main();
}

#[divan::bench(args = [1, 5, 6, 16, 64, 128, 256])]
fn build_sgl(bencher: Bencher, segments: usize) {
    let backing = HostBacking::new();
    let pool: pools::ScalablePool<&HostBacking> =
        pools::DmaPool::create("chain", 128, 16, 0, &backing).unwrap();
    let layout = SglLayout::new(128, 0x22).unwrap();
    let list: Vec<Segment> = (0..segments)
        .map(|i| Segment {
            addr: DmaAddr(0x1000_0000 + i as u64 * 4096),
            len_bytes: 4096,
        })
        .collect();
    let mut frame = vec![0u8; 128];
    let mut chains = Vec::with_capacity(64);
    bencher.bench_local(|| {
        let mut chain_pool = &pool;
        let offset = build(
            &layout,
            divan::black_box(&list),
            DataDirection::FromDevice,
            &mut frame,
            &mut chain_pool,
            &mut chains,
        )
        .unwrap();
        chains.clear();
        offset
    });
}
