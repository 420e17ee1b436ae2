//! Host tests that keep `unsafe` where CONTRIBUTING.md says it is ("## Unsafe"):
//! - every crate root (`src/lib.rs`, `src/main.rs` of every package in the repository, the
//!   Hermit loader and application and the fuzz support crate included) carries
//!   `#![deny(unsafe_code)]` or `#![forbid(unsafe_code)]`;
//! - every `#[expect(unsafe_code, …)]` or `#[allow(unsafe_code, …)]` in a crate's `src/` sits on
//!   an item (a `mod` or an `fn`) that the table lists, and every item the table lists carries
//!   one, so the table is the list of places that may hold `unsafe`, and nothing else is.
//!
//! The compiler then holds the line: code outside those items that writes `unsafe` fails to
//! build. Integration tests, benches, examples and fuzz targets are crates of their own that the
//! table does not cover (CONTRIBUTING.md says so); they are not scanned.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use harness::workspace;

/// One package: its name (the table's crate column) and its directory.
#[derive(Debug, Clone)]
pub(crate) struct Package {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
}

/// Every package of the repository: the workspace's members and the crates with workspaces of
/// their own (`hermit/app`, `fuzz`), found by their `Cargo.toml`, sorted by name; the vendored
/// crates under `third_party/` are not the repository's own code and are left out.
pub(crate) fn packages(root: &Path) -> Vec<Package> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            // third_party/ holds vendored upstream crates (patched, third_party/*/README.md):
            // they keep upstream's own unsafe discipline and layout, not this repository's.
            let skip = ["target", ".git", "corpus", "artifacts", "third_party"];
            if path.is_dir() && !skip.iter().any(|s| name == *s) && !is_source(&path) {
                folders.push(path);
            } else if name == "Cargo.toml"
                && let Some(package) = package_name(&path)
            {
                found.push(Package {
                    name: package,
                    dir: folder.clone(),
                });
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Source folders hold no manifests; skipping them keeps the walk short.
fn is_source(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name == "src" || name == "tests" || name == "benches")
}

/// The `[package] name` of a manifest, if it has one (a virtual workspace has none).
fn package_name(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let value: toml::Table = text.parse().ok()?;
    Some(value.get("package")?.get("name")?.as_str()?.to_string())
}

/// The `.rs` files under `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The module path of a file under `src/`: `lib.rs`/`main.rs` are the root (""), `a/mod.rs`
/// and `a.rs` are `a`, `a/b.rs` is `a::b`.
pub(crate) fn module_path(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// Whether a crate root denies or forbids `unsafe_code` for the whole crate.
fn denies_unsafe(root_source: &str) -> bool {
    root_source.lines().any(|line| {
        let line: String = line.split_whitespace().collect();
        line == "#![deny(unsafe_code)]" || line == "#![forbid(unsafe_code)]"
    })
}

/// The items of one file that carry `#[expect(unsafe_code …)]` or `#[allow(unsafe_code …)]`:
/// the name of the `mod` or `fn` each attribute sits on, or `Err` with the line of an attribute
/// on anything else (an inner `#![allow(unsafe_code)]` included), which the table cannot name.
fn unsafe_items(source: &str) -> Vec<Result<String, String>> {
    let lines: Vec<&str> = source.lines().collect();
    let mut items = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at].trim_start();
        let (is_attribute, attribute_end, rest) = attribute_at(&lines, at);
        let allows_unsafe = is_attribute
            && ["#[expect(", "#[allow(", "#![expect(", "#![allow("]
                .iter()
                .any(|start| line.starts_with(start))
            && lines[at..=attribute_end]
                .iter()
                .any(|l| l.contains("unsafe_code"));
        if !allows_unsafe {
            at = attribute_end + 1;
            continue;
        }
        if line.starts_with("#!") {
            items.push(Err(format!("line {}: an inner attribute", at + 1)));
            at = attribute_end + 1;
            continue;
        }
        // Skip the item's other attributes and doc comments to reach the item itself, which may
        // follow an attribute on its line.
        let mut item = attribute_end + 1;
        let mut same_line = rest;
        while same_line.trim().is_empty() && item < lines.len() {
            let next = lines[item].trim_start();
            if next.starts_with("#[") {
                let (_, end, after) = attribute_at(&lines, item);
                (item, same_line) = (end + 1, after);
            } else if next.starts_with("//") {
                item += 1;
            } else {
                same_line = next;
                item += 1;
            }
        }
        items.push(
            item_name(same_line).ok_or_else(|| format!("line {}: not on a `mod` or `fn`", at + 1)),
        );
        at = item;
    }
    items
}

