//! Resolving the kernel's fault call traces to functions and source lines.
//!
//! A `FAULT` report ends with `Call trace (…):` followed by `  #N  0xADDR` lines (frame-pointer
//! walk) or `  ? 0xADDR` lines (stack scan). The guest has no symbol table, so xtask resolves the
//! addresses on the host with binutils' `addr2line` against the ELF it booted. Without
//! `addr2line` the raw trace stays as the guest printed it.

use std::path::Path;
use std::process::{Command, Stdio};

/// One trace entry: its marker (`#3` or `?`) and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub marker: String,
    pub address: u64,
}

impl Frame {
    /// The address to look up: `#0` is the faulting instruction itself, every other entry is a
    /// return address, which points after its call; one byte back lands inside the call.
    fn lookup_address(&self) -> u64 {
        if self.marker == "#0" {
            self.address
        } else {
            self.address.saturating_sub(1)
        }
    }
}

/// The frames listed after the last `Call trace` line of `console`.
pub fn trace(console: &[String]) -> Vec<Frame> {
    let Some(start) = console
        .iter()
        .rposition(|line| line.starts_with("Call trace"))
    else {
        return Vec::new();
    };
    console[start + 1..]
        .iter()
        .map_while(|line| {
            let mut words = line.split_whitespace();
            let marker = words.next()?;
            if !(marker == "?" || marker.starts_with('#')) {
                return None;
            }
            let address = u64::from_str_radix(words.next()?.strip_prefix("0x")?, 16).ok()?;
            Some(Frame {
                marker: marker.to_owned(),
                address,
            })
        })
        .collect()
}

/// `  #0  0x11e9fd  page_fault at kernel/src/arch/fault.rs:120` for each frame, or `None` when
/// there is no trace or `addr2line` is unavailable.
pub fn symbolize(kernel: &Path, console: &[String]) -> Option<Vec<String>> {
    let frames = trace(console);
    if frames.is_empty() {
        return None;
    }
    let output = Command::new("addr2line")
        .args(["-f", "-C", "-i", "-p", "-e"])
        .arg(kernel)
        .args(
            frames
                .iter()
                .map(|frame| format!("{:#x}", frame.lookup_address())),
        )
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())?;
    let text = String::from_utf8_lossy(&output.stdout);
    // With -p each address gives one line, plus ` (inlined by) …` lines for inlined callers.
    let mut entries: Vec<String> = Vec::new();
    for line in text.lines() {
        match (
            line.trim_start().starts_with("(inlined by)"),
            entries.last_mut(),
        ) {
            (true, Some(last)) => {
                last.push_str("\n        ");
                last.push_str(line.trim());
            }
            _ => entries.push(line.trim().to_owned()),
        }
    }
    Some(
        frames
            .iter()
            .zip(entries)
            .map(|(frame, place)| format!("  {:<3} {:#x}  {place}", frame.marker, frame.address))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_after_the_header_are_read() {
        let console: Vec<String> = [
            "FAULT #PF page fault",
            "Call trace (frame pointers; resolve with addr2line -e kernel ADDR):",
            "  #0  0x11e9fd",
            "  #1  0x1200aa",
            "  ? 0x1300bb",
            "[    0.1] INFO later",
        ]
        .iter()
        .map(|line| line.to_string())
        .collect();
        let frames = trace(&console);
        assert_eq!(frames.len(), 3);
        assert_eq!(
            frames[0],
            Frame {
                marker: "#0".into(),
                address: 0x11e9fd
            }
        );
        assert_eq!(frames[2].marker, "?");
        assert!(trace(&console[..1]).is_empty());
    }
}
