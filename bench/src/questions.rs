//! The question each bench answers, in one sentence: its results page opens with it and its
//! figure's title states it. Keyed by the file stem the bench writes (`target/bench/<stem>.json`).

/// The question of `<stem>.json`; empty for a file no bench here describes.
pub fn question(stem: &str) -> &'static str {
    match stem {
        "dmapool" | "dmapool-guest" => {
            "How much faster is a dmapool with its free list outside the blocks than the \
             pre-6.4 per-page lists, and what does it cost against Linux 6.4's in-block stack, \
             on the mpt3sas chain-pool pattern?"
        }
        "fake-rw" | "fake-rw-host" => {
            "What does the midlayer cost per I/O when no data moves (scsi_debug fake_rw=1), and \
             how does it scale from one job to two?"
        }
        "fake-rw-os" => {
            "Does the same pools and scsi code cost more or less per I/O on Hermit 0.11 than on \
             our kernel?"
        }
        "sense-reserve" | "sense-reserve-host" => {
            "What does each sense-buffer allocator (slab, mempool, prealloc, per-tag) cost, and \
             which of them keep I/O going under memory pressure?"
        }
        "device" => {
            "How fast are the virtio-scsi and LSI SAS1068 drivers on a null disk, polled or \
             interrupt-driven, with one job or two?"
        }
        "device-os" => {
            "What does Hermit 0.11 cost per I/O against our kernel on the same virtio-scsi and \
             LSI SAS1068 drivers, polled and interrupt-driven?"
        }
        "numa" => {
            "Do per-node dmapools halve the lock contention of one shared pool when several \
             CPUs share each node and frees cross nodes?"
        }
        "nbd" => {
            "What throughput and latency does a host client get from the guest's NBD server over \
             QEMU user networking (informational: QEMU's network path dominates)?"
        }
        "linux" => {
            "How do stock Linux 6.1 and 6.12 compare with sensepool on the same cases in the \
             same QEMU?"
        }
        "linux-sense" => {
            "What does a sense-buffer reserve (the 2008 thread's mempools and idle objects) cost \
             per command on the stock kernels' own SLUB and mempool, and on ours?"
        }
        _ => "",
    }
}
