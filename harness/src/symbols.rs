//! Resolving kernel addresses to functions and source lines: the fault call traces, and the
//! executed blocks of an instruction-count breakdown ([`SymbolTable`], [`inline_frames`]).
//!
//! A `FAULT` report ends with `Call trace (…):` followed by `  #N  0xADDR` lines (frame-pointer
//! walk) or `  ? 0xADDR` lines (stack scan). The guest has no symbol table, so xtask resolves the
//! addresses on the host with binutils' `addr2line` against the ELF it booted. Without
//! `addr2line` the raw trace stays as the guest printed it.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::{Error, Result};
use crate::process;

/// A function of the ELF's symbol table: `[start, end)` and its demangled name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

/// The ELF's code symbols, sorted by address, for address → function lookups.
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    symbols: Vec<Symbol>,
}

impl SymbolTable {
    /// `nm --defined-only -C -S ELF`, parsed.
    pub fn load(elf: &Path) -> Result<Self> {
        let mut command = Command::new("nm");
        command.args(["--defined-only", "-C", "-S"]).arg(elf);
        if process::find_on_path("nm").is_none() {
            return Err(Error::Plugin {
                reason: "the breakdown reads the kernel's symbols with binutils' nm, which is not on PATH (sudo apt-get install binutils)".into(),
            });
        }
        Ok(Self::parse(&process::output(&mut command)?))
    }

    /// Parses `nm -S` lines (`ADDR [SIZE] TYPE NAME`), keeping text symbols (`t`/`T`/`w`/`W`).
    /// A symbol without a size ends where the next one starts; malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut symbols: Vec<(u64, Option<u64>, String)> = Vec::new();
        for line in text.lines() {
            let words: Vec<&str> = line.splitn(4, ' ').collect();
            let hex = |word: &str| u64::from_str_radix(word, 16).ok();
            let (start, size, kind, name) = match words.as_slice() {
                [addr, size, kind, name] if kind.len() == 1 && hex(size).is_some() => {
                    (hex(addr), hex(size), *kind, name.to_string())
                }
                [addr, kind, name @ ..] if kind.len() == 1 => {
                    (hex(addr), None, *kind, name.join(" "))
                }
                _ => continue,
            };
            if let (Some(start), true) = (start, ["t", "T", "w", "W"].contains(&kind)) {
                symbols.push((start, size, name.trim().to_owned()));
            }
        }
        symbols.sort_by_key(|symbol| symbol.0);
        let next_starts: Vec<u64> = symbols
            .iter()
            .skip(1)
            .map(|symbol| symbol.0)
            .chain([u64::MAX])
            .collect();
        let symbols = symbols
            .into_iter()
            .zip(next_starts)
            .map(|((start, size, name), next)| Symbol {
                start,
                end: size.map_or(next, |size| start + size.max(1)),
                name,
            })
            .collect();
        Self { symbols }
    }

    /// The function containing `address`.
    pub fn lookup(&self, address: u64) -> Option<&Symbol> {
        let index = self
            .symbols
            .partition_point(|symbol| symbol.start <= address);
        let symbol = self.symbols.get(index.checked_sub(1)?)?;
        (address < symbol.end).then_some(symbol)
    }
}

/// One frame of an address's inline chain: the function, its source file and line (`None` where
/// the line tables give none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineFrame {
    pub function: String,
    pub file: String,
    pub line: Option<u32>,
}

/// `addr2line -a -f -i -C` for every address at once: each address's inline chain, innermost
/// frame first. Empty when `addr2line` is missing (the breakdown then uses symbols only).
pub fn inline_frames(elf: &Path, addresses: &[u64]) -> HashMap<u64, Vec<InlineFrame>> {
    let output = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-C", "-e"])
        .arg(elf)
        .args(addresses.iter().map(|address| format!("{address:#x}")))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success());
    output.map_or_else(HashMap::new, |output| {
        parse_inline_frames(&String::from_utf8_lossy(&output.stdout))
    })
}

/// Parses `addr2line -a -f -i` output: a `0xADDR` line, then function / `file:line` pairs (the
/// line may be `?` or followed by ` (discriminator N)`).
pub(crate) fn parse_inline_frames(text: &str) -> HashMap<u64, Vec<InlineFrame>> {
    let mut chains: HashMap<u64, Vec<InlineFrame>> = HashMap::new();
    let mut current: Option<u64> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(hex) = line.strip_prefix("0x") {
            current = u64::from_str_radix(hex.trim(), 16).ok();
            continue;
        }
        let (Some(address), Some(location)) = (current, lines.next()) else {
            break;
        };
        let location = location.split(" (").next().unwrap_or(location);
        let (file, number) = location.rsplit_once(':').unwrap_or((location, ""));
        chains.entry(address).or_default().push(InlineFrame {
            function: line.trim().to_owned(),
            file: file.to_owned(),
            line: number.parse().ok(),
        });
    }
    chains
}

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
    fn symbols_are_found_by_range() {
        let table = SymbolTable::parse(
            "0000000000100000 0000000000000010 T kernel_main\n\
             0000000000100020 t scsi::midlayer::Midlayer<H,A,C>::submit\n\
             0000000000100040 0000000000000008 t pools::slab::SlabCache<B>::alloc\n\
             0000000000200000 0000000000000100 D SOME_DATA\n\
             garbage line\n",
        );
        assert_eq!(table.lookup(0x100005).unwrap().name, "kernel_main");
        // Between kernel_main's end and the next symbol: no function.
        assert!(table.lookup(0x100018).is_none());
        // Without a size a symbol runs to the next one.
        assert_eq!(
            table.lookup(0x10003f).unwrap().name,
            "scsi::midlayer::Midlayer<H,A,C>::submit"
        );
        assert!(table.lookup(0x100048).is_none());
        assert!(
            table.lookup(0x200010).is_none(),
            "data symbols are not code"
        );
        assert!(table.lookup(0xff).is_none());
    }

    #[test]
    fn inline_chains_are_grouped_by_address() {
        let chains = parse_inline_frames(
            "0x0000000000150364\n\
             next<u16>\n\
             /rustc/abc/library/core/src/iter/range.rs:857\n\
             run<H, A, C>\n\
             /w/scsi/src/workload/mod.rs:253 (discriminator 2)\n\
             0x0000000000150400\n\
             scsi::workload::run\n\
             /w/scsi/src/workload/mod.rs:?\n",
        );
        assert_eq!(chains[&0x150364].len(), 2);
        assert_eq!(chains[&0x150364][0].function, "next<u16>");
        assert_eq!(chains[&0x150364][0].line, Some(857));
        assert_eq!(chains[&0x150364][1].file, "/w/scsi/src/workload/mod.rs");
        assert_eq!(chains[&0x150364][1].line, Some(253));
        assert_eq!(chains[&0x150400][0].function, "scsi::workload::run");
        assert_eq!(chains[&0x150400][0].line, None);
    }

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
