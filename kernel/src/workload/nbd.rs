//! `workload=nbd`: serve the first disk the scan finds over NBD on virtio-net, with the stats
//! endpoint beside it, until a client sends `shutdown` with the host's control secret to the
//! stats port.
//!
//! The disk is reached through the midlayer and the real host adapter driver, so an NBD read is
//! READ(10/16) commands through virtio-scsi (or the SAS1068) to QEMU's image file. Each NBD
//! request runs to completion before the next (the midlayer still splits a large one into
//! commands kept `cmd_per_lun` deep). On shutdown the device's cache is flushed (SYNCHRONIZE
//! CACHE) and the kernel exits with success, so the image holds every acknowledged write. A
//! shutdown first lets the NBD sessions finish what they had received ([`Server::finished`]).
//!
//! When no frame has moved for [`SPIN_AFTER_TRAFFIC_NS`] the CPU halts ([`idle::wait_until`])
//! until the NIC
//! interrupts, smoltcp's next timer, or the server's idle period (100 ms with interrupts), so
//! an idle server leaves the host CPU alone. While serving, the host's hot-plug notices are applied between polls
//! ([`os::storage::hotplug`]): a disk added or removed is printed on the console and the stats
//! port lists the disks as they are now. The export stays the disk it started with.
//!
//! The console gets `NBD serving sda (N bytes) on 10.0.2.15:10809, stats on :10810` once the
//! server listens (xtask waits for that line) and `NBD stopped: ...` at the end.

use alloc::string::String;
use alloc::sync::Arc;

use scsi::host::ScsiHost;
use scsi::sense_alloc::SenseMode;

use crate::cmdline::Cmdline;
use nbd::block::{BlockExport, MidlayerDisk};
use nbd::session::{Export, Tls};
use os::arch::exit::ExitCode;
use os::arch::idle;
use os::arch::time;
use os::net::config::NetConfig;
use os::net::control::{self, Control};
use os::net::device::NetDevice;
use os::net::server::{Server, ServerStats};
use os::net::stats::{self, Snapshot};
use os::net::tls::{ServerConfig, credentials};
use os::platform::console::println;
use os::platform::fw_cfg;
use os::storage::hotplug::Disks;
use os::storage::report::{NamedDisk, print_scan};
use os::storage::{self, HostInfo, HostVisitor, KernelClock, SenseBuf, Stack, StackSense};

/// The stats port's [`Control`] with the secret the host gave through fw_cfg (none: every
/// state-changing command is refused).
fn control_from_host() -> Control {
    match fw_cfg::read_file(control::SECRET_FILE, control::MAX_SECRET_BYTES) {
        Ok(secret) => {
            if secret.is_none() {
                println!(
                    "NBD control: no secret from the host ({}): `shutdown` will be refused",
                    control::SECRET_FILE
                );
            }
            Control::new(secret.as_deref())
        }
        Err(error) => {
            println!("NBD control: {error}: `shutdown` will be refused");
            Control::new(None)
        }
    }
}

/// The TLS configuration `nbd_tls=on|require` serves under, from the host's fw_cfg files;
/// `Err` (said on the console) when it asks for TLS and the host gave no usable credentials:
/// serving in the clear instead would be what the user said not to do.
fn tls_from_host(mode: Tls) -> Result<Option<Arc<ServerConfig>>, ()> {
    if mode == Tls::Off {
        return Ok(None);
    }
    match credentials::from_host() {
        Ok(config) => Ok(Some(config)),
        Err(error) => {
            println!("NBD FAILED: nbd_tls needs the host's TLS credentials: {error}");
            Err(())
        }
    }
}

/// A scanned disk on this kernel's midlayer, as the NBD export's block device.
type ScsiDisk<'d, 's, H> = MidlayerDisk<'d, H, StackSense<'s>, KernelClock>;

