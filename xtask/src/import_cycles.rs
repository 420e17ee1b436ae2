//! A host test that keeps the modules of each crate in layers: no cycle of imports between the
//! files of a crate.
//!
//! An edge is a path written from one file to another with `crate::` or `super::` (in a `use`
//! or inline, groups `{a, b::c}` expanded); it points at the file of the longest module prefix
//! of the path that is a file (`crate::insns::for_boot` → `insns/mod.rs`; an item of the crate
//! root → `lib.rs`). A parent naming its child module through `mod`, `self::` or a bare name
//! is not an edge: a child may use its parent, and the parent its child, as long as no chain of
//! `crate::`/`super::` paths comes back. `super::` inside an inline `mod NAME {` (a test
//! module) resolves from that module. Strings and comments are left out.
//!
//! [`NOT_YET_COVERED`] names the crates that still have cycles; it is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use harness::workspace;

use crate::unsafe_confinement::{module_path, packages, rust_files};

/// Crates whose files still import each other in a circle, each one checked once it leaves
/// this list (a listed crate with no cycle left makes the test fail until it is taken off).
/// Empty since 2026-12-04: every workspace crate is covered, the Hermit programs and `fuzz`
/// included. The last circles went by moving code to where it belongs: `pools`' `BackingError`
/// into `backing`, `drivers`' `VirtioScsiError` into `virtio_scsi/error`, `scsi`'s CDB field
/// readers into `target/cdb_fields`, the OS's `route_virtqueues` into `pci/virtio_common` and
/// the topology tables' tests into their own file, and by handing arch what it needs from
/// above (the page-table frames through `paging::set_table_frames`, the APs' entry through
/// `trampoline::install`).
const NOT_YET_COVERED: &[&str] = &[];

/// The files of one crate (`src/`) and the file each `crate::`/`super::` path of theirs
/// reaches: `file → files it imports`.
fn edges(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = rust_files(src);
    let modules: BTreeMap<String, PathBuf> = files
        .iter()
        .map(|file| (module_path(src, file), file.clone()))
        .collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap_or_default();
        let here = module_path(src, file);
        let targets: BTreeSet<PathBuf> = paths(&source)
            .into_iter()
            .filter_map(|(inline, path)| resolve(&here, &inline, &path))
            .map(|module| owning_file(&modules, &module))
            .filter(|target| target != file)
            .collect();
        edges.insert(file.clone(), targets);
    }
    edges
}

/// Every `crate::…`/`super::…` path of `source` with the inline modules it is written in.
fn paths(source: &str) -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut statement = String::new();
    for line in source.lines() {
        let indent = line.len() - line.trim_start().len();
        if inline
            .last()
            .is_some_and(|(_, at)| *at == indent && line.trim() == "}")
        {
            inline.pop();
            continue;
        }
        if let Some(name) = inline_module(line) {
            inline.push((name, indent));
            continue;
        }
        let code = without_strings_and_comments(line);
        let names: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        if statement.is_empty() && !starts_a_use(&code) {
            found.extend(inline_paths(&code).into_iter().map(|p| (names.clone(), p)));
            continue;
        }
        statement.push_str(&code);
        statement.push(' ');
        if code.contains(';') {
            let tree = statement.trim().trim_end_matches(';');
            let tree = tree.split_once("use ").map_or("", |(_, tree)| tree.trim());
            found.extend(expand(tree).into_iter().map(|p| (names.clone(), p)));
            statement.clear();
        }
    }
    found
}

/// The name of the inline module `line` opens (`mod tests {`, `pub(crate) mod x {`).
fn inline_module(line: &str) -> Option<String> {
    let line = line.trim();
    let rest = line.strip_suffix('{')?.trim_end();
    let rest = rest
        .strip_prefix("pub(crate) ")
        .or_else(|| rest.strip_prefix("pub(super) "))
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let name = rest.strip_prefix("mod ")?;
    name.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then(|| name.to_owned())
}

/// Whether `code` begins a `use` declaration (of any visibility).
fn starts_a_use(code: &str) -> bool {
    let code = code.trim_start();
    ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
        .iter()
        .any(|start| code.starts_with(start))
}

/// `line` without `//` comments and without the contents of string and char literals (a
/// string that spans lines is not followed: the paths this test reads are not in one).
fn without_strings_and_comments(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let (mut at, mut in_string) = (0, false);
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        match c {
            '\\' if in_string => at += 1,
            '"' => in_string = !in_string,
            '/' if !in_string && next == Some('/') => break,
            // A char literal: `'x'` or `'\x'` (a lifetime has no closing quote there).
            '\'' if !in_string && chars.get(at + 2) == Some(&'\'') => at += 2,
            '\'' if !in_string && next == Some('\\') => {
                at += chars[at + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map_or(0, |p| p + 1);
            }
            _ if in_string => {}
            _ => out.push(c),
        }
        at += 1;
    }
    out
}

/// The `crate::…`/`super::…` paths written inline in `code` (calls, types, attributes).
fn inline_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|at| at + from) {
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push(path.trim_end_matches(':').to_owned());
        }
    }
    found
}

