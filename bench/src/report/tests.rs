use serde_json::json;

use super::*;

/// A scratch folder under the target directory, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = workspace::target_dir().join("report-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn dmapool_document() -> Value {
    json!({
        "bench": "dmapool",
        "command": "cargo xtask bench dmapool --quick",
        "date": "2026-12-01 21:40:12 UTC",
        "load": {"start": [2.31, 1.2, 0.5], "end": [2.8, 1.3, 0.55]},
        "where": "host",
        "accel": null,
        "host": {"cpu": "Test CPU", "cpus": 2, "os": "linux"},
        "headlines": ["n=373959: legacy/scalable alloc 30×, free 1480×"],
        "results": [
            dmapool_record("scalable", 10.5, 5.4),
            dmapool_record("legacy|old", 16.0, 25.2),
        ],
    })
}

/// A host dmapool record as the bench writes it.
fn dmapool_record(impl_name: &str, alloc_ns_per_op: f64, free_ns_per_op: f64) -> Value {
    json!({
        "bench": "dmapool", "impl": impl_name, "n": 1000, "size": 128, "align": 16,
        "alloc_ns_per_op": alloc_ns_per_op, "free_ns_per_op": free_ns_per_op,
        "alloc_total_ms": 0.1, "free_total_ms": 0.2, "destroy_ms": 0.01, "pages": 32,
        "where": "host", "stat": "min", "reps": 3,
        "alloc_ns_per_op_median": alloc_ns_per_op, "free_ns_per_op_median": free_ns_per_op,
    })
}

fn setup(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let (from, to) = (dir.join("bench"), dir.join("results"));
    std::fs::create_dir_all(&from).unwrap();
    let text = serde_json::to_string_pretty(&dmapool_document()).unwrap();
    std::fs::write(from.join("dmapool.json"), text).unwrap();
    std::fs::write(from.join("dmapool.svg"), "<svg/>").unwrap();
    std::fs::write(from.join("dmapool.fio.json"), "{}").unwrap();
    std::fs::write(from.join("soak.json"), r#"{"minutes": 1}"#).unwrap();
    (from, to)
}

fn contents(dir: &Path) -> Vec<(String, String)> {
    sorted_entries(dir)
        .unwrap()
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            (name, text)
        })
        .collect()
}

#[test]
fn the_same_json_gives_the_same_pages() {
    let (from, to) = setup("twice");
    generate(&from, &to).unwrap();
    let first = contents(&to);
    // A later second and fresh file times must not show in the pages (a page that printed the
    // clock or a file's mtime would differ).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let text = std::fs::read(from.join("dmapool.json")).unwrap();
    std::fs::write(from.join("dmapool.json"), text).unwrap();
    generate(&from, &to).unwrap();
    assert_eq!(first, contents(&to));
    let names: Vec<&str> = first.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["README.md", "dmapool.md", "dmapool.svg"]);
}

#[test]
fn a_page_says_how_when_and_where_its_figures_were_made() {
    let (from, to) = setup("facts");
    let generated = generate(&from, &to).unwrap();
    assert_eq!(generated.pages, 1);
    assert_eq!(generated.skipped.len(), 1, "soak.json has no results array");
    let page = std::fs::read_to_string(to.join("dmapool.md")).unwrap();
    for expected in [
        "| command | `cargo xtask bench dmapool --quick` |",
        "| date | 2026-12-01 21:40:12 UTC |",
        "| host | Test CPU, 2 CPUs, linux |",
        "| load average (1, 5, 15 min) | 2.31 / 1.20 / 0.50 at the start, 2.80 / 1.30 / 0.55 at the end |",
        "- n=373959: legacy/scalable alloc 30×, free 1480×",
        "| bench | impl | n | size | align | alloc ns/op | free ns/op |",
        "| dmapool | legacy\\|old | 1000 | 128 | 16 | 16.00 | 25.20 |",
        "![dmapool.svg](dmapool.svg)",
        "](../benchmarks.md#dmapool)",
    ] {
        assert!(
            page.contains(expected),
            "{expected:?} missing from:\n{page}"
        );
    }
    std::fs::write(to.join("notes.md"), "# Notes by hand\n\nMeasured then.\n").unwrap();
    generate(&from, &to).unwrap();
    let index = std::fs::read_to_string(to.join(INDEX)).unwrap();
    assert!(
        index.contains(
            "| [dmapool: results (host)](dmapool.md) | 2026-12-01 21:40:12 UTC | **loaded**: timings not publishable |"
        ),
        "{index}"
    );
    assert!(index.contains("\n- [Notes by hand](notes.md)\n"), "{index}");
    assert!(!index.contains("| [Notes by hand]"), "{index}");
}

