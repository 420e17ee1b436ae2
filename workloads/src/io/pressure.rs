//! Memory pressure on the sense slab, for the sense-reserve question: does a reserve keep I/O
//! moving when the slab cannot get memory? Pressure Linux would recognise: nothing empties the
//! per-CPU caches or shrinks `scsi_sense_cache` (Linux has no shrinker for it, and a SLUB cache
//! gives back only the empty slabs beyond `min_partial`), and no other user shares its objects
//! (it is a usercopy cache, never merged with another); memory is taken by a competing
//! allocator on another CPU, page by page.
//!
//! The slab's pages come from a `workloads::PageBudget` of `mem_budget` pages. `pressure=` picks
//! what else happens while the job runs:
//! - `none`: nothing; the budget only caps the slab.
//! - `fail:P`: each sense allocation fails with probability P (seeded by `seed=`), drawn per
//!   object in front of the per-CPU cache (`workloads::Failslab`, Linux failslab semantics).
//! - `writeback[:K]`: a competing allocator (dirty page cache) takes every free page above the
//!   budget's atomic reserve (`atomic_reserve=`, pages only the slab may take, 0 by default),
//!   and gives back one page per K completed writes (default 32), which it takes again at its
//!   next turn. On the guest it runs on the second vCPU, concurrently; in the host model it takes
//!   its turn between the host's passes, so it wins every race for a freed page (the worst case
//!   of the concurrent one). This case runs `rw=randwrite`.
//! - `multi:K`: `writeback`, with every command taking K objects from the sense pool in one
//!   forward step (its sense buffer and K − 1 chain objects, all or none).
//! - `shared[:H]`: `writeback`, with a second host A on the same sense cache and pool (one
//!   reserve for both, as Linux's `sg_pool` mempools serve every host) whose device answers
//!   nothing (scsi_debug `every_nth=1 opts=4`): from the moment pressure starts A keeps H
//!   commands in error handling, each holding the element it took, while the measured host B
//!   writes back (see `matrix::shared`).
//! - `eh` / `eh:reuse`: `writeback`, with the host's own device swallowing every
//!   `every_nth`-th command (`opts=4`) and Linux's error handling (30 s timeouts, see
//!   `matrix::eh_defaults`); under `eh` recovering a timed-out command takes a second buffer
//!   from the same pool while the failing command keeps its own; under `eh:reuse` it takes none,
//!   as Linux's `scsi_eh_prep_cmnd` reuses the failed command's buffer.
//!
//! Pressure starts in steady state: the job first completes twice its queue depth with nothing
//! taken away, so commands are in flight (with scsi_debug's `delay`/`ndelay` keeping them there)
//! when memory goes; what a host holds at that moment is not decided by an idle start.

use crate::PageBudget;
use crate::budget::PAGE_BYTES;
use alloc::string::{String, ToString};
use scsi::param::ValueError;
use scsi::param::number::count;

/// The most objects one step of `multi:K` takes.
pub const MULTI_MAX_ELEMENTS: u32 = 16;
/// The most commands host A keeps in error handling under `shared:H`.
pub const SHARED_MAX_HOLDERS: u32 = 16;

/// Pages given back per this many completed writes, when `writeback` names no K.
pub const WRITEBACK_WRITES_PER_PAGE: u32 = 32;
/// Pages in the default `mem_budget` (4 MiB): room for a `prealloc` or `pertag` reserve of
/// 1519 buffers (48 pages of 32) many times over.
pub const DEFAULT_MEM_BUDGET_PAGES: usize = 1024;

/// `pressure=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PressureMode {
    /// No pressure: the budget only caps the slab.
    #[default]
    None,
    /// Each slab page refill fails at random.
    Fail {
        /// The failure probability in parts per million.
        ppm: u32,
    },
    /// A consumer takes every free page and gives pages back only as writes complete.
    Writeback {
        /// Completed writes per page given back (K).
        writes_per_page: u32,
    },
    /// `writeback`, with each command taking this many objects in one forward step.
    Multi {
        /// Objects per forward step (K ≥ 2).
        elements_per_step: u32,
    },
    /// `writeback`, with timed-out commands recovered by error handling.
    Eh {
        /// Whether recovery takes a second buffer from the pool (`eh`) or reuses the failed
        /// command's own (`eh:reuse`, Linux).
        second_buffer: bool,
    },
    /// `writeback`, with a second host on the same pool keeping commands in error handling.
    Shared {
        /// Commands the failing host keeps in error handling, each holding its element (H).
        holders: u32,
    },
}

