//! Behaviour: unit attentions, readiness, injection, delays, LUNs and resets.

use super::*;

#[test]
fn power_on_unit_attention_is_29h_01h_power_on_occurred() {
    // Linux `find_build_dev_info` sets SDEBUG_UA_POOCCUR: 29h/01h, not 29h/00h.
    let mut t = target("delay=0");
    settle(&mut t, 0);
    assert!(send(&mut t, &TUR, 0).unwrap().good());
}

#[test]
fn luns_changed_is_reported_once_per_target() {
    // SPC-4 and later (scsi_level 7): the first LUN that reports 3Fh/0Eh clears it on every
    // LUN of the target (`clear_luns_changed_on_target`).
    let mut t = target("delay=0 max_luns=2");
    settle(&mut t, 0);
    settle(&mut t, 1);
    t.set_max_luns(2);
    let a = send_to(&mut t, 1, 0, &TUR, 0).unwrap();
    assert_eq!(a.check(), Some((SenseKey::UnitAttention, 0x3f, 0x0e)));
    assert!(send_to(&mut t, 1, 1, &TUR, 0).unwrap().good(), "LUN 1");
}

#[test]
fn request_sense_leaves_unit_attentions_pending() {
    // `resp_requests` never looks at the UA bitmap: NO SENSE, and the UA stays for the next
    // command that does not skip UAs.
    let mut t = target("delay=0");
    let a = send(&mut t, &request_sense(false), 96).unwrap();
    assert!(a.good());
    assert_eq!(
        a.data.len() - a.residual as usize,
        18,
        "fixed sense is 18 bytes"
    );
    assert_eq!((a.data[0], a.data[2] & 0xf, a.data[12]), (0x70, 0, 0));
    settle(&mut t, 0);
}

#[test]
fn request_sense_reports_a_stopped_unit_as_not_ready() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    assert!(send(&mut t, &STOP, 0).unwrap().good());
    let a = send(&mut t, &request_sense(false), 96).unwrap();
    assert!(a.good(), "the sense comes as data, with GOOD status");
    assert_eq!((a.data[2] & 0xf, a.data[12], a.data[13]), (0x2, 0x04, 0x02));
    let d = send(&mut t, &request_sense(true), 96).unwrap();
    assert_eq!(
        d.data.len() - d.residual as usize,
        8,
        "descriptor sense is 8 bytes"
    );
    assert_eq!(
        (d.data[0], d.data[1], d.data[2], d.data[3]),
        (0x72, 0x2, 0x04, 0x02)
    );
}

#[test]
fn tur_ms_to_ready_reports_becoming_ready_with_the_remaining_ms() {
    let mut t = target("delay=0 tur_ms_to_ready=100");
    settle(&mut t, 0);
    t.clock().advance(30_000_000);
    let a = send(&mut t, &TUR, 0).unwrap();
    assert_eq!(a.check(), Some((SenseKey::NotReady, 0x04, 0x01)));
    let remaining = a
        .sense
        .unwrap()
        .information
        .expect("INFORMATION: ms to ready");
    assert!((69..=70).contains(&remaining), "{remaining} ms");
    // A media-access command: Linux's `resp_not_ready` builds 04h/01h, then overwrites it with
    // 04h/02h for anything but TEST UNIT READY.
    let r = send(&mut t, &READ10_1, 512).unwrap();
    assert_eq!(r.check(), Some((SenseKey::NotReady, 0x04, 0x02)));
    let s = send(&mut t, &request_sense(false), 96).unwrap();
    assert_eq!((s.data[2] & 0xf, s.data[12], s.data[13]), (0x2, 0x04, 0x01));
    // START (not STOP) cannot cut the wait short.
    let start = send(&mut t, &[0x1b, 0, 0, 0, 1, 0], 0).unwrap();
    assert_eq!(start.check(), Some((SenseKey::IllegalRequest, 0x24, 0x00)));
    t.clock().advance(70_000_000);
    assert!(send(&mut t, &TUR, 0).unwrap().good());
    assert!(send(&mut t, &READ10_1, 512).unwrap().good());
}

