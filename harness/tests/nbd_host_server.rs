//! The `nbd` crate's session served on the host over real TCP sockets (`nbd::stream::serve` on
//! a `TcpStream`, one thread per connection, one RAM export behind a lock), driven by real
//! clients: the harness's test client (the one the guest NBD tests use) and libnbd's `nbdinfo`
//! and `nbdcopy` (installed by `cargo xtask setup`). The same protocol code runs in the guest,
//! so a client that cannot talk to this server cannot talk to the guest's either; this finds
//! that in seconds, without QEMU.

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::nbd_client::{self as client, Client};
use nbd::memory::MemoryExport;
use nbd::session::{Export, Session, Tls};
use nbd::wire::Errno;

const DISK_BYTES: usize = 16 << 20;

/// The one export every connection serves, each call under the lock.
#[derive(Clone)]
struct Shared(Arc<Mutex<MemoryExport>>);

impl Export for Shared {
    fn size_bytes(&self) -> u64 {
        self.0.lock().unwrap().size_bytes()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.0.lock().unwrap().read(offset, buf)
    }
    fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        self.0.lock().unwrap().write(offset, data, fua)
    }
    fn write_zeroes(&mut self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.0.lock().unwrap().write_zeroes(offset, len, fua)
    }
    fn flush(&mut self) -> Result<(), Errno> {
        self.0.lock().unwrap().flush()
    }
}

/// Starts a server on a free loopback port; it runs until the test process ends.
fn start_server() -> (SocketAddr, Shared) {
    start_server_with(false, Tls::Off)
}

/// [`start_server`], serving the export read-only when `read_only`, under the `tls` policy
/// (this server has no TLS transport: a STARTTLS ends the connection).
fn start_server_with(read_only: bool, tls: Tls) -> (SocketAddr, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let export = Shared(Arc::new(Mutex::new(MemoryExport::new(DISK_BYTES))));
    let shared = export.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut export = export.clone();
            std::thread::spawn(move || {
                // A client silent this long is gone: the connection ends with an error.
                stream
                    .set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let mut session = Session::new("mem").with_read_only(read_only).with_tls(tls);
                let _ = nbd::stream::serve(&mut stream, &mut session, &mut export);
            });
        }
    });
    (addr, shared)
}

/// A libnbd tool, or a failure that says how to get it.
fn tool(name: &str) -> Command {
    let found = Command::new(name).arg("--version").output();
    assert!(
        found.is_ok_and(|out| out.status.success()),
        "{name} is not installed: `cargo xtask setup` installs libnbd-bin"
    );
    Command::new(name)
}

#[test]
fn xtask_s_client_writes_reads_and_gets_the_errors_it_expects() {
    let (addr, _) = start_server();
    let mut c = Client::open(addr).unwrap();
    assert_eq!(c.size, DISK_BYTES as u64);
    let data: Vec<u8> = (0..128 << 10).map(|i| (i % 253) as u8).collect();
    assert_eq!(c.write(1 << 20, &data).unwrap(), 0);
    assert_eq!(c.read(1 << 20, data.len() as u32).unwrap(), Ok(data));
    assert_eq!(
        c.read(DISK_BYTES as u64, 512).unwrap(),
        Err(Errno::EINVAL.0),
        "a read past the end"
    );
    assert_eq!(
        c.read(u64::MAX - 511, 4096).unwrap(),
        Err(Errno::EINVAL.0),
        "a read whose offset + length wraps past 2^64"
    );
    assert_eq!(
        c.read(0, (32 << 20) + 4096).unwrap(),
        Err(Errno::EINVAL.0),
        "a read over 32 MiB (the protocol reserves EOVERFLOW for structured reads)"
    );
    assert_eq!(
        c.write(DISK_BYTES as u64 - 512, &[0; 1024]).unwrap(),
        Errno::ENOSPC.0,
        "a write past the end"
    );
    c.disconnect().unwrap();
    // A bad request magic closes the connection.
    let mut bad = Client::open(addr).unwrap();
    let mut header = client::request_bytes(client::cmd::READ, 1, 0, 512, &[]);
    header[0] ^= 0xff;
    bad.send(&header).unwrap();
    assert!(bad.closed_by_server(), "bad magic not closed");
}

