//! A host test that keeps the host crates in their layers: the harness never reaches the
//! benchmark library, the benchmarks or the system tests, the benchmark library never reaches
//! the benchmarks, and the benchmarks never reach the system tests (what both boot is the
//! harness's; docs/architecture.md, "The host side").
//!
//! Read from `cargo metadata --no-deps` like `workloads/tests/apart.rs`: a crate reaches
//! another when it names it as a normal or dev dependency, or one of its normal dependencies
//! does, followed through the workspace (as `cargo tree -e normal,dev` walks them).

use std::collections::BTreeSet;
use std::process::Command;

use harness::workspace;

/// `(crate, what it must never reach)`.
const RULES: [(&str, &[&str]); 4] = [
    ("harness", &["benchkit", "bench", "systest", "xtask"]),
    ("benchkit", &["bench", "systest", "xtask"]),
    ("bench", &["systest", "xtask"]),
    ("stats", &["workloads", "harness", "benchkit", "bench"]),
];

/// Every workspace package that `root` reaches (see the module's comment).
fn reached(metadata: &serde_json::Value, root: &str) -> BTreeSet<String> {
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let deps = |name: &str, dev_too: bool| -> Vec<String> {
        let package = packages.iter().find(|p| p["name"] == name);
        package
            .and_then(|p| p["dependencies"].as_array())
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null() || (dev_too && d["kind"] == "dev"))
            .filter_map(|d| d["name"].as_str())
            .filter(|d| packages.iter().any(|p| p["name"] == *d))
            .map(str::to_owned)
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut todo = deps(root, true);
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(deps(&name, false));
        }
    }
    seen
}

/// The rules `metadata` breaks, one line each.
fn broken(metadata: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (root, never) in RULES {
        let reached = reached(metadata, root);
        for name in never.iter().filter(|name| reached.contains(**name)) {
            problems.push(format!(
                "`{root}` reaches `{name}` (through {reached:?}): a lower layer never names a \
                 higher one; move what it needs down, or define a trait the higher one implements"
            ));
        }
    }
    problems
}

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace::root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

#[test]
fn the_host_crates_stay_in_their_layers() {
    let metadata = metadata();
    for (root, _) in RULES {
        let names = metadata["packages"].as_array().into_iter().flatten();
        assert!(
            names.filter(|p| p["name"] == root).count() == 1,
            "no workspace package {root}: update RULES"
        );
    }
    let problems = broken(&metadata);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_dev_dependency_and_a_dependency_of_a_dependency_count() {
    let package = |name: &str, deps: &[(&str, Option<&str>)]| {
        let deps: Vec<serde_json::Value> = deps
            .iter()
            .map(|(name, kind)| serde_json::json!({"name": name, "kind": kind}))
            .collect();
        serde_json::json!({"name": name, "dependencies": deps})
    };
    let metadata = serde_json::json!({"packages": [
        package("harness", &[("serde", None), ("systest", Some("dev"))]),
        package("benchkit", &[("harness", None), ("plotters", None)]),
        package("bench", &[("benchkit", None)]),
        package("systest", &[("harness", None), ("bench", Some("dev"))]),
        package("stats", &[]),
    ]});
    let problems = broken(&metadata);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("`harness` reaches `systest`"),
        "{problems:?}"
    );
    // A dev-dependency of a dependency is not followed (cargo does not build it).
    assert!(!reached(&metadata, "harness").contains("bench"));
}
