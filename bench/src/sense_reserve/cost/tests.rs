use super::*;

fn row(
    slab: &str,
    mode: &str,
    machine: (u64, u64, u64),
    pinned: (u64, u64),
) -> SenseReserveCostRecord {
    let (hosts, hw_queues, can_queue) = machine;
    Run::new(SenseReserveCostResult {
        bench: "sense-reserve-cost".into(),
        place: "host".into(),
        sense_slab: slab.into(),
        sense_mode: mode.into(),
        hosts,
        hw_queues,
        can_queue,
        iodepth: 32,
        stride_bytes: 128,
        objects_per_slab: 32,
        per_queue_pinned_bytes: pinned.0,
        host_tagset_pinned_bytes: pinned.1,
        per_queue_reserve_objects: 2,
        per_queue_reserve_bytes: 4096,
        ..SenseReserveCostResult::default()
    })
}

#[test]
fn sizes_read_in_decimal_units() {
    assert_eq!(readable(0), "0 B");
    assert_eq!(readable(999), "999 B");
    assert_eq!(readable(4096), "4.1 kB");
    assert_eq!(readable(21_207_465_984), "21.2 GB");
}

#[test]
fn a_table_per_slab_a_row_per_machine_two_figures_per_mode() {
    let rows = [
        row("slab", "pertag", (1, 1, 128), (16_384, 16_384)),
        row("slab", "mempool:2", (1, 1, 128), (8192, 8192)),
        row(
            "slab",
            "pertag",
            (256, 64, 10107),
            (21_207_465_984, 331_218_944),
        ),
        row("slub", "pertag", (1, 1, 128), (16_384, 16_384)),
    ];
    let tables = tables(&rows);
    assert_eq!(tables.len(), 2);
    let slab: Vec<&str> = tables[0].lines().collect();
    assert!(slab[0].starts_with("sense_slab=slab"));
    assert!(slab[1].contains("pertag") && slab[1].contains("mempool:2"));
    assert!(slab[2].contains("1 × 1 × 128") && slab[2].contains("16.4 kB / 16.4 kB"));
    assert!(slab[3].contains("21.2 GB / 331.2 MB") && slab[3].trim_end().ends_with('-'));
    let headlines = headlines(&rows);
    assert!(
        headlines[0].contains("256 hosts × 64 queues × 10107 tags")
            && headlines[0].contains("pertag 21.2 GB / 331.2 MB"),
        "{headlines:?}"
    );
}

#[test]
fn a_record_that_does_not_match_the_type_names_the_field() {
    let mut record = serde_json::to_value(row("slab", "slab", (1, 1, 128), (4096, 4096))).unwrap();
    record["hosts"] = serde_json::json!("many");
    let error = harness::typed::from_record::<SenseReserveCostRecord>(&record, "cost").unwrap_err();
    assert!(error.to_string().contains("hosts"), "{error}");
}
