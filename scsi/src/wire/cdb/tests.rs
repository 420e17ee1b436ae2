use super::*;
use proptest::prelude::*;

fn arb_pc() -> impl Strategy<Value = PageControl> {
    prop_oneof![
        Just(PageControl::Current),
        Just(PageControl::Changeable),
        Just(PageControl::Default),
        Just(PageControl::Saved)
    ]
}

fn arb_rw10() -> impl Strategy<Value = Rw10> {
    (any::<u32>(), any::<u16>(), any::<bool>(), any::<bool>()).prop_map(
        |(lba, blocks, fua, dpo)| Rw10 {
            lba,
            blocks,
            fua,
            dpo,
        },
    )
}

fn arb_rw16() -> impl Strategy<Value = Rw16> {
    (any::<u64>(), any::<u32>(), any::<bool>(), any::<bool>()).prop_map(
        |(lba, blocks, fua, dpo)| Rw16 {
            lba: Lba(lba),
            blocks: BlockCount(blocks),
            fua,
            dpo,
        },
    )
}

fn arb_cdb() -> impl Strategy<Value = Cdb> {
    prop_oneof![
        Just(Cdb::TestUnitReady),
        (any::<u8>(), any::<u16>()).prop_map(|(page, alloc_len)| Cdb::Inquiry {
            evpd: true,
            page,
            alloc_len
        }),
        any::<u16>().prop_map(|alloc_len| Cdb::Inquiry {
            evpd: false,
            page: 0,
            alloc_len
        }),
        (any::<bool>(), any::<u8>())
            .prop_map(|(desc, alloc_len)| Cdb::RequestSense { desc, alloc_len }),
        (any::<bool>(), arb_pc(), 0u8..64, any::<u8>(), any::<u8>()).prop_map(
            |(dbd, pc, page, subpage, alloc_len)| Cdb::ModeSense6 {
                dbd,
                pc,
                page,
                subpage,
                alloc_len
            }
        ),
        (
            any::<bool>(),
            any::<bool>(),
            arb_pc(),
            0u8..64,
            any::<u8>(),
            any::<u16>()
        )
            .prop_map(
                |(llbaa, dbd, pc, page, subpage, alloc_len)| Cdb::ModeSense10 {
                    llbaa,
                    dbd,
                    pc,
                    page,
                    subpage,
                    alloc_len
                }
            ),
        (any::<bool>(), 0u8..16, any::<bool>(), any::<bool>()).prop_map(
            |(immed, power_condition, loej, start)| Cdb::StartStopUnit {
                immed,
                power_condition,
                loej,
                start
            }
        ),
        Just(Cdb::ReadCapacity10),
        any::<u32>().prop_map(|alloc_len| Cdb::ReadCapacity16 { alloc_len }),
        arb_rw10().prop_map(Cdb::Read10),
        arb_rw10().prop_map(Cdb::Write10),
        arb_rw16().prop_map(Cdb::Read16),
        arb_rw16().prop_map(Cdb::Write16),
        (any::<bool>(), any::<u32>(), any::<u16>())
            .prop_map(|(immed, lba, blocks)| Cdb::SynchronizeCache10 { immed, lba, blocks }),
        (any::<u8>(), any::<u32>()).prop_map(|(select_report, alloc_len)| Cdb::ReportLuns {
            select_report,
            alloc_len
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encode_then_parse_is_identity(cdb in arb_cdb()) {
        let bytes = cdb.encode();
        prop_assert_eq!(Cdb::parse(bytes.as_slice()), Ok(cdb));
    }

    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..24)) {
        if let Ok(cdb) = Cdb::parse(&raw) {
            // A parsed CDB re-encodes to the same opcode and a length no longer than the input.
            let bytes = cdb.encode();
            prop_assert_eq!(bytes.as_slice()[0], raw[0]);
            prop_assert!(bytes.as_slice().len() <= raw.len());
        }
    }

    #[test]
    fn rw_template_agrees_with_encode(write: bool, lba: u64, blocks: u32, small: bool) {
        // Half the cases inside READ/WRITE(10)'s fields, where the template is used.
        let (lba, blocks) = if small {
            (Lba(lba & 0xffff_ffff), BlockCount(blocks & 0xffff))
        } else {
            (Lba(lba), BlockCount(blocks))
        };
        let cdb = if write { Cdb::write(lba, blocks) } else { Cdb::read(lba, blocks) };
        prop_assert_eq!(CdbBytes::rw(write, lba, blocks), cdb.encode());
    }

    #[test]
    fn fast_rw_decode_agrees_with_parse(raw in proptest::collection::vec(any::<u8>(), 0..20), op in 0usize..5) {
        let mut raw = raw;
        if let Some(first) = raw.first_mut() {
            *first = [0x28, 0x2a, 0x88, 0x8a, 0x12][op];
        }
        let slow = Cdb::parse(&raw).ok().and_then(|cdb| {
            let write = matches!(cdb, Cdb::Write10(_) | Cdb::Write16(_));
            cdb.lba_range().map(|(lba, blocks)| (write, lba, blocks))
        });
        prop_assert_eq!(Cdb::parse_rw(&raw), slow);
        prop_assert_eq!(Cdb::is_rw(&raw), slow.is_some());
        if let Ok(bytes) = CdbBytes::from_slice(&raw) {
            prop_assert_eq!(bytes.is_rw(), slow.is_some());
        }
    }

    #[test]
    fn truncated_cdbs_are_errors(cdb in arb_cdb(), cut in 1usize..16) {
        let bytes = cdb.encode();
        let raw = bytes.as_slice();
        let cut = cut.min(raw.len() - 1);
        let result = Cdb::parse(&raw[..cut]);
        prop_assert!(
            matches!(result, Err(WireError::Truncated { .. })),
            "expected truncation error, got {:?}",
            result
        );
    }
}

#[test]
fn known_encodings() {
    // READ(10) LBA 0x12345678, 8 blocks, FUA: SBC-4 §5.11 table 68.
    let cdb = Cdb::Read10(Rw10 {
        lba: 0x1234_5678,
        blocks: 8,
        fua: true,
        dpo: false,
    });
    assert_eq!(
        cdb.encode().as_slice(),
        &[0x28, 0x08, 0x12, 0x34, 0x56, 0x78, 0, 0, 8, 0]
    );
    let rc16 = Cdb::ReadCapacity16 { alloc_len: 32 };
    assert_eq!(
        rc16.encode().as_slice(),
        &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]
    );
    assert_eq!(Cdb::inquiry().encode().as_slice(), &[0x12, 0, 0, 0, 36, 0]);
}