#[test]
fn recovered_error_goes_to_the_next_read_or_write_after_the_nth_command() {
    // The every_nth-th command sets "inject pending"; the next READ/WRITE that reaches
    // `resp_read_dt0`/`resp_write_dt0` takes RECOVERED ERROR 5Dh/00h and clears it.
    let mut t = target("delay=0 every_nth=3 opts=8");
    settle(&mut t, 0); // command 1
    assert!(send(&mut t, &TUR, 0).unwrap().good()); // 2
    assert!(send(&mut t, &TUR, 0).unwrap().good()); // 3: pending, but a TUR cannot take it
    let a = send(&mut t, &READ10_1, 512).unwrap(); // 4
    assert_eq!(a.check(), Some((SenseKey::RecoveredError, 0x5d, 0x00)));
    assert!(send(&mut t, &READ10_1, 512).unwrap().good(), "taken once"); // 5
    assert_eq!(t.stats().injected_recovered, 1);
    assert_eq!(OPT_RECOVERED_ERR, 8);
}

#[test]
fn timeout_injection_comes_after_unit_attention_and_opcode_checks() {
    // `fake_timeout()` runs after the opcode lookup, the UA report and the not-ready check.
    let mut t = target("delay=0 every_nth=1 opts=4");
    settle(&mut t, 0);
    let bad = send_to(&mut t, 2, 0, &[0xc5, 0, 0, 0, 0, 0], 0).unwrap();
    assert_eq!(bad.check(), Some((SenseKey::IllegalRequest, 0x20, 0x00)));
    assert!(send_to(&mut t, 3, 0, &TUR, 0).is_none(), "swallowed");
    assert_eq!(t.stats().injected_timeouts, 1);
    assert_eq!(OPT_TIMEOUT, 4);
}

#[test]
fn timeout_injection_reports_a_stopped_unit_first() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    assert!(send(&mut t, &STOP, 0).unwrap().good());
    t.set_injection(1, OPT_TIMEOUT);
    let a = send_to(&mut t, 2, 0, &TUR, 0).unwrap();
    assert_eq!(a.check(), Some((SenseKey::NotReady, 0x04, 0x02)));
}

#[test]
fn aborting_a_swallowed_command_succeeds() {
    // Linux 0191's `scsi_debug_abort` returns SUCCESS whether or not it found the command
    // (it never fails), so a swallowed command is simply gone after the abort.
    let mut t = target("delay=0 every_nth=1 opts=4");
    settle(&mut t, 0);
    assert!(send_to(&mut t, 7, 0, &TUR, 0).is_none());
    assert!(t.abort(Tag(7)).is_ok());
    assert_eq!(t.outstanding(), 0);
}

#[test]
fn negative_every_nth_turns_to_minus_one_at_the_first_timeout_check_it_hits() {
    // `fake_timeout`: count % |every_nth| == 0 hits, and then every_nth becomes -1. With
    // fake_rw a READ skips `fake_timeout`, so a hit on a READ does not switch it.
    let mut t = target("delay=0 fake_rw=1 every_nth=-3 opts=4");
    settle(&mut t, 0); // 1
    assert!(send(&mut t, &TUR, 0).unwrap().good()); // 2
    assert!(send(&mut t, &READ10_1, 512).unwrap().good()); // 3: hit, but no timeout check
    assert!(send_to(&mut t, 4, 0, &TUR, 0).unwrap().good()); // 4
    assert!(send_to(&mut t, 5, 0, &TUR, 0).unwrap().good()); // 5
    assert!(send_to(&mut t, 6, 0, &TUR, 0).is_none()); // 6: hit
    assert_eq!(t.params().every_nth, -1);
    assert!(send_to(&mut t, 7, 0, &TUR, 0).is_none()); // 7: every command from now on
}

#[test]
fn one_jiffy_is_4_ms_as_on_debians_hz_250_kernels() {
    let mut t = target("delay=1");
    let tur = send(&mut t, &TUR, 0).unwrap();
    assert!(tur.check().is_some());
    assert_eq!(t.params().delay_ns(), 4_000_000);
}

