use super::*;

#[test]
fn bins_read_as_a_list_and_as_the_older_text() {
    let bins = LatencyBins(vec![
        LatencyBin {
            floor_ns: 900,
            count: 1,
        },
        LatencyBin {
            floor_ns: 1500,
            count: 19,
        },
    ]);
    let json = serde_json::to_string(&bins).unwrap();
    assert_eq!(
        json,
        r#"[{"floor_ns":900,"count":1},{"floor_ns":1500,"count":19}]"#
    );
    assert_eq!(serde_json::from_str::<LatencyBins>(&json).unwrap(), bins);
    let text: LatencyBins = serde_json::from_str(r#""900:1,1500:19""#).unwrap();
    assert_eq!(text, bins);
    let error = serde_json::from_str::<LatencyBins>(r#""900-1""#).unwrap_err();
    assert!(alloc::format!("{error}").contains("900-1"), "{error}");
}

#[test]
fn a_fake_rw_line_keeps_the_old_field_names_and_its_counts_are_optional() {
    let mut result = FakeRwResult::default();
    let line = result_line(&result);
    assert!(line.starts_with(r#"RESULT {"where":"","rw":"#), "{line}");
    assert!(
        line.contains(r#""io_mode":"","irq_interrupts":0"#),
        "{line}"
    );
    assert!(!line.contains("insn_window"), "{line}");
    result.insns = Some(InsnCount {
        insn_window: 3,
        insn_slot: 2,
        insn_ops: 1000,
    });
    let json = serde_json::to_string(&result).unwrap();
    assert!(
        json.ends_with(r#""insn_window":3,"insn_slot":2,"insn_ops":1000}"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<FakeRwResult>(&json).unwrap(), result);
}

/// Guest tests match the start of the line (`RESULT {"device":"virtio-scsi","disk":"sda"`).
#[test]
fn a_device_line_starts_with_the_adapter_and_the_disk() {
    let result = DeviceResult {
        device: "virtio-scsi".into(),
        disk: "sda".into(),
        ..DeviceResult::default()
    };
    let line = result_line(&result);
    assert!(
        line.starts_with(r#"RESULT {"device":"virtio-scsi","disk":"sda","where":"#),
        "{line}"
    );
    let json = line.strip_prefix("RESULT ").unwrap();
    assert_eq!(serde_json::from_str::<DeviceResult>(json).unwrap(), result);
}

#[test]
fn a_verify_line_reads_back() {
    let result = VerifyResult {
        workload: "verify".into(),
        elapsed_ms: rounded(12.345_678, 3),
        irq: IrqResult {
            irq_halts: 7,
            ..IrqResult::default()
        },
        verdict: "ok".into(),
        ..VerifyResult::default()
    };
    let json = serde_json::to_string(&result).unwrap();
    assert!(json.contains(r#""elapsed_ms":12.346,"#), "{json}");
    assert!(
        json.contains(r#""irq_halts":7,"halted_ns":0,"verdict":"ok"}"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<VerifyResult>(&json).unwrap(), result);
}

#[test]
fn rounding_keeps_the_printed_decimals() {
    assert_eq!(rounded(99.96, 1), 100.0);
    assert_eq!(rounded(42.04, 1), 42.0);
    assert_eq!(rounded(-1.25, 1), -1.3);
    assert_eq!(rounded(0.0, 3), 0.0);
}
