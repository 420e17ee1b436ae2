//! The stall watchdog's report and the hooks through which an outside actor (memory pressure
//! on the sense slab) gets its turns during a job.

use super::Pressure;

/// What the stall watchdog saw: no command completed for `stall_ms` while commands were
/// outstanding. The job then stops issuing, relieves any pressure and drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// When it fired, from the start of the job.
    pub at_ns: u64,
    /// Commands submitted and not completed at that moment.
    pub outstanding: usize,
    /// Of those, the ones parked without a sense buffer.
    pub parked: usize,
    /// Commands completed (good or failed) before it.
    pub completed: u64,
    /// Objects taken from the sense pool (slab or reserve) between the last completion and
    /// the watchdog: non-zero means commands kept taking elements and giving them back
    /// without completing (a livelock), zero that nothing moved at all (a stall).
    pub element_moves: u64,
}

/// What a job lets an outside actor do between its steps (memory pressure, see
/// [`Pressure`]); `()` does nothing.
pub trait Hooks<A> {
    /// Whether [`completed`](Self::completed) does anything: the loop records each completion
    /// for it only when it does.
    const WANTS_COMPLETIONS: bool = true;
    /// Once per pass of the loop, before the submissions (after the previous completions).
    fn tick(&mut self, _slab: &A) {}
    /// A command completed (`write`: it was a write).
    fn completed(&mut self, _write: bool) {}
    /// The stall watchdog fired: let the parked commands finish.
    fn relieve(&mut self) {}
    /// The counted window's slot when it is not the stack's own mode's (a stack whose
    /// allocator runs in `slab` mode over a pool-wide reserve counts as the pool's mode).
    fn window_slot(&self) -> Option<u8> {
        None
    }
}

impl<A> Hooks<A> for () {
    const WANTS_COMPLETIONS: bool = false;
}

impl<A> Hooks<A> for Pressure<'_> {
    fn tick(&mut self, _slab: &A) {
        Pressure::tick(self);
    }
    fn completed(&mut self, write: bool) {
        Pressure::completed(self, write);
    }
    fn relieve(&mut self) {
        Pressure::relieve(self);
    }
}
