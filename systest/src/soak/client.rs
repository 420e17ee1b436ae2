//! One soak client: random reads, writes (a quarter with FUA), flushes, trims and WRITE_ZEROES
//! on its own region of the export, one request at a time, checked against its [`Shadow`]; now
//! and then it sends a write and hangs up without waiting for the reply. A broken connection
//! (reset, or no answer within the client's timeout) is counted, its request's blocks become
//! unknown, and the client reconnects; the final read-back must succeed.

use std::net::SocketAddr;
use std::time::Instant;

use workloads::Rng;

use super::model::{BLOCK, Block, Shadow, pattern};
use super::{Faults, Tally};
use harness::nbd_client::{self as nbd, Client};

/// Largest request, in blocks.
const MAX_BLOCKS: u64 = 16;

/// A client and its model.
pub struct Worker {
    pub id: u64,
    pub shadow: Shadow,
    pub tally: Tally,
    /// The first few connection errors, for the report.
    pub errors: Vec<String>,
    rng: Rng,
    next_tag: u64,
    client: Option<Client>,
    /// Where the guest's NBD server is.
    addr: SocketAddr,
}

impl Worker {
    pub fn new(id: u64, shadow: Shadow, addr: SocketAddr) -> Worker {
        Worker {
            addr,
            id,
            shadow,
            tally: Tally::default(),
            errors: Vec::new(),
            rng: Rng::new(0x5eed ^ (id << 32)),
            next_tag: 0,
            client: None,
        }
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn client(&mut self) -> Result<&mut Client, String> {
        if self.client.is_none() {
            self.client = Some(Client::open(self.addr).map_err(|e| format!("connect: {e}"))?);
        }
        Ok(self.client.as_mut().expect("just opened"))
    }

    /// Runs random requests until `until`.
    pub fn run(&mut self, faults: &Faults, until: Instant) -> Result<(), String> {
        while Instant::now() < until {
            let blocks = self.shadow.blocks.len() as u64;
            let count = 1 + self.random() % MAX_BLOCKS;
            let index = self.random() % (blocks - count + 1);
            let roll = self.random() % 100;
            let result = match roll {
                0..40 => self.read(faults, index, count),
                40..70 => self.write(faults, index, count, roll < 48),
                70..78 => self.flush(),
                78..85 => self.trim(index, count),
                85..99 => self.write_zeroes(faults, index, count),
                _ => self.hang_up_mid_write(index, count),
            };
            if let Err(error) = result {
                // The connection broke (reset, or no answer within the client's timeout): the
                // request's blocks may hold either version; reconnect and go on.
                self.tally.connection_errors += 1;
                if self.errors.len() < 5 {
                    self.errors.push(format!("client {}: {error}", self.id));
                }
                self.client = None;
                self.shadow.set(index, count, Block::Unknown);
            }
        }
        if let Some(client) = self.client.take() {
            client.disconnect().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Sends one request and returns its reply's error (data of a read follows on the stream).
    fn exchange(
        &mut self,
        kind: u16,
        flags: u16,
        index: u64,
        count: u64,
        payload: &[u8],
    ) -> Result<u32, String> {
        let offset = self.shadow.offset(index);
        let mut bytes = nbd::request_bytes(kind, 1, offset, (count * BLOCK) as u32, payload);
        bytes[4..6].copy_from_slice(&flags.to_be_bytes());
        let client = self.client()?;
        client.send(&bytes).map_err(|e| e.to_string())?;
        let (error, handle) = client.reply().map_err(|e| e.to_string())?;
        if handle != 1 {
            return Err(format!("reply for handle {handle}, not 1"));
        }
        Ok(error)
    }

    fn read(&mut self, faults: &Faults, index: u64, count: u64) -> Result<(), String> {
        self.tally.reads += 1;
        let error = self.exchange(nbd::cmd::READ, 0, index, count, &[])?;
        let injected = faults.touches_read(&self.shadow, index, count);
        if error != 0 {
            self.tally.note_error(injected);
            return Ok(());
        }
        let data = self
            .client()?
            .bytes((count * BLOCK) as usize)
            .map_err(|e| e.to_string())?;
        if injected {
            self.tally.missed_errors += 1;
        }
        let wrong = self.shadow.mismatches(index, &data);
        self.tally.mismatches += wrong.len() as u64;
        Ok(())
    }

    fn write(&mut self, faults: &Faults, index: u64, count: u64, fua: bool) -> Result<(), String> {
        self.tally.writes += 1;
        self.tally.fua_writes += u64::from(fua);
        self.next_tag += 1;
        let tag = (self.id << 48) | self.next_tag;
        let payload: Vec<u8> = (0..count)
            .flat_map(|i| pattern(tag, self.shadow.first_block + index + i))
            .collect();
        let flags = if fua { nbd::cflag::FUA } else { 0 };
        let error = self.exchange(nbd::cmd::WRITE, flags, index, count, &payload)?;
        self.settle(faults, index, count, error, Block::Data(tag));
        Ok(())
    }

    fn write_zeroes(&mut self, faults: &Faults, index: u64, count: u64) -> Result<(), String> {
        self.tally.write_zeroes += 1;
        let error = self.exchange(nbd::cmd::WRITE_ZEROES, 0, index, count, &[])?;
        self.settle(faults, index, count, error, Block::Zero);
        Ok(())
    }

    /// A write-like request answered `error`: the blocks hold `done` or are unknown.
    fn settle(&mut self, faults: &Faults, index: u64, count: u64, error: u32, done: Block) {
        let injected = faults.touches_write(&self.shadow, index, count);
        if error == 0 {
            if injected {
                self.tally.missed_errors += 1;
            }
            self.shadow.set(index, count, done);
        } else {
            self.tally.note_error(injected);
            if faults.only_full(&self.shadow, index, count) {
                if error == nbd::Errno::ENOSPC.0 {
                    self.tally.disk_full_errors += 1;
                } else {
                    self.tally.wrong_errno += 1;
                }
            }
            self.shadow.set(index, count, Block::Unknown);
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        self.tally.flushes += 1;
        let error = self.exchange(nbd::cmd::FLUSH, 0, 0, 0, &[])?;
        if error != 0 {
            self.tally.note_error(false);
        }
        Ok(())
    }

    fn trim(&mut self, index: u64, count: u64) -> Result<(), String> {
        self.tally.trims += 1;
        let error = self.exchange(nbd::cmd::TRIM, 0, index, count, &[])?;
        if error != 0 {
            self.tally.note_error(false);
        }
        // Trimmed data is unspecified until the next write.
        self.shadow.set(index, count, Block::Unknown);
        Ok(())
    }

    fn hang_up_mid_write(&mut self, index: u64, count: u64) -> Result<(), String> {
        self.tally.hang_ups += 1;
        self.next_tag += 1;
        let tag = (self.id << 48) | self.next_tag;
        let payload: Vec<u8> = (0..count)
            .flat_map(|i| pattern(tag, self.shadow.first_block + index + i))
            .collect();
        let offset = self.shadow.offset(index);
        let bytes =
            nbd::request_bytes(nbd::cmd::WRITE, 1, offset, (count * BLOCK) as u32, &payload);
        // Half of them cut the payload short (nothing may be written), half send it whole.
        let cut = if self.random() % 2 == 0 {
            bytes.len() / 2
        } else {
            bytes.len()
        };
        let mut client = self
            .client
            .take()
            .map_or_else(|| Client::open(self.addr).map_err(|e| e.to_string()), Ok)?;
        client.send(&bytes[..cut]).map_err(|e| e.to_string())?;
        drop(client);
        self.shadow.set(index, count, Block::Unknown);
        Ok(())
    }

    /// Reads the whole region back through the guest; blocks it cannot read (an injected read
    /// error) are counted, not checked.
    pub fn read_back(&mut self, faults: &Faults) -> Result<(), String> {
        let blocks = self.shadow.blocks.len() as u64;
        let mut index = 0;
        while index < blocks {
            let count = MAX_BLOCKS.min(blocks - index);
            self.read_back_range(faults, index, count)?;
            index += count;
        }
        if let Some(client) = self.client.take() {
            client.disconnect().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn read_back_range(&mut self, faults: &Faults, index: u64, count: u64) -> Result<(), String> {
        let error = self.exchange(nbd::cmd::READ, 0, index, count, &[])?;
        if error == 0 {
            let data = self
                .client()?
                .bytes((count * BLOCK) as usize)
                .map_err(|e| e.to_string())?;
            self.tally.final_checked += count;
            self.tally.mismatches += self.shadow.mismatches(index, &data).len() as u64;
            return Ok(());
        }
        if count == 1 {
            if !faults.touches_read(&self.shadow, index, 1) {
                self.tally.note_error(false);
            }
            self.tally.final_unreadable += 1;
            return Ok(());
        }
        for block in index..index + count {
            self.read_back_range(faults, block, 1)?;
        }
        Ok(())
    }
}
