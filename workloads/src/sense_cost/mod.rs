//! `workload=sense-cost`: the 2008 sense-buffer experiment's per-command cost on our sense
//! allocator, shaped as the `sp_sense` module runs it on a stock kernel's SLUB and mempool
//! (`harness/linux/sp_sense/sp_sense.c`), so `cargo xtask bench linux --case sense` puts the two
//! side by side.
//!
//! A ring of `iodepth` commands per host: each step completes the oldest command (its buffer goes
//! back with `free_for`) and submits a new one in its slot (`alloc_for`), `commands` steps per
//! ring and round, every host's ring on the same CPU in turn. `touch=zero` zeroes every new
//! buffer (the 2.6.24 midlayer's `scsi_init_cmd_errh`); `touch=error` writes it only when a
//! command fails, and these never fail. The modes ([`CostMode`]) are the module's, each mapped to
//! the nearest of ours ([`CostMode::sense_mode`]); where the meaning differs the row says so
//! ([`CostMode::differs`]). The caller gives each CPU its allocator (one per CPU over the shared
//! cache, with `fail=` a [`crate::Failslab`] in front) and runs [`run_cpu`] on every CPU at once;
//! the timed part runs between the counted-window markers, and the guest kernel runs with
//! interrupts off.

mod params;

use alloc::vec::Vec;

use pools::ElementAllocator;
use pools::clock::Clock;
use scsi::sense_alloc::{ReserveFailed, SenseAllocator, SenseMode, SenseStorage};
use scsi::wire::{SCSI_SENSE_BUFFERSIZE, Tag};

pub use params::{MAX_HOSTS, SenseCostParams};

use crate::io::SenseSlab;
use protocol::window::CountedWindows;

/// Modes per run: one instruction-count slot each.
pub const MAX_MODES: usize = 16;
/// Idle objects or reserve entries of one mode, at most (the module's `SP_MAX_IDLE`).
pub const MAX_IDLE: usize = 1_000_000;
/// Consecutive failed attempts after which a command gives up: a real shortage, not a draw.
const MAX_RETRIES: u64 = 1_000_000;

/// One row of the 2008 thread, as the module names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostMode {
    /// One buffer per tag, set up once (2008's baseline; blk-mq's per-request buffer).
    Static,
    /// An allocation and a free per command, with `idle` more objects held for the round.
    Slab {
        /// Objects allocated before the ring and held (0: plain `slab`).
        idle: usize,
    },
    /// A mempool of this many entries per host in front of the slab.
    Mempool(usize),
}

impl CostMode {
    /// The thread's four rows and the two designs around them: `static`, `slab`, `mempool:1`,
    /// `mempool:2`, `slab+idle:1519`, `mempool:1519`.
    pub const SEED_ROWS: [CostMode; 6] = [
        CostMode::Static,
        CostMode::Slab { idle: 0 },
        CostMode::Mempool(1),
        CostMode::Mempool(2),
        CostMode::Slab { idle: 1519 },
        CostMode::Mempool(1519),
    ];

    /// Parses `static`, `slab`, `slab+idle:K` or `mempool:N` (K, N ≤ [`MAX_IDLE`]).
    pub fn parse(text: &str) -> Result<CostMode, scsi::param::ValueError> {
        let bad = || {
            scsi::param::ValueError::expected(
                "static, slab, slab+idle:K or mempool:N (K, N at most 1000000)",
            )
        };
        let number = |digits: &str| -> Result<usize, scsi::param::ValueError> {
            scsi::param::number::count(digits, 0, MAX_IDLE as u64).map_err(|_| bad())
        };
        match text {
            "static" => Ok(CostMode::Static),
            "slab" => Ok(CostMode::Slab { idle: 0 }),
            _ => match (
                text.strip_prefix("slab+idle:"),
                text.strip_prefix("mempool:"),
            ) {
                (Some(idle), _) => Ok(CostMode::Slab {
                    idle: number(idle)?,
                }),
                (_, Some(entries)) => Ok(CostMode::Mempool(number(entries)?)),
                _ => Err(bad()),
            },
        }
    }

    /// Our sense allocator's mode for this row.
    pub fn sense_mode(self) -> SenseMode {
        match self {
            CostMode::Static => SenseMode::Pertag,
            CostMode::Slab { .. } => SenseMode::Slab,
            CostMode::Mempool(entries) => SenseMode::Mempool(entries),
        }
    }

