//! A reusable spinning barrier: `parties` CPUs call [`SpinBarrier::wait`] and all leave together.
//! Guest tests and benchmarks use it to start every CPU's loop at the same moment, so contention
//! is real rather than an accident of staggered start-up. Sense is a generation counter, so the
//! barrier can be reused immediately.

use core::sync::atomic::{AtomicUsize, Ordering};

/// See the [module docs](self).
#[derive(Debug)]
pub struct SpinBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    /// A barrier for `parties` participants (0 behaves as 1).
    pub const fn new(parties: usize) -> Self {
        SpinBarrier {
            parties: if parties == 0 { 1 } else { parties },
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    /// Waits until all parties have arrived. Returns `true` in exactly one of them (the last).
    pub fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return true;
        }
        while self.generation.load(Ordering::Acquire) == generation {
            core::hint::spin_loop();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn nobody_passes_before_everyone_arrived_and_it_is_reusable() {
        const THREADS: usize = 3;
        const ROUNDS: u64 = 50;
        let barrier = Arc::new(SpinBarrier::new(THREADS));
        let counter = Arc::new(AtomicU64::new(0));
        let leaders = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (barrier, counter, leaders) = (
                    Arc::clone(&barrier),
                    Arc::clone(&counter),
                    Arc::clone(&leaders),
                );
                std::thread::spawn(move || {
                    for round in 0..ROUNDS {
                        counter.fetch_add(1, Ordering::SeqCst);
                        if barrier.wait() {
                            leaders.fetch_add(1, Ordering::SeqCst);
                        }
                        // Everyone incremented for this round before anyone got here.
                        assert!(counter.load(Ordering::SeqCst) >= (round + 1) * THREADS as u64);
                        barrier.wait();
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(leaders.load(Ordering::SeqCst), ROUNDS);
    }
}
