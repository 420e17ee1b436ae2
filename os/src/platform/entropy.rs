//! The guest's random generator, the one TLS draws from (its handshake nonces and key shares,
//! through getrandom, `arch::random`). The guest has no entropy of its own worth the name, so
//! the seed mixes what the host hands over out of band (the fw_cfg file [`HOST_SEED_FILE`], 32
//! bytes xtask reads from its `/dev/urandom` for each boot) with what the guest can find itself
//! (RDRAND when the CPU has it, and the TSC): a seed any one of them makes unpredictable.
//!
//! The generator is SHA-256 in counter mode: block *i* is SHA-256(key ‖ *i*), and after every
//! request the key is replaced by a hash of itself, so output already handed out cannot be
//! recomputed from a later state. Pure and host-tested; [`Generator`] holds no global state.

use sha2::{Digest, Sha256};

/// The fw_cfg file with the host's seed.
pub const HOST_SEED_FILE: &str = "opt/sensepool/entropy";
/// The most bytes of host seed read (xtask writes 32).
pub const MAX_HOST_SEED_BYTES: usize = 256;
/// The least host seed that counts as a seed: 128 bits.
pub const MIN_HOST_SEED_BYTES: usize = 16;

/// Where a seed came from, for the console line that says how the generator was seeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeedSources {
    /// Bytes of host seed mixed in.
    pub host_bytes: usize,
    /// RDRAND values mixed in.
    pub rdrand_values: usize,
}

impl SeedSources {
    /// Whether something unpredictable went in (the TSC alone is not).
    pub fn enough(&self) -> bool {
        self.host_bytes >= MIN_HOST_SEED_BYTES || self.rdrand_values >= 4
    }
}

/// A deterministic generator over a secret key (see the module docs).
#[derive(Clone)]
pub struct Generator {
    key: [u8; 32],
    counter: u64,
}

impl core::fmt::Debug for Generator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the key.
        f.debug_struct("Generator").finish_non_exhaustive()
    }
}

impl Generator {
    /// A generator keyed by every part of `seed`, each length-prefixed so that no two
    /// different lists of parts give the same key.
    pub fn new(seed: &[&[u8]]) -> Generator {
        let mut hash = Sha256::new();
        hash.update(b"sensepool entropy v1");
        for part in seed {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        Generator {
            key: hash.finalize().into(),
            counter: 0,
        }
    }

    /// Fills `out` with generator output, then moves the key on.
    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(32) {
            let block = self.block(b"out");
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        self.key = self.block(b"key");
    }

    fn block(&mut self, label: &[u8]) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(self.key);
        hash.update(label);
        hash.update(self.counter.to_le_bytes());
        self.counter += 1;
        hash.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_any_change_other_bytes() {
        let mut a = Generator::new(&[b"host", b"tsc"]);
        let mut b = Generator::new(&[b"host", b"tsc"]);
        let (mut x, mut y) = ([0u8; 100], [0u8; 100]);
        a.fill(&mut x);
        b.fill(&mut y);
        assert_eq!(x, y);
        // The parts are length-prefixed: moving a byte between them is another seed.
        let mut c = Generator::new(&[b"hos", b"ttsc"]);
        c.fill(&mut y);
        assert_ne!(x, y);
        // Successive requests differ, and no 32-byte block repeats within one.
        a.fill(&mut y);
        assert_ne!(x, y);
        assert_ne!(x[..32], x[32..64]);
    }

    #[test]
    fn enough_needs_the_host_seed_or_rdrand() {
        assert!(!SeedSources::default().enough());
        assert!(
            SeedSources {
                host_bytes: 32,
                rdrand_values: 0
            }
            .enough()
        );
        assert!(
            SeedSources {
                host_bytes: 0,
                rdrand_values: 4
            }
            .enough()
        );
        assert!(
            !SeedSources {
                host_bytes: 8,
                rdrand_values: 1
            }
            .enough()
        );
    }
}
