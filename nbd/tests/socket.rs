//! A session served over a real TCP connection on the loopback (`stream::serve` on a std
//! `TcpStream`), with a client that speaks through the crate's own wire headers: the handshake,
//! a write and a read back, pipelined requests, and the hostile endings (a bad magic, a client
//! gone in the middle of a header). Every socket has a timeout, so a silent peer fails the test
//! instead of hanging it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use nbd::memory::MemoryExport;
use nbd::session::{CloseReason, Session};
use nbd::stream::{Ended, serve};
use nbd::wire::{self, Greeting, OptionReplyHeader, RequestHeader, SimpleReply, cmd, opt, rep};
use zerocopy::IntoBytes;

const TIMEOUT: Duration = Duration::from_secs(20);
const DISK_BYTES: usize = 1 << 20;

/// A server thread for one connection; joins to how it ended and the disk.
fn server() -> (TcpStream, JoinHandle<(Ended, MemoryExport)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut export = MemoryExport::new(DISK_BYTES);
        let mut session = Session::new("mem");
        let ended = serve(&mut stream, &mut session, &mut export).expect("served without error");
        (ended, export)
    });
    let client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(TIMEOUT)).unwrap();
    (client, handle)
}

fn read_exact<const N: usize>(client: &mut TcpStream) -> [u8; N] {
    let mut buf = [0u8; N];
    client.read_exact(&mut buf).unwrap();
    buf
}

/// Greeting, client flags, `NBD_OPT_GO` for the default export; returns the export size.
fn handshake(client: &mut TcpStream) -> u64 {
    let greeting: Greeting = wire::header(&read_exact::<18>(client)).unwrap();
    assert_eq!(greeting.nbd_magic.get(), wire::NBDMAGIC);
    assert_eq!(greeting.ihaveopt.get(), wire::IHAVEOPT);
    let mut hello = 3u32.to_be_bytes().to_vec();
    let go = [0u8, 0, 0, 0, 0, 0];
    let header = wire::OptionHeader {
        magic: wire::IHAVEOPT.into(),
        option: opt::GO.into(),
        len: (go.len() as u32).into(),
    };
    hello.extend_from_slice(header.as_bytes());
    hello.extend_from_slice(&go);
    client.write_all(&hello).unwrap();
    let mut size = None;
    loop {
        let reply: OptionReplyHeader = wire::header(&read_exact::<20>(client)).unwrap();
        assert_eq!(reply.magic.get(), wire::REPLY_MAGIC);
        let mut data = vec![0u8; reply.len.get() as usize];
        client.read_exact(&mut data).unwrap();
        match reply.reply.get() {
            rep::INFO if data[..2] == [0, 0] => {
                size = Some(u64::from_be_bytes(data[2..10].try_into().unwrap()));
            }
            rep::INFO => {}
            rep::ACK => return size.expect("NBD_INFO_EXPORT before the ACK"),
            other => panic!("GO answered {other:#x}"),
        }
    }
}

fn reply(client: &mut TcpStream) -> SimpleReply {
    let reply: SimpleReply = wire::header(&read_exact::<16>(client)).unwrap();
    assert_eq!(reply.magic.get(), wire::SIMPLE_REPLY_MAGIC);
    reply
}

#[test]
fn a_write_and_pipelined_reads_come_back_over_tcp() {
    let (mut client, server) = server();
    assert_eq!(handshake(&mut client), DISK_BYTES as u64);
    let data: Vec<u8> = (0..64 << 10).map(|i| (i * 7 % 251) as u8).collect();
    let mut out = RequestHeader::new(cmd::WRITE, 0, 1, 4096, data.len() as u32)
        .as_bytes()
        .to_vec();
    out.extend_from_slice(&data);
    // Two reads pipelined behind the write, one past the end of the disk.
    out.extend_from_slice(RequestHeader::new(cmd::READ, 0, 2, 4096, data.len() as u32).as_bytes());
    out.extend_from_slice(RequestHeader::new(cmd::READ, 0, 3, DISK_BYTES as u64, 512).as_bytes());
    client.write_all(&out).unwrap();
    let write = reply(&mut client);
    assert_eq!((write.error.get(), write.handle.get()), (0, 1));
    let read = reply(&mut client);
    assert_eq!((read.error.get(), read.handle.get()), (0, 2));
    let mut back = vec![0u8; data.len()];
    client.read_exact(&mut back).unwrap();
    assert_eq!(back, data);
    let beyond = reply(&mut client);
    assert_eq!((beyond.error.get(), beyond.handle.get()), (22, 3), "EINVAL");
    client
        .write_all(RequestHeader::new(cmd::DISC, 0, 4, 0, 0).as_bytes())
        .unwrap();
    let (ended, export) = server.join().unwrap();
    assert_eq!(ended, Ended::Session(CloseReason::Disconnect));
    assert_eq!(&export.data[4096..4096 + data.len()], &data[..]);
}