/// The stats endpoint's text: the server's counters and this host's disks as they are now.
fn stats_text<'s, H: ScsiHost<SenseBuf<'s>>>(
    sense_mode: SenseMode,
    export_name: &str,
    server_stats: &ServerStats,
    device: &NetDevice,
    export: &BlockExport<ScsiDisk<'_, 's, H>>,
    disks: &[NamedDisk],
) -> String {
    let stack = &*export.device().stack;
    // The live dmapools of this I/O path are the NIC's packet buffers (virtio-scsi keeps
    // none; an MPT host's chain pool belongs to the storage layer, printed at detach).
    let pools = device.pools();
    stats::render(&Snapshot {
        uptime_ms: time::now_ns() / 1_000_000,
        pools: &pools,
        sense_mode,
        sense: stack.sense_stats(),
        scsi: stack.stats(),
        server: server_stats,
        disks,
        export: export_name,
        nic_interrupts: device.interrupts,
    })
}

/// How long the server keeps polling after the last frame before it halts: a client at
/// iodepth 1 sends its next request about one round trip after the reply, and waking a halted
/// vCPU costs a host scheduler wake-up on top (milliseconds on a loaded host).
const SPIN_AFTER_TRAFFIC_NS: u64 = 2_000_000;

struct Nbd {
    net: NetConfig,
    sense: SenseMode,
    next_disk: usize,
    /// Set once a disk has been served (later hosts are only scanned).
    served: bool,
    ok: bool,
}

impl Nbd {
    /// The virtio-net NIC, brought up and named on the console; `None` (said why) without one.
    fn bring_up_nic(&self) -> Option<NetDevice> {
        let mut device = match NetDevice::probe() {
            Ok(device) => device,
            Err(err) => {
                println!("NBD FAILED: {err}");
                return None;
            }
        };
        device.inject_reset_after(self.net.nic_reset_after);
        let mac = device.mac();
        log::info!(
            "net: virtio-net at {} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            device.function.bdf,
            mac[0],
            mac[1],
            mac[2],
            mac[3],
            mac[4],
            mac[5]
        );
        Some(device)
    }
}

impl HostVisitor for Nbd {
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool {
        let report = stack.scan();
        let disks = print_scan(host, &report, &mut self.next_disk);
        if self.served {
            return true;
        }
        let Some(named) = disks.first() else {
            log::warn!("nbd: {host}: no disk to export");
            return true;
        };
        self.served = true;
        let (Some(mut device), Ok(tls)) = (self.bring_up_nic(), tls_from_host(self.net.nbd_tls))
        else {
            self.ok = false;
            return false;
        };
        let name: &'static str = String::leak(named.name.clone());
        let disk = named.disk;
        let server = Server::new(&mut device, self.net, name, control_from_host(), tls);
        let export = BlockExport::new(MidlayerDisk { stack, disk });
        let [a, b, c, d] = self.net.ip;
        println!(
            "NBD serving {name} ({} bytes, {} {}-byte blocks, {host}{}{}) on {a}.{b}.{c}.{d}:{}, stats on :{}",
            export.size_bytes(),
            disk.blocks,
            disk.block_len,
            if self.net.nbd_readonly {
                ", read-only"
            } else {
                ""
            },
            match self.net.nbd_tls {
                Tls::Off => "",
                Tls::On => ", TLS offered",
                Tls::Require => ", TLS required with a client certificate",
            },
            self.net.nbd_port,
            self.net.stats_port
        );
        let mut serving = Serving {
            server,
            device,
            export,
            disks: Disks::new(*host, disks),
            sense_mode: self.sense,
            name,
            last_traffic_ns: time::now_ns(),
        };
        let (serve_start_ns, idle_start) = (serving.last_traffic_ns, idle::stats());
        let served = serving.run();
        serving.print_idle(serve_start_ns, idle_start);
        let flushed = serving.finish();
        self.ok &= served && flushed;
        self.ok
    }
}

/// One served disk: the NIC, the server on it and the export, polled together.
struct Serving<'d, 's, H: ScsiHost<SenseBuf<'s>>> {
    server: Server,
    device: NetDevice,
    export: BlockExport<ScsiDisk<'d, 's, H>>,
    /// The host's disks as hot-plug notices leave them (listed on the stats port).
    disks: Disks,
    sense_mode: SenseMode,
    name: &'static str,
    /// When a frame last moved or a session last did work (TSC ns).
    last_traffic_ns: u64,
}

