//! Attributing counted instructions to the kernel's functions and to the I/O path's layers
//! (`cargo xtask bench fake-rw --count-insns --breakdown`, and `bench device … --breakdown` for
//! the real adapters).
//!
//! The plugin reports every translated block executed inside a window: its start address, its
//! instruction count and how often it ran. Each block is charged whole to
//! - the function of the ELF's symbol table containing its start (the "top functions": what
//!   the compiler left out of line), and
//! - a layer, from the innermost frame of its start address's inline chain (addr2line, from
//!   the release build's line tables) that lies in the project's own sources: library code
//!   inlined into the midlayer counts as the midlayer. Out-of-line library code (the heap,
//!   `memcpy`) is named by its symbol.
//!
//! A block can span several inlined functions; charging it to its first instruction's is the
//! approximation. Over a run of hundreds of thousands of I/Os the blocks' totals add up to the
//! published window count (the report shows both). The table is of the working instructions;
//! the waiting ones (empty polls and the waits after them) get a column of their own.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use benchkit::ResultSet;
use harness::boot::Echo;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::{self, Block, PluginLog};
use harness::profile::Profile;
use harness::symbols::{self, InlineFrame, SymbolTable};
use harness::workspace;

/// The layers of the I/O path (fake_rw's target, or a real adapter's driver), in the order the
/// table prints them; a layer with no instructions in either column is left out of the table.
pub const LAYERS: [&str; 15] = [
    "CDB build",
    "midlayer submit",
    "sense alloc/free",
    "target parse/respond",
    "driver submit",
    "virtqueue / request frame",
    "doorbell / registers",
    "interrupt entry/exit",
    "completion wait (irq policy)",
    "driver completion",
    "completion",
    "workload loop",
    "kernel (clock, locks, markers)",
    "heap (talc)",
    "other / library",
];

/// Driver functions that belong to the completion side (their names begin with one of these).
const DRIVER_COMPLETION: [&str; 6] = ["poll", "complete", "reap", "finish", "reply", "drain"];

/// Which layer a source file and function belong to; `None` outside the project's sources.
pub fn layer_of_frame(frame: &InlineFrame) -> Option<&'static str> {
    let (file, function) = (frame.file.as_str(), frame.function.as_str());
    let in_file = |part: &str| file.contains(part);
    if in_file("scsi/src/wire/cdb_layout") {
        // The CDB byte layouts serve both encode and parse: the caller's frame decides.
        return None;
    }
    let layer = if in_file("pools/src/") || in_file("scsi/src/sense_alloc/") {
        "sense alloc/free"
    } else if in_file("scsi/src/wire/cdb_encode")
        || (in_file("scsi/src/wire/cdb.rs") && !function.starts_with("parse"))
    {
        "CDB build"
    } else if in_file("scsi/src/target/") || in_file("scsi/src/wire/") {
        "target parse/respond"
    } else if in_file("drivers/src/virtio/")
        || in_file("drivers/src/mpt/adapter/queue")
        || in_file("drivers/src/mpt/sgl")
        || in_file("virtio-drivers")
    {
        "virtqueue / request frame"
    } else if in_file("storage/virtio_doorbell")
        || in_file("pci/virtio_common")
        || in_file("drivers/src/mpt/regs")
        || in_file("storage/mpt.rs")
    {
        "doorbell / registers"
    } else if in_file("drivers/src/irq")
        || in_file("storage/interrupt")
        || in_file("storage/virtio_irq")
    {
        "completion wait (irq policy)"
    } else if in_file("kernel/src/arch/irq")
        || in_file("kernel/src/arch/idt")
        || in_file("kernel/src/arch/apic")
        || in_file("kernel/src/arch/idle")
    {
        "interrupt entry/exit"
    } else if in_file("drivers/src/") {
        if starts_with_any(function, &DRIVER_COMPLETION) {
            "driver completion"
        } else {
            "driver submit"
        }
    } else if in_file("scsi/src/midlayer/completion")
        || (in_file("scsi/src/midlayer/") && starts_with_any(function, &["poll", "complete"]))
    {
        "completion"
    } else if in_file("scsi/src/midlayer/") {
        "midlayer submit"
    } else if in_file("workloads/src/io/") {
        "workload loop"
    } else if in_file("kernel/src/") || in_file("os/src/") || in_file("protocol/src/") {
        "kernel (clock, locks, markers)"
    } else {
        return None;
    };
    Some(layer)
}