#[test]
fn inquiry_report_luns_and_request_sense_are_answered_at_once() {
    // F_DELAY_OVERR: these respond with no delay whatever `delay` says.
    let mut t = target("delay=100");
    let cmd = |cdb: &[u8], data_len| ScsiCmd {
        tag: Tag(1),
        target: 0,
        lun: Lun(0),
        cdb: CdbBytes::from_slice(cdb).unwrap(),
        direction: DataDirection::FromDevice,
        buffers: CmdBuffers {
            data: vec![0u8; data_len],
            sense: Box::new([0u8; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    let mut done = Vec::new();
    for cdb in [
        &INQUIRY[..],
        &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0][..],
        &request_sense(false)[..],
    ] {
        t.queue_command(cmd(cdb, 256)).unwrap();
        done.clear();
        assert_eq!(
            t.poll(&mut done),
            1,
            "{:02x} answered without delay",
            cdb[0]
        );
    }
    // A CHECK CONDITION found before the response function (here the power-on UA) is
    // answered at once too; the next TEST UNIT READY waits for its delay.
    t.queue_command(cmd(&TUR, 0)).unwrap();
    done.clear();
    assert_eq!(t.poll(&mut done), 1, "the unit attention at once");
    t.queue_command(cmd(&TUR, 0)).unwrap();
    done.clear();
    assert_eq!(t.poll(&mut done), 0, "TEST UNIT READY waits for its delay");
}

#[test]
fn start_stop_unit_takes_a_second_and_synchronize_cache_a_twentieth_when_delay_is_set() {
    let mut t = target("delay=1");
    settle(&mut t, 0);
    let start_ns = t.clock().now_ns();
    assert!(send(&mut t, &STOP, 0).unwrap().good());
    let ssu_ns = t.clock().now_ns() - start_ns;
    assert!(
        (1_000_000_000..1_002_000_000).contains(&ssu_ns),
        "{ssu_ns} ns"
    );
    // Unchanged state (already stopped) or IMMED: at once, as `resp_start_stop` says.
    let again = t.clock().now_ns();
    assert!(send(&mut t, &STOP, 0).unwrap().good());
    let unchanged_ns = t.clock().now_ns() - again;
    assert!(unchanged_ns < 1_000_000, "{unchanged_ns} ns");
    assert!(send(&mut t, &[0x1b, 0, 0, 0, 1, 0], 0).unwrap().good()); // start again
    // SYNCHRONIZE CACHE waits only when a WRITE came since the last one.
    let sync_cache = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let quick = t.clock().now_ns();
    assert!(send(&mut t, &sync_cache, 0).unwrap().good());
    assert!(
        t.clock().now_ns() - quick < 10_000_000,
        "no write since the last sync"
    );
    let write = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    assert!(send(&mut t, &write, 512).unwrap().good());
    let sync = t.clock().now_ns();
    assert!(send(&mut t, &sync_cache, 0).unwrap().good());
    let sync_ns = t.clock().now_ns() - sync;
    assert!((50_000_000..52_000_000).contains(&sync_ns), "{sync_ns} ns");
}

#[test]
fn ndelay_of_a_second_or_more_is_refused() {
    // Linux ignores ndelay >= 1 s (with a warning) and keeps 0; we refuse it by name.
    let error = ScsiDebug::<ManualClock>::from_params("ndelay=1000000000", ManualClock::new(1))
        .err()
        .expect("refused");
    assert!(error.to_string().contains("ndelay"), "{error}");
    assert!(target("ndelay=999999999").params().ndelay > 0);
}

#[test]
fn fake_rw_leaves_the_residual_zero() {
    // Linux resets resid to 0 in queuecommand and the fake path never sets it.
    let mut t = target("delay=0 fake_rw=1");
    settle(&mut t, 0);
    let a = send(&mut t, &READ10_1, 4096).unwrap();
    assert!(a.good());
    assert_eq!(a.residual, 0);
}

#[test]
fn standard_inquiry_is_96_bytes_with_multip_linked_and_cmdque() {
    let mut t = target("delay=0");
    let a = send(&mut t, &INQUIRY, 255).unwrap();
    assert!(a.good());
    assert_eq!(a.data.len() - a.residual as usize, 96);
    assert_eq!(a.data[4], 96 - 5, "ADDITIONAL LENGTH");
    assert_eq!(a.data[3], 2, "HiSup clear, response data format 2");
    assert_eq!(a.data[5], 0, "no PROTECT, no TPGS");
    assert_eq!(a.data[6], 0x10, "MultiP");
    assert_eq!(a.data[7], 0x0a, "LINKED | CMDQUE");
    assert_eq!(&a.data[32..36], b"0191");
    assert_eq!(
        &a.data[36..44],
        b"20210520",
        "driver date in the vendor area"
    );
    assert_eq!(
        &a.data[58..66],
        &[0x00, 0xc0, 0x05, 0xc0, 0x06, 0x00, 0x21, 0x00]
    );
}

#[test]
fn unit_serial_number_is_the_decimal_lu_id() {
    // lu_id_num = (host_no + 1) * 2000 + target * 1000 + lun, printed with "%d" (host 0).
    let mut t = target("delay=0 max_luns=2");
    let a = send_to(&mut t, 1, 1, &[0x12, 1, 0x80, 0, 0xff, 0], 255).unwrap();
    assert!(a.good());
    assert_eq!(&a.data[4..4 + usize::from(a.data[3])], b"2001");
    let d = send(&mut t, &[0x12, 1, 0x83, 0, 0xff, 0], 255).unwrap();
    let naa = d
        .data
        .windows(12)
        .find(|w| w[0..4] == [0x01, 0x03, 0x00, 0x08])
        .expect("an NAA logical unit designator");
    assert_eq!(&naa[4..], &(0x3333_3330_0000_0000u64 + 2000).to_be_bytes());
}

#[test]
fn a_lun_past_max_luns_is_did_no_connect() {
    let mut t = target("delay=0");
    for cdb in [&TUR[..], &INQUIRY[..]] {
        let a = send_to(&mut t, 1, 3, cdb, 96).unwrap();
        assert_eq!(a.host_error, Some(HostError::NoConnect), "{:02x}", cdb[0]);
    }
}

#[test]
fn report_luns_accepts_an_allocation_length_of_4() {
    let mut t = target("delay=0 max_luns=2");
    let a = send(&mut t, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0], 4).unwrap();
    assert!(a.good());
    assert_eq!(&a.data[..4], &[0, 0, 0, 16], "LUN LIST LENGTH of two LUNs");
    let short = send(&mut t, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0], 3).unwrap();
    assert_eq!(short.check(), Some((SenseKey::IllegalRequest, 0x24, 0x00)));
}

#[test]
fn report_luns_honours_select_report() {
    let mut t = target("delay=0 max_luns=2");
    let wlun = send(&mut t, &[0xa0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0], 256).unwrap();
    assert_eq!(
        &wlun.data[..4],
        &[0, 0, 0, 8],
        "only the REPORT LUNS well-known LUN"
    );
    assert_eq!(&wlun.data[8..10], &[0xc1, 0x01]);
    let all = send(&mut t, &[0xa0, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0], 256).unwrap();
    assert_eq!(
        &all.data[..4],
        &[0, 0, 0, 24],
        "two LUNs and the well-known LUN"
    );
    let bad = send(&mut t, &[0xa0, 0, 7, 0, 0, 0, 0, 0, 1, 0, 0, 0], 256).unwrap();
    assert_eq!(bad.check(), Some((SenseKey::IllegalRequest, 0x24, 0x00)));
}

#[test]
fn start_stop_unit_with_a_power_condition_is_an_invalid_field() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let a = send(&mut t, &[0x1b, 0, 0, 0, 0x10, 0], 0).unwrap();
    assert_eq!(a.check(), Some((SenseKey::IllegalRequest, 0x24, 0x00)));
    let sks = a.sense.unwrap().sense_key_specific.expect("field pointer");
    assert_eq!(sks, [0xcf, 0, 4], "C/D, BPV, bit 7 of byte 4");
    assert!(send(&mut t, &TUR, 0).unwrap().good(), "still running");
}

