use super::super::matrix::tests::{failed, measured};
use super::*;
use harness::guest::Os;
use matrix::IO_MODES;

#[test]
fn the_summary_row_has_medians_spread_and_run_counts() {
    let cell = Cell {
        os: harness::guest::Os::Ours,
        device: Device::Mptsas,
        io_mode: IoMode::Poll,
        iodepth: 1,
        numjobs: 1,
    };
    let mut runs = Vec::new();
    for (round, iops, p99_ns, cpus) in [
        (0, 100, 20000, 1.0),
        (1, 300, 40000, 1.2),
        (2, 200, 10000, 1.1),
    ] {
        let mut run = measured(&cell, round, iops);
        if let DeviceRun::Measured(record) = &mut run {
            record.result.io.lat_p99_ns = p99_ns;
            record.qemu_host_cpus = Some(cpus);
        }
        runs.push(run);
    }
    runs.push(failed(&cell, 3));
    let row = summary(&runs, &cell);
    let iops = row.iops.as_ref().unwrap();
    assert_eq!(iops.iops, 200.0);
    assert_eq!(iops.iops_spread, "100-300");
    assert_eq!(row.lat_p99_us, Some(20.0));
    assert_eq!(row.qemu_host_cpus, Some(1.1));
    assert_eq!(row.runs, "3/4");
    let none = summary(&[failed(&cell, 0)], &cell);
    assert_eq!(
        (none.iops, none.busy_pct, none.runs.as_str()),
        (None, None, "0/1")
    );
}

/// A summary row with every figure measured: one counted run at irq qd32, two jobs.
fn counted_row() -> CellSummary {
    let cell = Cell {
        os: harness::guest::Os::Ours,
        device: Device::VirtioScsi,
        io_mode: IoMode::Irq,
        iodepth: 32,
        numjobs: 2,
    };
    let mut run = measured(&cell, 0, 1000);
    if let DeviceRun::Measured(record) = &mut run {
        record.qemu_host_cpus = Some(1.5);
        record.result.io.ios = 1000;
        record.insns = harness::insns::InsnFigures {
            insns_per_op: Some(700.0),
            insns_waiting_per_op: Some(30.0),
            notifies_per_op: Some(0.5),
            mmio_per_op: Some(1.0),
            mmio_waiting_per_op: Some(2.0),
            pio_per_op: Some(0.0),
            pio_waiting_per_op: Some(0.25),
            ..Default::default()
        };
    }
    summary(&[run], &cell)
}

/// A column whose key is no field of the summary row would print an empty cell forever.
#[test]
fn every_column_names_a_field_of_the_summary_row() {
    let row = counted_row();
    assert_eq!(row.insns_per_op, Some(700.0));
    assert_eq!(row.insns_waiting_per_op, Some(30.0));
    assert_eq!(row.device_accesses_per_op, Some(3.25));
    assert_eq!(row.irqs_per_op, Some(0.0));
    let row = benchkit::table::fields(&row);
    for column in columns() {
        assert!(row.contains_key(column.key), "column `{}`", column.key);
    }
}

/// The other way round: a figure the summary row (and so the JSON) has but no column shows
/// is missing from the printed table, as the working instructions per I/O once were.
#[test]
fn every_figure_of_the_summary_row_has_a_column() {
    // Shown otherwise: the IOPS range is the `iops_spread` column; smp is the whole run's.
    let shown_otherwise = ["iops_min", "iops_max", "smp"];
    let columns = columns();
    for key in benchkit::table::fields(&counted_row()).keys() {
        assert!(
            shown_otherwise.contains(&key.as_str()) || columns.iter().any(|c| c.key == key),
            "the summary's `{key}` has no column in the printed table"
        );
    }
}

/// A record as `target/bench/device.json` holds it (the guest's line with the histogram
/// in the older `floor:count` text, the cell's tag, the round) reads; without a field it
/// does not, and the error names the field.
#[test]
fn an_older_record_reads_and_a_missing_field_is_named() {
    let cell = Cell {
        os: harness::guest::Os::Ours,
        device: Device::VirtioScsi,
        io_mode: IoMode::Poll,
        iodepth: 1,
        numjobs: 1,
    };
    let DeviceRun::Measured(record) = measured(&cell, 2, 777) else {
        unreachable!()
    };
    let mut fields = serde_json::to_value(&record).unwrap();
    fields["lat_bins"] = Value::from("900:1,1500:2");
    fields["position"] = Value::from(5);
    let run = DeviceRun::read(&fields).unwrap();
    assert!(cell.matches(&run));
    assert_eq!(
        run.measured().map(|r| (r.round, r.result.io.iops)),
        Some((2, 777))
    );
    fields.as_object_mut().unwrap().remove("lat_p99_ns");
    let error = DeviceRun::read(&fields).unwrap_err().to_string();
    assert!(error.contains("lat_p99_ns"), "{error}");
}

/// A cell Hermit refused reads "not supported on hermit" in its row, not 0/1; its partner on
/// our kernel is measured as usual; a Hermit cell that ran gives hermit / ours ratios within a
/// round, instructions included.
#[test]
fn kernels_side_by_side_with_a_refused_cell() {
    let ours = Cell {
        os: Os::Ours,
        device: Device::VirtioScsi,
        io_mode: IoMode::Poll,
        iodepth: 32,
        numjobs: 1,
    };
    let hermit = ours.on(Os::Hermit);
    let irq = ours.with(IoMode::Irq, 1);
    let counted = |cell: &Cell, round, iops, insns| {
        let mut run = measured(cell, round, iops);
        if let DeviceRun::Measured(record) = &mut run {
            record.insns.insns_per_op = Some(insns);
        }
        run
    };
    let mut refusal = failed(&irq.on(Os::Hermit), 0);
    if let DeviceRun::Failed(failure) = &mut refusal {
        failure.error = format!(
            "guest failed: CMDLINE ERROR: key 'io_mode': bad value 'irq': {}",
            protocol::NOT_SUPPORTED
        );
    }
    let runs = vec![
        counted(&ours, 0, 1000, 500.0),
        counted(&hermit, 0, 800, 550.0),
        counted(&ours, 1, 2000, 500.0),
        counted(&hermit, 1, 1000, 550.0),
        measured(&irq, 0, 900),
        refusal,
    ];
    let refused = summary(&runs, &irq.on(Os::Hermit));
    assert_eq!(refused.runs, "not supported on hermit");
    assert_eq!((refused.os, refused.iops), (Os::Hermit, None));
    assert_eq!(summary(&runs, &irq).runs, "1/1");
    let groups = matrix::groups(&[Device::VirtioScsi], &IO_MODES, &[Os::Ours, Os::Hermit]);
    let ratios = kernel_ratios(&runs, &groups);
    let entry = |of: &str| {
        ratios
            .iter()
            .map(|(_, entry)| entry)
            .find(|e| e.ratio == "hermit / ours, virtio-scsi poll qd32 j1" && e.of == of)
            .unwrap_or_else(|| panic!("no {of} ratio in {ratios:?}"))
    };
    let iops = entry("IOPS");
    assert_eq!((iops.min, iops.max, iops.rounds), (0.5, 0.8, 2));
    assert!((entry("working insns/IO").median - 1.1).abs() < 1e-12);
    assert!(
        ratios.iter().all(|(_, e)| !e.ratio.contains("irq")),
        "no ratio for a refused cell"
    );
}