fn starts_with_any(text: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|prefix| text.starts_with(prefix))
}

/// A block's layer: its innermost project frame's, else its symbol's (read as a path:
/// `scsi::midlayer::Midlayer::submit` lies in `scsi/src/midlayer/`).
pub fn layer_of(frames: &[InlineFrame], symbol: Option<&str>) -> &'static str {
    if let Some(layer) = frames.iter().find_map(layer_of_frame) {
        return layer;
    }
    let Some(name) = symbol else {
        return "other / library";
    };
    if name.contains("talc") {
        return "heap (talc)";
    }
    if name.contains("virtio_drivers") {
        return "virtqueue / request frame";
    }
    let path = short_name(name.trim_start_matches('<'));
    let path = path.split(' ').next().unwrap_or_default();
    let mut segments = path.split("::");
    let krate = segments.next().unwrap_or_default();
    let rest: Vec<&str> = segments.collect();
    let pseudo = InlineFrame {
        function: rest.last().copied().unwrap_or_default().to_owned(),
        file: format!("/{krate}/src/{}", rest.join("/")),
        line: None,
    };
    layer_of_frame(&pseudo).unwrap_or("other / library")
}

/// Instructions per layer and per function.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Breakdown {
    /// Every attributed working instruction.
    pub total: u64,
    /// Every attributed waiting instruction.
    pub waiting: u64,
    /// In [`LAYERS`] order (zeros included): working, waiting.
    pub layers: Vec<(&'static str, u64, u64)>,
    /// Working instructions by symbol, most first.
    pub functions: Vec<(String, u64)>,
    /// Working instructions by source line (`file:line` of the innermost project frame, else the
    /// symbol's name), most first.
    pub lines: Vec<(String, u64)>,
}

/// Charges every block to its function and layer.
pub fn attribute(
    blocks: &[Block],
    symbols: &SymbolTable,
    frames: &HashMap<u64, Vec<InlineFrame>>,
) -> Breakdown {
    let mut layers: HashMap<&'static str, (u64, u64)> = HashMap::new();
    let mut functions: HashMap<String, u64> = HashMap::new();
    let mut lines: HashMap<String, u64> = HashMap::new();
    let (mut total, mut waiting) = (0u64, 0u64);
    for block in blocks {
        let insns = block.insns.saturating_mul(block.execs);
        let waited = block.insns.saturating_mul(block.wait_execs);
        let symbol = symbols.lookup(block.vaddr).map(|s| s.name.as_str());
        let chain = frames.get(&block.vaddr).map_or(&[][..], Vec::as_slice);
        let layer = layers.entry(layer_of(chain, symbol)).or_default();
        layer.0 += insns;
        layer.1 += waited;
        if insns > 0 {
            let name = symbol.map_or_else(|| format!("{:#x}", block.vaddr), short_name);
            let project = chain.iter().find(|frame| layer_of_frame(frame).is_some());
            let line = match project {
                Some(frame) => match frame.line {
                    Some(number) => format!("{}:{number}", frame.file),
                    // Line 0 (compiler-made code): the function at least says where.
                    None => format!("{}:? ({})", frame.file, short_name(&frame.function)),
                },
                None => name.clone(),
            };
            *functions.entry(name).or_default() += insns;
            *lines.entry(line).or_default() += insns;
        }
        total += insns;
        waiting += waited;
    }
    Breakdown {
        total,
        waiting,
        functions: most_first(functions),
        lines: most_first(lines),
        layers: LAYERS
            .iter()
            .map(|layer| {
                let (working, waited) = layers.get(layer).copied().unwrap_or_default();
                (*layer, working, waited)
            })
            .collect(),
    }
}

