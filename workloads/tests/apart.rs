//! The product crates stand apart from the lab: no workspace crate that `pools`, `scsi` or
//! `drivers` depend on (normal dependencies, followed through the workspace) or name as a
//! dev-dependency is `workloads`, so `cargo tree -p pools -p scsi -p drivers -e normal,dev`
//! shows no benchmark code.
//!
//! Read from `cargo metadata --no-deps` (the workspace's own manifests only, no registry or
//! lock): a crate from crates.io cannot depend on a workspace crate, so the workspace's own
//! dependency lists decide.

use std::collections::BTreeSet;
use std::process::Command;

/// The crates that make up the stack.
const PRODUCT: [&str; 3] = ["pools", "scsi", "drivers"];
/// What must not appear in their tree.
const LAB: &str = "workloads";

/// Every workspace package that `roots` reach: their normal and dev dependencies, then the
/// normal dependencies of what those reach (as `cargo tree -e normal,dev` walks them).
fn reached(metadata: &serde_json::Value, roots: &[&str]) -> BTreeSet<String> {
    let packages = metadata["packages"].as_array().expect("packages");
    let deps = |name: &str, dev_too: bool| -> Vec<String> {
        let package = packages
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no workspace package {name}"));
        package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null() || (dev_too && d["kind"] == "dev"))
            .filter_map(|d| d["name"].as_str())
            .filter(|d| packages.iter().any(|p| p["name"] == *d))
            .map(str::to_owned)
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.iter().flat_map(|r| deps(r, true)).collect();
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(deps(&name, false));
        }
    }
    seen
}

#[test]
fn pools_scsi_and_drivers_do_not_reach_the_lab() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    for root in PRODUCT {
        let reached = reached(&metadata, &[root]);
        assert!(
            !reached.contains(LAB),
            "`cargo tree -p {root} -e normal,dev` reaches `{LAB}` (through {reached:?}): \
             move the test or code that needs it into `{LAB}`"
        );
    }
}
