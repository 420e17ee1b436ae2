//! Connection life cycle against real sockets: stats queries that half-close or never read must
//! not use up the stats port, clients over `nbd_max_clients=` get a refusal that says why (not
//! silence), a burst of garbage connections leaves every slot usable, and `shutdown` answers a
//! connected client `NBD_ESHUTDOWN` before closing it, and one still in its handshake
//! `NBD_REP_ERR_SHUTDOWN`.

use harness::nbd_guest::NbdGuest;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::io;
use harness::nbd_client::{self as nbd, Client};

/// The kernel's default `nbd_max_clients=`.
const MAX_CLIENTS: usize = 64;
/// Connections held in their handshake while the others are served.
const HANDSHAKING: usize = 10;
/// Stats connections held open by `idle_hold` (the guest has 8 stats sockets).
const HELD_QUERIES: usize = 10;
/// `NBD_ESHUTDOWN`.
const ESHUTDOWN: u32 = nbd::Errno::ESHUTDOWN.0;
/// How long a client retries while the server reclaims slots (each try is a fresh connection).
const RETRY_FOR: Duration = Duration::from_secs(60);
/// Where the client connected across the shutdown writes before it (must be in the image).
pub const SHUTDOWN_OFFSET: u64 = 40 << 20;
pub const SHUTDOWN_BYTE: u8 = 0x3c;

fn stats_stream(nbd: &NbdGuest) -> Result<TcpStream, String> {
    let stream = io(TcpStream::connect_timeout(
        &nbd.stats_addr(),
        nbd::IO_TIMEOUT,
    ))?;
    io(stream.set_read_timeout(Some(nbd::IO_TIMEOUT)))?;
    Ok(stream)
}

fn is_stats(text: &str) -> bool {
    text.contains("poolinfo - 0.1") && text.contains("disks ")
}

/// Six queries that send their FIN first (as `nc -N` does) are answered, then a plain one is.
pub fn half_close(nbd: &NbdGuest) -> Result<String, String> {
    for i in 0..6 {
        let mut stream = stats_stream(nbd)?;
        io(stream.shutdown(Shutdown::Write))?;
        let mut text = String::new();
        io(stream.read_to_string(&mut text))?;
        if !is_stats(&text) {
            return Err(format!("half-closed query {i}: got {} bytes", text.len()));
        }
    }
    if !is_stats(&nbd.stats_text(b"")?) {
        return Err("a plain query after the half-closed ones got no text".into());
    }
    Ok("6 half-closed queries answered, then a plain one".into())
}

/// More queries held open (never reading, never closing) than the guest has stats sockets; one
/// more query is still answered.
pub fn idle_hold(nbd: &NbdGuest) -> Result<String, String> {
    let held: Vec<TcpStream> = (0..HELD_QUERIES)
        .map(|_| stats_stream(nbd))
        .collect::<Result<_, _>>()?;
    // Held, not merely opened: let the guest see all of them before the next query.
    std::thread::sleep(Duration::from_secs(1));
    let start = Instant::now();
    let text = nbd.stats_text(b"")?;
    let waited = start.elapsed();
    drop(held);
    if !is_stats(&text) {
        return Err(format!(
            "the query after {HELD_QUERIES} held ones got no text"
        ));
    }
    Ok(format!(
        "a query after {HELD_QUERIES} held ones answered in {:.1} s",
        waited.as_secs_f64()
    ))
}