#[test]
fn nbdinfo_reads_the_export_s_size_and_block_sizes() {
    let (addr, _) = start_server();
    let out = tool("nbdinfo")
        .arg("--json")
        .arg(format!("nbd://{addr}/mem"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nbdinfo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let export = &json["exports"][0];
    assert_eq!(export["export-size"], DISK_BYTES as u64, "{text}");
    assert_eq!(export["block_size_maximum"], 32 << 20, "{text}");
    assert_eq!(export["can_multi_conn"], true, "{text}");
}

#[test]
fn nbdcopy_with_four_connections_copies_in_and_back_out_unchanged() {
    let (addr, export) = start_server();
    let dir = std::env::temp_dir().join(format!("nbd-host-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (source, back) = (dir.join("source"), dir.join("back"));
    let mut data = vec![0u8; DISK_BYTES];
    workloads::Rng::new(21).fill_bytes(&mut data);
    std::fs::write(&source, &data).unwrap();
    let url = format!("nbd://{addr}/mem");
    let copies = [
        (source.display().to_string(), url.clone()),
        (url, back.display().to_string()),
    ];
    for (from, to) in copies {
        let out = tool("nbdcopy")
            .args(["--connections=4", &from, &to])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nbdcopy {from} {to}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let copied = std::fs::read(&back).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(copied == data, "the copy that came back differs");
    assert!(
        export.0.lock().unwrap().data == data,
        "the export differs from the source"
    );
}

/// A read-only export as real clients see it: nbdinfo reports it read-only, qemu-io cannot open
/// it for writing and reads it with `-r`, and the export is untouched.
#[test]
fn real_clients_see_a_read_only_export_as_read_only() {
    let (addr, export) = start_server_with(true, Tls::Off);
    export.0.lock().unwrap().data.fill(0x5a);
    let url = format!("nbd://{addr}/mem");
    let out = tool("nbdinfo").args(["--json", &url]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let info = &json["exports"][0];
    assert_eq!(info["is_read_only"], true, "{json}");
    assert_eq!(info["can_trim"], false, "{json}");
    assert_eq!(info["can_zero"], false, "{json}");
    let write = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 0xab 0 64k", &url])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&write.stderr).to_string()
        + &String::from_utf8_lossy(&write.stdout);
    // qemu's NBD client refuses to open a read-only export for writing.
    assert!(
        !write.status.success() && said.contains("Permission denied"),
        "{said}"
    );
    let read = Command::new("qemu-io")
        .args(["-r", "-f", "raw", "-c", "read -P 0x5a 0 64k", &url])
        .output()
        .unwrap();
    assert!(read.status.success(), "{read:?}");
    let mut raw = Client::open(addr).unwrap();
    assert_eq!(raw.write(0, &[1; 512]).unwrap(), Errno::EPERM.0);
    raw.disconnect().unwrap();
    assert!(export.0.lock().unwrap().data.iter().all(|&b| b == 0x5a));
}

/// A server that requires TLS, as the clients users have see it in the clear: qemu-img and
/// nbdinfo are refused with `NBD_REP_ERR_TLS_REQD` (each says TLS is required), and learn
/// nothing of the export, and the same session code offering TLS (`on`) still serves them.
#[test]
fn plain_clients_are_refused_by_a_server_that_requires_tls() {
    let (addr, _) = start_server_with(false, Tls::Require);
    let url = format!("nbd://{addr}/mem");
    // Each client's own words for NBD_REP_ERR_TLS_REQD.
    for (mut command, args, words) in [
        (
            tool("nbdinfo"),
            ["--size", &url],
            "server requires TLS encryption first",
        ),
        (
            Command::new("qemu-img"),
            ["info", &url],
            "TLS negotiation required before option 7 (go)",
        ),
    ] {
        let out = command.args(args).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{command:?} was served: {said}");
        assert!(said.contains(words), "{command:?}: {said}");
        assert!(
            !said.contains("16777216"),
            "{command:?} learnt the size: {said}"
        );
    }
    let (addr, _) = start_server_with(false, Tls::On);
    let out = tool("nbdinfo")
        .args(["--size", &format!("nbd://{addr}/mem")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        DISK_BYTES.to_string()
    );
}