#[test]
fn a_page_opens_with_its_figure_and_says_when_the_host_was_loaded() {
    let (from, to) = setup("opens");
    generate(&from, &to).unwrap();
    let page = std::fs::read_to_string(to.join("dmapool.md")).unwrap();
    let lines: Vec<&str> = page.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines[1].starts_with("# dmapool: results"), "{page}");
    // Load 2.31 at the start on 2 CPUs: loaded.
    assert!(lines[2].starts_with("> **Measured on a loaded host** (load average 2.31"));
    assert_eq!(lines[3], "![dmapool.svg](dmapool.svg)");
    assert!(
        lines[4].starts_with(crate::questions::question("dmapool")),
        "{page}"
    );
    // The figure is drawn from the JSON, with the question as its title.
    let svg = std::fs::read_to_string(to.join("dmapool.svg")).unwrap();
    assert!(svg.contains("How much faster is a dmapool"), "{svg}");
    let mut quiet = dmapool_document();
    quiet["load"]["start"] = json!([0.4, 0.3, 0.2]);
    std::fs::write(from.join("dmapool.json"), quiet.to_string()).unwrap();
    generate(&from, &to).unwrap();
    let page = std::fs::read_to_string(to.join("dmapool.md")).unwrap();
    assert!(!page.contains("loaded host"), "{page}");
}

/// With the settle windows recorded, the other processes' CPU decides, not the load average
/// (which counts the bench's own QEMU): quiet when both windows stayed below half a core.
#[test]
fn the_settle_windows_decide_whether_a_run_was_quiet() {
    let (from, to) = setup("settle");
    let page_for = |start: Value, end: Value| {
        let mut document = dmapool_document();
        // A load average that the older rule would call loaded.
        document["load"]["start"] = json!([3.5, 3.0, 2.0]);
        document["quiet"] =
            json!({"settle_s": 3.0, "others_cores_start": start, "others_cores_end": end});
        std::fs::write(from.join("dmapool.json"), document.to_string()).unwrap();
        generate(&from, &to).unwrap();
        let index = std::fs::read_to_string(to.join(INDEX)).unwrap();
        (
            std::fs::read_to_string(to.join("dmapool.md")).unwrap(),
            index,
        )
    };
    let (page, index) = page_for(json!(0.1), json!(0.2));
    assert!(!page.contains("loaded host"), "{page}");
    assert!(index.contains("| quiet |"), "{index}");
    let (page, index) = page_for(json!(0.1), json!(0.75));
    assert!(
        page.contains("other processes used 0.10 host cores before the run and 0.75 after it"),
        "{page}"
    );
    assert!(index.contains("**loaded**"), "{index}");
    let (page, _) = page_for(Value::Null, json!(0.1));
    assert!(page.contains("not measured host cores before"), "{page}");
}

#[test]
fn old_json_without_date_or_load_says_so() {
    let (from, to) = setup("old");
    let mut document = dmapool_document();
    let object = document.as_object_mut().unwrap();
    object.remove("date");
    object.remove("load");
    object.remove("headlines");
    std::fs::write(from.join("dmapool.json"), document.to_string()).unwrap();
    generate(&from, &to).unwrap();
    let page = std::fs::read_to_string(to.join("dmapool.md")).unwrap();
    assert!(page.contains("| date | not recorded |"), "{page}");
    assert!(page.contains("| load average (1, 5, 15 min) | not recorded |"));
}

#[test]
fn garbage_json_is_an_error_naming_the_file() {
    let (from, to) = setup("garbage");
    std::fs::write(from.join("broken.json"), "{\"results\": [").unwrap();
    let error = generate(&from, &to).unwrap_err().to_string();
    assert!(
        error.contains("broken.json") && error.contains("not JSON"),
        "{error}"
    );
}

#[test]
fn plots_go_to_the_longest_matching_stem() {
    let stems = ["fake-rw".to_owned(), "fake-rw-host".to_owned()];
    let files = [
        "fake-rw-host.svg".to_owned(),
        "fake-rw.svg".to_owned(),
        "fake-rw-extra.svg".to_owned(),
    ];
    assert_eq!(
        plots_of("fake-rw", &stems, &files),
        ["fake-rw.svg", "fake-rw-extra.svg"]
    );
    assert_eq!(
        plots_of("fake-rw-host", &stems, &files),
        ["fake-rw-host.svg"]
    );
}

/// A record of a bench with a type reads as that type: one that lacks a field stops the report
/// with an error naming the file and the field, rather than a page of empty cells.
#[test]
fn a_record_that_does_not_read_as_its_type_is_named() {
    let (from, to) = setup("typed");
    let mut document = dmapool_document();
    document["results"][1]
        .as_object_mut()
        .unwrap()
        .remove("free_ns_per_op");
    std::fs::write(from.join("dmapool.json"), document.to_string()).unwrap();
    let error = generate(&from, &to).unwrap_err().to_string();
    assert!(
        error.contains("dmapool.json") && error.contains("free_ns_per_op"),
        "{error}"
    );
}
