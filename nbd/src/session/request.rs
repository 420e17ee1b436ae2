//! The transmission phase: one 28-byte request header (magic, flags, type, handle, offset,
//! length), a payload for writes, and a simple reply (magic, error, handle), followed by the data
//! of a successful read. Writes and reads move in pieces of [`STREAM_CHUNK_BYTES`] over as many
//! calls as they need (`continue_write_run`, `continue_read_run`).

use super::{
    Budget, CloseReason, Export, MAX_PAYLOAD_BYTES, ReadRun, STREAM_CHUNK_BYTES, Session, WriteRun,
    ZERO_CHUNK_BYTES, ZeroRun,
};
use crate::wire::{self, Errno, RequestHeader, cflag, cmd};

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
        let header: RequestHeader = wire::header(self.unparsed())?;
        if header.magic.get() != wire::REQUEST_MAGIC {
            self.close(CloseReason::BadRequestMagic(header.magic.get()));
            return Some(0);
        }
        let request = Request {
            flags: header.flags.get(),
            kind: header.kind.get(),
            handle: header.handle.get(),
            offset: header.offset.get(),
            len: header.len.get(),
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
        budget.charge_command();
        // The payload follows on the wire whatever the answer: a request that cannot run has
        // it drained, so the stream stays in step and the client gets its error.
        let error = if after_shutdown {
            Some(Errno::ESHUTDOWN)
        } else {
            check_request(request, export.size_bytes(), self.read_only).err()
        };
        self.write_run = Some(WriteRun {
            handle: request.handle,
            offset: request.offset,
            remaining: u64::from(request.len),
            len: request.len,
            fua: request.flags & cflag::FUA != 0,
            error,
        });
        if request.len == 0 {
            self.finish_write(export);
        }
        Some(wire::REQUEST_BYTES)
    }

    /// Takes the next piece of the write in progress once it has all arrived, and writes it
    /// (unless the write already failed); returns the bytes taken, or `None` for more input.
    pub(super) fn continue_write_run(
        &mut self,
        export: &mut impl Export,
        budget: &mut Budget,
    ) -> Option<usize> {
        let run = self.write_run.as_mut()?;
        let piece = run.remaining.min(u64::from(STREAM_CHUNK_BYTES)) as usize;
        let input = &self.input[self.consumed..];
        if input.len() < piece {
            return None;
        }
        if run.error.is_none()
            && let Err(errno) = export.write(run.offset, &input[..piece], false)
        {
            run.error = Some(errno);
        }
        // A write that failed its range check is still drained, and its offset may lie near
        // 2^64: it is only written through while `error` is `None`, so saturating is exact there.
        run.offset = run.offset.saturating_add(piece as u64);
        run.remaining -= piece as u64;
        budget.charge_bytes(piece as u64);
        if run.remaining == 0 {
            self.finish_write(export);
        }
        Some(piece)
    }

    /// The whole payload is in: flush for FUA, count, reply.
    fn finish_write(&mut self, export: &mut impl Export) {
        let Some(run) = self.write_run.take() else {
            return;
        };
        let mut result = run.error.map_or(Ok(()), Err);
        if result.is_ok() && run.fua && run.len > 0 {
            result = export.flush();
        }
        if result.is_ok() {
            self.stats.writes += 1;
            self.stats.bytes_written += u64::from(run.len);
        }
        self.simple_reply(result.err(), run.handle);
    }

    /// Every command without a payload.
    fn command(&mut self, request: Request, export: &mut impl Export, budget: &mut Budget) {
        if request.kind == cmd::DISC {
            // No reply: the client closes after sending it (and the server after flushing).
            self.close(CloseReason::Disconnect);
            return;
        }
        if let Err(errno) = check_request(request, export.size_bytes(), self.read_only) {
            self.simple_reply(Some(errno), request.handle);
            return;
        }
        let fua = request.flags & cflag::FUA != 0;
        let result = match request.kind {
            cmd::READ => return self.read(request, export, budget),
            cmd::FLUSH => export.flush().inspect(|()| self.stats.flushes += 1),
            // Trim is advisory (the protocol lets the server ignore it); only the range is
            // checked. SCSI UNMAP is not wired into the midlayer.
            cmd::TRIM => {
                self.stats.trims += 1;
                Ok(())
            }
            cmd::WRITE_ZEROES => {
                // Written in chunks by `continue_zero_run`, which sends the reply.
                self.zero_run = Some(ZeroRun {
                    handle: request.handle,
                    offset: request.offset,
                    end: request.offset + u64::from(request.len),
                    fua,
                });
                return;
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

    /// Starts a READ: an error reply, or the reply header and the first piece of data (a first
    /// piece that fails becomes an error reply instead).
    fn read(&mut self, request: Request, export: &mut impl Export, budget: &mut Budget) {
        let header_at = self.output.len();
        self.simple_reply(None, request.handle);
        self.read_run = Some(ReadRun {
            offset: request.offset,
            end: request.offset + u64::from(request.len),
            len: request.len,
        });
        if let Err(errno) = self.read_piece(export, budget) {
            self.read_run = None;
            self.output.truncate(header_at);
            self.simple_reply(Some(errno), request.handle);
        }
    }

    /// Reads the next piece of the READ in progress into the output; a failure now can no
    /// longer be reported (the header said success), so the session closes.
    pub(super) fn continue_read_run(&mut self, export: &mut impl Export, budget: &mut Budget) {
        if let Err(errno) = self.read_piece(export, budget) {
            self.read_run = None;
            self.stats.errors += 1;
            self.close(CloseReason::ReadFailedAfterHeader(errno.0));
        }
    }

    /// One piece of the READ in progress, straight into the output; ends the run after the last.
    fn read_piece(&mut self, export: &mut impl Export, budget: &mut Budget) -> Result<(), Errno> {
        let Some(run) = self.read_run.as_mut() else {
            return Ok(());
        };
        let piece = (run.end - run.offset).min(u64::from(STREAM_CHUNK_BYTES)) as usize;
        let data_at = self.output.len();
        self.output.resize(data_at + piece, 0);
        if let Err(errno) = export.read(run.offset, &mut self.output[data_at..]) {
            self.output.truncate(data_at);
            return Err(errno);
        }
        run.offset += piece as u64;
        budget.charge_bytes(piece.max(1) as u64);
        if run.offset == run.end {
            let len = run.len;
            self.read_run = None;
            self.stats.reads += 1;
            self.stats.bytes_read += u64::from(len);
        }
        Ok(())
    }
}

/// Whether `request` may run on an export of `size_bytes`, and the protocol's error when not
/// ("Error values", "Command flags", "Size constraints" of the NBD protocol document):
/// - on a read-only export, WRITE, TRIM and WRITE_ZEROES are EPERM;
/// - a command flag not documented for the command is EINVAL (FUA is valid on every command
///   once `NBD_FLAG_SEND_FUA` is advertised, NO_HOLE on WRITE_ZEROES; DF and FAST_ZERO need
///   transmission flags this server does not advertise);
/// - a READ or WRITE over [`MAX_PAYLOAD_BYTES`] is EINVAL (EOVERFLOW is reserved for DF reads and
///   for commands without a payload);
/// - a range reaching past the end (or past 2^64) is ENOSPC for WRITE and WRITE_ZEROES, EINVAL
///   for READ and TRIM;
/// - an unknown command is EINVAL.
fn check_request(request: Request, size_bytes: u64, read_only: bool) -> Result<(), Errno> {
    let (allowed_flags, beyond_end) = match request.kind {
        cmd::READ | cmd::TRIM => (cflag::FUA, Errno::EINVAL),
        cmd::WRITE => (cflag::FUA, Errno::ENOSPC),
        cmd::WRITE_ZEROES => (cflag::FUA | cflag::NO_HOLE, Errno::ENOSPC),
        cmd::FLUSH => return flags_within(request.flags, cflag::FUA),
        _ => return Err(Errno::EINVAL),
    };
    flags_within(request.flags, allowed_flags)?;
    if read_only && request.kind != cmd::READ {
        return Err(Errno::EPERM);
    }
    if matches!(request.kind, cmd::READ | cmd::WRITE) && request.len > MAX_PAYLOAD_BYTES {
        return Err(Errno::EINVAL);
    }
    match request.offset.checked_add(u64::from(request.len)) {
        Some(end) if end <= size_bytes => Ok(()),
        _ => Err(beyond_end),
    }
}

fn flags_within(flags: u16, allowed: u16) -> Result<(), Errno> {
    if flags & !allowed == 0 {
        Ok(())
    } else {
        Err(Errno::EINVAL)
    }
}
