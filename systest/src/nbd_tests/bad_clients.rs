//! Clients that misbehave on purpose, from [`harness::nbd_client`]: malformed handshakes,
//! out-of-range and oversize requests, a write cut off by a hang-up, and a deep pipeline. Each
//! must get an error reply or a closed connection, and the server must go on serving.

use super::{TORN_OFFSET, client_size, io};
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;

pub fn bad_handshake(nbd: &NbdGuest) -> Result<String, String> {
    // Unknown client flags: the server hangs up.
    let mut client = io(Client::connect(nbd.nbd_addr()))?;
    io(client.send(&0x8000_0000u32.to_be_bytes()))?;
    if !client.closed_by_server() {
        return Err("unknown client flags: connection stayed open".into());
    }
    // Garbage instead of an option: hang up.
    let mut client = io(Client::connect(nbd.nbd_addr()))?;
    io(client.send(&3u32.to_be_bytes()))?;
    io(client.send(&[0x5a; 16]))?;
    if !client.closed_by_server() {
        return Err("bad option magic: connection stayed open".into());
    }
    // Unknown option and unknown export: error replies, then GO still works.
    let mut client = io(Client::connect(nbd.nbd_addr()))?;
    io(client.send(&3u32.to_be_bytes()))?;
    io(client.option(8, &[]))?;
    let (unsup, _) = io(client.option_reply())?;
    io(client.option(nbd::opt::GO, &nbd::go_payload("nosuch")))?;
    let (unknown, _) = io(client.option_reply())?;
    if unsup != nbd::rep::ERR_UNSUP || unknown != nbd::rep::ERR_UNKNOWN {
        return Err(format!("replies {unsup:#x} {unknown:#x}"));
    }
    // A client that vanishes during the handshake.
    drop(io(Client::connect(nbd.nbd_addr()))?);
    let size = client_size(nbd)?;
    Ok(format!(
        "closed on bad flags and magic, ERR_UNSUP/ERR_UNKNOWN answered, then served {size} B"
    ))
}

/// `result` with `what` in front of its error.
pub fn step<T>(what: &str, result: std::io::Result<T>) -> Result<T, String> {
    result.map_err(|e| format!("{what}: {e}"))
}

pub fn bad_requests(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = step("open", Client::open(nbd.nbd_addr()))?;
    let size = client.size;
    let past_end = step("read past the end", client.read(size - 512, 1024))?.err();
    let wraps = step("read wrapping past 2^64", client.read(u64::MAX - 511, 4096))?.err();
    let oversize = step("oversize read", client.read(0, 64 << 20))?.err();
    let write_past = step("write past the end", client.write(size - 4, &[0xee; 8]))?;
    // The NBD protocol's "Error values": EINVAL for a read beyond the end or over the maximum
    // payload (EOVERFLOW is reserved for structured reads), ENOSPC for a write beyond the end.
    if past_end != Some(nbd::Errno::EINVAL.0)
        || wraps != Some(nbd::Errno::EINVAL.0)
        || oversize != Some(nbd::Errno::EINVAL.0)
        || write_past != nbd::Errno::ENOSPC.0
    {
        return Err(format!(
            "errors: read past the end {past_end:?}, wrapping read {wraps:?}, oversize read {oversize:?}, write past the end {write_past}"
        ));
    }
    // The connection still works after the errors.
    if step("good read", client.read(0, 4096))?.is_err() {
        return Err("a good read after the errors failed".into());
    }
    // An oversize write (4 KiB over the 32 MiB maximum) with its payload: the payload is
    // drained, the error comes back, and the connection goes on.
    let oversize_len = (32 << 20) + 4096;
    step(
        "oversize write",
        client.request(
            nbd::cmd::WRITE,
            9,
            0,
            oversize_len,
            &vec![0xee; oversize_len as usize],
        ),
    )?;
    let (error, _) = step("oversize write reply", client.reply())?;
    if error != nbd::Errno::EINVAL.0 {
        return Err(format!("oversize write: errno {error}, not EINVAL"));
    }
    match step("read after the oversize write", client.read(0, 4096))? {
        Ok(data) if data.iter().all(|&b| b != 0xee) => {}
        other => {
            return Err(format!(
                "after the oversize write: {:?}",
                other.map(|d| d.iter().filter(|&&b| b == 0xee).count())
            ));
        }
    }
    io(client.disconnect())?;
    Ok(
        "EINVAL (past the end, wrapping, oversize), ENOSPC; a 32 MiB + 4 KiB write drained, EINVAL, connection kept"
            .into(),
    )
}

pub fn torn_write(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let full = nbd::request_bytes(nbd::cmd::WRITE, 5, TORN_OFFSET, 4096, &[0xcd; 4096]);
    io(client.send(&full[..28 + 1000]))?;
    drop(client);
    // The server must go on serving.
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let back = io(client.read(TORN_OFFSET, 4096))?;
    io(client.disconnect())?;
    match back {
        Ok(data) if data.iter().all(|&b| b == 0) => {
            Ok("nothing written, next client served".into())
        }
        Ok(_) => Err("part of a torn write reached the disk".into()),
        Err(errno) => Err(format!("read after torn write: errno {errno}")),
    }
}

pub fn pipelined(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let base = 24u64 << 20;
    let mut batch = Vec::new();
    for i in 0..16u64 {
        batch.extend(nbd::request_bytes(
            nbd::cmd::WRITE,
            100 + i,
            base + i * 4096,
            4096,
            &[i as u8 + 1; 4096],
        ));
    }
    for i in 0..16u64 {
        batch.extend(nbd::request_bytes(
            nbd::cmd::READ,
            200 + i,
            base + i * 4096,
            4096,
            &[],
        ));
    }
    io(client.send(&batch))?;
    for i in 0..16u64 {
        let (error, handle) = io(client.reply())?;
        if error != 0 || handle != 100 + i {
            return Err(format!("write reply {i}: errno {error} handle {handle}"));
        }
    }
    for i in 0..16u64 {
        let (error, handle) = io(client.reply())?;
        let data = io(client.bytes(4096))?;
        if error != 0 || handle != 200 + i || data.iter().any(|&b| b != i as u8 + 1) {
            return Err(format!("read reply {i}: errno {error} handle {handle}"));
        }
    }
    io(client.disconnect())?;
    Ok("32 requests in flight on one connection".into())
}
