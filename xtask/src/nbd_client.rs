//! A minimal NBD client for the host-side tests: the fixed newstyle handshake, option requests,
//! simple-reply transmission, and raw byte access so tests can misbehave on purpose. Every
//! socket has read and write timeouts, so a silent server fails a test instead of hanging it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const OPT_GO: u32 = 7;
pub const REP_ACK: u32 = 1;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;

/// How long any single read or write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// One connection.
pub struct Client {
    pub stream: TcpStream,
    /// Export size from GO.
    pub size: u64,
}

type IoResult<T> = std::io::Result<T>;

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

impl Client {
    /// Connects and reads the greeting; no flags sent yet.
    pub fn connect(addr: SocketAddr) -> IoResult<Client> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let mut client = Client { stream, size: 0 };
        let magic = client.u64()?;
        let opt = client.u64()?;
        let _flags = client.bytes(2)?;
        if magic != NBDMAGIC || opt != IHAVEOPT {
            return Err(bad(format!("greeting {magic:#x} {opt:#x}")));
        }
        Ok(client)
    }

    /// Connects, sends fixed-newstyle + no-zeroes flags and GO for the default export.
    pub fn open(addr: SocketAddr) -> IoResult<Client> {
        let mut client = Client::connect(addr)?;
        client.send(&3u32.to_be_bytes())?;
        client.option(OPT_GO, &go_payload(""))?;
        loop {
            let (reply, data) = client.option_reply()?;
            match reply {
                REP_INFO if data.len() >= 12 && data[..2] == [0, 0] => {
                    client.size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                }
                REP_INFO => {}
                REP_ACK => return Ok(client),
                other => return Err(bad(format!("GO answered {other:#x}"))),
            }
        }
    }

    pub fn send(&mut self, bytes: &[u8]) -> IoResult<()> {
        self.stream.write_all(bytes)
    }

    pub fn bytes(&mut self, len: usize) -> IoResult<Vec<u8>> {
        let mut buf = vec![0; len];
        self.stream.read_exact(&mut buf)?;
        Ok(buf)
    }

    fn u64(&mut self) -> IoResult<u64> {
        Ok(u64::from_be_bytes(self.bytes(8)?.try_into().unwrap()))
    }

    fn u32(&mut self) -> IoResult<u32> {
        Ok(u32::from_be_bytes(self.bytes(4)?.try_into().unwrap()))
    }

    pub fn option(&mut self, code: u32, data: &[u8]) -> IoResult<()> {
        let mut out = IHAVEOPT.to_be_bytes().to_vec();
        out.extend(code.to_be_bytes());
        out.extend((data.len() as u32).to_be_bytes());
        out.extend(data);
        self.send(&out)
    }

    /// (reply type, data) of one option reply.
    pub fn option_reply(&mut self) -> IoResult<(u32, Vec<u8>)> {
        let magic = self.u64()?;
        if magic != REPLY_MAGIC {
            return Err(bad(format!("option reply magic {magic:#x}")));
        }
        let _option = self.u32()?;
        let reply = self.u32()?;
        let len = self.u32()? as usize;
        Ok((reply, self.bytes(len)?))
    }

    pub fn request(
        &mut self,
        kind: u16,
        handle: u64,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> IoResult<()> {
        self.send(&request_bytes(kind, handle, offset, len, payload))
    }

    /// (error, handle) of one simple reply; a successful read's data follows (read it with
    /// [`Client::bytes`]).
    pub fn reply(&mut self) -> IoResult<(u32, u64)> {
        let magic = self.u32()?;
        if magic != SIMPLE_REPLY_MAGIC {
            return Err(bad(format!("reply magic {magic:#x}")));
        }
        let error = self.u32()?;
        Ok((error, self.u64()?))
    }

    /// Whether the server closed the connection (EOF before `IO_TIMEOUT`).
    pub fn closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0))
            || matches!(self.stream.read(&mut byte), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }

    pub fn read(&mut self, offset: u64, len: u32) -> IoResult<Result<Vec<u8>, u32>> {
        self.request(CMD_READ, 1, offset, len, &[])?;
        match self.reply()? {
            (0, _) => Ok(Ok(self.bytes(len as usize)?)),
            (error, _) => Ok(Err(error)),
        }
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> IoResult<u32> {
        self.request(CMD_WRITE, 2, offset, data.len() as u32, data)?;
        Ok(self.reply()?.0)
    }

    pub fn disconnect(mut self) -> IoResult<()> {
        self.request(CMD_DISC, 0, 0, 0, &[])
    }
}

pub fn go_payload(name: &str) -> Vec<u8> {
    let mut data = (name.len() as u32).to_be_bytes().to_vec();
    data.extend(name.as_bytes());
    data.extend(1u16.to_be_bytes());
    data.extend(3u16.to_be_bytes());
    data
}

pub fn request_bytes(kind: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = REQUEST_MAGIC.to_be_bytes().to_vec();
    out.extend(0u16.to_be_bytes());
    out.extend(kind.to_be_bytes());
    out.extend(handle.to_be_bytes());
    out.extend(offset.to_be_bytes());
    out.extend(len.to_be_bytes());
    out.extend(payload);
    out
}
