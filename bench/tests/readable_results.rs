//! Every figure under `docs/results/` passes the readability check
//! (`benchkit::plot::check`): no overlapping labels, none off the canvas, no floating-point
//! artefact, every series in the legend.

use std::path::Path;

use benchkit::plot::check::check_file;

#[test]
fn committed_figures_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
    let mut failures = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "svg") {
            continue;
        }
        seen += 1;
        for problem in check_file(&path).unwrap() {
            failures.push(format!("{}: {problem}", path.display()));
        }
    }
    assert!(seen > 0, "no SVG under {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
