//! Mode parameter data returned by MODE SENSE(6)/(10) (SPC-5 §7.5): a header, an optional
//! block descriptor, and mode pages. Decoded pages: Caching (08h, SBC-4 §6.5.5) and Control
//! (0Ah, SPC-5 §7.5.8); everything else is kept as bytes.

use super::{WireError, need};
use alloc::vec::Vec;

/// Which MODE SENSE variant produced the data (the headers differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeSenseFormat {
    /// 4-byte header (SPC-5 §7.5.5, table 446).
    Six,
    /// 8-byte header (table 447).
    Ten,
}

/// A mode page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModePage {
    /// Caching mode page: write cache enabled, read cache disabled.
    Caching {
        /// WCE: write cache enabled.
        wce: bool,
        /// RCD: read cache disabled.
        rcd: bool,
    },
    /// Control mode page: D_SENSE selects descriptor-format sense.
    Control {
        /// D_SENSE: report sense in descriptor format.
        d_sense: bool,
    },
    /// Another page (or subpage), body bytes after its page-length field.
    Other {
        /// Page code.
        page: u8,
        /// Subpage code, for a page in SUB_PAGE format.
        subpage: Option<u8>,
        /// The page body after its length field.
        data: Vec<u8>,
    },
}

/// Mode parameter data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeParameters {
    /// Whether the data came from MODE SENSE(6) or (10).
    pub format: ModeSenseFormat,
    /// MEDIUM TYPE (0 for a disk).
    pub medium_type: u8,
    /// WP bit of the device-specific parameter.
    pub write_protect: bool,
    /// DPOFUA bit: DPO and FUA are supported.
    pub dpofua: bool,
    /// Short (8-byte) block descriptor: number of blocks (saturated at u32::MAX) and length.
    pub block_descriptor: Option<(u32, u32)>,
    /// The mode pages, in the order returned.
    pub pages: Vec<ModePage>,
}

const CACHING_LEN: usize = 0x12;
const CONTROL_LEN: usize = 0x0a;

impl ModePage {
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        match self {
            ModePage::Caching { wce, rcd } => {
                let mut body = [0u8; CACHING_LEN];
                body[0] = (u8::from(*wce) << 2) | u8::from(*rcd);
                out.extend_from_slice(&[0x08, CACHING_LEN as u8]);
                out.extend_from_slice(&body);
            }
            ModePage::Control { d_sense } => {
                let mut body = [0u8; CONTROL_LEN];
                body[0] = u8::from(*d_sense) << 2;
                out.extend_from_slice(&[0x0a, CONTROL_LEN as u8]);
                out.extend_from_slice(&body);
            }
            ModePage::Other {
                page,
                subpage: None,
                data,
            } => {
                let len = u8::try_from(data.len()).map_err(|_| WireError::InvalidField {
                    what: "mode page length",
                    value: data.len() as u64,
                })?;
                out.extend_from_slice(&[page & 0x3f, len]);
                out.extend_from_slice(data);
            }
            ModePage::Other {
                page,
                subpage: Some(sub),
                data,
            } => {
                let len = u16::try_from(data.len()).map_err(|_| WireError::InvalidField {
                    what: "mode subpage length",
                    value: data.len() as u64,
                })?;
                out.extend_from_slice(&[0x40 | (page & 0x3f), *sub]);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(data);
            }
        }
        Ok(())
    }

    /// Parses one page at the start of `buf`; returns it and the bytes it used.
    fn parse(buf: &[u8]) -> Result<(ModePage, usize), WireError> {
        need("mode page header", buf, 2)?;
        let page = buf[0] & 0x3f;
        if buf[0] & 0x40 != 0 {
            need("mode subpage header", buf, 4)?;
            let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
            need("mode subpage", buf, 4 + len)?;
            let data = buf[4..4 + len].to_vec();
            return Ok((
                ModePage::Other {
                    page,
                    subpage: Some(buf[1]),
                    data,
                },
                4 + len,
            ));
        }
        let len = usize::from(buf[1]);
        need("mode page", buf, 2 + len)?;
        let body = &buf[2..2 + len];
        let decoded = match (page, body.first()) {
            (0x08, Some(&b)) if len == CACHING_LEN => ModePage::Caching {
                wce: b & 4 != 0,
                rcd: b & 1 != 0,
            },
            (0x0a, Some(&b)) if len == CONTROL_LEN => ModePage::Control {
                d_sense: b & 4 != 0,
            },
            _ => ModePage::Other {
                page,
                subpage: None,
                data: body.to_vec(),
            },
        };
        Ok((decoded, 2 + len))
    }
}

