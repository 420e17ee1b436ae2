//! Debian packages without installing them: `apt-get` with private lists under
//! `target/linux/apt/`.
//!
//! The host's own apt configuration names the Debian mirror it may use; this module reads that
//! mirror's URI from `/etc/apt/sources.list` and `/etc/apt/sources.list.d/*` and writes a private
//! sources list for bookworm, bookworm-backports and bookworm's sources (fio is built from its
//! source package). `apt-get update` then fills private lists (`Dir::State::Lists`), an empty dpkg
//! status (`Dir::State::status=/dev/null`) keeps the host's installed set out of every answer,
//! and `apt-get download` / `apt-get source --download-only` fetch `.deb`s and sources into
//! `target/linux/debs` and `target/linux/src`. Nothing is installed: packages are unpacked with
//! `dpkg-deb -x` into folders under `target/linux/`. Files already downloaded are reused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::process;

/// The private apt set-up under one directory.
#[derive(Clone, Debug)]
pub struct Apt {
    root: PathBuf,
}

/// Lists older than this are refreshed.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

fn fail(step: &str, reason: impl Into<String>) -> Error {
    Error::Linux {
        step: step.to_owned(),
        reason: reason.into(),
    }
}

/// The first Debian mirror URI the host's apt configuration uses for bookworm, from one-line
/// (`deb URI bookworm main`) or deb822 (`URIs:` / `Suites:`) sources.
pub(crate) fn mirror_in(sources: &str) -> Option<String> {
    for line in sources.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"deb") {
            // `deb [options] URI suite components`
            let rest: Vec<&str> = words[1..]
                .iter()
                .copied()
                .skip_while(|word| word.starts_with('['))
                .filter(|word| !word.ends_with(']'))
                .collect();
            if rest.get(1).is_some_and(|suite| *suite == "bookworm") {
                return rest.first().map(|uri| uri.trim_end_matches('/').to_owned());
            }
        }
    }
    for stanza in sources.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let is_deb =
            field("Types").is_some_and(|types| types.split_whitespace().any(|t| t == "deb"));
        let bookworm =
            field("Suites").is_some_and(|s| s.split_whitespace().any(|s| s == "bookworm"));
        if is_deb && bookworm {
            if let Some(uri) = field("URIs").and_then(|uris| uris.split_whitespace().next()) {
                return Some(uri.trim_end_matches('/').to_owned());
            }
        }
    }
    None
}

/// The host's apt sources, concatenated.
fn host_sources() -> String {
    let mut text = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let name = path.to_string_lossy();
            if name.ends_with(".list") || name.ends_with(".sources") {
                text.push_str("\n\n");
                text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    text
}

/// Creates the private apt directories under `root` and writes its sources list for `mirror`
/// (bookworm, bookworm-backports, bookworm's sources); `true` when the list was already so.
fn write_sources(root: &Path, mirror: &str) -> Result<bool> {
    for dir in [
        "lists/partial",
        "cache/archives/partial",
        "etc/sources.list.d",
        "etc/preferences.d",
    ] {
        let path = root.join(dir);
        std::fs::create_dir_all(&path).map_err(|source| Error::Write { path, source })?;
    }
    let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
    let list = format!(
        "deb [signed-by={keyring}] {mirror} bookworm main\n\
         deb [signed-by={keyring}] {mirror} bookworm-backports main\n\
         deb-src [signed-by={keyring}] {mirror} bookworm main\n"
    );
    let list_path = root.join("etc/sources.list");
    let unchanged = std::fs::read_to_string(&list_path).is_ok_and(|old| old == list);
    if !unchanged {
        std::fs::write(&list_path, &list).map_err(|source| Error::Write {
            path: list_path.clone(),
            source,
        })?;
    }
    Ok(unchanged)
}

impl Apt {
    /// Writes the private sources list under `root` and refreshes the lists when they are
    /// missing or a day old.
    pub fn prepare(root: &Path) -> Result<Self> {
        let step = "apt set-up";
        let apt = Self {
            root: root.to_path_buf(),
        };
        let mirror = mirror_in(&host_sources()).ok_or_else(|| {
            fail(
                step,
                "no Debian bookworm mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/; \
                 the stock kernels come from Debian's packages",
            )
        })?;
        let unchanged = write_sources(root, &mirror)?;
        let stamp = root.join("lists/.updated");
        let fresh = std::fs::metadata(&stamp)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|time| SystemTime::now().duration_since(time).ok())
            .is_some_and(|age| age < LISTS_MAX_AGE);
        if unchanged && fresh {
            return Ok(apt);
        }
        eprintln!(
            "xtask: refreshing private apt lists from {mirror} (bookworm, bookworm-backports)"
        );
        let mut update = apt.command("apt-get");
        update.args(["-q", "update"]);
        process::run(&mut update).map_err(|error| {
            fail(
                step,
                format!("{error}: no path to the Debian mirror {mirror}? (network, proxy, DNS)"),
            )
        })?;
        std::fs::write(&stamp, b"").map_err(|source| Error::Write {
            path: stamp,
            source,
        })?;
        Ok(apt)
    }

    /// `program` (apt-get, apt-cache) with the private directories.
    pub fn command(&self, program: &str) -> Command {
        let root = self.root.display();
        let mut command = Command::new(program);
        for option in [
            format!("Dir::State::Lists={root}/lists"),
            format!("Dir::Cache={root}/cache"),
            format!("Dir::Etc::SourceList={root}/etc/sources.list"),
            format!("Dir::Etc::SourceParts={root}/etc/sources.list.d"),
            format!("Dir::Etc::Preferences={root}/etc/preferences"),
            format!("Dir::Etc::PreferencesParts={root}/etc/preferences.d"),
            "Dir::State::status=/dev/null".to_owned(),
            // Downloads go to our own folder, which apt's sandbox user cannot write.
            "APT::Sandbox::User=root".to_owned(),
        ] {
            command.args(["-o", &option]);
        }
        command
    }

    /// The `Depends:` field of `package` (e.g. `linux-image-amd64/bookworm-backports`), as
    /// package names without version constraints or alternatives.
    pub fn depends(&self, package: &str) -> Result<Vec<String>> {
        let mut show = self.command("apt-cache");
        show.args(["show", package]);
        let text = process::output(&mut show)
            .map_err(|error| fail("package lookup", format!("{package}: {error}")))?;
        let stanza = text.split("\n\n").next().unwrap_or("");
        Ok(depends_of(stanza))
    }

    /// Downloads `packages` into `dir` unless a `.deb` of that name is there already; returns
    /// each package's `.deb`, printing its size.
    pub(crate) fn download(&self, packages: &[String], dir: &Path) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let missing: Vec<&String> = packages
            .iter()
            .filter(|package| cached_deb(dir, package).is_none())
            .collect();
        if !missing.is_empty() {
            let mut download = self.command("apt-get");
            download
                .arg("-q")
                .arg("download")
                .args(&missing)
                .current_dir(dir);
            process::run(&mut download)
                .map_err(|error| fail("package download", format!("{error}")))?;
        }
        let mut debs = Vec::new();
        for package in packages {
            let deb = cached_deb(dir, package).ok_or_else(|| {
                fail(
                    "package download",
                    format!("no .deb for {package} in {}", dir.display()),
                )
            })?;
            let size = std::fs::metadata(&deb).map_or(0, |meta| meta.len());
            let state = if missing.contains(&package) {
                "downloaded"
            } else {
                "cached"
            };
            eprintln!(
                "xtask: {state} {} ({:.1} MB)",
                deb.file_name().unwrap_or_default().to_string_lossy(),
                size as f64 / 1e6
            );
            debs.push(deb);
        }
        Ok(debs)
    }

    /// Fetches the source package `name` into `dir` (once) and returns its `.dsc`.
    pub fn source(&self, name: &str, dir: &Path) -> Result<PathBuf> {
        let find = || {
            std::fs::read_dir(dir).ok().and_then(|entries| {
                entries.flatten().map(|e| e.path()).find(|path| {
                    let file = path.file_name().unwrap_or_default().to_string_lossy();
                    file.starts_with(&format!("{name}_")) && file.ends_with(".dsc")
                })
            })
        };
        if let Some(dsc) = find() {
            return Ok(dsc);
        }
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut fetch = self.command("apt-get");
        fetch
            .args(["-q", "source", "--download-only", name])
            .current_dir(dir);
        process::run(&mut fetch).map_err(|error| fail("source download", format!("{error}")))?;
        find().ok_or_else(|| {
            fail(
                "source download",
                format!("no {name} .dsc in {}", dir.display()),
            )
        })
    }
}

