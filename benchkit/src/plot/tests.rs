//! Every shape, drawn with labels as long and values as awkward as the benches give it, must
//! pass the readability check.

use super::*;

/// A scratch folder for one test's SVGs; `KEEP_PLOTS=dir` keeps them there to look at.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = match std::env::var_os("KEEP_PLOTS") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("benchkit-plot-{}-{name}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn readable(path: &Path) -> String {
    let problems = check::check_file(path).unwrap();
    assert!(problems.is_empty(), "{}: {problems:#?}", path.display());
    std::fs::read_to_string(path).unwrap()
}

fn spread(value: f64) -> Option<Bar> {
    Some(Bar {
        value,
        min: value * 0.8,
        max: value * 1.15,
    })
}

#[test]
fn log_log_lines_read() {
    let dir = scratch("lines");
    let series = |label: &str, color, dashed, slope: f64| Series {
        label: label.into(),
        points: [1000.0, 4000.0, 16000.0, 373_959.0]
            .iter()
            .map(|&n: &f64| (n, 20.0 * (n / 1000.0).powf(slope)))
            .collect(),
        spread: vec![(1000.0, 18.0, 25.0)],
        color,
        dashed,
    };
    let chart = LineChart {
        title: "How does the time per alloc and free grow with the blocks in use?".into(),
        subtitle: "dmapool, 128 B blocks, align 16, host".into(),
        x_label: "blocks live at once (n)".into(),
        y_label: "time per operation, ns".into(),
        series: vec![
            series("legacy alloc", 0, false, 1.0),
            series("legacy free", 0, true, 1.3),
            series("scalable alloc", 1, false, 0.0),
            series("scalable free", 1, true, 0.05),
        ],
        spread: "min–median of 5 repetitions".into(),
    };
    let path = dir.join("line.svg");
    draw_log_log(&path, &chart).unwrap();
    assert!(readable(&path).contains("legacy free"));
}

#[test]
fn bars_with_long_labels_read() {
    let dir = scratch("bars");
    let bars = BarChart {
        title: "t".into(),
        y_label: "IOPS".into(),
        bars: vec![
            (
                "scsi_debug randread bs=4096 qd32 j1 libaio vs 6.1".into(),
                41.9,
            ),
            (
                "dmapool n=373959 pages (sensepool scalable) vs 6.12".into(),
                1393.0,
            ),
            ("mempool:2".into(), 0.002),
        ],
    };
    let path = dir.join("bars.svg");
    draw_bars(&path, &bars).unwrap();
    assert!(readable(&path).contains("mempool:2"));
}

#[test]
fn ratio_bars_on_a_log_axis_read() {
    let dir = scratch("hbars");
    let row = |label: &str, a: f64, b: f64| BarRow {
        label: label.into(),
        bars: vec![spread(a), spread(b)],
    };
    let chart = HBars {
        header: Header {
            title: "How many times faster than stock Linux is sensepool on the same case?".into(),
            subtitle: "guest (tcg), medians".into(),
        },
        axis: "sensepool advantage, × (log scale)".into(),
        log: true,
        baseline: Some(Baseline { value: 1.0 }),
        series: vec!["vs Linux 6.1".into(), "vs Linux 6.12".into()],
        groups: vec![
            RowGroup {
                name: "fake_rw (scsi_debug), IOPS".into(),
                rows: vec![
                    row("4k qd32 j1 libaio", 46.2, 41.9),
                    row("512 qd32 j2", 132.0, 56.6),
                ],
            },
            RowGroup {
                name: "dmapool n=373959, time".into(),
                rows: vec![
                    BarRow {
                        label: "free, sensepool legacy".into(),
                        bars: vec![spread(0.816), spread(0.0022)],
                    },
                    BarRow {
                        label: "free, sensepool scalable".into(),
                        bars: vec![spread(1393.0), None],
                    },
                ],
            },
        ],
        spread: "min–max of 3 repetitions".into(),
        value_suffix: Some("×".into()),
    };
    let path = dir.join("hbars.svg");
    draw_hbars(&path, &chart).unwrap();
    let svg = readable(&path);
    assert!(svg.contains("1393×") && svg.contains("0.00220×") && svg.contains("not measured"));
}

