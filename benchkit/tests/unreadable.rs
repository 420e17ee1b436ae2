//! The readability check on figures the benches really wrote and a reader could not read
//! (`tests/unreadable/README.md` says where each comes from): it must name what is wrong.

use std::path::Path;

use benchkit::plot::check::{Problem, check_file};

fn problems(name: &str) -> Vec<Problem> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/unreadable")
        .join(name);
    check_file(&path).unwrap()
}

#[test]
fn the_linux_figure_of_2026_12_02_fails() {
    let problems = problems("linux-2026-12-02.svg");
    let overlaps = problems
        .iter()
        .filter(|p| matches!(p, Problem::Overlap { .. }))
        .count();
    assert!(overlaps >= 5, "{problems:#?}");
    assert!(
        problems.iter().any(|p| matches!(
            p,
            Problem::OffCanvas { label } if label.starts_with("scsi_debug")
        )),
        "{problems:#?}"
    );
}

#[test]
fn the_device_figure_with_float_ticks_fails() {
    let problems = problems("device-2026-12-03.svg");
    for tick in ["1.5999999999999999", "1.7999999999999998"] {
        assert!(
            problems.contains(&Problem::FloatArtefact { label: tick.into() }),
            "{problems:#?}"
        );
        assert!(
            problems.contains(&Problem::OffCanvas { label: tick.into() }),
            "{problems:#?}"
        );
    }
}
