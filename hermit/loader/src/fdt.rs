//! The flattened device tree handed to Hermit (what Hermit's own loader builds from Multiboot):
//! root `compatible = "hermit,pvh"` (anything but `hermit,uefi`), one `/memory@…` node per usable
//! e820 range (Hermit's only source of physical memory), `/hermit,tsc` with the TSC rate in
//! `khz` (the first frequency source Hermit 0.11 reads; [`crate::tsc`] says why it matters) and
//! `/chosen/bootargs`. No
//! `/hermit,rsdp` node: Hermit reads a given RSDP through the identity map without mapping it
//! (as under UEFI), and the first MiB is unmapped when Hermit starts; without the node Hermit
//! finds the RSDP itself in the BIOS area, mapping each page it searches.
//!
//! Hermit splits bootargs with `shell_words` and panics on an unbalanced quote; everything after
//! `--` becomes the application's arguments, and its network settings go before ([`bootargs`]). So the command line goes in behind `--`, and a line
//! with a quote or a backslash is refused here with an error naming the character.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use nbd::config::NetConfig;
use vm_fdt::FdtWriter;

use pvh::start_info::PhysRange;

/// Why no device tree was built.
#[derive(Debug, thiserror::Error)]
pub enum FdtError {
    /// The writer failed (it only fails on malformed names or an unbalanced node).
    #[error("device tree writer: {0}")]
    Writer(String),
    /// The command line is not UTF-8.
    #[error("the command line is not UTF-8")]
    NotUtf8,
    /// The command line holds a character Hermit's bootargs splitter would interpret.
    #[error(
        "the command line contains {found:?}, which Hermit's bootargs parser would interpret; use plain key=value words"
    )]
    Quote {
        /// The offending character.
        found: char,
    },
}

fn writer_error(error: vm_fdt::Error) -> FdtError {
    FdtError::Writer(format!("{error}"))
}

/// The bootargs for `cmdline`: Hermit's network settings, `-- ` and the words.
///
/// Hermit configures its TCP stack from `-ip`, `-mask` and `-gateway` before `--` (10.0.5.3
/// without them, an address QEMU's user network does not route), so they come from the
/// words' `ip=` and `gw=` (`nbd::config`, the application's own words, and its defaults:
/// 10.0.2.15/24 behind 10.0.2.2, QEMU's user network).
pub fn bootargs(cmdline: &[u8]) -> Result<String, FdtError> {
    let text = core::str::from_utf8(cmdline).map_err(|_| FdtError::NotUtf8)?;
    if let Some(found) = text.chars().find(|c| matches!(c, '\'' | '"' | '\\')) {
        return Err(FdtError::Quote { found });
    }
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let net = NetConfig::addresses_from(words.iter().copied());
    let dotted = |[a, b, c, d]: [u8; 4]| format!("{a}.{b}.{c}.{d}");
    Ok(format!(
        "-ip {} -mask {} -gateway {} -- {}",
        dotted(net.ip),
        dotted(net.netmask()),
        dotted(net.gateway),
        words.join(" ")
    ))
}

/// Builds the blob.
pub fn build(ram: &[PhysRange], tsc_khz: u32, bootargs: &str) -> Result<Vec<u8>, FdtError> {
    let mut fdt = FdtWriter::new().map_err(writer_error)?;
    let root = fdt.begin_node("").map_err(writer_error)?;
    fdt.property_string("compatible", "hermit,pvh")
        .map_err(writer_error)?;
    fdt.property_u32("#address-cells", 2)
        .map_err(writer_error)?;
    fdt.property_u32("#size-cells", 2).map_err(writer_error)?;
    for range in ram {
        let node = fdt
            .begin_node(&format!("memory@{:x}", range.start))
            .map_err(writer_error)?;
        fdt.property_string("device_type", "memory")
            .map_err(writer_error)?;
        fdt.property_array_u64("reg", &[range.start, range.end - range.start])
            .map_err(writer_error)?;
        fdt.end_node(node).map_err(writer_error)?;
    }
    let tsc = fdt.begin_node("hermit,tsc").map_err(writer_error)?;
    fdt.property_u32("khz", tsc_khz).map_err(writer_error)?;
    fdt.end_node(tsc).map_err(writer_error)?;
    let chosen = fdt.begin_node("chosen").map_err(writer_error)?;
    fdt.property_string("bootargs", bootargs)
        .map_err(writer_error)?;
    fdt.end_node(chosen).map_err(writer_error)?;
    fdt.end_node(root).map_err(writer_error)?;
    fdt.finish().map_err(writer_error)
}