#[test]
fn grouped_columns_read() {
    let dir = scratch("grouped");
    let grouped = GroupedBars {
        title: "Which io_mode gives the most IOPS for the CPU it costs?".into(),
        subtitle: "randread 4 KiB".into(),
        groups: [
            "virtio qd1 j1",
            "virtio qd32 j2",
            "mpt qd1 j1",
            "mpt qd32 j2",
        ]
        .map(String::from)
        .to_vec(),
        series: vec!["poll".into(), "irq".into(), "hybrid".into()],
        panels: vec![
            Panel {
                y_label: "IOPS".into(),
                bars: vec![vec![spread(10.0), spread(8.0), spread(9.0)]; 4],
                log: false,
            },
            Panel {
                y_label: "QEMU host CPUs".into(),
                bars: vec![vec![spread(1.6), spread(1.9), spread(0.8)]; 4],
                log: true,
            },
            Panel {
                y_label: "guest busy, %".into(),
                bars: vec![vec![None, None, None]; 4],
                log: false,
            },
        ],
        spread: "min–max of rounds".into(),
    };
    let path = dir.join("grouped.svg");
    draw_grouped(&path, &grouped).unwrap();
    let svg = readable(&path);
    assert!(svg.contains("mpt qd32 j2") && svg.contains("hybrid"));
    assert!(
        svg.lines().any(|line| line.trim() == "0.1"),
        "the log panel labels its lowest decade"
    );
    assert!(
        svg.contains("guest busy, %: not reported"),
        "an empty panel says so"
    );
}

#[test]
fn grids_and_small_multiples_read() {
    let dir = scratch("grid");
    let cell = |text: &str, detail: &str, rgb| {
        Some(GridCell {
            text: text.into(),
            detail: detail.into(),
            rgb,
        })
    };
    let grid = Grid {
        title: "IOPS relative to slab".into(),
        subtitle: String::new(),
        rows: vec!["none".into(), "eh:reuse+batch".into()],
        columns: vec![
            "slab".into(),
            "mempool:16".into(),
            "a very long mode name".into(),
        ],
        cells: vec![
            vec![
                cell("1.00×", "", (240, 240, 240)),
                cell("0.93×", "0.90–0.95", (250, 200, 170)),
                None,
            ],
            vec![
                cell("STALL 501ms", "", (220, 220, 220)),
                cell("1.20×", "1.10–1.31", (170, 200, 230)),
                None,
            ],
        ],
        key: vec![
            GridCell {
                text: "0.5×".into(),
                detail: String::new(),
                rgb: (250, 200, 170),
            },
            GridCell {
                text: "2×".into(),
                detail: String::new(),
                rgb: (170, 200, 230),
            },
        ],
    };
    let path = dir.join("grid.svg");
    draw_grid(&path, &grid).unwrap();
    assert!(readable(&path).contains("0.90–0.95"));
    let categories: Vec<String> = ["slab", "mempool:1", "mempool:16", "prealloc", "backup"]
        .map(String::from)
        .to_vec();
    let panel = |name: &str| SmallPanel {
        name: name.into(),
        points: vec![
            Point::Missing,
            Point::Value(spread(12_000.0).unwrap()),
            Point::Value(spread(310_000.0).unwrap()),
            Point::Absent,
            Point::Value(Bar::single(90_000.0)),
        ],
    };
    let chart = Multiples {
        header: Header {
            title: "Which reserve keeps IOPS up under each kind of pressure?".into(),
            subtitle: String::new(),
        },
        y_axis: "IOPS (log scale)".into(),
        log: true,
        categories,
        panels: [
            "none",
            "fail:0.01",
            "eh:reuse+batch",
            "shared+batch",
            "errors",
        ]
        .map(panel)
        .to_vec(),
        per_row: 4,
        value: "median IOPS".into(),
        spread: "min–max of 7 rounds".into(),
        missing: "STALL or LIVELOCK: no IOPS".into(),
    };
    let path = dir.join("multiples.svg");
    draw_multiples(&path, &chart).unwrap();
    assert!(readable(&path).contains("shared+batch"));
}

#[test]
fn a_panel_goes_logarithmic_only_when_its_values_span_decades() {
    let bars = |values: &[f64]| -> Vec<Vec<Option<Bar>>> {
        vec![
            values
                .iter()
                .map(|&v| Some(Bar::single(v)))
                .chain([None])
                .collect(),
        ]
    };
    let wide = Panel::fitted("waiting instructions per I/O", bars(&[0.0, 12.0, 39000.0]));
    assert!(wide.log);
    assert_eq!(wide.y_label, "waiting instructions per I/O (log scale)");
    let narrow = Panel::fitted("IOPS", bars(&[0.0, 1200.0, 110000.0]));
    assert!(
        !narrow.log,
        "within two decades (zero aside) the axis stays linear"
    );
    assert_eq!(narrow.y_label, "IOPS");
    assert!(!Panel::fitted("none", bars(&[])).log);
}
