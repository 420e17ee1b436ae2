#![no_main]
//! The kernel command line: any bytes in the loader's window, through `boot_line` (NUL and
//! UTF-8 checks) and `Cmdline::parse` (every key, value syntax, duplicates, cross-checks).
//!
//! Beyond "no panic": a window without NUL or with bad UTF-8 is refused with the right offset;
//! an accepted line is the bytes before the first NUL; every refusal names a key the line
//! contains or a key the kernel knows, and a bad value is quoted from the line; parsing is
//! deterministic.
use libfuzzer_sys::fuzz_target;
use sensepool_fuzz::cmdline::{Cmdline, CmdlineError, boot_line, keys};

const KNOWN_TESTS: &[&str] = &["boot-smoke", "pools-dmapool", "scsi-scan"];

fuzz_target!(|data: &[u8]| {
    let line = match boot_line(data) {
        Ok(line) => line,
        Err(CmdlineError::Unterminated { max_bytes }) => {
            assert_eq!(max_bytes, data.len());
            assert!(!data.contains(&0), "a window with a NUL is terminated");
            return;
        }
        Err(CmdlineError::NotUtf8 { offset, byte }) => {
            let nul = data.iter().position(|&b| b == 0).expect("a NUL");
            assert!(offset < nul, "bad byte {offset} before the NUL at {nul}");
            assert_eq!(data[offset], byte);
            assert!(
                core::str::from_utf8(&data[..offset]).is_ok(),
                "the bytes before it are UTF-8"
            );
            return;
        }
        Err(other) => panic!("boot_line gave {other:?}"),
    };
    assert_eq!(data[line.len()], 0, "the line ends at the first NUL");
    assert!(!line.as_bytes().contains(&0));
    let parsed = Cmdline::parse(line, KNOWN_TESTS);
    assert_eq!(
        parsed,
        Cmdline::parse(line, KNOWN_TESTS),
        "parsing is deterministic"
    );
    let Err(err) = parsed else { return };
    let text = err.to_string();
    let named = |key: &str| line.contains(key) || keys::spellings().contains(&key);
    match &err {
        CmdlineError::UnknownKey { key, .. }
        | CmdlineError::MissingValue { key }
        | CmdlineError::Duplicate { key, .. } => {
            assert!(
                line.contains(key.as_str()),
                "{text}: names '{key}', not in the line"
            );
        }
        CmdlineError::BadValue { key, value, .. } => {
            assert!(
                named(key),
                "{text}: names '{key}', neither in the line nor a key"
            );
            assert!(
                line.contains(value.as_str()) || named(key),
                "{text}: value not from the line"
            );
        }
        CmdlineError::Unterminated { .. } | CmdlineError::NotUtf8 { .. } => {
            panic!("parse gave a window error: {text}")
        }
    }
    assert!(
        text.starts_with("key '") || text.starts_with("command line:"),
        "{text}"
    );
});