/// Opens a client, retrying while the server is still reclaiming slots; returns it and the
/// number of tries.
fn open_retrying(nbd: &NbdGuest) -> Result<(Client, u32), String> {
    let start = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        match Client::open(nbd.nbd_addr()) {
            Ok(client) => return Ok((client, tries)),
            Err(e) if start.elapsed() > RETRY_FOR => {
                return Err(format!("no connection after {tries} tries: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// After 60 garbage connections, and with [`HANDSHAKING`] connections held in their handshake,
/// every slot is usable: `nbd_max_clients` idle clients are served, the next one is refused with
/// `NBD_REP_ERR_POLICY` and a message naming the limit, and after one leaves a new client is
/// served.
pub fn idle_clients(nbd: &NbdGuest) -> Result<String, String> {
    for _ in 0..60 {
        let mut stream = io(TcpStream::connect_timeout(&nbd.nbd_addr(), nbd::IO_TIMEOUT))?;
        let _ = stream.write_all(&[0x5a; 16]);
    }
    // Connections that stay in their handshake hold no served slot.
    let handshaking: Vec<Client> = (0..HANDSHAKING)
        .map(|_| io(Client::connect(nbd.nbd_addr())))
        .collect::<Result<_, _>>()?;
    let mut clients = Vec::new();
    let mut tries = 0;
    for _ in 0..MAX_CLIENTS {
        let (client, n) = open_retrying(nbd)?;
        clients.push(client);
        tries += n;
    }
    let refusal = refused_client(nbd)?;
    clients
        .pop()
        .map(Client::disconnect)
        .transpose()
        .map_err(|e| e.to_string())?;
    let (replacement, _) = open_retrying(nbd)?;
    clients.push(replacement);
    for client in clients {
        io(client.disconnect())?;
    }
    drop(handshaking);
    Ok(format!(
        "after 60 garbage connections and beside {HANDSHAKING} in their handshake, {MAX_CLIENTS} clients served ({tries} connects); the next refused: {refusal:?}; a new one served after one left"
    ))
}

/// A client over the limit: the refusal's message.
fn refused_client(nbd: &NbdGuest) -> Result<String, String> {
    // The refusal socket may still be closing a garbage connection: retry the connect.
    let start = Instant::now();
    let mut client = loop {
        match Client::connect(nbd.nbd_addr()) {
            Ok(client) => break client,
            Err(e) if start.elapsed() > RETRY_FOR => return Err(format!("connect: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    io(client.send(&3u32.to_be_bytes()))?;
    io(client.option(nbd::opt::GO, &nbd::go_payload("")))?;
    let (reply, data) = io(client.option_reply())?;
    let message = String::from_utf8_lossy(&data).into_owned();
    if reply != nbd::rep::ERR_POLICY || !message.contains("nbd_max_clients") {
        return Err(format!(
            "client {} answered {reply:#x} {message:?}, not a refusal naming nbd_max_clients",
            MAX_CLIENTS + 1
        ));
    }
    Ok(message)
}

/// Reads the stats text to its end, then sends `command` and closes, as
/// `(sleep 1; echo shutdown) | nc HOST PORT` does: the line arrives after the guest's FIN,
/// together with this client's, when the guest's socket may already be in TIME-WAIT.
fn late_command(nbd: &NbdGuest, command: &[u8], sent: &mut Instant) -> Result<String, String> {
    let mut stream = io(TcpStream::connect_timeout(
        &nbd.stats_addr(),
        nbd::IO_TIMEOUT,
    ))?;
    io(stream.set_read_timeout(Some(nbd::IO_TIMEOUT)))?;
    let mut text = String::new();
    io(stream.read_to_string(&mut text))?;
    io(stream.write_all(command))?;
    *sent = Instant::now();
    io(stream.shutdown(Shutdown::Write))?;
    Ok(text)
}

/// A client connected across `shutdown`: its acknowledged write stays, later requests get
/// `NBD_ESHUTDOWN`, and the server closes after its `NBD_CMD_DISC`. `line_sent` is set when
/// the `shutdown` line has been written (after the client's write and the stats text, which
/// take seconds on a loaded host).
pub fn shutdown(nbd: &NbdGuest, line_sent: &mut Instant) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    // A second client in its option haggling across the shutdown.
    let mut haggling = io(Client::connect(nbd.nbd_addr()))?;
    io(haggling.send(&3u32.to_be_bytes()))?;
    let error = io(client.write(SHUTDOWN_OFFSET, &[SHUTDOWN_BYTE; 4096]))?;
    if error != 0 {
        return Err(format!("write before shutdown: errno {error}"));
    }
    let line = harness::control::command_line("shutdown").map_err(String::from)?;
    let text = late_command(nbd, line.as_bytes(), line_sent)?;
    if !text.contains("poolinfo - 0.1") {
        return Err("no stats text before shutdown".into());
    }
    // The line reaches the guest after its text and with this client's FIN, and the guest
    // acts on it on a later round: ask until the answer is ESHUTDOWN.
    let start = Instant::now();
    let mut answers = Vec::new();
    loop {
        let back = io(client.read(0, 4096))?;
        match back {
            Err(ESHUTDOWN) => break,
            Err(errno) => return Err(format!("read after shutdown: errno {errno}")),
            Ok(_) if start.elapsed() > RETRY_FOR => {
                return Err(format!("reads still served {answers:?} after shutdown"));
            }
            Ok(_) => answers.push("ok"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    io(client.request(nbd::cmd::DISC, 0, 0, 0, &[]))?;
    if !client.closed_by_server() {
        return Err("connection not closed after NBD_CMD_DISC".into());
    }
    let haggled = options_after_shutdown(haggling)?;
    Ok(format!(
        "ESHUTDOWN after {} served reads, closed after DISC; {haggled}",
        answers.len()
    ))
}

/// A client still in its option haggling when the shutdown began: its next option gets
/// `NBD_REP_ERR_SHUTDOWN` (the protocol's "Termination of the session during option haggling";
/// a hang-up would be a hard disconnect the server may not make), and its ABORT is acknowledged.
fn options_after_shutdown(mut client: Client) -> Result<String, String> {
    let answer = |client: &mut Client, code| {
        io(client.option(code, &nbd::go_payload("")))?;
        io(client.option_reply()).map(|(reply, _)| reply)
    };
    let go = answer(&mut client, nbd::opt::GO)
        .map_err(|e| format!("GO from a client in its handshake across shutdown: {e}"))?;
    if go != nbd::rep::ERR_SHUTDOWN {
        return Err(format!(
            "GO after shutdown answered {go:#x}, not ERR_SHUTDOWN"
        ));
    }
    let abort = answer(&mut client, nbd::opt::ABORT)?;
    if abort != nbd::rep::ACK || !client.closed_by_server() {
        return Err(format!("ABORT after shutdown answered {abort:#x}"));
    }
    Ok("a client in its handshake got ERR_SHUTDOWN, then ABORT acknowledged".into())
}
