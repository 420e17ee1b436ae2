//! The vocabulary of a conformance scenario: commands (a raw CDB, a LUN, a data direction and
//! length), pauses and resets, and a builder that numbers them and spells the CDBs the
//! scenarios use. Pure data: both the guest script and the host replay are made from it.

/// How a command's data moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// No data buffer.
    None,
    /// Data in: the buffer is zeroed before the command.
    In,
    /// Data out: the buffer holds [`pattern`] of the command's seed.
    Out,
}

/// One SCSI command as the guest's SG_IO and the host's `ScsiCmd` send it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// What it is, for the report ("READ(10) past the end").
    pub name: String,
    pub lun: u16,
    pub cdb: Vec<u8>,
    pub dir: Dir,
    pub len: u32,
    /// The data-out pattern's seed (0: zeros).
    pub seed: u8,
    /// SG_IO's timeout; a command our target swallows is aborted after as long.
    pub timeout_ms: u32,
}

/// A task-management function, as `SG_SCSI_RESET` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    Device,
    Target,
    Bus,
    Host,
}

impl ResetKind {
    /// The word `sg_cdb` takes.
    pub fn word(self) -> &'static str {
        match self {
            ResetKind::Device => "device",
            ResetKind::Target => "target",
            ResetKind::Bus => "bus",
            ResetKind::Host => "host",
        }
    }
}

/// One step of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Command(Command),
    /// Wall-clock time passes (the host's clock is advanced as much).
    Sleep {
        ms: u32,
    },
    Reset {
        kind: ResetKind,
        lun: u16,
    },
}

/// The data-out bytes of `seed`: zeros for 0, else a byte per position that differs from
/// block to block (`sg_cdb.c`'s `pattern`).
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            if seed == 0 {
                0
            } else {
                (usize::from(seed) + i * 7 + (i >> 9)) as u8
            }
        })
        .collect()
}

/// SG_IO's timeout for a command that is answered.
pub const TIMEOUT_MS: u32 = 30_000;

/// Builds a scenario's steps; commands go to [`Steps::lun`] (0 unless changed).
#[derive(Default)]
pub struct Steps {
    pub steps: Vec<Step>,
    lun: u16,
    timeout_ms: Option<u32>,
}

impl Steps {
    pub fn new() -> Self {
        Self::default()
    }

    /// Later commands go to `lun`.
    pub fn lun(&mut self, lun: u16) -> &mut Self {
        self.lun = lun;
        self
    }

    /// Later commands time out after `ms` (for scenarios whose target swallows commands).
    pub fn timeout(&mut self, ms: u32) -> &mut Self {
        self.timeout_ms = Some(ms);
        self
    }

    fn push(&mut self, name: &str, cdb: &[u8], dir: Dir, len: u32, seed: u8) -> &mut Self {
        self.steps.push(Step::Command(Command {
            name: name.to_owned(),
            lun: self.lun,
            cdb: cdb.to_vec(),
            dir,
            len,
            seed,
            timeout_ms: self.timeout_ms.unwrap_or(TIMEOUT_MS),
        }));
        self
    }

    /// A command without data.
    pub fn none(&mut self, name: &str, cdb: &[u8]) -> &mut Self {
        self.push(name, cdb, Dir::None, 0, 0)
    }

    /// A data-in command with a `len`-byte buffer.
    pub fn read(&mut self, name: &str, cdb: &[u8], len: u32) -> &mut Self {
        self.push(name, cdb, Dir::In, len, 0)
    }

    /// A data-out command sending `len` bytes of `pattern(seed)`.
    pub fn write(&mut self, name: &str, cdb: &[u8], len: u32, seed: u8) -> &mut Self {
        self.push(name, cdb, Dir::Out, len, seed)
    }

    pub fn sleep(&mut self, ms: u32) -> &mut Self {
        self.steps.push(Step::Sleep { ms });
        self
    }

    pub fn reset(&mut self, kind: ResetKind) -> &mut Self {
        self.steps.push(Step::Reset {
            kind,
            lun: self.lun,
        });
        self
    }

