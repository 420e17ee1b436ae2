//! The `NBD stopped:` line both guests print when their server ends, after the final
//! SYNCHRONIZE CACHE. The guest tests and xtask read it, so it has one home.

use core::fmt;

use crate::session::NbdStats;
use crate::wire::Errno;

/// What the line reports.
#[derive(Debug, Clone, Copy)]
pub struct Stopped<'a> {
    /// NBD connections accepted.
    pub connections: u64,
    /// Sessions ended by a protocol error, a vanished peer or a timeout.
    pub dropped: u64,
    /// Counters of every session (`refusals` is the "refused" count).
    pub nbd: &'a NbdStats,
    /// SYNCHRONIZE CACHE commands the export sent.
    pub cache_syncs: u64,
    /// The final flush's outcome.
    pub final_flush: Result<(), Errno>,
}

impl fmt::Display for Stopped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nbd = self.nbd;
        write!(
            f,
            "NBD stopped: {} connections, {} refused, {} reads ({} B), {} writes ({} B), {} flushes ({} SYNCHRONIZE CACHE), {} errors, {} dropped; final flush ",
            self.connections,
            nbd.refusals,
            nbd.reads,
            nbd.bytes_read,
            nbd.writes,
            nbd.bytes_written,
            nbd.flushes,
            self.cache_syncs,
            nbd.errors,
            self.dropped,
        )?;
        match self.final_flush {
            Ok(()) => f.write_str("ok"),
            Err(errno) => write!(f, "failed (errno {})", errno.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn the_line_names_each_counter_and_the_flush() {
        let nbd = NbdStats {
            reads: 3,
            bytes_read: 12288,
            writes: 2,
            bytes_written: 8192,
            flushes: 1,
            errors: 4,
            refusals: 5,
            ..NbdStats::default()
        };
        let mut line = Stopped {
            connections: 7,
            dropped: 6,
            nbd: &nbd,
            cache_syncs: 2,
            final_flush: Ok(()),
        };
        assert_eq!(
            line.to_string(),
            "NBD stopped: 7 connections, 5 refused, 3 reads (12288 B), 2 writes (8192 B), 1 flushes (2 SYNCHRONIZE CACHE), 4 errors, 6 dropped; final flush ok"
        );
        line.final_flush = Err(Errno(5));
        assert!(line.to_string().ends_with("final flush failed (errno 5)"));
    }
}