/// The map's entries, largest count first (ties by name).
fn most_first(counts: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// A `file:line` named from the workspace root (other names unchanged).
pub fn relative_line(line: &str, root: &Path) -> String {
    let root = root.to_string_lossy();
    let root = root.trim_end_matches('/');
    line.strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(line)
        .to_owned()
}

/// A breakdown boot of `args` on `smp` vCPUs with every executed block recorded: prints the
/// layer table and the top functions and writes `target/bench/<file_stem>.json`.
pub fn run(
    guest: &Guest,
    profile: &Profile,
    plugin: Option<&Path>,
    (args, smp): (&str, u32),
    file_stem: &str,
) -> Result<Document> {
    let overrides = Overrides {
        smp: Some(smp),
        timeout: Some(Duration::from_secs(300)),
        kernel_args: Some(args.to_owned()),
        counting: insns::for_boot(plugin, true)?,
        ..Overrides::default()
    };
    let (lines, log) = benchkit::run_case(guest, profile, &overrides, Echo::Summary)?;
    let (Some(log), Some(line)) = (log, lines.first()) else {
        return Err(Error::NoResults {
            what: "the breakdown boot".into(),
        });
    };
    let figures = insns::join(line, Some(&log))?;
    let (ops, counted) = (figures.insn_ops.unwrap_or(0), figures.insns.unwrap_or(0));
    let attributed = from_log(&log, &guest.kernel)?;
    let document = Document {
        command: ResultSet::<()>::new("", "", "guest", None).command,
        case: args.to_owned(),
        ..report(&attributed, ops, counted, (15, 40))
    };
    let value = serde_json::to_value(&document).unwrap_or_default();
    let path = benchkit::write_document(&workspace::output_dir("bench")?, file_stem, &value)?;
    println!("wrote {}", path.display());
    Ok(document)
}

/// Attributes a breakdown boot's blocks with the kernel ELF's symbols and line tables.
pub fn from_log(log: &PluginLog, kernel: &Path) -> Result<Breakdown> {
    if log.blocks.is_empty() {
        return Err(Error::Plugin {
            reason: "the breakdown boot reported no executed blocks (was breakdown=on passed?)"
                .into(),
        });
    }
    let symbols = SymbolTable::load(kernel)?;
    let mut addresses: Vec<u64> = log.blocks.iter().map(|block| block.vaddr).collect();
    addresses.sort_unstable();
    addresses.dedup();
    let frames = symbols::inline_frames(kernel, &addresses);
    Ok(attribute(&log.blocks, &symbols, &frames))
}

/// `target/bench/fake-rw-breakdown.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The command that ran, for reproduction.
    pub command: String,
    /// The kernel command line of the breakdown boot.
    pub case: String,
    /// Operations in the counted window.
    pub ops: u64,
    /// The window's own count per operation.
    pub window_insns_per_op: f64,
    /// The blocks' total per operation (matches the window's when every block was attributed).
    pub attributed_insns_per_op: f64,
    /// The waiting blocks' total per operation (empty polls and the waits after them).
    #[serde(default)]
    pub waiting_insns_per_op: f64,
    pub layers: Vec<LayerShare>,
    pub functions: Vec<FunctionShare>,
    /// The top source lines.
    #[serde(default)]
    pub lines: Vec<LineShare>,
}

/// One layer's instructions per operation and share of the attributed ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerShare {
    pub layer: String,
    pub insns_per_op: f64,
    pub share_pct: f64,
    /// Its waiting instructions per operation.
    #[serde(default)]
    pub waiting_insns_per_op: f64,
}