impl PressureMode {
    /// Parses `none`, `fail:P` (0 ≤ P ≤ 1 as a decimal, e.g. `fail:0.01`), `writeback[:K]`
    /// (1 ≤ K ≤ 1000000 writes per page), `multi:K` (2 ≤ K ≤ 16 objects per step) or
    /// `shared[:H]` (1 ≤ H ≤ 16 commands in error handling, default 1), `eh` or `eh:reuse`.
    pub fn parse(text: &str) -> Result<PressureMode, ValueError> {
        let expected = || {
            ValueError::expected(
                "none, fail:P with 0 <= P <= 1, writeback[:K], multi:K with 2 <= K <= 16, shared[:H] with 1 <= H <= 16, eh or eh:reuse",
            )
        };
        match text {
            "none" => return Ok(PressureMode::None),
            "shared" => return Ok(PressureMode::Shared { holders: 1 }),
            "eh" => {
                return Ok(PressureMode::Eh {
                    second_buffer: true,
                });
            }
            "eh:reuse" => {
                return Ok(PressureMode::Eh {
                    second_buffer: false,
                });
            }
            "writeback" => {
                return Ok(PressureMode::Writeback {
                    writes_per_page: WRITEBACK_WRITES_PER_PAGE,
                });
            }
            _ => {}
        }
        if let Some(k) = text.strip_prefix("multi:") {
            let elements_per_step = count(k, 2, u64::from(MULTI_MAX_ELEMENTS))?;
            return Ok(PressureMode::Multi { elements_per_step });
        }
        if let Some(h) = text.strip_prefix("shared:") {
            let holders = count(h, 1, u64::from(SHARED_MAX_HOLDERS))?;
            return Ok(PressureMode::Shared { holders });
        }
        if let Some(k) = text.strip_prefix("writeback:") {
            let writes_per_page = count(k, 1, 1_000_000)?;
            return Ok(PressureMode::Writeback { writes_per_page });
        }
        let p = text.strip_prefix("fail:").ok_or_else(expected)?;
        let ppm = probability_ppm(p).ok_or_else(expected)?;
        Ok(PressureMode::Fail { ppm })
    }

    /// The name as parsed, e.g. `fail:0.01`.
    pub fn name(self) -> String {
        match self {
            PressureMode::None => "none".to_string(),
            PressureMode::Fail { ppm } => {
                let mut digits = alloc::format!("{}.{:06}", ppm / 1_000_000, ppm % 1_000_000);
                while digits.ends_with('0') {
                    digits.pop();
                }
                if digits.ends_with('.') {
                    digits.pop();
                }
                alloc::format!("fail:{digits}")
            }
            PressureMode::Writeback { writes_per_page }
                if writes_per_page == WRITEBACK_WRITES_PER_PAGE =>
            {
                "writeback".to_string()
            }
            PressureMode::Writeback { writes_per_page } => {
                alloc::format!("writeback:{writes_per_page}")
            }
            PressureMode::Multi { elements_per_step } => {
                alloc::format!("multi:{elements_per_step}")
            }
            PressureMode::Eh {
                second_buffer: true,
            } => "eh".to_string(),
            PressureMode::Eh {
                second_buffer: false,
            } => "eh:reuse".to_string(),
            PressureMode::Shared { holders: 1 } => "shared".to_string(),
            PressureMode::Shared { holders } => alloc::format!("shared:{holders}"),
        }
    }

    /// Objects one command takes from the sense pool per forward step (1 but for `multi:K`).
    pub fn elements_per_step(self) -> usize {
        match self {
            PressureMode::Multi { elements_per_step } => elements_per_step as usize,
            _ => 1,
        }
    }

    /// Whether the case writes (the write-back cases).
    pub fn writes_back(self) -> bool {
        self.writes_per_page().is_some()
    }

    /// Completed writes per page the consumer gives back, for the cases that take memory away.
    fn writes_per_page(self) -> Option<u32> {
        match self {
            PressureMode::Writeback { writes_per_page } => Some(writes_per_page),
            PressureMode::Multi { .. } | PressureMode::Shared { .. } | PressureMode::Eh { .. } => {
                Some(WRITEBACK_WRITES_PER_PAGE)
            }
            PressureMode::None | PressureMode::Fail { .. } => None,
        }
    }
}

/// `0.01`, `1`, `0.5`, `1.0` as parts per million: digits, an optional point and at most six
/// decimals (a probability, not a count, so not the shared number syntax).
pub(crate) fn probability_ppm(text: &str) -> Option<u32> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || fraction.len() > 6 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let mut ppm = whole.parse::<u64>().ok()?.checked_mul(1_000_000)?;
    let mut scale = 100_000;
    for b in fraction.bytes() {
        ppm += u64::from(b - b'0') * scale;
        scale /= 10;
    }
    u32::try_from(ppm).ok().filter(|&ppm| ppm <= 1_000_000)
}

/// `mem_budget=`: bytes in the shared number syntax (`mem_budget=4m`), from one page to 1 GiB,
/// rounded up to whole 4 KiB pages.
pub fn mem_budget_pages(text: &str) -> Result<usize, ValueError> {
    let bytes: u64 = count(text, PAGE_BYTES as u64, 1 << 30)?;
    Ok(bytes.div_ceil(PAGE_BYTES as u64) as usize)
}