#[test]
fn each_reset_succeeds_and_leaves_linux_s_unit_attention() {
    // scsi_debug_device_reset: 29h/00h on that LUN; target and bus resets: 29h/02h on every
    // LUN they cover (here target 0 of 2, two LUNs each); host reset: 29h/02h everywhere.
    use scsi::host::ResetScope;
    let mut t = target("delay=0 num_tgts=2 max_luns=2");
    let ua_of = |t: &mut Target, target: u16, lun: u64| {
        let answer = send_at(t, target, lun, &TUR);
        answer.check().map(|(_, asc, ascq)| (asc, ascq))
    };
    for (target, lun) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        assert_eq!(ua_of(&mut t, target, lun), Some((0x29, 0x01)));
    }
    let mut returned = Vec::new();
    let lun1 = ResetScope::Lun {
        target: 0,
        lun: Lun(1),
    };
    t.reset_scope(lun1, &mut returned).unwrap();
    assert_eq!(ua_of(&mut t, 0, 0), None);
    assert_eq!(ua_of(&mut t, 0, 1), Some((0x29, 0x00)));
    t.reset_scope(ResetScope::Target(0), &mut returned).unwrap();
    assert_eq!(
        [
            ua_of(&mut t, 0, 0),
            ua_of(&mut t, 0, 1),
            ua_of(&mut t, 1, 0)
        ],
        [Some((0x29, 0x02)), Some((0x29, 0x02)), None]
    );
    t.reset_scope(ResetScope::Bus, &mut returned).unwrap();
    t.reset(&mut returned).unwrap();
    for (target, lun) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        assert_eq!(
            ua_of(&mut t, target, lun),
            Some((0x29, 0x02)),
            "once for both"
        );
        assert_eq!(ua_of(&mut t, target, lun), None);
    }
    assert!(returned.is_empty(), "nothing was outstanding");
}