/// Whether line `at` starts an attribute, the line where that attribute ends (brackets
/// balanced) and what follows it on that line; `(false, at, "")` for any other line.
fn attribute_at<'a>(lines: &[&'a str], at: usize) -> (bool, usize, &'a str) {
    if !lines[at].trim_start().starts_with('#') {
        return (false, at, "");
    }
    let mut depth = 0i32;
    for (offset, line) in lines[at..].iter().enumerate() {
        for (index, c) in line.char_indices() {
            match c {
                '[' | '(' => depth += 1,
                ']' | ')' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                return (true, at + offset, &line[index + 1..]);
            }
        }
    }
    (true, lines.len() - 1, "")
}

/// The name of the `mod NAME` or `fn NAME` declared on `line`, after any visibility and
/// qualifiers (`pub(crate)`, `unsafe`, `extern "C"`).
fn item_name(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let keyword = words.iter().position(|w| *w == "mod" || *w == "fn")?;
    let name = words.get(keyword + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The table's `(crate, item path)` pairs, with `a::{b, c}` expanded to `a::b`, `a::c` and
/// parenthesised remarks (`(feature `std`)`) left out.
fn table_entries(contributing: &str) -> Vec<(String, String)> {
    let Some(start) = contributing.find("## Unsafe") else {
        return Vec::new();
    };
    let section = &contributing[start..];
    let section = section[2..]
        .find("\n## ")
        .map_or(section, |end| &section[..end + 2]);
    let mut entries = Vec::new();
    for line in section.lines().map(str::trim) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| crate | module | why |` splits into 5 cells, the outer two empty.
        if cells.len() != 5 || !cells[1].starts_with('`') && !is_word(cells[1]) {
            continue;
        }
        if cells[1] == "crate" || cells[1].starts_with("---") {
            continue;
        }
        let krate = cells[1].trim_matches('`').to_string();
        for path in backticked(&without_remarks(cells[2])) {
            for expanded in expand_braces(&path) {
                entries.push((krate.clone(), expanded));
            }
        }
    }
    entries
}

fn is_word(cell: &str) -> bool {
    !cell.is_empty()
        && cell
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
}

/// `cell` without its parenthesised parts.
fn without_remarks(cell: &str) -> String {
    let mut depth = 0;
    cell.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    return false;
                }
                _ => {}
            }
            depth == 0
        })
        .collect()
}

/// The `code` spans of `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `a::{b, c}` → `a::b`, `a::c`; a path without braces is itself.
fn expand_braces(path: &str) -> Vec<String> {
    match (path.find('{'), path.rfind('}')) {
        (Some(open), Some(close)) if open < close => path[open + 1..close]
            .split(',')
            .map(|part| format!("{}{}", &path[..open], part.trim()))
            .collect(),
        _ => vec![path.to_string()],
    }
}

/// What the repository under `root` breaks of the two rules, one line each (empty: nothing).
fn violations(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut found = BTreeSet::new();
    for package in packages(root) {
        let src = package.dir.join("src");
        for root_file in ["lib.rs", "main.rs"].map(|name| src.join(name)) {
            let Ok(text) = std::fs::read_to_string(&root_file) else {
                continue;
            };
            if !denies_unsafe(&text) {
                problems.push(format!(
                    "{}: crate root without #![deny(unsafe_code)] or #![forbid(unsafe_code)]",
                    shown(root, &root_file)
                ));
            }
        }
        for file in rust_files(&src) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let module = module_path(&src, &file);
            for item in unsafe_items(&text) {
                match item {
                    Ok(name) if module.is_empty() => {
                        found.insert((package.name.clone(), name));
                    }
                    Ok(name) => {
                        found.insert((package.name.clone(), format!("{module}::{name}")));
                    }
                    Err(at) => problems.push(format!(
                        "{}: {at}: allows unsafe_code where the table cannot name it",
                        shown(root, &file)
                    )),
                }
            }
        }
    }
    let contributing = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap_or_default();
    let listed: BTreeSet<_> = table_entries(&contributing).into_iter().collect();
    for (krate, item) in found.difference(&listed) {
        problems.push(format!(
            "{krate}: `{item}` allows unsafe_code but is not in CONTRIBUTING.md's table"
        ));
    }
    for (krate, item) in listed.difference(&found) {
        problems.push(format!(
            "{krate}: `{item}` is in CONTRIBUTING.md's table but allows no unsafe_code"
        ));
    }
    problems
}

