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
    assert_eq!(parse("test=list").unwrap().tests, Some(TestSelection::List));
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
    assert_eq!(parse("n=4k").unwrap().n, 4096);
    assert_eq!(parse("n=2M").unwrap().n, 2 << 20);
    assert_eq!(parse("n=0x10").unwrap().n, 16);
    assert_eq!(parse("size=0x1000").unwrap().size, 4096);
    assert_eq!(parse("bs=0x1000").unwrap().io.job.bs, 4096);
    assert!(parse("n=k").is_err());
    assert!(parse("n=-1").is_err());
    let err = parse("n=99999999999999999999").unwrap_err().to_string();
    assert!(err.contains("99999999999999999999"), "{err}");
    assert!(
        parse("n=0xffffffffffffffffk").is_err(),
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
        CmdlineError::Duplicate {
            key: "n".into(),
            earlier: "n".into()
        }
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

#[test]
fn an_alias_given_with_its_name_is_a_duplicate_naming_both() {
    for line in ["iodepth=32 qd=1", "qd=1 iodepth=32", "jobs=2 numjobs=1"] {
        let err = parse(line).unwrap_err();
        assert!(
            matches!(err, CmdlineError::Duplicate { .. }),
            "{line}: {err:?}"
        );
        let text = err.to_string();
        let (first, second) = line.split_once(' ').unwrap();
        for word in [first, second] {
            let spelling = word.split_once('=').unwrap().0;
            assert!(
                text.contains(&alloc::format!("'{spelling}'")),
                "{line}: {text}"
            );
        }
    }
}

#[test]
fn the_nbd_and_stats_ports_must_differ() {
    for line in [
        "nbd_port=2000 stats_port=2000",
        "stats_port=10809",
        "nbd_port=10810",
    ] {
        let err = parse(line).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("nbd_port") && text.contains("stats_port"),
            "{line}: {text}"
        );
    }
    assert!(parse("nbd_port=2000 stats_port=2001").is_ok());
}

#[test]
fn the_boot_line_ends_at_its_nul_and_must_be_utf8() {
    let mut window = [b'x'; 64];
    window[..14].copy_from_slice(b"runtime=100ms\0");
    assert_eq!(boot_line(&window), Ok("runtime=100ms"));
    assert_eq!(boot_line(b"\0"), Ok(""));
    // No NUL in the window: the loader's line was longer than the kernel reads, and the
    // last word may have been cut (`runtime=100ms` read as `runtime=10`).
    let cut = boot_line(b"runtime=10");
    assert_eq!(cut, Err(CmdlineError::Unterminated { max_bytes: 10 }));
    let text = cut.unwrap_err().to_string();
    assert!(text.starts_with("command line:"), "{text}");
    // Not UTF-8: an error naming the byte, not an empty line that runs the default workload.
    let err = boot_line(b"n=1 \xff\xfe\0").unwrap_err();
    assert_eq!(
        err,
        CmdlineError::NotUtf8 {
            offset: 4,
            byte: 0xff
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_boot_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(line) = boot_line(&bytes) {
            prop_assert!(bytes.contains(&0) && line.len() < bytes.len());
            let _ = parse(line);
        }
    }
}

#[test]
fn io_mode_defaults_to_irq_where_a_device_is_driven() {
    for (line, mode) in [
        ("workload=verify", IoMode::Irq),
        ("workload=device", IoMode::Irq),
        ("workload=nbd", IoMode::Irq),
        ("workload=fake-rw", IoMode::Poll),
        ("workload=device io_mode=poll", IoMode::Poll),
        ("workload=fake-rw io_mode=irq", IoMode::Irq),
        (
            "workload=device io_mode=hybrid",
            IoMode::Hybrid {
                poll_us: DEFAULT_POLL_US,
            },
        ),
        (
            "workload=device io_mode=hybrid poll_us=20",
            IoMode::Hybrid { poll_us: 20 },
        ),
    ] {
        assert_eq!(parse(line).unwrap().io_mode(), mode, "{line}");
    }
}

#[test]
fn bad_io_modes_name_their_key() {
    let err = parse("io_mode=napi").unwrap_err().to_string();
    assert!(err.starts_with("key 'io_mode': bad value 'napi'"), "{err}");
    assert!(err.contains("poll|irq|hybrid"), "{err}");
    let err = parse("io_mode=hybrid poll_us=-1").unwrap_err().to_string();
    assert!(err.starts_with("key 'poll_us'"), "{err}");
    // poll_us= without hybrid would silently do nothing.
    let err = parse("workload=device poll_us=20").unwrap_err().to_string();
    assert!(err.starts_with("key 'poll_us': bad value '20'"), "{err}");
    assert!(err.contains("io_mode is irq"), "{err}");
}
