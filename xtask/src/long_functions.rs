//! A host test that keeps docs/structure.md's list of long functions true: every function of
//! more than [`LIMIT`] lines in the repository's code (tests aside) has a row there with the
//! reason it is one piece, and every row names such a function. A function that grows past the
//! limit is split, or gets its row; one that is split loses it.
//!
//! A function runs from its `fn` line to the first line after it that closes at the same
//! indentation (rustfmt's layout). Test code is left out: `#[cfg(test)]` modules, files named
//! `tests.rs`, `tests/` folders, benches and fuzz targets.

use std::collections::BTreeSet;
use std::path::Path;

use harness::workspace;

use crate::unsafe_confinement::{packages, rust_files};

/// Lines a function may span, its `fn` line and closing brace included.
const LIMIT: usize = 60;

/// The heading of the table in docs/structure.md.
const HEADING: &str = "## Functions over 60 lines";

/// `(file, function, lines)` of every function of `source` longer than [`LIMIT`], outside
/// `#[cfg(test)]` modules.
fn long_functions(source: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        let indent = line.len() - line.trim_start().len();
        if line.trim() == "#[cfg(test)]" && lines.get(at + 1).is_some_and(|next| opens_mod(next)) {
            at = closing(&lines, at + 1, indent).unwrap_or(lines.len());
            continue;
        }
        if let Some(name) = fn_name(line)
            && !line.trim_end().ends_with(';')
            && let Some(end) = closing(&lines, at, indent)
            && end + 1 - at > LIMIT
        {
            found.push((name, end + 1 - at));
        }
        at += 1;
    }
    found
}

/// Whether `line` opens an inline module (`mod tests {`).
fn opens_mod(line: &str) -> bool {
    let line = line.trim();
    line.ends_with('{') && (line.starts_with("mod ") || line.starts_with("pub mod "))
}

/// The name of the function `line` declares, after any visibility and qualifiers.
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    if let Some(scoped) = rest.strip_prefix("pub(") {
        rest = scoped.split_once(") ").map_or(rest, |(_, after)| after);
    }
    for prefix in ["pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name: String = rest
        .strip_prefix("fn ")?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The line that closes the item opened at `start` with indentation `indent`: the first later
/// line that is `}` (or `},`/`};`) at that indentation, or the start line itself if it closes.
fn closing(lines: &[&str], start: usize, indent: usize) -> Option<usize> {
    if lines[start].trim_end().ends_with('}') {
        return Some(start);
    }
    (start + 1..lines.len()).find(|&at| {
        let line = lines[at];
        line.len() - line.trim_start().len() == indent
            && ["}", "},", "};"].contains(&line.trim_end().trim_start())
    })
}

/// Whether `path` (relative to the root) holds test code this check leaves out.
fn is_test_code(path: &str) -> bool {
    path.ends_with("/tests.rs")
        || ["/tests/", "/benches/", "fuzz_targets/"]
            .iter()
            .any(|part| path.contains(part))
}

/// `path::function` of every long function in the repository.
fn in_the_code(root: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for package in packages(root) {
        for file in rust_files(&package.dir) {
            // A package of its own workspace (fuzz, the Hermit application) builds into its
            // own `target/`, whose generated sources are not the repository's.
            if file
                .strip_prefix(&package.dir)
                .is_ok_and(|p| p.starts_with("target"))
            {
                continue;
            }
            let path = file.strip_prefix(root).unwrap_or(&file);
            let path = path.to_string_lossy().into_owned();
            if is_test_code(&path) {
                continue;
            }
            let source = std::fs::read_to_string(&file).unwrap_or_default();
            for (name, _) in long_functions(&source) {
                found.insert(format!("{path}::{name}"));
            }
        }
    }
    found
}

/// `path::function` of every row of the table under [`HEADING`] (`` | `path` | `function` | …``).
fn in_the_docs(structure: &str) -> BTreeSet<String> {
    let Some((_, after)) = structure.split_once(HEADING) else {
        return BTreeSet::new();
    };
    let section = after.split("\n## ").next().unwrap_or(after);
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let path = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let name = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
            path.ends_with(".rs").then(|| format!("{path}::{name}"))
        })
        .collect()
}

#[test]
fn every_long_function_has_its_reason_in_docs_structure() {
    let root = workspace::root();
    let docs = std::fs::read_to_string(root.join("docs/structure.md")).expect("docs/structure.md");
    let (code, listed) = (in_the_code(&root), in_the_docs(&docs));
    let missing: Vec<&String> = code.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "functions over {LIMIT} lines without a row in docs/structure.md \"{HEADING}\" (split \
         them or say why they are one piece): {missing:#?}\nrows naming no such function: \
         {stale:#?}"
    );
}

#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let body = "    x();\n".repeat(LIMIT);
    let source = format!(
        "fn short() {{}}\npub(in crate::a) fn long() {{\n{body}}}\ntrait T {{\n    fn declared();\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n"
    );
    assert_eq!(long_functions(&source), [("long".to_owned(), LIMIT + 2)]);
    let docs =
        format!("{HEADING}\n\n| file | function | why |\n|---|---|---|\n| `a/b.rs` | `f` | x |\n");
    assert_eq!(in_the_docs(&docs), BTreeSet::from(["a/b.rs::f".to_owned()]));
}
