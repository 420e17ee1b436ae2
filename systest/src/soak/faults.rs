//! The faults of phase 1: blkdebug's failing sectors, garbage connections, and a second disk
//! hot-plugged and unplugged over QMP.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use workloads::Rng;

use super::BAD_SECTORS_EACH;
use super::model::{BLOCK, Shadow};
use harness::nbd_client::Errno;
use harness::qmp::Qmp;

/// The sectors blkdebug fails: with EIO for writes and for reads, and with ENOSPC for writes
/// (a host file system that is full). QEMU reports an ENOSPC to the guest as DATA PROTECT,
/// SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h) only under `werror=report`; under its default
/// (`werror=enospc`) it stops the guest instead, and every client times out.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    write: Vec<u64>,
    read: Vec<u64>,
    full: Vec<u64>,
}

impl Faults {
    /// `BAD_SECTORS_EACH` write-failing and read-failing sectors spread over each region.
    pub fn for_regions(regions: &[Shadow]) -> Faults {
        let mut faults = Faults::default();
        for region in regions {
            let len = region.blocks.len() as u64;
            for i in 0..BAD_SECTORS_EACH {
                let write_block =
                    region.first_block + len * (2 * i + 1) / (2 * BAD_SECTORS_EACH + 1);
                let read_block =
                    region.first_block + len * (2 * i + 2) / (2 * BAD_SECTORS_EACH + 1);
                faults.write.push(write_block * (BLOCK / 512) + 3);
                faults.read.push(read_block * (BLOCK / 512) + 5);
            }
            // One disk-full sector per region, before its first EIO sector.
            let full_block = region.first_block + len / (2 * BAD_SECTORS_EACH + 1) / 2;
            faults.full.push(full_block * (BLOCK / 512) + 1);
        }
        faults
    }

    fn touches(sectors: &[u64], shadow: &Shadow, index: u64, count: u64) -> bool {
        let start = shadow.offset(index) / 512;
        let end = shadow.offset(index + count) / 512;
        sectors.iter().any(|s| (start..end).contains(s))
    }

    /// How many sectors fail.
    pub fn sectors(&self) -> u64 {
        (self.write.len() + self.read.len() + self.full.len()) as u64
    }

    /// Whether a write of these blocks meets a failing sector (EIO or ENOSPC).
    pub fn touches_write(&self, shadow: &Shadow, index: u64, count: u64) -> bool {
        Self::touches(&self.write, shadow, index, count)
            || Self::touches(&self.full, shadow, index, count)
    }

    /// Whether a write of these blocks meets only disk-full sectors, so ENOSPC is the one right
    /// answer.
    pub fn only_full(&self, shadow: &Shadow, index: u64, count: u64) -> bool {
        Self::touches(&self.full, shadow, index, count)
            && !Self::touches(&self.write, shadow, index, count)
    }

    pub fn touches_read(&self, shadow: &Shadow, index: u64, count: u64) -> bool {
        Self::touches(&self.read, shadow, index, count)
    }

    /// blkdebug's rules file.
    pub fn config(&self) -> String {
        let rule = |event: &str, errno: Errno, sector: u64| {
            format!(
                "[inject-error]\nevent = \"{event}\"\nerrno = \"{}\"\nsector = \"{sector}\"\n\n",
                errno.0
            )
        };
        let mut text = String::new();
        for &sector in &self.write {
            text += &rule("write_aio", Errno::EIO, sector);
        }
        for &sector in &self.read {
            text += &rule("read_aio", Errno::EIO, sector);
        }
        for &sector in &self.full {
            text += &rule("write_aio", Errno::ENOSPC, sector);
        }
        text
    }
}

/// Opens connections that send junk (or nothing) and hang up, until `stop`.
pub fn garbage_connections(stop: &AtomicBool, count: &AtomicU64, nbd_addr: SocketAddr) {
    let mut rng = Rng::new(0x6a72_6261_6765);
    while !stop.load(Ordering::SeqCst) {
        if let Ok(mut stream) = TcpStream::connect_timeout(&nbd_addr, Duration::from_secs(5)) {
            use std::io::Write;
            let mut junk = vec![0; rng.below(64) as usize];
            rng.fill_bytes(&mut junk);
            let _ = stream.write_all(&junk);
            count.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Plugs a second disk in and out over QMP until `stop`: (completed cycles, errors).
pub fn hotplug_cycles(stop: &AtomicBool, qmp: &Path, images: &Path) -> (u64, Vec<String>) {
    let image: PathBuf = images.join(format!("soak-hotplug-{}.raw", std::process::id()));
    let mut cycles = 0;
    let mut errors = Vec::new();
    let mut qmp = match Qmp::connect(qmp) {
        Ok(qmp) => qmp,
        Err(e) => return (0, vec![e.into()]),
    };
    while !stop.load(Ordering::SeqCst) {
        match plug_cycle(&mut qmp, &image, stop) {
            Ok(()) => cycles += 1,
            Err(e) => errors.push(e),
        }
        if errors.len() > 5 {
            break;
        }
    }
    let _ = std::fs::remove_file(&image);
    (cycles, errors)
}

fn plug_cycle(qmp: &mut Qmp, image: &Path, stop: &AtomicBool) -> std::result::Result<(), String> {
    let file = std::fs::File::create(image).map_err(|e| e.to_string())?;
    file.set_len(8 << 20).map_err(|e| e.to_string())?;
    drop(file);
    let node = "soakhp";
    qmp.plug_scsi_hd(node, image)?;
    sleep_unless(stop, Duration::from_secs(3));
    qmp.execute("device_del", json!({ "id": node }))?;
    // The node is released once the device is gone.
    let start = Instant::now();
    while qmp
        .execute("blockdev-del", json!({ "node-name": node }))
        .is_err()
    {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("blockdev-del: node still in use 30 s after device_del".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    sleep_unless(stop, Duration::from_secs(2));
    Ok(())
}

fn sleep_unless(stop: &AtomicBool, total: Duration) {
    let start = Instant::now();
    while start.elapsed() < total && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
}
