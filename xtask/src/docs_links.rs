//! Host tests of the documentation: every relative link in `README.md`, `CONTRIBUTING.md` and
//! `docs/` resolves (the file exists and, for a Markdown file, so does the `#anchor`), and every
//! benchmark in the README's table links a results page, and the docs speak the project's own
//! words: no issue numbers, commit hashes or notes on who ran what (the git history keeps those).

use std::path::{Path, PathBuf};

use harness::workspace;

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

/// Issue references (`#19`, not a heading's `# ` nor an HTML entity's `&#…;`) in `text`.
fn issue_numbers(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for (at, _) in text.match_indices('#') {
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let entity = at > 0 && bytes[at - 1] == b'&';
        let glued = bytes
            .get(at + 1 + digits)
            .is_some_and(u8::is_ascii_alphanumeric);
        if digits > 0 && !entity && !glued {
            found.push(text[at..at + 1 + digits].to_string());
        }
    }
    found
}

/// Words of 7 to 40 hexadecimal digits with both a digit and a letter: what a commit hash looks
/// like (`0x…` addresses are one word with the `x`, decimal figures have no letter).
fn commit_hashes(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| {
            (7..=40).contains(&word.len())
                && word
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && word.bytes().any(|b| b.is_ascii_digit())
                && word.bytes().any(|b| b.is_ascii_lowercase())
        })
        .map(str::to_string)
        .collect()
}

/// Mentions of engineers other than the readers ("kernel and storage engineers"): who ran what,
/// or how many shared the machine, is the history's business, not the docs'.
fn who_ran_what(text: &str) -> Vec<String> {
    text.match_indices("engineer")
        .filter(|&(at, _)| {
            let before = &text[text[..at]
                .char_indices()
                .rev()
                .nth(24)
                .map_or(0, |(i, _)| i)..at];
            !before.contains("kernel") && !before.contains("storage")
        })
        .map(|(at, _)| text[at.saturating_sub(30)..].chars().take(50).collect())
        .collect()
}

#[test]
fn the_docs_carry_no_issue_numbers_hashes_or_who_ran_what() {
    let root = workspace::root();
    let mut problems = Vec::new();
    for document in documents(&root) {
        let text = std::fs::read_to_string(&document).unwrap();
        let name = document
            .strip_prefix(&root)
            .unwrap_or(&document)
            .display()
            .to_string();
        for (line_number, line) in text.lines().enumerate() {
            let words = issue_numbers(line)
                .into_iter()
                .chain(commit_hashes(line))
                .chain(who_ran_what(line));
            for word in words {
                problems.push(format!("{name}:{}: {word}", line_number + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn issue_numbers_hashes_and_engineers_are_recognised() {
    assert_eq!(
        issue_numbers("issue #19, see #3. # Heading &#123; [x](#top) C#9x"),
        ["#19", "#3"]
    );
    assert_eq!(
        commit_hashes("main at f90b7be; 0x1ffdffff; 1710835 runs; 'decaf' beef12 e50aa6fba"),
        ["f90b7be", "e50aa6fba"]
    );
    assert_eq!(
        who_ran_what("for kernel and storage engineers who"),
        Vec::<String>::new()
    );
    assert_eq!(who_ran_what("shared by six engineers").len(), 1);
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
