//! `workload=nbd` on Hermit: serve the first disk the scan finds over NBD on Hermit's own TCP
//! stack (its `tcp` feature: smoltcp under its socket calls, on a modern virtio-net device),
//! with the stats port beside it, until a client sends `shutdown` with the host's control
//! secret. The export is `nbd::block::MidlayerDisk` over the polled virtio-scsi (or SAS1068)
//! attach, the same export sensepool's kernel serves; on shutdown the disk's cache is flushed
//! and the application exits with success.
//!
//! The console lines are our kernel's: `NBD serving sda (…) on 10.0.2.15:10809, stats on
//! :10810` once the server listens, `NBD shutdown requested by PEER on the stats port`, and
//! `NBD stopped: …` at the end.

use alloc::format;
use alloc::string::String;

use hermit::println;
use nbd::block::{BlockExport, MidlayerDisk};
use nbd::config::NetConfig;
use nbd::control::{self, Control};
use nbd::session::{Export, Tls};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::SenseStorage;
use scsi::wait::IoMode;
use workloads::device::HostId;
use workloads::io::WorkloadParams;
use workloads::platform::scan_disks;

use crate::attach::{HermitPlatform, OnHost};
use crate::nbd_server::{Server, Totals};
use crate::platform::{ExitCode, TscClock};
use crate::sockets;

/// How long the loop keeps polling after the last work before it sleeps in `sys_poll`: a client
/// at iodepth 1 sends its next request about one round trip after the reply.
const SPIN_AFTER_TRAFFIC_NS: u64 = 2_000_000;
/// The sleep between idle rounds: the latency a request may wait once the loop is idle.
const IDLE_SLEEP_US: u64 = 1000;

/// Serves the first disk found; `served` and `ok` say how it went.
struct Nbd {
    net: NetConfig,
    next_disk: usize,
    served: bool,
    ok: bool,
}

/// The words our kernel takes that this application cannot honour, refused by name.
fn refused_words(net: &NetConfig) -> Option<String> {
    if net.nbd_tls != Tls::Off {
        return Some(String::from(
            "nbd_tls= is not available on Hermit (the application has no TLS)",
        ));
    }
    if net.nic_reset_after != 0 {
        return Some(String::from(
            "nic_reset_after= is not available on Hermit (Hermit drives the NIC, not the application)",
        ));
    }
    None
}

/// The stats port's [`Control`] with the host's secret (none: `shutdown` is refused).
fn control_from_host() -> Control {
    match crate::host_files::read_file(control::SECRET_FILE, control::MAX_SECRET_BYTES) {
        Ok(None) => {
            println!(
                "NBD control: no secret from the host ({}): `shutdown` will be refused",
                control::SECRET_FILE
            );
            Control::new(None)
        }
        Ok(Some(secret)) => Control::new(Some(&secret)),
        Err(error) => {
            println!("NBD control: {error}: `shutdown` will be refused");
            Control::new(None)
        }
    }
}

/// The stats endpoint's text: the server's counters and the export.
fn stats_text<E: Export>(name: &str, totals: &Totals, export: &E) -> String {
    let nbd = &totals.nbd;
    format!(
        "sensepool on Hermit: NBD export {name} ({} bytes)\n\
         nbd connections={} dropped={} refused={} reads={} writes={} flushes={} bytes_read={} bytes_written={} errors={}\n",
        export.size_bytes(),
        totals.connections,
        totals.dropped,
        nbd.refusals,
        nbd.reads,
        nbd.writes,
        nbd.flushes,
        nbd.bytes_read,
        nbd.bytes_written,
        nbd.errors
    )
}

impl OnHost for Nbd {
    fn host<H, A, C>(&mut self, id: HostId<'_>, stack: &mut Midlayer<H, A, C>) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
    {
        let disks = scan_disks(
            &HermitPlatform,
            id.name,
            id.index,
            stack,
            &mut self.next_disk,
        );
        if self.served {
            return true;
        }
        let Some(named) = disks.first() else {
            log::warn!("nbd: {}: no disk to export", id.name);
            return true;
        };
        self.served = true;
        let name: &'static str = String::leak(named.name.clone());
        let disk = named.disk;
        let mut server = match Server::listen(self.net, name, control_from_host()) {
            Ok(server) => server,
            Err(error) => {
                println!(
                    "NBD FAILED: {error} (Hermit drives a virtio-net NIC only as a modern device: disable-legacy=on)"
                );
                self.ok = false;
                return false;
            }
        };
        let mut export = BlockExport::new(MidlayerDisk { stack, disk });
        let [a, b, c, d] = self.net.ip;
        println!(
            "NBD serving {name} ({} bytes, {} {}-byte blocks, {}{}) on {a}.{b}.{c}.{d}:{}, stats on :{}",
            export.size_bytes(),
            disk.blocks,
            disk.block_len,
            id.name,
            if self.net.nbd_readonly {
                ", read-only"
            } else {
                ""
            },
            self.net.nbd_port,
            self.net.stats_port
        );
        serve(&mut server, &mut export, name);
        self.ok &= finish(&server, &mut export);
        self.ok
    }
}

/// Polls the server until it has finished after `shutdown`, then a little longer, so the
/// stats client gets its text and the end of its stream before the machine goes away.
fn serve<E: Export>(server: &mut Server, export: &mut E, name: &str) {
    let mut text = |totals: &Totals, export: &E| stats_text(name, totals, export);
    let mut last_work_ns = TscClock.now_ns();
    loop {
        let now_ns = TscClock.now_ns();
        if server.finished(now_ns) {
            break;
        }
        if server.poll(export, now_ns, &mut text) {
            last_work_ns = now_ns;
        } else if now_ns.saturating_sub(last_work_ns) > SPIN_AFTER_TRAFFIC_NS {
            sockets::sleep(IDLE_SLEEP_US);
        }
    }
    let deadline_ns = TscClock.now_ns() + 200_000_000;
    while TscClock.now_ns() < deadline_ns {
        if !server.poll(export, TscClock.now_ns(), &mut text) {
            sockets::sleep(IDLE_SLEEP_US);
        }
    }
}

/// The final SYNCHRONIZE CACHE and the `NBD stopped:` line; whether the flush succeeded.
fn finish<D: nbd::block::BlockDevice>(server: &Server, export: &mut BlockExport<D>) -> bool {
    let flushed = export.sync_cache();
    let totals = server.totals();
    println!(
        "{}",
        nbd::stopped::Stopped {
            connections: totals.connections,
            dropped: totals.dropped,
            nbd: &totals.nbd,
            cache_syncs: export.cache_syncs(),
            final_flush: flushed,
        }
    );
    flushed.is_ok()
}

/// Serves until told to stop; success when a disk was served and flushed at the end.
pub fn run(params: &WorkloadParams, io_mode: IoMode, net: NetConfig) -> ExitCode {
    if let Some(reason) = refused_words(&net) {
        println!("CMDLINE ERROR: {reason}");
        return ExitCode::Failure;
    }
    if crate::platform::start_clock("nbd").is_none() {
        return ExitCode::Failure;
    }
    let mut nbd = Nbd {
        net,
        next_disk: 0,
        served: false,
        ok: true,
    };
    let (_, failed) = crate::storage::on_every_host(&mut nbd, params, io_mode);
    if !nbd.served {
        println!("NBD FAILED: no SCSI disk to export");
    }
    if nbd.served && nbd.ok && failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
