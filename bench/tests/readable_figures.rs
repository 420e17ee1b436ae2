//! Every bench's figures, drawn from a sample of the JSON it writes, pass the readability check
//! (`benchkit::plot::check`): no overlapping labels, none off the canvas, no floating-point
//! artefact, every series in the legend. The samples: whole runs in `tests/figure-samples/`
//! (its README says where each comes from), so the figures are as full as a real run's, and
//! the cut-down key samples of `tests/samples/` (`json_keys.rs`), so a run with a single record
//! per kind draws too.

use std::path::{Path, PathBuf};

use benchkit::plot::check::check_file;

/// The results files in `tests/<folder>` (fio's files left out).
fn json_in(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(folder);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.ends_with(".json") && !name.ends_with(".fio.json")
        })
        .collect();
    paths.sort();
    paths
}

fn samples() -> Vec<PathBuf> {
    json_in("figure-samples")
}

#[test]
fn every_bench_has_a_sample() {
    let stems: Vec<String> = samples()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for bench in [
        "device",
        "device-os",
        "dmapool",
        "fake-rw",
        "fake-rw-os",
        "linux",
        "linux-sense",
        "nbd",
        "numa",
        "sense-reserve",
    ] {
        assert!(stems.iter().any(|s| s == bench), "no sample for {bench}");
    }
}

#[test]
fn every_figure_reads() {
    let out = std::env::temp_dir().join(format!("bench-figures-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let mut failures = Vec::new();
    let whole = samples();
    for sample in whole.iter().chain(&json_in("samples")) {
        let stem = sample.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(sample).unwrap();
        let document = serde_json::from_str(&text).unwrap();
        let drawn = bench::figures::draw(&stem, &document, &out)
            .unwrap_or_else(|error| panic!("{}: {error}", sample.display()));
        let Some(drawn) = drawn else {
            // A file no bench draws (the breakdown) is fine among the key samples only.
            assert!(!whole.contains(sample), "{stem}: no bench draws it");
            continue;
        };
        assert!(!drawn.is_empty(), "{}: no figure", sample.display());
        for svg in drawn {
            for problem in check_file(&svg).unwrap() {
                failures.push(format!(
                    "{} ({}): {problem}",
                    svg.display(),
                    sample.display()
                ));
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