    /// Objects held outside the rings with `hosts` rings on each of `cpus` CPUs (one CPU holds
    /// the idle objects): what `idle=` of the module's line counts.
    pub fn idle_objects(self, hosts: usize, iodepth: usize, cpus: usize) -> usize {
        match self {
            CostMode::Static => cpus * hosts * iodepth,
            CostMode::Slab { idle } => idle,
            CostMode::Mempool(entries) => cpus * hosts * entries,
        }
    }

    /// How our row differs in meaning from the module's on the slab `backend`, if it does.
    pub fn differs(self, backend: SenseSlab) -> Option<&'static str> {
        match (self, backend) {
            (CostMode::Static, _) => Some(
                "pertag: the tag's buffer is taken from the allocator's tag table and put back per command",
            ),
            (_, SenseSlab::Slab) => Some(
                "our slab: a per-CPU magazine of 64 in front of a Bonwick slab, not SLUB's per-CPU slab",
            ),
            (_, SenseSlab::Slub) => Some(
                "our SLUB-shaped cache (pools::slub): per-CPU active and partial slabs, as SLUB, on our pages",
            ),
        }
    }
}

impl core::fmt::Display for CostMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CostMode::Static => f.write_str("static"),
            CostMode::Slab { idle: 0 } => f.write_str("slab"),
            CostMode::Slab { idle } => write!(f, "slab+idle:{idle}"),
            CostMode::Mempool(entries) => write!(f, "mempool:{entries}"),
        }
    }
}

/// What a new buffer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// Zeroed at submission (the 2.6.24 midlayer's `memset` in `scsi_init_cmd_errh`).
    Zero,
    /// Written only when the command fails; these commands never fail.
    Error,
}

impl Touch {
    /// The word `touch=` takes.
    pub fn name(self) -> &'static str {
        match self {
            Touch::Zero => "zero",
            Touch::Error => "error",
        }
    }
}

/// Why a CPU's share of a window could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SenseCostError {
    /// A host's reserve (or its tags' buffers) could not be filled.
    #[error(transparent)]
    Reserve(#[from] ReserveFailed),
    /// The idle objects could not all be allocated.
    #[error("{wanted} idle objects: the allocator supplied only {have}")]
    Idle {
        /// Objects asked for.
        wanted: usize,
        /// Objects obtained.
        have: usize,
    },
    /// A command found no buffer after this many attempts in a row.
    #[error("a command found no sense buffer in {attempts} attempts")]
    Starved {
        /// Attempts made.
        attempts: u64,
    },
}

/// One CPU's share of one window: which mode on which slot, and how long.
#[derive(Debug, Clone, Copy)]
pub struct CpuWindow {
    /// The row.
    pub mode: CostMode,
    /// Its instruction-count slot (its index in `modes=`).
    pub slot: u8,
    /// Commands per ring.
    pub commands: u64,
    /// Rings on this CPU.
    pub hosts: u16,
    /// Commands each ring keeps in flight.
    pub iodepth: u16,
    /// What a new buffer gets.
    pub touch: Touch,
    /// Whether this CPU holds the mode's idle objects (CPU 0 does, before its rings start).
    pub holds_idle: bool,
}

/// What one CPU measured in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuOutcome {
    /// Clock time of the timed loop.
    pub ns: u64,
    /// Allocation attempts that found nothing (retried at once).
    pub retries: u64,
    /// Buffers taken from a reserve (mempool modes; `pertag` counts its tags' takes too).
    pub reserve_hits: u64,
    /// Distinct 4 KiB pages the in-flight buffers sat in when the loop ended (0 when the
    /// storage has no bus address).
    pub ring_pages: u64,
}

/// One host: its allocator and the buffer each in-flight command holds.
struct Ring<A: ElementAllocator> {
    sense: SenseAllocator<A>,
    slots: Vec<Option<A::Element>>,
    head: usize,
}