/// One out-of-line function's instructions per operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionShare {
    pub function: String,
    pub insns_per_op: f64,
}

/// One source line's instructions per operation (`file:line` from the workspace root, or the
/// symbol of a block outside the project's sources).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LineShare {
    pub line: String,
    pub insns_per_op: f64,
}

/// Prints the per-layer table, the top functions and the top source lines per operation, and
/// returns them as the document (without its command and case). `counted` is the window's own
/// count, which the attributed blocks should match.
pub fn report(
    breakdown: &Breakdown,
    ops: u64,
    counted: u64,
    (top, top_lines): (usize, usize),
) -> Document {
    let per_op = |insns: u64| round(insns as f64 / ops.max(1) as f64);
    let share = |insns: u64| round(100.0 * insns as f64 / breakdown.total.max(1) as f64);
    let root = workspace::root();
    let document = Document {
        ops,
        window_insns_per_op: per_op(counted),
        attributed_insns_per_op: per_op(breakdown.total),
        waiting_insns_per_op: per_op(breakdown.waiting),
        layers: (breakdown.layers.iter())
            .map(|(layer, insns, waited)| LayerShare {
                layer: (*layer).to_owned(),
                insns_per_op: per_op(*insns),
                share_pct: share(*insns),
                waiting_insns_per_op: per_op(*waited),
            })
            .collect(),
        functions: (breakdown.functions.iter().take(top))
            .map(|(name, insns)| FunctionShare {
                function: name.clone(),
                insns_per_op: per_op(*insns),
            })
            .collect(),
        lines: (breakdown.lines.iter().take(top_lines))
            .map(|(line, insns)| LineShare {
                line: relative_line(line, &root),
                insns_per_op: per_op(*insns),
            })
            .collect(),
        ..Document::default()
    };
    print(&document);
    document
}

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// The three tables of `report`.
fn print(document: &Document) {
    let share = |per_op: f64| 100.0 * per_op / document.attributed_insns_per_op.max(0.1);
    println!(
        "\ninstructions per I/O by layer ({} I/Os; blocks attributed: {:.1} insns/IO of the window's {:.1}):",
        document.ops, document.attributed_insns_per_op, document.window_insns_per_op
    );
    println!(
        "{:<32} {:>10} {:>7} {:>16}",
        "layer", "insns/IO", "share", "waiting insns/IO"
    );
    for layer in &document.layers {
        if layer.insns_per_op == 0.0 && layer.waiting_insns_per_op == 0.0 {
            continue;
        }
        println!(
            "{:<32} {:>10.1} {:>6.1}% {:>16.1}",
            layer.layer, layer.insns_per_op, layer.share_pct, layer.waiting_insns_per_op
        );
    }
    let functions = document.functions.iter();
    let lines = document.lines.iter();
    for (heading, column, rows) in [
        (
            "top functions (out-of-line symbols; inlined code counts in its caller):",
            "function",
            functions
                .map(|f| (&f.function, f.insns_per_op))
                .collect::<Vec<_>>(),
        ),
        (
            "top source lines (innermost project frame of each block's first instruction):",
            "line",
            lines.map(|l| (&l.line, l.insns_per_op)).collect(),
        ),
    ] {
        println!("\n{heading}\n{:>10} {:>7}  {column}", "insns/IO", "share");
        for (name, per_op) in rows {
            let name: String = name.chars().take(110).collect();
            println!("{per_op:>10.1} {:>6.1}%  {name}", share(per_op));
        }
    }
}

/// A demangled name without generic arguments (`Midlayer<H,A,C>::submit` → `Midlayer::submit`),
/// so one function's instances share a row.
pub fn short_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    // `m::<impl X<T>>::f` leaves an empty segment.
    let out = out.replace("::::", "::");
    // `<X as Trait>::f` lost its whole head above; keep the original then.
    if out.starts_with("::") || out.is_empty() {
        name.to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests;