#[test]
fn a_fake_rw_read_follows_a_delay_set_and_cleared_at_run_time() {
    let mut t = target("delay=0 fake_rw=1");
    settle(&mut t, 0);
    let read = |tag: u16| ScsiCmd {
        tag: Tag(tag),
        target: 0,
        lun: Lun(0),
        cdb: CdbBytes::from_slice(&READ10_1).unwrap(),
        direction: DataDirection::FromDevice,
        buffers: CmdBuffers {
            data: vec![0u8; 512],
            sense: Box::new([0u8; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    let mut done = Vec::new();
    t.set_delay_ns(5_000_000);
    t.queue_command(read(2)).expect("queued");
    assert_eq!(t.poll(&mut done), 0, "delayed");
    t.clock().advance(5_000_000);
    assert_eq!(t.poll(&mut done), 1, "due");
    t.set_delay_ns(0);
    t.queue_command(read(3)).expect("queued");
    assert_eq!(t.poll(&mut done), 1, "at once again");
    assert!(done.iter().all(|c| c.completion.status == 0));
}

#[test]
fn every_nth_counts_fake_rw_reads_whether_delayed_or_not() {
    // As in the test above it: READ 3 is a hit without a timeout check; TUR 6 hits.
    let mut t = target("delay=0 fake_rw=1 every_nth=-3 opts=4");
    settle(&mut t, 0); // 1
    assert!(send(&mut t, &TUR, 0).unwrap().good()); // 2
    t.set_delay_ns(1_000_000);
    assert!(send(&mut t, &READ10_1, 512).unwrap().good()); // 3, delayed
    t.set_delay_ns(0);
    assert!(send(&mut t, &READ10_1, 512).unwrap().good()); // 4, at once
    assert!(send_to(&mut t, 5, 0, &TUR, 0).unwrap().good()); // 5
    assert!(send_to(&mut t, 6, 0, &TUR, 0).is_none()); // 6: hit
    assert_eq!(t.params().every_nth, -1);
}
