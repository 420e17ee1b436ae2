//! Host tests of the documentation: every relative link in `README.md`, `CONTRIBUTING.md` and
//! `docs/` resolves (the file exists and, for a Markdown file, so does the `#anchor`), and every
//! benchmark in the README's table links a results page.

use std::path::{Path, PathBuf};

use crate::workspace;

/// The Markdown files whose links are checked, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The targets of `[text](target)` and `![alt](target)` outside fenced code blocks.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut anchors = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            anchors.push(slug(line.trim_start_matches('#')));
        }
    }
    anchors
}

/// Every link of `document` that does not resolve, as `file: target (why)`.
fn broken_links(root: &Path, document: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(document).unwrap_or_default();
    let shown = document.strip_prefix(root).unwrap_or(document).display();
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let path = if file.is_empty() {
            document.to_path_buf()
        } else {
            document.parent().unwrap_or(root).join(file)
        };
        if !path.exists() {
            broken.push(format!("{shown}: {target} (no such file)"));
            continue;
        }
        if let Some(anchor) = anchor
            && path.extension().is_some_and(|ext| ext == "md")
        {
            let target_text = std::fs::read_to_string(&path).unwrap_or_default();
            if !anchors(&target_text).iter().any(|a| a == anchor) {
                broken.push(format!("{shown}: {target} (no such heading)"));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = workspace::root();
    let documents = documents(&root);
    assert!(documents.len() > 3, "{documents:?}");
    let broken: Vec<String> = documents
        .iter()
        .flat_map(|document| broken_links(&root, document))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_bench_in_the_readme_table_has_a_results_page() {
    let root = workspace::root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let rows: Vec<&str> = readme
        .lines()
        .filter(|line| line.starts_with("| `cargo xtask bench "))
        .collect();
    assert!(!rows.is_empty(), "README.md has no benchmark table");
    for row in rows {
        let page = link_targets(row)
            .into_iter()
            .find(|target| target.starts_with("docs/results/") && target.ends_with(".md"));
        let Some(page) = page else {
            panic!("README row without a docs/results/ page: {row}");
        };
        assert!(root.join(&page).exists(), "{page} missing (row: {row})");
    }
}

#[test]
fn broken_links_and_anchors_are_found() {
    let dir = workspace::target_dir().join("docs-links-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("b.md"), "# The `io_mode` page: here\n").unwrap();
    let a = dir.join("a.md");
    std::fs::write(
        &a,
        "[ok](b.md) [ok](b.md#the-io_mode-page-here) [web](https://x.org/y)\n\
         [gone](c.md) [bad](b.md#nope) [self](#top)\n```\n[in code](d.md)\n```\n# Top\n",
    )
    .unwrap();
    assert_eq!(
        broken_links(&dir, &a),
        [
            "a.md: c.md (no such file)",
            "a.md: b.md#nope (no such heading)"
        ]
    );
}
