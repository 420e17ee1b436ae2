//! The host half of `cargo xtask test`: `cargo test --workspace --no-fail-fast`, streamed live, with the
//! `test result: … N passed; M failed; …` lines of every test binary (unit, integration, doc)
//! added up so the whole command can close with one summary line.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use harness::error::{Error, Result};
use harness::{process, workspace};
use systest::Tally;

/// Runs the host tests; a build failure or a crashed test binary counts as one failure.
pub fn run() -> Result<Tally> {
    let mut command = process::cargo();
    command.args(["test", "--workspace", "--no-fail-fast"]);
    command.current_dir(workspace::root());
    let (mut child, described) = process::spawn(command.stdout(Stdio::piped()))?;
    let mut tally = Tally::default();
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut reader = BufReader::new(stdout);
    let mut buffer = Vec::new();
    while reader
        .read_until(b'\n', &mut buffer)
        .is_ok_and(|read| read > 0)
    {
        let line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
        buffer.clear();
        println!("{line}");
        let _ = std::io::stdout().flush();
        if let Some(result) = parse_result_line(&line) {
            tally += result;
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        command: described.clone(),
        source,
    })?;
    if !status.success() && tally.failed == 0 {
        eprintln!(
            "xtask: `{described}` failed ({status}) without a failing test: counted as 1 failure"
        );
        tally.failed = 1;
    }
    Ok(tally)
}

/// Parses libtest's `test result: ok. 5 passed; 0 failed; 0 ignored; …` line.
pub fn parse_result_line(line: &str) -> Option<Tally> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let mut tally = Tally::default();
    let mut seen = 0;
    for part in counts.split(';') {
        let mut words = part.split_whitespace();
        let (Some(number), Some(label)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<u64>() else {
            continue;
        };
        match label {
            "passed" => (tally.passed, seen) = (number, seen + 1),
            "failed" => (tally.failed, seen) = (number, seen + 1),
            _ => {}
        }
    }
    (seen == 2).then_some(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_result_lines_parse() {
        let ok = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s";
        assert_eq!(
            parse_result_line(ok),
            Some(Tally {
                passed: 12,
                failed: 0
            })
        );
        let failed =
            "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out";
        assert_eq!(
            parse_result_line(failed),
            Some(Tally {
                passed: 3,
                failed: 2
            })
        );
        assert_eq!(parse_result_line("test foo ... ok"), None);
        assert_eq!(parse_result_line("test result: ok. lots passed"), None);
    }
}