/// The paths a use tree names, groups expanded: `crate::{a, b::{c, d}}` → `crate::a`,
/// `crate::b::c`, `crate::b::d`. Only paths that start with `crate` or `super` are kept.
fn expand(tree: &str) -> Vec<String> {
    let mut tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    for tight in ["{", "}", ",", "::"] {
        tree = tree
            .replace(&format!(" {tight}"), tight)
            .replace(&format!("{tight} "), tight);
    }
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out.retain(|path| path.starts_with("crate::") || path.starts_with("super::"));
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        out.push(
            format!("{prefix}{path}")
                .trim_end_matches("::self")
                .to_owned(),
        );
        return;
    };
    let head = format!("{prefix}{}", &tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut depth = 0;
    let mut part = String::new();
    for c in inner.chars().chain([',']) {
        match c {
            ',' if depth == 0 => {
                if !part.is_empty() {
                    expand_into(&head, &part, out);
                }
                part.clear();
            }
            '{' => {
                depth += 1;
                part.push(c);
            }
            '}' => {
                depth -= 1;
                part.push(c);
            }
            _ => part.push(c),
        }
    }
}

/// The module path (`a::b::item…`, from the crate root) that `path`, written in module `here`
/// inside the inline modules `inline`, names; `None` for `super` above the root.
fn resolve(here: &str, inline: &[String], path: &str) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    let mut base: Vec<&str> = here.split("::").filter(|p| !p.is_empty()).collect();
    base.extend(inline.iter().map(String::as_str));
    if parts.first() == Some(&"crate") {
        base.clear();
        parts.remove(0);
    }
    while parts.first() == Some(&"super") {
        base.pop()?;
        parts.remove(0);
    }
    base.extend(parts);
    Some(base.join("::"))
}

/// The file of the longest prefix of `module` that is a file (the crate root when none is).
fn owning_file(modules: &BTreeMap<String, PathBuf>, module: &str) -> PathBuf {
    let parts: Vec<&str> = module.split("::").collect();
    (0..=parts.len())
        .rev()
        .find_map(|n| modules.get(&parts[..n].join("::")))
        .or_else(|| modules.get(""))
        .cloned()
        .unwrap_or_default()
}

/// The cycles of `edges`: each strongly connected set of more than one file, sorted.
fn cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    let reaches = |from: &PathBuf| -> BTreeSet<PathBuf> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(file) = todo.pop() {
            for next in edges.get(&file).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        edges.keys().map(|file| (file, reaches(file))).collect();
    let mut found: Vec<Vec<PathBuf>> = Vec::new();
    for (file, reached) in &reach {
        if !reached.contains(*file) || found.iter().any(|set| set.contains(file)) {
            continue;
        }
        let set: Vec<PathBuf> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|back| back.contains(*file)))
            .cloned()
            .collect();
        found.push(set);
    }
    found
}

/// Every crate's cycles, as `crate: a.rs → b.rs → …` lines, by crate name.
fn all_cycles(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut by_crate = BTreeMap::new();
    for package in packages(root) {
        let src = package.dir.join("src");
        let shown = |file: &PathBuf| {
            file.strip_prefix(root)
                .unwrap_or(file)
                .display()
                .to_string()
        };
        let lines: Vec<String> = cycles(&edges(&src))
            .iter()
            .map(|set| set.iter().map(shown).collect::<Vec<_>>().join(", "))
            .collect();
        by_crate.insert(package.name, lines);
    }
    by_crate
}

#[test]
fn no_crate_imports_its_own_modules_in_a_circle() {
    let root = workspace::root();
    let mut problems = Vec::new();
    for (name, cycles) in all_cycles(&root) {
        let listed = NOT_YET_COVERED.contains(&name.as_str());
        match (cycles.is_empty(), listed) {
            (false, false) => problems.extend(
                cycles
                    .iter()
                    .map(|set| format!("{name}: these files import each other in a circle: {set}")),
            ),
            (true, true) => problems.push(format!(
                "{name} has no import cycle left: take it off NOT_YET_COVERED"
            )),
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn paths_resolve_to_the_files_that_hold_them() {
    let source = "use crate::{a::{self, B}, c};\nuse super::d::E;\nfn f() { crate::g::h(); let s = \"crate::x\"; }\n\
                  #[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::k;\n}\n";
    let found: Vec<(Vec<String>, String)> = paths(source);
    let resolved: Vec<String> = found
        .iter()
        .filter_map(|(inline, path)| resolve("m::n", inline, path))
        .collect();
    assert_eq!(
        resolved,
        ["a", "a::B", "c", "m::d::E", "g::h", "m::n::*", "m::k"]
    );
    let modules: BTreeMap<String, PathBuf> = [("", "lib.rs"), ("a", "a.rs"), ("m::d", "m/d.rs")]
        .into_iter()
        .map(|(m, f)| (m.to_owned(), PathBuf::from(f)))
        .collect();
    assert_eq!(owning_file(&modules, "a::B"), PathBuf::from("a.rs"));
    assert_eq!(owning_file(&modules, "m::d::E"), PathBuf::from("m/d.rs"));
    assert_eq!(owning_file(&modules, "c"), PathBuf::from("lib.rs"));
}

#[test]
fn a_two_file_circle_is_found_and_a_chain_is_not() {
    let file = |name: &str| PathBuf::from(name);
    let graph = |pairs: &[(&str, &str)]| {
        let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (from, to) in pairs {
            edges.entry(file(from)).or_default().insert(file(to));
            edges.entry(file(to)).or_default();
        }
        edges
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(
        cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        [vec![file("a"), file("b"), file("c")]]
    );
}
