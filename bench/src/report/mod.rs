//! `cargo xtask report`: the results pages under `docs/results/`, generated from the JSON the
//! benchmarks wrote under `target/bench/`, so every figure in the docs is one a run produced.
//!
//! One page per JSON file (`docs/results/<stem>.md`), opening with its figures (drawn again
//! from the JSON by [`crate::figures`], so they follow today's plotting code; the SVGs of a file
//! no bench draws are copied as the run wrote them), then the command, date, host,
//! accelerator, load averages and where the spread is shown, the conclusions the bench printed
//! and its tables. Pages of benches that were not
//! rerun are left as they are, and `docs/results/README.md` indexes every page. The output
//! depends only on the JSON and SVG files: the same input gives byte-identical pages. The run's
//! facts are read loosely (a missing one shows as "not recorded"); the results of a bench whose
//! records have a type are read into it, and one that does not read is an error naming the
//! file and the field; which array becomes which table is decided in one place, [`pages`].

mod markdown;
mod pages;

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use harness::error::{Error, Result};
use harness::workspace;

/// `cargo xtask report` options.
#[derive(Args, Debug)]
pub struct Options {
    /// Read the JSON (and SVG) from this folder (default: target/bench).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Write the pages into this folder (default: docs/results).
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
}

/// The index page's name inside the results folder.
pub const INDEX: &str = "README.md";

/// Runs the command: generates the pages and names each file written.
pub fn run(options: &Options) -> Result<()> {
    let from = match &options.from {
        Some(dir) => dir.clone(),
        None => workspace::target_dir().join("bench"),
    };
    let to = match &options.to {
        Some(dir) => dir.clone(),
        None => workspace::root().join("docs").join("results"),
    };
    let generated = generate(&from, &to)?;
    for skipped in &generated.skipped {
        println!("skipped {skipped}");
    }
    for path in &generated.written {
        println!("wrote {}", path.display());
    }
    if generated.pages == 0 {
        println!(
            "no benchmark JSON in {}: run a `cargo xtask bench …` first; the index was rewritten from the pages already there",
            from.display()
        );
    }
    Ok(())
}

/// What [`generate`] did.
#[derive(Debug, Default)]
pub struct Generated {
    /// Every file written (pages, plots, the index).
    pub written: Vec<PathBuf>,
    /// JSON files that are not benchmark result sets, with the reason.
    pub skipped: Vec<String>,
    /// How many pages were generated from JSON.
    pub pages: usize,
}

/// Writes a page for every benchmark JSON file in `from` into `to`, copies its plots, and
/// rewrites the index from every page in `to`.
pub fn generate(from: &Path, to: &Path) -> Result<Generated> {
    let mut generated = Generated::default();
    let files = sorted_entries(from)?;
    std::fs::create_dir_all(to).map_err(|source| Error::Write {
        path: to.to_path_buf(),
        source,
    })?;
    let stems: Vec<String> = files
        .iter()
        .filter_map(|name| name.strip_suffix(".json"))
        .filter(|stem| !stem.ends_with(".fio"))
        .map(str::to_owned)
        .collect();
    for stem in &stems {
        let path = from.join(format!("{stem}.json"));
        let text = read(&path)?;
        let document: Value = serde_json::from_str(&text).map_err(|error| Error::Report {
            path: path.clone(),
            reason: format!("not JSON: {error}"),
        })?;
        if !document.get("results").is_some_and(Value::is_array) {
            generated
                .skipped
                .push(format!("{}: no `results` array", path.display()));
            continue;
        }
        pages::check_typed(stem, &document).map_err(|error| Error::Report {
            path: path.clone(),
            reason: error.to_string(),
        })?;
        let plots = match crate::figures::draw(stem, &document, to)? {
            Some(drawn) => {
                let names = drawn
                    .iter()
                    .filter_map(|path| Some(path.file_name()?.to_str()?.to_owned()))
                    .collect();
                generated.written.extend(drawn);
                names
            }
            None => copy_plots(from, to, &plots_of(stem, &stems, &files), &mut generated)?,
        };
        let page = markdown::page(stem, &document, &plots);
        generated
            .written
            .push(write(to, &format!("{stem}.md"), &page)?);
        generated.pages += 1;
    }
    let index = markdown::index(&read_pages(to)?);
    generated.written.push(write(to, INDEX, &index)?);
    Ok(generated)
}

/// Copies the SVGs `plots` from `from` to `to` (a file no bench here draws keeps the plots
/// its run wrote) and returns their names.
fn copy_plots(
    from: &Path,
    to: &Path,
    plots: &[String],
    generated: &mut Generated,
) -> Result<Vec<String>> {
    for plot in plots {
        let target = to.join(plot);
        std::fs::copy(from.join(plot), &target).map_err(|source| Error::Write {
            path: target.clone(),
            source,
        })?;
        generated.written.push(target);
    }
    Ok(plots.to_vec())
}

/// The SVGs that belong to `stem`: `<stem>.svg` and `<stem>-<part>.svg`, unless a longer stem
/// of another JSON file claims the name (`fake-rw-host.svg` belongs to `fake-rw-host`).
fn plots_of(stem: &str, stems: &[String], files: &[String]) -> Vec<String> {
    let owner = |name: &str| {
        let base = name.strip_suffix(".svg")?;
        stems
            .iter()
            .filter(|s| base == s.as_str() || base.starts_with(&format!("{s}-")))
            .max_by_key(|s| s.len())
    };
    files
        .iter()
        .filter(|name| owner(name).is_some_and(|s| s == stem))
        .cloned()
        .collect()
}

/// The file names in `dir`, sorted (a missing folder has none).
fn sorted_entries(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// `(file name, text)` of every page in `dir` but the index, sorted by name.
fn read_pages(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut pages = Vec::new();
    for name in sorted_entries(dir)? {
        if name.ends_with(".md") && name != INDEX {
            let text = read(&dir.join(&name))?;
            pages.push((name, text));
        }
    }
    Ok(pages)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests;