impl ModeParameters {
    /// The full parameter data; the target truncates it to the allocation length.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let header_len = match self.format {
            ModeSenseFormat::Six => 4,
            ModeSenseFormat::Ten => 8,
        };
        let mut out = alloc::vec![0u8; header_len];
        let device_specific = (u8::from(self.write_protect) << 7) | (u8::from(self.dpofua) << 4);
        let bd_len = if self.block_descriptor.is_some() {
            8
        } else {
            0
        };
        if let Some((blocks, block_len)) = self.block_descriptor {
            out.extend_from_slice(&blocks.to_be_bytes());
            out.push(0);
            out.extend_from_slice(&block_len.to_be_bytes()[1..]);
        }
        for page in &self.pages {
            page.encode(&mut out)?;
        }
        // MODE DATA LENGTH excludes itself.
        match self.format {
            ModeSenseFormat::Six => {
                let len = u8::try_from(out.len() - 1).map_err(|_| WireError::InvalidField {
                    what: "mode data length",
                    value: out.len() as u64,
                })?;
                out[..4].copy_from_slice(&[len, self.medium_type, device_specific, bd_len]);
            }
            ModeSenseFormat::Ten => {
                let len = u16::try_from(out.len() - 2).map_err(|_| WireError::InvalidField {
                    what: "mode data length",
                    value: out.len() as u64,
                })?;
                out[..2].copy_from_slice(&len.to_be_bytes());
                out[2..8].copy_from_slice(&[self.medium_type, device_specific, 0, 0, 0, bd_len]);
            }
        }
        Ok(out)
    }

    /// Parses mode parameter data. Data cut short by the allocation length is `Truncated`.
    pub fn parse(buf: &[u8], format: ModeSenseFormat) -> Result<ModeParameters, WireError> {
        let (data_len, medium_type, device_specific, long_lba, bd_len, header_len) = match format {
            ModeSenseFormat::Six => {
                need("mode parameter header(6)", buf, 4)?;
                (
                    usize::from(buf[0]) + 1,
                    buf[1],
                    buf[2],
                    false,
                    usize::from(buf[3]),
                    4,
                )
            }
            ModeSenseFormat::Ten => {
                need("mode parameter header(10)", buf, 8)?;
                let len = usize::from(u16::from_be_bytes([buf[0], buf[1]])) + 2;
                (
                    len,
                    buf[2],
                    buf[3],
                    buf[4] & 1 != 0,
                    usize::from(u16::from_be_bytes([buf[6], buf[7]])),
                    8,
                )
            }
        };
        need(
            "mode parameter data",
            buf,
            data_len.max(header_len + bd_len),
        )?;
        if data_len < header_len + bd_len {
            // The MODE DATA LENGTH does not even cover the header and block descriptors.
            return Err(WireError::InvalidField {
                what: "mode data length",
                value: data_len as u64,
            });
        }
        let block_descriptor = match (bd_len, long_lba) {
            (0, _) => None,
            (8, false) => {
                let d = &buf[header_len..header_len + 8];
                Some((
                    u32::from_be_bytes([d[0], d[1], d[2], d[3]]),
                    u32::from_be_bytes([0, d[5], d[6], d[7]]),
                ))
            }
            (16, true) => {
                let d = &buf[header_len..header_len + 16];
                let blocks = u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
                Some((
                    u32::try_from(blocks).unwrap_or(u32::MAX),
                    u32::from_be_bytes([d[12], d[13], d[14], d[15]]),
                ))
            }
            _ => {
                return Err(WireError::InvalidField {
                    what: "block descriptor length",
                    value: bd_len as u64,
                });
            }
        };
        let mut pages = Vec::new();
        let mut rest = &buf[header_len + bd_len..data_len];
        while !rest.is_empty() {
            let (page, used) = ModePage::parse(rest)?;
            pages.push(page);
            rest = &rest[used..];
        }
        Ok(ModeParameters {
            format,
            medium_type,
            write_protect: device_specific & 0x80 != 0,
            dpofua: device_specific & 0x10 != 0,
            block_descriptor,
            pages,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_page() -> impl Strategy<Value = ModePage> {
        prop_oneof![
            (any::<bool>(), any::<bool>()).prop_map(|(wce, rcd)| ModePage::Caching { wce, rcd }),
            any::<bool>().prop_map(|d_sense| ModePage::Control { d_sense }),
            (
                0x10u8..0x3f,
                proptest::option::of(1u8..0xff),
                proptest::collection::vec(any::<u8>(), 0..12)
            )
                .prop_map(|(page, subpage, data)| ModePage::Other {
                    page,
                    subpage,
                    data
                }),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(ten: bool, medium_type: u8, wp: bool, dpofua: bool,
                      bd in proptest::option::of((any::<u32>(), 0u32..0x100_0000)),
                      pages in proptest::collection::vec(arb_page(), 0..4)) {
            let format = if ten { ModeSenseFormat::Ten } else { ModeSenseFormat::Six };
            let params = ModeParameters { format, medium_type, write_protect: wp, dpofua, block_descriptor: bd, pages };
            let bytes = params.encode().unwrap();
            prop_assert_eq!(ModeParameters::parse(&bytes, format), Ok(params));
        }

        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Whatever parses encodes back and parses to the same value.
            for format in [ModeSenseFormat::Six, ModeSenseFormat::Ten] {
                if let Ok(params) = ModeParameters::parse(&raw, format) {
                    let bytes = params.encode().unwrap();
                    prop_assert_eq!(ModeParameters::parse(&bytes, format), Ok(params));
                }
            }
        }

        /// Headers whose length fields disagree with each other (found by the test above).
        #[test]
        fn inconsistent_lengths_are_errors(len: u8, bd_len in prop_oneof![Just(0u8), Just(8), Just(16)], rest in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut raw = alloc::vec![len, 0, 0, bd_len];
            raw.extend_from_slice(&rest);
            if let Ok(params) = ModeParameters::parse(&raw, ModeSenseFormat::Six) {
                prop_assert!(usize::from(len) + 1 >= 4 + usize::from(bd_len));
                prop_assert_eq!(params.block_descriptor.is_some(), bd_len == 8);
            }
        }
    }
}