/// Runs this CPU's rings of a window on `allocator`: sets up (idle objects first, then the
/// hosts' allocators), calls `ready` once whatever the set-up did (the caller's barrier with the
/// other CPUs; a caller injecting failures arms them there, as failslab by default spares the
/// allocations that may sleep, which set-up's are), runs the timed loop between `clock`'s
/// window markers, and gives everything back (`pertag`'s tag buffers go with its allocator).
pub fn run_cpu<A, C>(
    window: &CpuWindow,
    allocator: &A,
    clock: &C,
    ready: impl FnOnce(),
) -> Result<CpuOutcome, SenseCostError>
where
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
{
    let idle = match (window.mode, window.holds_idle) {
        (CostMode::Slab { idle }, true) => take_idle(allocator, idle),
        _ => Ok(Vec::new()),
    };
    let depth = usize::from(window.iodepth);
    let rings = idle.as_ref().ok().map(|_| {
        (0..window.hosts)
            .map(|_| {
                Ok(Ring {
                    sense: SenseAllocator::new(window.mode.sense_mode(), allocator, depth)?,
                    slots: (0..depth).map(|_| None).collect(),
                    head: 0,
                })
            })
            .collect::<Result<Vec<_>, SenseCostError>>()
    });
    // Every CPU passes the barrier once, whatever its set-up did.
    ready();
    let mut idle = idle?;
    let mut rings = rings.unwrap_or(Ok(Vec::new()))?;
    let start = clock.now_ns();
    clock.window_begin(window.slot);
    let looped = match window.touch {
        Touch::Zero => ring_loop::<A, true>(&mut rings, window.commands),
        Touch::Error => ring_loop::<A, false>(&mut rings, window.commands),
    };
    clock.window_end(window.slot);
    let ns = clock.now_ns().saturating_sub(start);
    let mut outcome = CpuOutcome {
        ns,
        ring_pages: ring_pages(&rings),
        ..CpuOutcome::default()
    };
    for ring in &mut rings {
        for (tag, slot) in ring.slots.iter_mut().enumerate() {
            if let Some(buf) = slot.take() {
                ring.sense.free_for(Tag(tag as u16), buf);
            }
        }
        if matches!(window.mode, CostMode::Mempool(_)) {
            outcome.reserve_hits += ring.sense.stats().reserve_hits;
        }
    }
    for element in idle.drain(..) {
        allocator.free(element);
    }
    outcome.retries = looped?;
    Ok(outcome)
}

/// `count` objects from `allocator`, or how many it gave before it failed (given back).
fn take_idle<A: ElementAllocator>(
    allocator: &A,
    count: usize,
) -> Result<Vec<A::Element>, SenseCostError> {
    let mut held = Vec::with_capacity(count);
    while held.len() < count {
        match allocator.try_alloc() {
            Some(element) => held.push(element),
            None => {
                let have = held.len();
                held.into_iter().for_each(|element| allocator.free(element));
                return Err(SenseCostError::Idle {
                    wanted: count,
                    have,
                });
            }
        }
    }
    Ok(held)
}

/// The timed loop: `commands` steps on every ring; returns the retries.
fn ring_loop<A, const ZERO: bool>(
    rings: &mut [Ring<&A>],
    commands: u64,
) -> Result<u64, SenseCostError>
where
    A: ElementAllocator,
    A::Element: SenseStorage,
{
    const ZEROS: [u8; SCSI_SENSE_BUFFERSIZE] = [0; SCSI_SENSE_BUFFERSIZE];
    let mut retries = 0;
    for _ in 0..commands {
        for ring in rings.iter_mut() {
            let tag = Tag(ring.head as u16);
            if let Some(old) = ring.slots[ring.head].take() {
                ring.sense.free_for(tag, old);
            }
            let mut attempts = 0;
            let mut buf = loop {
                match ring.sense.alloc_for(tag) {
                    Some(buf) => break buf,
                    None if attempts < MAX_RETRIES => attempts += 1,
                    None => return Err(SenseCostError::Starved { attempts }),
                }
            };
            retries += attempts;
            if ZERO {
                buf.store(&ZEROS);
            }
            ring.slots[ring.head] = Some(buf);
            ring.head += 1;
            if ring.head == ring.slots.len() {
                ring.head = 0;
            }
        }
    }
    Ok(retries)
}

/// Distinct 4 KiB pages of the in-flight buffers (by bus address).
fn ring_pages<A: ElementAllocator>(rings: &[Ring<A>]) -> u64
where
    A::Element: SenseStorage,
{
    let mut pages: Vec<u64> = rings
        .iter()
        .flat_map(|ring| ring.slots.iter().flatten())
        .filter_map(|buf| buf.dma_addr().map(|addr| addr.0 >> 12))
        .collect();
    pages.sort_unstable();
    pages.dedup();
    pages.len() as u64
}

#[cfg(test)]
mod tests;
