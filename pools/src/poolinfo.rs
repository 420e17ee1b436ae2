//! Pool statistics in the exact format of Linux's sysfs `pools` file.
//!
//! `mm/dmapool.c` (`pools_show`) prints the header `poolinfo - 0.1` and then, per pool,
//! `"%-16s %4zu %4zu %4u %2zu\n"`: name, active blocks, total blocks, block size, pages.
//! Tools that parse that file can parse this output unchanged.

use core::fmt::{self, Write};

use crate::dmapool::PoolInfo;

/// The header line, without its newline.
pub const HEADER: &str = "poolinfo - 0.1";

/// Writes the `pools` file for `pools` into `out`.
pub fn render<'a>(
    out: &mut impl Write,
    pools: impl IntoIterator<Item = &'a PoolInfo>,
) -> fmt::Result {
    writeln!(out, "{HEADER}")?;
    for pool in pools {
        writeln!(
            out,
            "{:<16} {:>4} {:>4} {:>4} {:>2}",
            pool.name, pool.active, pool.total, pool.size, pool.pages
        )?;
    }
    Ok(())
}

/// The `pools` file as a string.
pub fn to_string<'a>(pools: impl IntoIterator<Item = &'a PoolInfo>) -> alloc::string::String {
    let mut out = alloc::string::String::new();
    // Writing to a String cannot fail.
    let _ = render(&mut out, pools);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn info(name: &str, active: usize, total: usize, size: usize, pages: usize) -> PoolInfo {
        PoolInfo {
            name: String::from(name),
            algorithm: "scalable",
            active,
            total,
            size,
            pages,
            allocation: 4096,
            node: None,
            written_after_free: 0,
        }
    }

    #[test]
    fn matches_linux_format() {
        let pools = [
            info("chain pool", 373959, 373984, 128, 11687),
            info("sense", 3, 32, 96, 1),
        ];
        let text = to_string(&pools);
        assert_eq!(
            text,
            "poolinfo - 0.1\n\
             chain pool       373959 373984  128 11687\n\
             sense               3   32   96  1\n"
        );
    }

    #[test]
    fn long_names_are_not_truncated() {
        let text = to_string(&[info("a-very-long-pool-name-here", 0, 0, 16, 0)]);
        assert_eq!(
            text.lines().nth(1),
            Some("a-very-long-pool-name-here    0    0   16  0")
        );
    }
}