fn shown(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

#[test]
fn unsafe_stays_in_the_modules_contributing_lists() {
    let problems = violations(&workspace::root());
    assert!(
        problems.is_empty(),
        "unsafe is not confined as CONTRIBUTING.md (## Unsafe) says:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn every_package_is_found_including_the_separate_workspaces() {
    let names: Vec<String> = packages(&workspace::root())
        .into_iter()
        .map(|p| p.name)
        .collect();
    for expected in [
        "pools",
        "scsi",
        "drivers",
        "kernel",
        "xtask",
        "hermit-loader",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    assert!(names.len() >= 11, "{names:?}");
}

#[test]
fn items_are_found_through_their_other_attributes_and_any_visibility() {
    // One line per element, so that this file's own lines never start with an attribute.
    let source = [
        "#![deny(unsafe_code)]",
        "#[cfg(target_os = \"none\")]",
        "#[expect(",
        "    unsafe_code,",
        "    reason = \"ports\"",
        ")]",
        "#[cfg(test)]",
        "/// docs",
        "pub(crate) mod config;",
        "mod safe;",
        "#[allow(unsafe_code)] mod fakes;",
        "#[expect(unsafe_code, reason = \"symbol\")]",
        "#[unsafe(no_mangle)]",
        "extern \"C\" fn entry() {}",
        "#[expect(dead_code, reason = \"no unsafe here\")]",
        "mod unused;",
        "#[expect(unsafe_code, reason = \"x\")]",
        "unsafe impl Send for T {}",
    ]
    .join("\n");
    let items = unsafe_items(&source);
    assert_eq!(
        items,
        vec![
            Ok("config".into()),
            Ok("fakes".into()),
            Ok("entry".into()),
            Err("line 17: not on a `mod` or `fn`".into()),
        ]
    );
    assert_eq!(
        unsafe_items("#![allow(unsafe_code)]\n"),
        vec![Err("line 1: an inner attribute".into())]
    );
}

#[test]
fn crate_roots_must_deny_or_forbid() {
    assert!(denies_unsafe(
        "//! doc\n#![no_std]\n#![deny(unsafe_code)]\n"
    ));
    assert!(denies_unsafe("#![forbid( unsafe_code )]"));
    assert!(!denies_unsafe("#![warn(unsafe_code)]\n"));
    assert!(!denies_unsafe(
        "// #![deny(unsafe_code)] is not enough in a comment\n"
    ));
}

#[test]
fn the_table_expands_braces_and_drops_remarks() {
    let contributing = "## Unsafe\n\n  | crate | module | why |\n  |---|---|---|\n  \
        | pools | `raw` | views |\n  | pools | `host` (feature `std`) | alloc |\n  \
        | kernel | `memory::{dma, heap}`, `boot` | RAM |\n\n## Errors\n| x | `not` | here |\n";
    assert_eq!(
        table_entries(contributing),
        [
            ("pools", "raw"),
            ("pools", "host"),
            ("kernel", "memory::dma"),
            ("kernel", "memory::heap"),
            ("kernel", "boot"),
        ]
        .map(|(k, m)| (k.to_string(), m.to_string()))
    );
    assert_eq!(module_path(Path::new("s"), Path::new("s/lib.rs")), "");
    assert_eq!(module_path(Path::new("s"), Path::new("s/a/mod.rs")), "a");
    assert_eq!(module_path(Path::new("s"), Path::new("s/a/b.rs")), "a::b");
}
