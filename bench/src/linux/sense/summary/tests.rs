use super::*;

/// A window of `mode` in `round` with `n` commands: counted with `insns` (and misses), or timed
/// with `ns`.
fn window(mode: &str, round: u64, n: u64, insns: Option<u64>, ns: u64) -> Window {
    Window {
        stack: "Linux 6.12".into(),
        config: "default".into(),
        counted: insns.is_some(),
        line: SenseCostResult {
            mode: mode.into(),
            round,
            n,
            hosts: 1,
            cpus: 1,
            ns,
            ring_slabs: Some(1),
            offslab_frees: Some(if mode == "slab" { 1699 } else { 0 }),
            probe: Some(3200),
            ..SenseCostResult::default()
        },
        window_insns: insns,
        window_l1d_misses: insns.map(|_| if round % 2 == 0 { 103 } else { 111 }),
        window_l2_misses: insns.map(|_| 0),
        host_load: 6.2,
    }
}

/// The counts of a 6.12 boot (2026-12-03): static and slab, two pairs each, and two timed
/// rounds of slab.
fn windows() -> Vec<Window> {
    vec![
        window("static", 0, 20_000, Some(820_063), 0),
        window("static", 1, 10_000, Some(410_063), 0),
        window("slab", 0, 20_000, Some(5_590_410), 0),
        window("slab", 1, 10_000, Some(2_800_410), 0),
        window("slab", 2, 20_000, Some(5_590_410), 0),
        window("slab", 3, 10_000, Some(2_800_410), 0),
        window("slab", 0, 200_000, None, 105_664_662),
        window("slab", 1, 100_000, None, 82_924_149),
    ]
}

#[test]
fn a_count_per_command_is_the_difference_of_two_rounds() {
    let rows = rows(&windows(), &|_| Some(5948.0));
    let slab = rows.iter().find(|r| r.mode == "slab").unwrap();
    assert_eq!(slab.insns_per_cmd, Some(279.0));
    assert_eq!(
        (slab.insns_min, slab.insns_max, slab.pairs),
        (Some(279.0), Some(279.0), 2)
    );
    assert_eq!(slab.fixed_insns, Some(10_410.0), "the window's own part");
    // The misses did not grow with the commands: a slope below zero, kept.
    assert_eq!(slab.l1d_per_cmd, Some(-0.0008));
    assert_eq!(slab.l2_per_cmd, Some(0.0));
    assert_eq!(slab.commands, 60_000);
    assert_eq!(
        slab.offslab_pct,
        Some(53.1),
        "1699 of 3200 frees off the active slab"
    );
}

#[test]
fn time_is_the_median_of_the_timed_rounds_only() {
    let rows = rows(&windows(), &|_| None);
    let slab = rows.iter().find(|r| r.mode == "slab").unwrap();
    // 528.3 and 829.2 ns per command: the mean of the two middle values.
    assert_eq!(slab.ns_per_cmd, Some(678.8));
    assert_eq!((slab.ns_min, slab.ns_max), (Some(528.3), Some(829.2)));
    let stat = rows.iter().find(|r| r.mode == "static").unwrap();
    assert_eq!(
        stat.ns_per_cmd, None,
        "a counted boot's time is not a timing"
    );
}

#[test]
fn added_cost_is_over_static_and_a_share_of_the_stacks_own_io() {
    let rows = rows(&windows(), &|stack| {
        (stack == "Linux 6.12").then_some(5948.0)
    });
    let slab = rows.iter().find(|r| r.mode == "slab").unwrap();
    assert_eq!(slab.added_insns, Some(238.0));
    assert_eq!(slab.added_pct_of_io, Some(4.0));
    // The thread's measure: 5948 / (5948 + 238) of the static kernel's throughput.
    assert_eq!(slab.pct_of_static, Some(96.2));
    assert_eq!(slab.seed_pct, Some(99.3));
    let stat = rows.iter().find(|r| r.mode == "static").unwrap();
    assert_eq!(
        (stat.added_insns, stat.pct_of_static),
        (Some(0.0), Some(100.0))
    );
}

#[test]
fn without_static_or_a_partner_round_nothing_is_invented() {
    let lonely = vec![
        window("slab", 0, 20_000, Some(5_590_410), 0),
        window("mempool:2", 0, 20_000, Some(7_292_470), 0),
        window("mempool:2", 1, 20_000, Some(7_292_470), 0),
    ];
    let rows = rows(&lonely, &|_| Some(5948.0));
    assert!(rows.iter().all(|r| r.insns_per_cmd.is_none()), "{rows:?}");
    assert!(rows.iter().all(|r| r.added_insns.is_none()));
}
