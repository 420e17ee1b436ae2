//! The NBD server's protocol half, free of I/O and built on the host too, where it is tested
//! against an in-memory disk: [`session`] is one connection's state machine (fixed newstyle
//! handshake, options, transmission with simple replies), [`block`] adapts a block device
//! (the SCSI midlayer in the guest) to the byte-addressed export a session serves and maps SCSI
//! errors to NBD errno values, [`wire`] holds the protocol's numbers.

pub mod block;
pub mod session;
pub mod wire;

#[cfg(test)]
mod tests;