impl<'s, H: ScsiHost<SenseBuf<'s>>> Serving<'_, 's, H> {
    /// Serves until the server has finished after `shutdown` (true) or the NIC died (false,
    /// said on the console), then lets the stats client see its text and the FIN before the
    /// machine goes away.
    fn run(&mut self) -> bool {
        // After `shutdown` the server drains its sessions (NBD_ESHUTDOWN to later requests).
        while !self.server.finished() {
            if self.device.is_dead() {
                // No frame will move again: keep what was acknowledged and say so.
                println!(
                    "NBD FAILED: the NIC did not confirm its reset; flushing the disk and exiting"
                );
                return false;
            }
            self.poll();
        }
        let deadline = time::now_ns() + 200_000_000;
        while time::now_ns() < deadline {
            self.poll();
        }
        true
    }

    /// One round of the server, then the host's hot-plug notices; halts when nothing has moved
    /// for [`SPIN_AFTER_TRAFFIC_NS`].
    fn poll(&mut self) {
        let before = self.device.stats();
        let (sense_mode, name, disks) = (self.sense_mode, self.name, &self.disks);
        // A session with work left (a long WRITE_ZEROES, requests waiting for their turn)
        // counts as traffic: the loop must not halt under it.
        let worked = self.server.poll(
            &mut self.device,
            &mut self.export,
            &mut |stats, device, export| {
                stats_text(sense_mode, name, stats, device, export, disks.list())
            },
        );
        // Hot-plug notices from the adapter: scan what appeared, forget what went away.
        self.disks.poll(self.export.device_mut().stack);
        let after = self.device.stats();
        let now_ns = time::now_ns();
        if worked || (after.rx_frames, after.tx_frames) != (before.rx_frames, before.tx_frames) {
            self.last_traffic_ns = now_ns;
        } else if now_ns - self.last_traffic_ns > SPIN_AFTER_TRAFFIC_NS {
            // Nothing moved for a while: halt until a frame, smoltcp's next timer or the idle
            // period.
            if !self.device.set_receive_interrupts(true) {
                idle::wait_until(self.server.next_deadline_ns(&self.device));
            }
            self.device.set_receive_interrupts(false);
        }
    }

    /// The `NBD idle:` line: how much of the time since `start_ns` the CPU was halted.
    fn print_idle(&self, start_ns: u64, idle_start: idle::IdleStats) {
        let serve_ns = time::now_ns() - start_ns;
        let halted_ns = idle::stats().halted_ns - idle_start.halted_ns;
        println!(
            "NBD idle: halted {:.1}% of {} ms serving, {} wake-ups, device interrupts {}",
            100.0 * halted_ns as f64 / serve_ns.max(1) as f64,
            serve_ns / 1_000_000,
            idle::stats().wakeups - idle_start.wakeups,
            if self.device.interrupts {
                "on (MSI-X)"
            } else {
                "off (timer poll)"
            }
        );
    }

    /// The final SYNCHRONIZE CACHE and the `NBD stopped:` line; whether the flush succeeded.
    fn finish(&mut self) -> bool {
        // Always SYNCHRONIZE CACHE here, even when the export saw no write since its last flush.
        let flushed = self.export.sync_cache();
        let totals = self.server.stats(&self.device);
        println!(
            "{}",
            nbd::stopped::Stopped {
                connections: totals.connections,
                dropped: totals.dropped,
                nbd: &totals.nbd,
                cache_syncs: self.export.cache_syncs(),
                final_flush: flushed,
            }
        );
        flushed.is_ok()
    }
}

/// Serves until told to stop; success when a disk was served and flushed at the end.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let mut nbd = Nbd {
        net: cmdline.net,
        sense: cmdline.io.sense,
        next_disk: 0,
        served: false,
        ok: true,
    };
    let summary = storage::for_each_host(
        &mut nbd,
        super::stack_config(&cmdline.io),
        cmdline.io_mode(),
    );
    if !nbd.served {
        println!("NBD FAILED: no SCSI disk to export");
    }
    if nbd.served && nbd.ok && summary.failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
