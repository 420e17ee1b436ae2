//! Console output: the `log` backend and the machine-readable lines.
//!
//! Log records go to COM1 as `[    0.012345] message` (seconds since the boot stub's first
//! instruction, from the calibrated TSC, as in Linux's printk), with `WARN:`/`ERROR:` prefixes
//! for those levels. Machine-readable lines (`RESULT`, `BOOT`, `FAULT`, `PANIC`,
//! `CMDLINE ERROR`, and the test runner's lines) are printed with [`println!`] at column 0
//! without a timestamp, so xtask can match them with a plain prefix test.

use core::fmt::Write;

use crate::arch::serial;
use crate::arch::time::now_ns;

/// Prints a line to COM1 with no timestamp (the OS's and its app's machine lines).
#[macro_export]
macro_rules! println {
    () => { $crate::platform::console::print_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::platform::console::print_line(format_args!($($arg)*)) };
}
pub use crate::println;

/// Writes `args` and a newline under the console lock.
pub fn print_line(args: core::fmt::Arguments<'_>) {
    serial::with_writer(|w| {
        let _ = w.write_fmt(args);
        let _ = w.write_str("\n");
    });
}

struct Logger;

static LOGGER: Logger = Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let ns = now_ns();
        let prefix = match record.level() {
            log::Level::Error => "ERROR: ",
            log::Level::Warn => "WARN: ",
            _ => "",
        };
        serial::with_writer(|w| {
            let _ = writeln!(
                w,
                "[{:5}.{:06}] {prefix}{}",
                ns / 1_000_000_000,
                ns % 1_000_000_000 / 1000,
                record.args()
            );
        });
    }

    fn flush(&self) {}
}

/// Installs the logger at `level`.
pub fn init_logger(level: log::LevelFilter) {
    // A second call fails harmlessly and keeps the first logger.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}
