//! The one seeded pseudo-random generator of the project: xorshift64* (Vigna, "An experimental
//! exploration of Marsaglia's xorshift generators, scrambled", 2016) for the stream, seeded
//! through one splitmix64 step (Steele, Lea and Flood, 2014).
//!
//! xorshift64* costs a few shifts and one multiply per number, which matters on a benchmark's
//! submission path, and its output passes the tests a workload's LBA scatter or a test's data
//! pattern needs. Its state must never be zero; seeding through splitmix64 turns any seed
//! (0, or consecutive seeds such as block numbers) into a well-mixed non-zero state, so callers
//! need no `| 1` of their own. Not for cryptography.

/// The splitmix64 increment (2⁶⁴ divided by the golden ratio).
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A repeatable stream of 64-bit numbers from a seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The stream of `seed`: equal seeds give equal streams, on every machine.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        let mixed = splitmix64(seed);
        Self {
            // splitmix64 is a bijection, so exactly one seed maps to 0; give it another state.
            state: if mixed == 0 { GOLDEN_GAMMA } else { mixed },
        }
    }

    /// The next number.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..bound` (Lemire's multiply-shift: no division, a bias below 2⁻³² for
    /// any bound a workload uses). A `bound` of 0 gives 0 rather than a panic.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        scale_below(self.next_u64(), bound)
    }

    /// Fills `out` with the stream's bytes (little-endian words).
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// `word` (a full-range random number) mapped onto `0..bound` by Lemire's multiply-shift,
/// for a caller that uses the same draw for something else too (fake-rw takes a command's
/// direction from its top bit). A `bound` of 0 gives 0.
#[inline]
#[must_use]
pub fn scale_below(word: u64, bound: u64) -> u64 {
    ((u128::from(word) * u128::from(bound)) >> 64) as u64
}

/// The seed of stream `index` of a family of streams from `seed`: `Rng::new` of it is the
/// `index`th splitmix64 output of `seed`'s sequence, so the streams are unrelated, and a
/// caller that hands out a run of indices (fake-rw's jobs, split over queues) gives each job
/// the same stream however they are split.
#[must_use]
pub const fn stream_seed(seed: u64, index: u64) -> u64 {
    seed.wrapping_add(index.wrapping_mul(GOLDEN_GAMMA))
}

/// One splitmix64 output for `seed`: a bijective mix of all 64 bits.
const fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_seeds_give_equal_streams_and_zero_is_a_seed() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        let mut zero = Rng::new(0);
        let first = zero.next_u64();
        assert_ne!(first, 0);
        assert_ne!(first, zero.next_u64());
    }

    #[test]
    fn consecutive_seeds_give_unrelated_streams() {
        let firsts: [u64; 4] = core::array::from_fn(|seed| Rng::new(seed as u64).next_u64());
        for (i, x) in firsts.iter().enumerate() {
            for y in &firsts[i + 1..] {
                // Well mixed: about half the bits differ, never only a few.
                assert!((x ^ y).count_ones() > 16, "{x:#x} vs {y:#x}");
            }
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let x = rng.below(10);
            assert!(x < 10);
            seen[x as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.below(1), 0);
    }

    #[test]
    fn a_stream_seed_is_a_step_of_splitmix() {
        assert_eq!(stream_seed(5, 0), 5);
        assert_eq!(stream_seed(stream_seed(5, 2), 3), stream_seed(5, 5));
        assert_ne!(Rng::new(stream_seed(5, 1)), Rng::new(stream_seed(5, 2)));
    }

    #[test]
    fn fill_bytes_takes_the_stream_and_handles_a_tail() {
        let mut out = [0u8; 11];
        Rng::new(3).fill_bytes(&mut out);
        let mut rng = Rng::new(3);
        let (w0, w1) = (rng.next_u64().to_le_bytes(), rng.next_u64().to_le_bytes());
        assert_eq!(out[..8], w0);
        assert_eq!(out[8..], w1[..3]);
    }
}