#[test]
fn read_picks_16_for_large_ranges() {
    assert!(matches!(Cdb::read(Lba(5), BlockCount(8)), Cdb::Read10(_)));
    assert!(matches!(
        Cdb::read(Lba(1 << 32), BlockCount(8)),
        Cdb::Read16(_)
    ));
    assert!(matches!(
        Cdb::write(Lba(0), BlockCount(0x10000)),
        Cdb::Write16(_)
    ));
    assert_eq!(
        Cdb::read(Lba(1 << 32), BlockCount(8)).lba_range(),
        Some((Lba(1 << 32), BlockCount(8)))
    );
}

#[test]
fn unknown_opcode_and_service_action() {
    assert_eq!(
        Cdb::parse(&[0xff, 0, 0, 0, 0, 0]),
        Err(WireError::UnsupportedOpcode(0xff))
    );
    let mut raw = [0u8; 16];
    raw[0] = opcode::SERVICE_ACTION_IN_16;
    raw[1] = 0x12;
    assert_eq!(
        Cdb::parse(&raw),
        Err(WireError::UnsupportedServiceAction {
            opcode: 0x9e,
            service_action: 0x12
        })
    );
    assert!(
        Cdb::parse(&[0x12, 0, 5, 0, 36, 0]).is_err(),
        "page code without EVPD"
    );
}
