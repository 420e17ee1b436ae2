//! A cursor over the fuzzer's bytes for targets that script a device register by register:
//! once the input runs out every read is zero, so a script always ends.

/// Reads little-endian values from the front of the input.
pub struct Script<'a> {
    bytes: &'a [u8],
}

impl<'a> Script<'a> {
    /// A script over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next byte, or 0.
    pub fn u8(&mut self) -> u8 {
        let (&first, rest) = self.bytes.split_first().unwrap_or((&0, &[]));
        self.bytes = rest;
        first
    }

    /// The next little-endian `u16`, zero-padded.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next little-endian `u32`, zero-padded.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = rest;
        head
    }
}
