use super::*;

fn cell() -> Cell {
    Cell {
        os: Os::Ours,
        device: Device::VirtioScsi,
        io_mode: IoMode::Irq,
        iodepth: 32,
        numjobs: 2,
    }
}

fn line(device: &str, numjobs: u64, io_mode: &str) -> benchkit::Run<DeviceResult> {
    let mut result = DeviceResult {
        device: device.into(),
        ..DeviceResult::default()
    };
    result.io.numjobs = numjobs;
    result.io.io_mode = io_mode.into();
    benchkit::Run::new(result)
}

#[test]
fn a_run_must_be_the_one_asked_for() {
    let good = line("virtio-scsi", 2, "irq");
    assert!(one_result(vec![good.clone()], &cell()).is_ok());
    for (run, says) in [
        (
            line("mptsas", 2, "irq"),
            "reported device=mptsas when asked for device=virtio-scsi",
        ),
        (
            line("virtio-scsi", 1, "irq"),
            "reported numjobs=1 when asked for numjobs=2",
        ),
        (
            line("virtio-scsi", 2, "poll"),
            "reported io_mode=poll when asked for io_mode=irq",
        ),
    ] {
        let error = one_result(vec![run], &cell()).unwrap_err();
        assert!(error.to_string().contains(says), "{error}");
    }
    assert!(one_result(vec![], &cell()).is_err());
    assert!(one_result(vec![good.clone(), good], &cell()).is_err());
}

/// A line that lacks a field is an error naming it, before any check of the cell.
#[test]
fn a_line_without_a_field_is_named() {
    let text = serde_json::to_string(&line("virtio-scsi", 2, "irq").result).unwrap();
    let silent = harness::console::parse_result(&text.replace(r#""io_mode":"irq","#, "")).unwrap();
    let error = benchkit::read_run::<DeviceResult>(&silent, None, "device RESULT")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("io_mode"),
        "a missing field is named: {error}"
    );
}

/// `bench device`'s command line, as xtask parses it.
#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    bench: crate::command::Command,
}

fn parse(words: &str) -> Result<Options, String> {
    use clap::Parser;
    let words = std::iter::once("bench").chain(words.split_whitespace());
    match Cli::try_parse_from(words).map_err(|error| error.to_string())? {
        Cli {
            bench: crate::command::Command::Device(options),
        } => Ok(options),
        other => Err(format!("not bench device: {other:?}")),
    }
}

#[test]
fn os_takes_ours_hermit_or_both_and_names_a_bad_value() {
    assert_eq!(parse("device").unwrap().os, OsChoice::Ours);
    let both = parse("device --os both --quick --count-insns").unwrap();
    assert_eq!((both.os, both.quick), (OsChoice::Both, true));
    assert_eq!(parse("device --os hermit").unwrap().os, OsChoice::Hermit);
    let error = parse("device --os windows").unwrap_err();
    assert!(
        error.contains("windows") && error.contains("--os"),
        "the error names the option and the value: {error}"
    );
    let error = parse("device --os").unwrap_err();
    assert!(error.contains("--os"), "{error}");
    // The attribution boot is our kernel's only.
    let error = parse("device --os both --count-insns --breakdown").unwrap_err();
    assert!(error.contains("--breakdown"), "{error}");
}

#[test]
fn a_failed_boot_becomes_an_error_record_of_its_cell() {
    let run = failed(&cell(), "guest failed: CMDLINE ERROR".into());
    let written = serde_json::to_value(&run).unwrap();
    let run = DeviceRun::read(&written).unwrap();
    assert!(cell().matches(&run));
    assert!(!cell().on(Os::Hermit).matches(&run));
    assert!(run.measured().is_none());
    assert_eq!(run.unsupported(), None, "a failure is not a refusal");
    assert_eq!(matrix::runs(&[run], &cell()).count(), 0);
}

/// A guest that refuses the cell in `protocol::NOT_SUPPORTED`'s words: the run is that
/// kernel's refusal, quoted from the guest's line, and reads back as such.
#[test]
fn a_refusal_in_the_guests_words_is_not_supported() {
    let hermit = cell().on(Os::Hermit);
    let error = format!(
        "guest failed with `{}`: CMDLINE ERROR: key 'io_mode': bad value 'irq': {} (no interrupts)",
        hermit.kernel_args("300ms"),
        protocol::NOT_SUPPORTED
    );
    let run = failed(&hermit, error);
    let written = serde_json::to_value(&run).unwrap();
    assert_eq!(written["os"], "hermit");
    let run = DeviceRun::read(&written).unwrap();
    assert!(hermit.matches(&run) && !cell().matches(&run));
    let words = run.unsupported().expect("a refusal");
    assert!(
        words.starts_with("key 'io_mode': bad value 'irq': "),
        "{words}"
    );
    assert!(report::one_line(&run).starts_with("not supported: key 'io_mode'"));
}
