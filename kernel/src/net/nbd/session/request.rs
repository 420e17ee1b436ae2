//! The transmission phase: one 28-byte request header (magic, flags, type, handle, offset,
//! length), a payload for writes, and a simple reply (magic, error, handle), followed by the data
//! of a successful read.

use super::{Budget, CloseReason, Export, MAX_PAYLOAD_BYTES, Session, ZERO_CHUNK_BYTES, ZeroRun};
use crate::net::nbd::wire::{self, Errno, cflag, cmd};

/// A parsed request header.
#[derive(Debug, Clone, Copy)]
struct Request {
    flags: u16,
    kind: u16,
    handle: u64,
    offset: u64,
    len: u32,
}

impl Session {
    /// Handles one request if it is complete, charging `budget`; returns the bytes taken.
    pub(super) fn request(
        &mut self,
        export: &mut impl Export,
        budget: &mut Budget,
    ) -> Option<usize> {
        let input = self.unparsed();
        if input.len() < wire::REQUEST_BYTES {
            return None;
        }
        let magic = wire::be_u32(input, 0);
        if magic != wire::REQUEST_MAGIC {
            self.close(CloseReason::BadRequestMagic(magic));
            return Some(0);
        }
        let request = Request {
            flags: wire::be_u16(input, 4),
            kind: wire::be_u16(input, 6),
            handle: wire::be_u64(input, 8),
            offset: wire::be_u64(input, 16),
            len: wire::be_u32(input, 24),
        };
        let after_shutdown = self
            .shutdown_after
            .is_some_and(|after| self.parsed_total >= after);
        if request.kind != cmd::WRITE {
            budget.charge_command();
            if after_shutdown && request.kind != cmd::DISC {
                self.simple_reply(Some(Errno::ESHUTDOWN), request.handle);
            } else {
                self.command(request, export, budget);
            }
            return Some(wire::REQUEST_BYTES);
        }
        if request.len > MAX_PAYLOAD_BYTES {
            // The payload follows on the wire and is too large to take; the stream cannot be
            // resynchronised without reading it, so answer and hang up.
            self.simple_reply(Some(Errno::EOVERFLOW), request.handle);
            self.close(CloseReason::OversizeWrite(request.len));
            return Some(wire::REQUEST_BYTES);
        }
        let total = wire::REQUEST_BYTES + request.len as usize;
        if input.len() < total {
            return None;
        }
        budget.charge_command();
        budget.charge_bytes(u64::from(request.len));
        if after_shutdown {
            self.simple_reply(Some(Errno::ESHUTDOWN), request.handle);
            return Some(total);
        }
        let result = match check_range(request, export.size_bytes(), Errno::ENOSPC) {
            Err(errno) => Err(errno),
            Ok(()) => {
                let start = self.consumed + wire::REQUEST_BYTES;
                let data = &self.input[start..start + request.len as usize];
                export.write(request.offset, data, request.flags & cflag::FUA != 0)
            }
        };
        if result.is_ok() {
            self.stats.writes += 1;
            self.stats.bytes_written += u64::from(request.len);
        }
        self.simple_reply(result.err(), request.handle);
        Some(total)
    }

    /// Every command without a payload.
    fn command(&mut self, request: Request, export: &mut impl Export, budget: &mut Budget) {
        let fua = request.flags & cflag::FUA != 0;
        let result = match request.kind {
            cmd::READ => {
                budget.charge_bytes(u64::from(request.len));
                return self.read(request, export);
            }
            cmd::DISC => {
                // No reply: the client closes after sending it (and the server after flushing).
                self.close(CloseReason::Disconnect);
                return;
            }
            cmd::FLUSH => export.flush().inspect(|()| self.stats.flushes += 1),
            // Trim is advisory (the protocol lets the server ignore it); only the range is
            // checked. SCSI UNMAP is not wired into the midlayer.
            cmd::TRIM => check_range(request, export.size_bytes(), Errno::ENOSPC)
                .inspect(|()| self.stats.trims += 1),
            cmd::WRITE_ZEROES => {
                match check_range(request, export.size_bytes(), Errno::ENOSPC) {
                    Ok(()) => {
                        // Written in chunks by `continue_zero_run`, which sends the reply.
                        self.zero_run = Some(ZeroRun {
                            handle: request.handle,
                            offset: request.offset,
                            end: request.offset + u64::from(request.len),
                            fua,
                        });
                        return;
                    }
                    Err(errno) => Err(errno),
                }
            }
            _ => Err(Errno::EINVAL),
        };
        self.simple_reply(result.err(), request.handle);
    }

    /// Writes the next chunk of the WRITE_ZEROES in progress; replies once it is all written.
    pub(super) fn continue_zero_run(&mut self, export: &mut impl Export, budget: &mut Budget) {
        let Some(run) = self.zero_run.as_mut() else {
            return;
        };
        let len = ZERO_CHUNK_BYTES.min(run.end - run.offset);
        let mut result = if len > 0 {
            export.write_zeroes(run.offset, len, false)
        } else {
            Ok(())
        };
        budget.charge_bytes(len.max(1));
        run.offset += len;
        let run = *run;
        if result.is_ok() && run.offset < run.end {
            return;
        }
        if result.is_ok() && run.fua {
            result = export.flush();
        }
        if result.is_ok() {
            self.stats.write_zeroes += 1;
        }
        self.zero_run = None;
        self.simple_reply(result.err(), run.handle);
    }

    fn read(&mut self, request: Request, export: &mut impl Export) {
        if request.len > MAX_PAYLOAD_BYTES {
            self.simple_reply(Some(Errno::EOVERFLOW), request.handle);
            return;
        }
        if let Err(errno) = check_range(request, export.size_bytes(), Errno::EINVAL) {
            self.simple_reply(Some(errno), request.handle);
            return;
        }
        // Read straight into the output behind the reply header; on error drop both.
        let header_at = self.output.len();
        self.simple_reply(None, request.handle);
        let data_at = self.output.len();
        self.output.resize(data_at + request.len as usize, 0);
        match export.read(request.offset, &mut self.output[data_at..]) {
            Ok(()) => {
                self.stats.reads += 1;
                self.stats.bytes_read += u64::from(request.len);
            }
            Err(errno) => {
                self.output.truncate(header_at);
                self.simple_reply(Some(errno), request.handle);
            }
        }
    }
}

/// `offset + len` must lie within the export; `beyond` is the errno when it does not (the
/// protocol asks ENOSPC for writes past the end, EINVAL for reads). An offset already past the
/// end is EINVAL for every command, an overflowing sum EOVERFLOW.
fn check_range(request: Request, size_bytes: u64, beyond: Errno) -> Result<(), Errno> {
    match request.offset.checked_add(u64::from(request.len)) {
        Some(end) if end <= size_bytes => Ok(()),
        Some(_) if request.offset > size_bytes => Err(Errno::EINVAL),
        Some(_) => Err(beyond),
        None => Err(Errno::EOVERFLOW),
    }
}
