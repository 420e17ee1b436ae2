//! The product crates stand apart from the lab: no workspace crate that `pools`, `scsi` or
//! `drivers` depend on (normal dependencies, followed through the workspace) or name as a
//! dev-dependency is `workloads`, so `cargo tree -p pools -p scsi -p drivers -e normal,dev`
//! shows no benchmark code. The OS stands apart the same way: `os`, and the guest↔host contract
//! it prints through (`protocol`) and boots with (`pit`, `pvh`), reach neither `workloads` nor
//! the kernel binary that brings the lab onto the OS.
//!
//! Read from `cargo metadata --no-deps` (the workspace's own manifests only, no registry or
//! lock): a crate from crates.io cannot depend on a workspace crate, so the workspace's own
//! dependency lists decide.

use std::collections::BTreeSet;
use std::process::Command;

/// The crates that make up the stack.
const PRODUCT: [&str; 3] = ["pools", "scsi", "drivers"];
/// The OS library and the crates beside it that the lab also uses.
const OS: [&str; 4] = ["os", "protocol", "pit", "pvh"];
/// What must not appear in their trees: the lab, and the binary that puts it on the OS.
const LAB: [&str; 2] = ["workloads", "kernel"];

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

/// The workspace's own manifests, read by `cargo metadata --no-deps`.
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
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// Each of `roots` with the lab crates its tree reaches, if any.
fn reaching_the_lab(roots: &[&str]) -> Vec<(String, Vec<&'static str>, BTreeSet<String>)> {
    let metadata = metadata();
    roots
        .iter()
        .filter_map(|root| {
            let reached = reached(&metadata, &[root]);
            let lab: Vec<&str> = LAB.into_iter().filter(|l| reached.contains(*l)).collect();
            (!lab.is_empty()).then(|| ((*root).to_owned(), lab, reached))
        })
        .collect()
}

#[test]
fn pools_scsi_and_drivers_do_not_reach_the_lab() {
    let found = reaching_the_lab(&PRODUCT);
    assert!(
        found.is_empty(),
        "`cargo tree -p ROOT -e normal,dev` reaches the lab (root, lab crates, everything it \
         reaches): {found:#?}; move the test or code that needs it into `workloads`"
    );
}

#[test]
fn the_os_and_the_contract_do_not_reach_the_lab() {
    let found = reaching_the_lab(&OS);
    assert!(
        found.is_empty(),
        "`cargo tree -p ROOT -e normal,dev` reaches the lab (root, lab crates, everything it \
         reaches): {found:#?}; what the OS needs from the lab is a trait the OS defines (or \
         `protocol` holds) and the kernel binary implements"
    );
}
