//! The guest's random source: RDRAND (when the CPU has it) and the TSC for the seed, and the
//! getrandom 0.2 hook through which the TLS stack (rustls-rustcrypto's key shares and nonces)
//! draws from `platform::entropy`'s generator. Until [`seed`] runs, a draw fails, and so does
//! any TLS handshake: nothing is ever drawn from an unseeded generator.

use spin::Mutex;
use x86_64::instructions::random::RdRand;

use super::time;
use crate::platform::entropy::{Generator, SeedSources};

static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

/// Seeds the generator from `host_seed` (the fw_cfg file, possibly empty), RDRAND when the CPU
/// has it, and the TSC; says what went in. Seeding again mixes the old state in.
pub fn seed(host_seed: &[u8]) -> SeedSources {
    let mut rdrand = [0u8; 64];
    let mut rdrand_values = 0;
    if let Some(source) = RdRand::new() {
        for chunk in rdrand.chunks_mut(8) {
            if let Some(value) = source.get_u64() {
                chunk.copy_from_slice(&value.to_le_bytes());
                rdrand_values += 1;
            }
        }
    }
    let mut previous = [0u8; 32];
    let mut generator = GENERATOR.lock();
    if let Some(old) = generator.as_mut() {
        old.fill(&mut previous);
    }
    let tsc = time::rdtsc().to_le_bytes();
    *generator = Some(Generator::new(&[host_seed, &rdrand, &tsc, &previous]));
    SeedSources {
        host_bytes: host_seed.len(),
        rdrand_values,
    }
}

/// Fills `out` from the generator; an error before [`seed`].
fn fill(out: &mut [u8]) -> Result<(), getrandom::Error> {
    match GENERATOR.lock().as_mut() {
        Some(generator) => {
            generator.fill(out);
            Ok(())
        }
        None => Err(getrandom::Error::UNSUPPORTED),
    }
}

getrandom::register_custom_getrandom!(fill);
