//! `cargo xtask setup`: everything `cargo xtask test` needs on a clean Debian machine, each
//! step checking first. The installers a boot needs live in the harness
//! (`harness/src/setup.rs`, which explains each); this adds cargo-fuzz for the fuzz smoke.

use std::process::Command;

use harness::error::Result;
use harness::{process, setup};

/// Everything `cargo xtask test` needs on a clean Debian machine: what a boot needs, the lint
/// components, libnbd's clients and a C compiler (`cargo xtask setup`, which CI runs).
pub fn ensure_everything() -> Result<()> {
    setup::ensure_all()?;
    setup::ensure_lint_components()?;
    setup::ensure_libnbd_tools()?;
    setup::ensure_c_compiler()?;
    harness::hermit::ensure_llvm_tools()?;
    ensure_cargo_fuzz()
}

/// cargo-fuzz, pinned, for the fuzz smoke of `cargo xtask test`: installed (about 35 s from
/// crates.io) only when a nightly toolchain is there, since fuzzing needs one. This set-up does
/// not install nightly itself: without it the smoke says it skipped, and `cargo xtask fuzz`
/// says to run `rustup toolchain install nightly`.
pub fn ensure_cargo_fuzz() -> Result<()> {
    match crate::fuzz::unavailable() {
        Some(reason) if reason.starts_with("cargo-fuzz") => {
            process::run(Command::new("cargo").args([
                "install",
                "cargo-fuzz",
                "--locked",
                "--version",
                CARGO_FUZZ_VERSION,
            ]))
        }
        _ => Ok(()),
    }
}

/// The cargo-fuzz the set-up installs.
const CARGO_FUZZ_VERSION: &str = "0.13.2";