/// Where the competing allocator of the write-back cases takes its turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Competitor {
    /// Between the host's passes, from the pressure actor: it wins every race for a freed page
    /// (the host model, deterministic).
    BetweenPasses,
    /// On another CPU, concurrently ([`PageBudget::compete`] in a loop there; the guest).
    OtherCpu,
}

/// The pressure actor for one sense slab. See the [module docs](self).
pub struct Pressure<'a> {
    mode: PressureMode,
    budget: &'a PageBudget,
    competitor: Competitor,
    writes: u64,
    completed: u64,
    /// Completions before pressure starts (steady state).
    steady_after: u64,
    active: bool,
    /// Set by [`relieve`](Self::relieve) until the next [`begin`](Self::begin).
    relieved: bool,
}

impl<'a> Pressure<'a> {
    /// The actor for `mode` over `budget` (the one the slab's backing charges), with the
    /// competing allocator taking its turns as `competitor` says.
    pub fn new(mode: PressureMode, budget: &'a PageBudget, competitor: Competitor) -> Self {
        Pressure {
            mode,
            budget,
            competitor,
            writes: 0,
            completed: 0,
            steady_after: 0,
            active: false,
            relieved: false,
        }
    }

    /// The pressure this actor applies.
    pub fn mode(&self) -> PressureMode {
        self.mode
    }

    /// The page budget it acts on.
    pub fn budget(&self) -> &'a PageBudget {
        self.budget
    }

    /// Whether pressure has started in the current job.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Before a job: no pressure yet; it starts once `steady_after` commands completed.
    pub fn begin(&mut self, steady_after: u64) {
        self.relieved = false;
        self.active = false;
        self.completed = 0;
        self.steady_after = steady_after;
        self.budget.set_fail_ppm(0);
        if steady_after == 0 {
            self.start();
        }
    }

    fn start(&mut self) {
        self.active = true;
        if let PressureMode::Fail { ppm } = self.mode {
            self.budget.set_fail_ppm(ppm);
        }
        if self.mode.writes_back() {
            self.budget.set_competing(true);
            self.budget.compete();
        }
    }

    /// The actor's turn, at the top of a pass of the workload loop: the competitor's turn,
    /// when it takes its turns here.
    pub fn tick(&mut self) {
        if self.active && self.competitor == Competitor::BetweenPasses {
            self.budget.compete();
        }
    }

    /// A command completed; starts the pressure at steady state, and under write-back every
    /// Kth completed write gives a page back.
    pub fn completed(&mut self, write: bool) {
        self.completed += 1;
        if !self.active && !self.relieved && self.completed >= self.steady_after {
            self.start();
        }
        if let Some(writes_per_page) = self.mode.writes_per_page()
            && write
            && self.active
        {
            self.writes += 1;
            if self.writes % u64::from(writes_per_page) == 0 {
                self.budget.give_back(1);
            }
        }
    }

    /// Ends the pressure (after a stall verdict, or after the job): the competitor stops and
    /// gives back everything and allocations stop failing, so parked commands can finish.
    pub fn relieve(&mut self) {
        self.relieved = true;
        self.active = false;
        self.budget.set_competing(false);
        self.budget.release_all();
        self.budget.set_fail_ppm(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_modes_and_budgets_users_type() {
        assert_eq!(PressureMode::parse("none").unwrap(), PressureMode::None);
        assert_eq!(
            PressureMode::parse("fail:0.01").unwrap(),
            PressureMode::Fail { ppm: 10_000 }
        );
        assert_eq!(
            PressureMode::parse("fail:1").unwrap(),
            PressureMode::Fail { ppm: 1_000_000 }
        );
        assert_eq!(
            PressureMode::parse("writeback").unwrap(),
            PressureMode::Writeback {
                writes_per_page: 32
            }
        );
        assert_eq!(
            PressureMode::parse("writeback:8").unwrap(),
            PressureMode::Writeback { writes_per_page: 8 }
        );
        for bad in [
            "fail:1.5",
            "fail:",
            "fail:.5",
            "fail:-0.1",
            "fail:1e-3",
            "writeback:0",
            "multi:1",
            "multi:17",
            "shared:0",
            "shared:17",
            "eh:1",
            "oom",
            "",
        ] {
            assert!(PressureMode::parse(bad).is_err(), "{bad}");
        }
        for name in [
            "none",
            "fail:0.01",
            "fail:0.5",
            "fail:1",
            "writeback",
            "writeback:8",
            "multi:2",
            "multi:16",
            "shared",
            "shared:2",
            "eh",
            "eh:reuse",
        ] {
            assert_eq!(PressureMode::parse(name).unwrap().name(), name);
        }
        assert_eq!(
            PressureMode::parse("multi:3").unwrap().elements_per_step(),
            3
        );
        assert_eq!(mem_budget_pages("1m").unwrap(), 256);
        assert_eq!(mem_budget_pages("4097").unwrap(), 2);
        assert_eq!(mem_budget_pages("0x4000").unwrap(), 4);
        for bad in ["0", "4095", "x", "2g"] {
            assert!(mem_budget_pages(bad).is_err(), "{bad}");
        }
    }
}
