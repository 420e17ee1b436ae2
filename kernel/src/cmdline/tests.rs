use super::*;
use alloc::vec;
use proptest::prelude::*;

const TESTS: &[&str] = &["boot", "heap-stress", "fault-pf"];

fn parse(line: &str) -> Result<Cmdline, CmdlineError> {
    Cmdline::parse(line, TESTS)
}

#[test]
fn empty_line_is_the_default_short_dmapool_run() {
    assert_eq!(parse("").unwrap(), Cmdline::default());
    assert_eq!(parse("  \t ").unwrap(), Cmdline::default());
    let default = Cmdline::default();
    assert_eq!(default.workload, Workload::Dmapool);
    assert_eq!(default.pool_impl, PoolImpl::Scalable);
    assert_eq!(default.n, MPT3SAS_CHAIN_BLOCKS);
}

#[test]
fn every_known_key_is_applied() {
    let c =
        parse("workload=none n=1000 size=96 align=64 impl=both test=boot,fault-pf loglevel=debug")
            .unwrap();
    assert_eq!(c.workload, Workload::None);
    assert_eq!((c.n, c.size, c.align), (1000, 96, 64));
    assert_eq!(c.pool_impl, PoolImpl::Both);
    assert_eq!(
        c.tests,
        Some(TestSelection::Named(vec!["boot".into(), "fault-pf".into()]))
    );
    assert_eq!(c.loglevel, log::LevelFilter::Debug);
    assert_eq!(parse("test=all").unwrap().tests, Some(TestSelection::All));
    assert_eq!(parse("loglevel=0").unwrap().loglevel, log::LevelFilter::Off);
    let smp = parse("maxcpus=2 smp_inject=ap-no-stack").unwrap();
    assert_eq!(
        (smp.maxcpus, smp.smp_inject),
        (Some(2), SmpInject::ApNoStack)
    );
    assert!(parse("maxcpus=0").is_err());
    assert!(parse("maxcpus=65").is_err());
    assert!(parse("smp_inject=yes").is_err());
    let numa = parse("workload=numa dmapool=per-node").unwrap();
    assert_eq!(
        (numa.workload, numa.dmapool),
        (Workload::Numa, Some(DmapoolMode::PerNode))
    );
    assert_eq!(
        parse("dmapool=shared").unwrap().dmapool,
        Some(DmapoolMode::Shared)
    );
    assert!(
        parse("dmapool=numa")
            .unwrap_err()
            .to_string()
            .starts_with("key 'dmapool'")
    );
}

#[test]
fn counts_take_hex_and_binary_suffixes() {
    assert_eq!(parse_count("bs", "4k", 0, u64::MAX), Ok(4096));
    assert_eq!(parse_count("bs", "2M", 0, u64::MAX), Ok(2 << 20));
    assert_eq!(parse_count("bs", "1g", 0, u64::MAX), Ok(1 << 30));
    assert_eq!(parse_count("n", "0x10", 0, u64::MAX), Ok(16));
    assert!(parse_count("n", "k", 0, u64::MAX).is_err());
    assert!(parse_count("n", "-1", 0, u64::MAX).is_err());
    assert!(parse_count("n", "99999999999999999999", 0, u64::MAX).is_err());
    assert!(
        parse_count("n", "0xffffffffffffffffk", 0, u64::MAX).is_err(),
        "overflow on scaling"
    );
}

#[test]
fn bad_values_name_the_key_and_value() {
    let err = parse("n=banana").unwrap_err();
    assert!(
        matches!(&err, CmdlineError::BadValue { key, value, .. } if key == "n" && value == "banana")
    );
    let text = err.to_string();
    assert!(text.starts_with("key 'n': bad value 'banana'"), "{text}");

    assert!(matches!(
        parse("n=0").unwrap_err(),
        CmdlineError::BadValue { .. }
    ));
    assert!(matches!(
        parse("align=24").unwrap_err(),
        CmdlineError::BadValue { .. }
    ));
    assert!(matches!(
        parse("impl=fast").unwrap_err(),
        CmdlineError::BadValue { .. }
    ));
    assert!(
        parse("impl=fast")
            .unwrap_err()
            .to_string()
            .contains("legacy|scalable|both")
    );
    assert!(
        matches!(parse("test=nosuch").unwrap_err(), CmdlineError::BadValue { value, .. } if value == "nosuch")
    );
    assert!(matches!(
        parse("loglevel=9").unwrap_err(),
        CmdlineError::BadValue { .. }
    ));
}

#[test]
fn unknown_missing_and_duplicate_keys_are_errors() {
    let err = parse("bogus=1").unwrap_err();
    assert!(
        err.to_string().starts_with("key 'bogus': unknown key"),
        "{err}"
    );
    assert_eq!(
        parse("quiet").unwrap_err(),
        CmdlineError::MissingValue {
            key: "quiet".into()
        }
    );
    assert_eq!(
        parse("n=").unwrap_err(),
        CmdlineError::MissingValue { key: "n".into() }
    );
    assert!(matches!(
        parse("=5").unwrap_err(),
        CmdlineError::MissingValue { .. }
    ));
    assert_eq!(
        parse("n=1 n=2").unwrap_err(),
        CmdlineError::Duplicate { key: "n".into() }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_input_never_panics(line in ".{0,64}") {
        let _ = parse(&line);
    }

    #[test]
    fn arbitrary_words_over_known_keys_never_panic(
        words in proptest::collection::vec(
            ("(workload|n|size|align|impl|test|loglevel|maxcpus|smp_inject|x)", "[a-z0-9,xkKmMgG=-]{0,12}"), 0..6)
    ) {
        let line: Vec<String> = words.iter().map(|(k, v)| alloc::format!("{k}={v}")).collect();
        if let Err(err) = parse(&line.join(" ")) {
            prop_assert!(err.to_string().starts_with("key '"));
        }
    }

    #[test]
    fn counts_round_trip(value in 1u64..(1 << 24)) {
        prop_assert_eq!(parse(&alloc::format!("n={value}")).unwrap().n as u64, value);
        prop_assert_eq!(parse(&alloc::format!("n={value:#x}")).unwrap().n as u64, value);
    }
}

#[test]
fn storage_workloads_and_fio_words_are_accepted() {
    let c = parse("workload=verify seed=25306484737 sense=slab").unwrap();
    assert_eq!(c.workload, Workload::Verify);
    assert_eq!(c.io.job.seed, 25_306_484_737);
    assert_eq!(c.io.sense, scsi::sense_alloc::SenseMode::Slab);
    let d = parse("workload=device iodepth=32 bs=4k rw=randread ios=1000").unwrap();
    assert_eq!(
        (d.workload, d.io.job.iodepth, d.io.job.bs),
        (Workload::Device, 32, 4096)
    );
    assert_eq!(parse("workload=scan").unwrap().workload, Workload::Scan);
    let err = parse("iodepth=0").unwrap_err();
    assert!(err.to_string().starts_with("key 'iodepth':"), "{err}");
}