/// The package names of a `Depends:` field (first alternative of each, no versions).
pub(crate) fn depends_of(stanza: &str) -> Vec<String> {
    let Some(field) = stanza
        .lines()
        .find_map(|line| line.strip_prefix("Depends:"))
    else {
        return Vec::new();
    };
    field
        .split(',')
        .filter_map(|item| {
            let first = item.split('|').next()?.trim();
            let name = first.split([' ', '(', ':']).next()?.trim();
            (!name.is_empty()).then(|| name.to_owned())
        })
        .collect()
}

/// `dir/<package>_*.deb`, if downloaded before.
fn cached_deb(dir: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    let entries = std::fs::read_dir(dir).ok()?;
    entries.flatten().map(|entry| entry.path()).find(|path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        name.starts_with(&prefix) && name.ends_with(".deb")
    })
}

/// Unpacks `deb` into `dest` with `dpkg-deb -x` (no maintainer scripts, nothing registered).
pub(crate) fn unpack(deb: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|source| Error::Write {
        path: dest.to_path_buf(),
        source,
    })?;
    let mut command = Command::new("dpkg-deb");
    command.arg("-x").arg(deb).arg(dest);
    process::output(&mut command)
        .map(drop)
        .map_err(|error| fail("unpacking", format!("{error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_from_one_line_and_deb822_sources() {
        let one_line = "# comment\ndeb [arch=amd64] http://mirror.example/debian/ bookworm main\n";
        assert_eq!(
            mirror_in(one_line).as_deref(),
            Some("http://mirror.example/debian")
        );
        let deb822 = "Types: deb\nURIs: http://m.example/debian-security\nSuites: bookworm-security\n\n\
                      Types: deb\nURIs: http://m.example/debian\nSuites: bookworm bookworm-updates\n";
        assert_eq!(
            mirror_in(deb822).as_deref(),
            Some("http://m.example/debian")
        );
        assert_eq!(mirror_in("deb http://x/ubuntu jammy main"), None);
    }

    #[test]
    fn depends_keeps_first_alternatives_without_versions() {
        let stanza = "Package: linux-headers-6.1.0-50-amd64\nDepends: linux-headers-6.1.0-50-common (= 6.1.176-1), linux-kbuild-6.1 (>= 6.1.176-1), gcc-12:amd64 | foo\nSize: 1";
        assert_eq!(
            depends_of(stanza),
            [
                "linux-headers-6.1.0-50-common",
                "linux-kbuild-6.1",
                "gcc-12"
            ]
        );
        assert!(depends_of("Package: x").is_empty());
    }
}
