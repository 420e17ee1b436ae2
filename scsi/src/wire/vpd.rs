//! Vital product data pages (SPC-5 §7.7): Supported VPD Pages (00h, §7.7.18), Unit Serial
//! Number (80h, §7.7.19) and Device Identification (83h, §7.7.6). All share the 4-byte header
//! PERIPHERAL(1) PAGE CODE(1) PAGE LENGTH(2).

use super::{WireError, need};
use alloc::vec::Vec;

/// One designation descriptor of the Device Identification page (SPC-5 §7.7.6.1, table 460).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Designator {
    /// PROTOCOL IDENTIFIER (meaningful with `piv`; SPC-5 table 479).
    pub protocol_id: u8,
    /// 1 = binary, 2 = ASCII, 3 = UTF-8.
    pub code_set: u8,
    /// PIV: `protocol_id` is valid.
    pub piv: bool,
    /// 0 = logical unit, 1 = target port, 2 = target device.
    pub association: u8,
    /// 1 = T10 vendor ID, 2 = EUI-64, 3 = NAA, 8 = SCSI name string, ...
    pub designator_type: u8,
    /// The designator bytes, as the code set encodes them.
    pub value: Vec<u8>,
}

/// A decoded VPD page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VpdPage {
    /// 00h: the page codes the logical unit supports, ascending.
    Supported(Vec<u8>),
    /// 80h: the product serial number, ASCII.
    UnitSerial(Vec<u8>),
    /// 83h: designation descriptors naming the logical unit and its ports.
    DeviceIdentification(Vec<Designator>),
    /// Any other page, undecoded.
    Other {
        /// The page code.
        page: u8,
        /// The page body after its 4-byte header.
        data: Vec<u8>,
    },
}

const HEADER_LEN: usize = 4;

impl VpdPage {
    /// The page code.
    pub fn page_code(&self) -> u8 {
        match self {
            VpdPage::Supported(_) => 0x00,
            VpdPage::UnitSerial(_) => 0x80,
            VpdPage::DeviceIdentification(_) => 0x83,
            VpdPage::Other { page, .. } => *page,
        }
    }

    /// Parses a page. The body is bounded by PAGE LENGTH and the buffer; a page longer than the
    /// buffer is `Truncated` (reissue INQUIRY with a larger allocation length).
    pub fn parse(buf: &[u8]) -> Result<VpdPage, WireError> {
        need("VPD page header", buf, HEADER_LEN)?;
        let page = buf[1];
        let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
        need("VPD page", buf, HEADER_LEN + len)?;
        let body = &buf[HEADER_LEN..HEADER_LEN + len];
        Ok(match page {
            0x00 => VpdPage::Supported(body.to_vec()),
            0x80 => VpdPage::UnitSerial(body.to_vec()),
            0x83 => VpdPage::DeviceIdentification(parse_designators(body)?),
            _ => VpdPage::Other {
                page,
                data: body.to_vec(),
            },
        })
    }

    /// The full page for peripheral byte `peripheral` (qualifier and device type). The target
    /// truncates it to the allocation length. A body over 65535 bytes is an error.
    pub fn encode(&self, peripheral: u8) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&[peripheral, self.page_code(), 0, 0]);
        match self {
            VpdPage::Supported(data) | VpdPage::UnitSerial(data) | VpdPage::Other { data, .. } => {
                out.extend_from_slice(data)
            }
            VpdPage::DeviceIdentification(list) => {
                for d in list {
                    let len = u8::try_from(d.value.len()).map_err(|_| WireError::InvalidField {
                        what: "designator length",
                        value: d.value.len() as u64,
                    })?;
                    out.push((d.protocol_id << 4) | (d.code_set & 0x0f));
                    out.push(
                        (u8::from(d.piv) << 7)
                            | ((d.association & 3) << 4)
                            | (d.designator_type & 0x0f),
                    );
                    out.push(0);
                    out.push(len);
                    out.extend_from_slice(&d.value);
                }
            }
        }
        let body = out.len() - HEADER_LEN;
        let body16 = u16::try_from(body).map_err(|_| WireError::InvalidField {
            what: "VPD page length",
            value: body as u64,
        })?;
        out[2..4].copy_from_slice(&body16.to_be_bytes());
        Ok(out)
    }
}

fn parse_designators(mut body: &[u8]) -> Result<Vec<Designator>, WireError> {
    let mut list = Vec::new();
    while !body.is_empty() {
        need("designation descriptor", body, 4)?;
        let len = usize::from(body[3]);
        need("designation descriptor", body, 4 + len)?;
        list.push(Designator {
            protocol_id: body[0] >> 4,
            code_set: body[0] & 0x0f,
            piv: body[1] & 0x80 != 0,
            association: (body[1] >> 4) & 3,
            designator_type: body[1] & 0x0f,
            value: body[4..4 + len].to_vec(),
        });
        body = &body[4 + len..];
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_designator() -> impl Strategy<Value = Designator> {
        (
            0u8..16,
            0u8..16,
            any::<bool>(),
            0u8..4,
            0u8..16,
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(
                |(protocol_id, code_set, piv, association, designator_type, value)| Designator {
                    protocol_id,
                    code_set,
                    piv,
                    association,
                    designator_type,
                    value,
                },
            )
    }

    fn arb_page() -> impl Strategy<Value = VpdPage> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..10).prop_map(VpdPage::Supported),
            proptest::collection::vec(any::<u8>(), 0..30).prop_map(VpdPage::UnitSerial),
            proptest::collection::vec(arb_designator(), 0..4)
                .prop_map(VpdPage::DeviceIdentification),
            (0x84u8..0xff, proptest::collection::vec(any::<u8>(), 0..30))
                .prop_map(|(page, data)| VpdPage::Other { page, data }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(page in arb_page()) {
            let bytes = page.encode(0).unwrap();
            prop_assert_eq!(VpdPage::parse(&bytes), Ok(page));
        }

        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Whatever parses encodes back (peripheral byte included) and parses the same.
            if let Ok(page) = VpdPage::parse(&raw) {
                let bytes = page.encode(raw[0]).unwrap();
                prop_assert_eq!(VpdPage::parse(&bytes), Ok(page));
            }
        }
    }

    #[test]
    fn designator_past_page_end_is_an_error() {
        let raw = [0, 0x83, 0, 6, 0x02, 0x01, 0, 8, b'L', b'i'];
        assert!(matches!(
            VpdPage::parse(&raw),
            Err(WireError::Truncated { .. })
        ));
    }
}
