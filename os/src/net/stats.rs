//! The stats endpoint's text: what a storage engineer would `cat` on Linux, in the same shapes.
//!
//! ```text
//! sensepool stats uptime_ms=12345
//! poolinfo - 0.1
//! <one line per dmapool of the exported host, Linux's pools file>
//! pools 0
//! sense mode=slab slab_allocs=.. reserve_hits=.. waits=.. reserve_held=.. in_use=..
//! scsi submitted=.. completed=.. succeeded=.. failed=.. retries=.. timeouts=.. aborts=.. resets=..
//! nbd connections=.. dropped=.. refused=.. reads=.. writes=.. flushes=.. trims=.. write_zeroes=.. bytes_read=.. bytes_written=.. errors=..
//! net rx_frames=.. tx_frames=.. rx_bytes=.. tx_bytes=.. errors=.. resets=.. irq=msix|timer irq_routes=.. tx_dropped=.. rx_waits_for_tx=..
//! control secret=given|none accepted=.. refused=..
//! disks 2
//! disk sda hctl=0:0:0:0 blocks=131072 block_len=512 bytes=67108864 (67.1 MB/64.0 MiB) export
//! disk sdb hctl=0:0:1:0 blocks=16384 block_len=512 bytes=8388608 (8.3 MB/8.0 MiB)
//! ```
//!
//! The `pools N` and `disks N` lines say how many lines their tables have, so a client can
//! check it got them all. The disk list is the current one: it follows hot-plug.

use alloc::string::String;
use core::fmt::Write;

use pools::PoolInfo;
use scsi::midlayer::MidlayerStats;
use scsi::sense_alloc::{SenseMode, SenseStats};

use super::server::ServerStats;
use crate::storage::report::{NamedDisk, capacity_text};

/// Everything the endpoint reports.
pub struct Snapshot<'a> {
    pub uptime_ms: u64,
    pub pools: &'a [PoolInfo],
    pub sense_mode: SenseMode,
    pub sense: SenseStats,
    pub scsi: MidlayerStats,
    pub server: &'a ServerStats,
    /// The host's disks now.
    pub disks: &'a [NamedDisk],
    /// The name of the disk served over NBD.
    pub export: &'a str,
    /// Whether the NIC wakes the sleeping server by MSI-X (else its timer polls).
    pub nic_interrupts: bool,
}

/// Renders `snapshot` as the endpoint's text.
pub fn render(snapshot: &Snapshot<'_>) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_text(&mut out, snapshot);
    out
}

fn write_text(out: &mut String, s: &Snapshot<'_>) -> core::fmt::Result {
    writeln!(out, "sensepool stats uptime_ms={}", s.uptime_ms)?;
    write_stack(out, s)?;
    write_server(out, s.server, s.nic_interrupts)?;
    write_disks(out, s.disks, s.export)
}

/// The pools, the sense allocator and the midlayer.
fn write_stack(out: &mut String, s: &Snapshot<'_>) -> core::fmt::Result {
    pools::poolinfo::render(out, s.pools)?;
    writeln!(out, "pools {}", s.pools.len())?;
    writeln!(
        out,
        "sense mode={} slab_allocs={} reserve_hits={} waits={} reserve_held={} in_use={}",
        s.sense_mode,
        s.sense.slab_allocs,
        s.sense.reserve_hits,
        s.sense.waits,
        s.sense.reserve_held,
        s.sense.in_use
    )?;
    writeln!(
        out,
        "scsi submitted={} completed={} succeeded={} failed={} retries={} timeouts={} aborts={} resets={}",
        s.scsi.submitted,
        s.scsi.completed,
        s.scsi.succeeded,
        s.scsi.failed,
        s.scsi.retries,
        s.scsi.timeouts,
        s.scsi.aborts,
        s.scsi.host_resets
    )
}

/// The NBD server's sessions and the NIC under it.
fn write_server(out: &mut String, server: &ServerStats, nic_interrupts: bool) -> core::fmt::Result {
    let nbd = &server.nbd;
    writeln!(
        out,
        "nbd connections={} dropped={} refused={} reads={} writes={} flushes={} trims={} write_zeroes={} bytes_read={} bytes_written={} errors={}",
        server.connections,
        server.dropped,
        server.refused,
        nbd.reads,
        nbd.writes,
        nbd.flushes,
        nbd.trims,
        nbd.write_zeroes,
        nbd.bytes_read,
        nbd.bytes_written,
        nbd.errors
    )?;
    let dev = &server.device;
    writeln!(
        out,
        "net rx_frames={} tx_frames={} rx_bytes={} tx_bytes={} errors={} resets={} irq={} irq_routes={} tx_dropped={} rx_waits_for_tx={}",
        dev.rx_frames,
        dev.tx_frames,
        dev.rx_bytes,
        dev.tx_bytes,
        dev.errors,
        dev.resets,
        if nic_interrupts { "msix" } else { "timer" },
        dev.interrupt_routes,
        dev.tx_dropped,
        dev.rx_waits_for_tx
    )?;
    writeln!(
        out,
        "control secret={} accepted={} refused={}",
        if server.control_secret {
            "given"
        } else {
            "none"
        },
        server.control_accepted,
        server.control_refused
    )?;
    writeln!(
        out,
        "tls mode={} started={} failed={}",
        match server.tls_mode {
            nbd::session::Tls::Off => "off",
            nbd::session::Tls::On => "on",
            nbd::session::Tls::Require => "require",
        },
        server.tls_started,
        server.tls_failures
    )
}

/// The disks of the host now, marking the exported one.
fn write_disks(out: &mut String, disks: &[NamedDisk], export: &str) -> core::fmt::Result {
    writeln!(out, "disks {}", disks.len())?;
    for disk in disks {
        writeln!(
            out,
            "disk {} hctl={} blocks={} block_len={} bytes={} ({}){}",
            disk.name,
            disk.hctl,
            disk.disk.blocks,
            disk.disk.block_len,
            disk.disk
                .blocks
                .saturating_mul(u64::from(disk.disk.block_len)),
            capacity_text(&disk.disk),
            if disk.name == export { " export" } else { "" }
        )?;
    }
    Ok(())
}
