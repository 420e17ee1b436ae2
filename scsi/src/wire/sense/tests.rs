use super::*;
use proptest::prelude::*;

fn arb_sense() -> impl Strategy<Value = Sense> {
    (
        any::<bool>(),
        any::<bool>(),
        0u8..16,
        any::<u8>(),
        any::<u8>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<[u8; 3]>()),
    )
        .prop_map(|(descriptor, deferred, key, asc, ascq, information, sks)| {
            let format = if descriptor {
                SenseFormat::Descriptor
            } else {
                SenseFormat::Fixed
            };
            // Fixed format holds 32 bits of INFORMATION; the SKSV bit is the flag itself.
            let information = if descriptor {
                information
            } else {
                information.map(|v| v & 0xffff_ffff)
            };
            Sense {
                format,
                deferred,
                key: SenseKey::from_bits(key),
                asc,
                ascq,
                information,
                sense_key_specific: sks.map(|s| [s[0] | 0x80, s[1], s[2]]),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn build_then_parse_is_identity(sense in arb_sense()) {
        let mut buf = [0u8; SCSI_SENSE_BUFFERSIZE];
        let len = sense.encode(&mut buf).unwrap();
        prop_assert_eq!(Sense::parse(&buf[..len]), Ok(sense));
    }

    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..SCSI_SENSE_BUFFERSIZE)) {
        // Whatever parses is a value the encoder can write back and the parser reads again.
        if let Ok(sense) = Sense::parse(&raw) {
            let mut buf = [0u8; SCSI_SENSE_BUFFERSIZE];
            let len = sense.encode(&mut buf).unwrap();
            prop_assert_eq!(Sense::parse(&buf[..len]), Ok(sense));
        }
    }

    #[test]
    fn arbitrary_descriptor_sense_never_panics(
        code in 0x72u8..0x74,
        rest in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut raw = alloc::vec![code];
        raw.extend_from_slice(&rest);
        if let Ok(sense) = Sense::parse(&raw) {
            let mut buf = [0u8; SCSI_SENSE_BUFFERSIZE];
            let len = sense.encode(&mut buf).unwrap();
            prop_assert_eq!(Sense::parse(&buf[..len]), Ok(sense));
        }
    }
}

#[test]
fn fixed_unit_attention_power_on() {
    // What a disk returns for the first command after power on: 70h, UA, 29h/00h.
    let raw = [
        0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x29, 0x00, 0, 0, 0, 0,
    ];
    let sense = Sense::parse(&raw).unwrap();
    assert_eq!(sense.key, SenseKey::UnitAttention);
    assert_eq!((sense.asc, sense.ascq), (0x29, 0x00));
    assert_eq!(
        sense.text(),
        Some("POWER ON, RESET, OR BUS DEVICE RESET OCCURRED")
    );
    assert_eq!(sense.information, None);
}

#[test]
fn short_fixed_sense_keeps_the_key() {
    let sense = Sense::parse(&[0x70, 0, 0x02]).unwrap();
    assert_eq!(sense.key, SenseKey::NotReady);
    assert_eq!(sense.asc, 0);
    assert!(Sense::parse(&[0x70, 0]).is_err());
    assert!(Sense::parse(&[]).is_err());
    assert!(Sense::parse(&[0x7f, 0, 0, 0]).is_err());
}

#[test]
fn descriptor_running_past_its_length_is_an_error() {
    // Additional length 4, but the information descriptor claims 12 bytes.
    let raw = [0x72, 0x03, 0x11, 0x00, 0, 0, 0, 4, 0x00, 0x0a, 0x80, 0];
    assert!(matches!(
        Sense::parse(&raw),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn medium_error_information_in_descriptor_format() {
    let mut sense = Sense::new(SenseFormat::Descriptor, SenseKey::MediumError, 0x11, 0x00);
    sense.information = Some(0x1_0000_1234);
    let mut buf = [0u8; 32];
    let len = sense.encode(&mut buf).unwrap();
    assert_eq!(len, 20);
    assert_eq!(
        Sense::parse(&buf[..len]).unwrap().information,
        Some(0x1_0000_1234)
    );
    // The same value does not fit the 32-bit fixed INFORMATION field.
    assert!(sense.encode_fixed(&mut buf).is_err());
    assert!(sense.encode_descriptor(&mut buf[..10]).is_err());
}