    pub fn tur(&mut self, name: &str) -> &mut Self {
        self.none(name, &[0; 6])
    }
}

/// CDB spellings.
pub mod cdb {
    pub fn inquiry(evpd: bool, page: u8, alloc_len: u16) -> Vec<u8> {
        let [high, low] = alloc_len.to_be_bytes();
        vec![0x12, u8::from(evpd), page, high, low, 0]
    }

    pub fn request_sense(desc: bool, alloc_len: u8) -> Vec<u8> {
        vec![0x03, u8::from(desc), 0, 0, alloc_len, 0]
    }

    /// MODE SENSE(6): `byte1` holds DBD, `page` PC and the page code.
    pub fn mode_sense6(byte1: u8, page: u8, subpage: u8, alloc_len: u8) -> Vec<u8> {
        vec![0x1a, byte1, page, subpage, alloc_len, 0]
    }

    /// MODE SENSE(10): `byte1` holds LLBAA and DBD.
    pub fn mode_sense10(byte1: u8, page: u8, subpage: u8, alloc_len: u16) -> Vec<u8> {
        let [high, low] = alloc_len.to_be_bytes();
        vec![0x5a, byte1, page, subpage, 0, 0, 0, high, low, 0]
    }

    pub fn start_stop(immed: bool, byte4: u8) -> Vec<u8> {
        vec![0x1b, u8::from(immed), 0, 0, byte4, 0]
    }

    /// A 10-byte CDB with a 32-bit LBA and a 16-bit length: READ(10), WRITE(10), VERIFY(10),
    /// SYNCHRONIZE CACHE(10), PRE-FETCH(10).
    pub fn lba10(opcode: u8, byte1: u8, lba: u32, blocks: u16) -> Vec<u8> {
        let mut cdb = vec![opcode, byte1, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[2..6].copy_from_slice(&lba.to_be_bytes());
        cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
        cdb
    }

    /// A 16-byte CDB with a 64-bit LBA and a 32-bit length.
    pub fn lba16(opcode: u8, byte1: u8, lba: u64, blocks: u32) -> Vec<u8> {
        let mut cdb = vec![opcode, byte1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[2..10].copy_from_slice(&lba.to_be_bytes());
        cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
        cdb
    }

    /// READ(6)/WRITE(6): a 21-bit LBA, a length of 0 meaning 256.
    pub fn lba6(opcode: u8, lba: u32, blocks: u8) -> Vec<u8> {
        let [_, a, b, c] = lba.to_be_bytes();
        vec![opcode, a & 0x1f, b, c, blocks, 0]
    }

    /// READ(12)/WRITE(12).
    pub fn lba12(opcode: u8, lba: u32, blocks: u32) -> Vec<u8> {
        let mut cdb = vec![opcode, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[2..6].copy_from_slice(&lba.to_be_bytes());
        cdb[6..10].copy_from_slice(&blocks.to_be_bytes());
        cdb
    }

    /// SERVICE ACTION IN(16) with `sa` (READ CAPACITY(16) is 10h).
    pub fn service_action_in(sa: u8, alloc_len: u32) -> Vec<u8> {
        let mut cdb = vec![0x9e, sa, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[10..14].copy_from_slice(&alloc_len.to_be_bytes());
        cdb
    }

    pub fn report_luns(select: u8, alloc_len: u32) -> Vec<u8> {
        let mut cdb = vec![0xa0, 0, select, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[6..10].copy_from_slice(&alloc_len.to_be_bytes());
        cdb
    }

    /// MAINTENANCE IN with service action `sa`: REPORT SUPPORTED OPERATION CODES (0Ch, with
    /// `byte2` the RCTD bit and reporting options) and TASK MANAGEMENT FUNCTIONS (0Dh).
    pub fn maintenance_in(
        sa: u8,
        byte2: u8,
        opcode: u8,
        service_action: u16,
        alloc_len: u32,
    ) -> Vec<u8> {
        let mut cdb = vec![0xa3, sa, byte2, opcode, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[4..6].copy_from_slice(&service_action.to_be_bytes());
        cdb[6..10].copy_from_slice(&alloc_len.to_be_bytes());
        cdb
    }
}