#[test]
fn a_bad_request_magic_closes_the_connection() {
    let (mut client, server) = server();
    handshake(&mut client);
    let mut bad = RequestHeader::new(cmd::READ, 0, 1, 0, 512);
    bad.magic = 0x1234_5678.into();
    client.write_all(bad.as_bytes()).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(client.read(&mut byte).unwrap(), 0, "the server closed");
    let (ended, _) = server.join().unwrap();
    assert_eq!(
        ended,
        Ended::Session(CloseReason::BadRequestMagic(0x1234_5678))
    );
}

#[test]
fn a_client_gone_in_the_middle_of_a_header_ends_the_session_quietly() {
    let (mut client, server) = server();
    handshake(&mut client);
    let header = RequestHeader::new(cmd::READ, 0, 1, 0, 512);
    client.write_all(&header.as_bytes()[..20]).unwrap();
    drop(client);
    let (ended, _) = server.join().unwrap();
    assert_eq!(ended, Ended::PeerClosed { mid_request: true });
}

/// More pipelined reads than the output's high-water mark holds, sent at once, then nothing
/// until every reply is in: the server must step again after sending, not wait for input with
/// complete requests still parsed only in part.
#[test]
fn pipelined_reads_past_the_output_high_water_are_all_answered() {
    let (mut client, server) = server();
    handshake(&mut client);
    let piece = 256u32 << 10;
    let reads = 4u64;
    let mut out = Vec::new();
    for handle in 0..reads {
        out.extend_from_slice(
            RequestHeader::new(cmd::READ, 0, handle, handle * u64::from(piece), piece).as_bytes(),
        );
    }
    client.write_all(&out).unwrap();
    for handle in 0..reads {
        let read = reply(&mut client);
        assert_eq!((read.error.get(), read.handle.get()), (0, handle));
        let mut data = vec![0u8; piece as usize];
        client.read_exact(&mut data).unwrap();
    }
    client
        .write_all(RequestHeader::new(cmd::DISC, 0, 9, 0, 0).as_bytes())
        .unwrap();
    let (ended, _) = server.join().unwrap();
    assert_eq!(ended, Ended::Session(CloseReason::Disconnect));
}

/// A session that acknowledged STARTTLS hands the stream back instead of reading on: the TLS
/// handshake is the caller's, and the client sends nothing more in the clear.
#[test]
fn starttls_hands_the_stream_back_after_the_acknowledgement() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut export = MemoryExport::new(DISK_BYTES);
        let mut session = Session::new("mem").with_tls(nbd::session::Tls::Require);
        serve(&mut stream, &mut session, &mut export).expect("served without error")
    });
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(TIMEOUT)).unwrap();
    read_exact::<18>(&mut client);
    let mut hello = 3u32.to_be_bytes().to_vec();
    let header = wire::OptionHeader {
        magic: wire::IHAVEOPT.into(),
        option: opt::STARTTLS.into(),
        len: 0.into(),
    };
    hello.extend_from_slice(header.as_bytes());
    client.write_all(&hello).unwrap();
    let reply: OptionReplyHeader = wire::header(&read_exact::<20>(&mut client)).unwrap();
    assert_eq!(
        (reply.option.get(), reply.reply.get()),
        (opt::STARTTLS, rep::ACK)
    );
    // The client now waits for the server's TLS handshake, as a real one does.
    assert_eq!(handle.join().unwrap(), Ended::StartTls);
}
