//! A hostile client against a fair server: one connection pipelines [`FLOOD_REQUESTS`]
//! `NBD_CMD_WRITE_ZEROES` over the whole export in one write while a second connection keeps
//! reading 4 KiB. The server must keep serving the reader during the flood, answer every flood
//! request in order and without error, and leave the whole export reading back as zeroes.
//!
//! Starvation shows in two ways, each judged against the flood itself, whatever the machine's
//! speed: the reader's first read (sent right after the flood) must come back before half of the
//! flood's replies have, and before half of the flood's time has passed. A server that runs a
//! client's whole receive buffer in one go answers the read only after the whole flood's work,
//! and, when it holds the flood's small replies until its turn ends, at about the moment those
//! replies arrive too: then only the time shows it (an unbounded turn budget answered the first
//! read after 0 replies and 50.2 s, the whole flood).
//!
//! The reader's latencies are printed (median and worst), never judged against a fixed time: a
//! timing does not make a test fail.

use harness::nbd_guest::NbdGuest;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::io;
use harness::nbd_client::{self as nbd, Client};

/// Whole-export WRITE_ZEROES requests in the flood. All of them fit in one receive buffer (28 bytes
/// each), so a server that runs a client's whole input in one go answers the reader only after
/// every one of them, whatever their number; 100 keep the flood about a minute long under TCG
/// (400 stalled a reader for 193 s before the server took turns, and took the suite's longest
/// three minutes once it did).
pub const FLOOD_REQUESTS: u64 = 100;
/// Markers written before the flood, which must read back as zeroes after it.
const MARKERS: [u64; 3] = [0, 32 << 20, (64 << 20) - 4096];
/// The first read may wait for a whole unfair flood (101 s before the fix): a long timeout lets
/// the case see starvation in the order of replies rather than as a timeout.
const STARVED_READ_TIMEOUT: Duration = Duration::from_secs(1200);
/// Reads during the flood are spaced by this much, so the reader samples the whole flood.
const READ_GAP: Duration = Duration::from_millis(20);

/// What the flooding connection saw: when its last reply came, and the first wrong reply.
struct FloodEnd {
    last_reply: Instant,
    wrong: Option<String>,
}

pub fn flood(nbd: &NbdGuest) -> Result<String, String> {
    let mut reader = io(Client::open(nbd.nbd_addr()))?;
    let mut flooder = io(Client::open(nbd.nbd_addr()))?;
    let size = flooder.size;
    for &offset in MARKERS.iter().filter(|&&o| o + 4096 <= size) {
        let error = io(reader.write(offset, &[0xee; 4096]))?;
        if error != 0 {
            return Err(format!("marker write at {offset:#x}: errno {error}"));
        }
    }
    let requests: Vec<u8> = (1..=FLOOD_REQUESTS)
        .flat_map(|handle| nbd::request_bytes(nbd::cmd::WRITE_ZEROES, handle, 0, size as u32, &[]))
        .collect();
    io(flooder.stream.set_read_timeout(Some(STARVED_READ_TIMEOUT)))?;
    io(reader.stream.set_read_timeout(Some(STARVED_READ_TIMEOUT)))?;
    let start = Instant::now();
    io(flooder.send(&requests))?;
    let (done_tx, done_rx) = mpsc::channel();
    let answered = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&answered);
    let replies = std::thread::spawn(move || {
        let end = collect_flood_replies(&mut flooder, &counter);
        let _ = done_tx.send(());
        (end, flooder)
    });
    let mut latencies = Vec::new();
    let mut answered_before_first_read = None;
    loop {
        let offset = (latencies.len() as u64 * 4096 * 7919) % (size - 4096) / 4096 * 4096;
        let asked = Instant::now();
        let back = io(reader.read(offset, 4096))?;
        let done = Instant::now();
        if let Err(errno) = back {
            return Err(format!("read during the flood: errno {errno}"));
        }
        answered_before_first_read.get_or_insert(answered.load(Ordering::SeqCst));
        latencies.push(done - asked);
        if done_rx.recv_timeout(READ_GAP).is_ok() {
            break;
        }
    }
    let (end, flooder) = replies.join().map_err(|_| "flood reader panicked")?;
    if let Some(wrong) = end.wrong {
        return Err(wrong);
    }
    let flood_secs = (end.last_reply - start).as_secs_f64();
    let before_first = answered_before_first_read.ok_or("no read completed")?;
    let first_read_secs = latencies[0].as_secs_f64();
    if before_first >= FLOOD_REQUESTS / 2 || first_read_secs >= flood_secs / 2.0 {
        return Err(format!(
            "starved: the first 4 KiB read came back after {before_first} of the flood's {FLOOD_REQUESTS} replies, {:.1} ms into the flood's {flood_secs:.1} s",
            first_read_secs * 1e3
        ));
    }
    io(flooder.disconnect())?;
    check_zeroes(&mut reader, size)?;
    io(reader.disconnect())?;
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let line = format!(
        "{FLOOD_REQUESTS} x {} MiB WRITE_ZEROES in {flood_secs:.1} s; first read answered after {before_first} flood replies; concurrent 4 KiB reads: {} done, median {:.1} ms, worst {:.1} ms; export reads back as zeroes",
        size >> 20,
        latencies.len(),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() - 1]),
    );
    Ok(line)
}

/// Reads the flood's replies; every one must succeed, in order.
fn collect_flood_replies(flooder: &mut Client, answered: &AtomicU64) -> FloodEnd {
    let mut last_reply = Instant::now();
    for expected in 1..=FLOOD_REQUESTS {
        match flooder.reply() {
            Ok((0, handle)) if handle == expected => {
                last_reply = Instant::now();
                answered.store(expected, Ordering::SeqCst);
            }
            Ok((error, handle)) => {
                return FloodEnd {
                    last_reply,
                    wrong: Some(format!(
                        "flood reply {expected}: errno {error}, handle {handle}"
                    )),
                };
            }
            Err(e) => {
                return FloodEnd {
                    last_reply,
                    wrong: Some(format!("flood reply {expected}: {e}")),
                };
            }
        }
    }
    FloodEnd {
        last_reply,
        wrong: None,
    }
}

/// The whole export reads back as zeroes.
fn check_zeroes(client: &mut Client, size: u64) -> Result<(), String> {
    let chunk = 4u64 << 20;
    let mut offset = 0;
    while offset < size {
        let len = chunk.min(size - offset) as u32;
        match io(client.read(offset, len))? {
            Ok(data) => {
                if let Some(at) = data.iter().position(|&b| b != 0) {
                    return Err(format!(
                        "byte {:#x} is {:#x} after the flood, not zero",
                        offset + at as u64,
                        data[at]
                    ));
                }
            }
            Err(errno) => return Err(format!("read back at {offset:#x}: errno {errno}")),
        }
        offset += u64::from(len);
    }
    Ok(())
}
