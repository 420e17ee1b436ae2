//! Passed and failed counts of the host-side cases of `cargo xtask test`.

/// Passed and failed counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
}

impl Tally {
    /// Prints `NAME ... ok (DETAIL)` or `NAME ... FAILED: REASON`, the line every host-side
    /// case of `cargo xtask test` closes with, and counts it.
    pub fn record(&mut self, name: &str, result: std::result::Result<String, String>) {
        match result {
            Ok(detail) => {
                println!("{name} ... ok ({detail})");
                self.passed += 1;
            }
            Err(reason) => {
                println!("{name} ... FAILED: {reason}");
                self.failed += 1;
            }
        }
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}
