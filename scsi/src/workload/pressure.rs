//! Memory pressure on the sense slab, for the sense-reserve question: does a reserve keep I/O
//! moving when the slab cannot get memory?
//!
//! The slab's pages come from a `pools::PageBudget` of `mem_budget` pages. `pressure=` picks
//! what else happens to that budget while the job runs:
//! - `none`: nothing; the budget only caps the slab.
//! - `fail:P`: each slab page refill fails with probability P (seeded by `seed=`).
//! - `writeback[:K]`: a consumer (dirty page cache) takes every free page, a shrinker reclaims
//!   the slab's empty pages (flushing the per-CPU magazine first, as `kmem_cache_shrink` does),
//!   and the consumer gives back one page per K completed writes (default 32): memory comes
//!   back only as write I/O completes. This case runs `rw=randwrite`.
//!
//! The pressure actor gets one turn per pass of the workload loop, right after the submission
//! phase and before the poll ([`Pressure::tick`]), plus one before the job starts
//! ([`Pressure::begin`]), when the host is idle: that is when a shrinker finds the slab's pages
//! empty. Pages given back by completed writes are free until the actor's next turn, so the
//! submissions that follow a completion can take them first.

use crate::param::ValueError;
use crate::param::number::count;
use crate::sense_alloc::Reclaim;
use alloc::string::{String, ToString};
use pools::PageBudget;
use pools::budget::PAGE_BYTES;

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
}

impl PressureMode {
    /// Parses `none`, `fail:P` (0 ≤ P ≤ 1 as a decimal, e.g. `fail:0.01`) or `writeback[:K]`
    /// (1 ≤ K ≤ 1000000 writes per page).
    pub fn parse(text: &str) -> Result<PressureMode, ValueError> {
        let expected = || ValueError::expected("none, fail:P with 0 <= P <= 1, or writeback[:K]");
        match text {
            "none" => return Ok(PressureMode::None),
            "writeback" => {
                return Ok(PressureMode::Writeback {
                    writes_per_page: WRITEBACK_WRITES_PER_PAGE,
                });
            }
            _ => {}
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
        }
    }
}

/// `0.01`, `1`, `0.5`, `1.0` as parts per million: digits, an optional point and at most six
/// decimals (a probability, not a count, so not the shared number syntax).
fn probability_ppm(text: &str) -> Option<u32> {
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

/// The pressure actor for one sense slab. See the [module docs](self).
pub struct Pressure<'budget> {
    mode: PressureMode,
    budget: &'budget PageBudget,
    writes: u64,
    /// Set by [`relieve`](Self::relieve) until the next [`begin`](Self::begin).
    relieved: bool,
}

impl<'budget> Pressure<'budget> {
    /// The actor for `mode` over `budget` (the one the slab's backing charges).
    pub fn new(mode: PressureMode, budget: &'budget PageBudget) -> Self {
        Pressure {
            mode,
            budget,
            writes: 0,
            relieved: false,
        }
    }

    /// The pressure this actor applies.
    pub fn mode(&self) -> PressureMode {
        self.mode
    }

    /// The page budget it acts on.
    pub fn budget(&self) -> &'budget PageBudget {
        self.budget
    }

    /// Before a job, with the host idle: applies the failure rate, or lets the shrinker and
    /// the consumer take everything they can.
    pub fn begin(&mut self, slab: &impl Reclaim) {
        self.relieved = false;
        match self.mode {
            PressureMode::None => self.budget.set_fail_ppm(0),
            PressureMode::Fail { ppm } => self.budget.set_fail_ppm(ppm),
            PressureMode::Writeback { .. } => {
                self.budget.set_fail_ppm(0);
                self.tick(slab);
            }
        }
    }

    /// The actor's turn during the job: under write-back the shrinker reclaims the slab's
    /// empty pages and the consumer takes every free page.
    pub fn tick(&mut self, slab: &impl Reclaim) {
        if let PressureMode::Writeback { .. } = self.mode
            && !self.relieved
        {
            slab.reclaim();
            self.budget.consume_free();
        }
    }

    /// A write completed; under write-back every Kth gives a page back.
    pub fn write_completed(&mut self) {
        if let PressureMode::Writeback { writes_per_page } = self.mode {
            self.writes += 1;
            if self.writes % u64::from(writes_per_page) == 0 {
                self.budget.give_back(1);
            }
        }
    }

    /// Ends the pressure (after a stall verdict, or after the job): the consumer gives every
    /// page back and refills stop failing, so parked commands can finish.
    pub fn relieve(&mut self) {
        self.relieved = true;
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
        ] {
            assert_eq!(PressureMode::parse(name).unwrap().name(), name);
        }
        assert_eq!(mem_budget_pages("1m").unwrap(), 256);
        assert_eq!(mem_budget_pages("4097").unwrap(), 2);
        assert_eq!(mem_budget_pages("0x4000").unwrap(), 4);
        for bad in ["0", "4095", "x", "2g"] {
            assert!(mem_budget_pages(bad).is_err(), "{bad}");
        }
    }
}
