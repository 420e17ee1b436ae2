//! Judging a completion: everything the device says about a command is checked before
//! anyone believes it.
//!
//! Finding the command a used entry belongs to is the [`OwnedQueue`]'s job
//! (`crate::virtio::queue`): it looks the token up before popping and refuses one that
//! matches nothing. A completion is then judged by [`check_header`] (the driver's own typed
//! `virtio_scsi_resp` header of virtio 1.2 §5.6.6.1, which the device wrote in place, and the
//! used ring's length; [`check_response`] judges the same from bytes): the used length, the response
//! code and the residual must make sense for the buffers of *that* command, or the command
//! fails with a [`DeviceError`] that names the bad value. The device's numbers are only ever
//! compared, never used to index.
//!
//! QEMU reports used length as data buffer size + response size for every command, reads
//! included *and writes included* (whose data buffers the device only reads), so the
//! length bound is all of the command's buffers, not just the device-writable ones.
//!
//! [`OwnedQueue`]: crate::virtio::queue::OwnedQueue

use zerocopy::FromBytes;
// `ref_from_prefix` reads the header where the device wrote it: every field of `CmdResp` has
// alignment 1, so any byte offset will do.

use super::wire::{CmdResp, SENSE_SIZE, response};

/// Why a command's completion was not believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The used length is larger than all the command's buffers together.
    #[error("used length {used_len} exceeds the command's {max_len} buffer bytes")]
    UsedLengthTooLarge {
        /// What the device said.
        used_len: u32,
        /// All buffer bytes of the command.
        max_len: u32,
    },
    /// The device wrote less than a response header.
    #[error("used length {used_len} is shorter than the {need}-byte response header")]
    ShortResponse {
        /// What the device said.
        used_len: u32,
        /// Header size.
        need: u32,
    },
    /// A response code virtio does not define.
    #[error("response code {0} is not defined")]
    UnknownResponse(u8),
    /// The residual is larger than the transfer.
    #[error("residual {resid} exceeds the {data_len}-byte transfer")]
    ResidTooLarge {
        /// Residual claimed.
        resid: u32,
        /// Transfer length.
        data_len: u32,
    },
}

/// A decoded, checked command response, read in place from the device-written header (the
/// sense bytes are not copied out: the caller copies them once, into the command's buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResponse<'a> {
    /// `response::*` (checked to be defined).
    pub response: u8,
    /// SAM status (meaningful when `response` is OK).
    pub status: u8,
    /// Status qualifier.
    pub status_qualifier: u16,
    /// Bytes not transferred (checked `<=` the transfer).
    pub resid: u32,
    /// The sense data the device reported: its `sense_len` bytes, clamped to `SENSE_SIZE`.
    pub sense: &'a [u8],
}

/// Judges a completion. `resp` is the device-written response header, `used_len` the
/// used-ring length, and the byte counts describe the command's own buffers.
pub fn check_response(
    resp: &[u8],
    used_len: u32,
    data_out_len: u32,
    data_in_len: u32,
) -> Result<CommandResponse<'_>, DeviceError> {
    match CmdResp::ref_from_prefix(resp) {
        Ok((parsed, _)) => check_header(parsed, used_len, data_out_len, data_in_len),
        // Fewer bytes than a header: judged as a used length that short would be (after the
        // upper bound, as every response is).
        Err(_) => {
            let header = check_used_len(used_len, data_out_len, data_in_len)?;
            Err(DeviceError::ShortResponse {
                used_len,
                need: header,
            })
        }
    }
}

/// The used length's upper bound, which every response is judged by first: at most the
/// response header and both of the command's buffers. Returns the header's size.
#[inline]
fn check_used_len(used_len: u32, data_out_len: u32, data_in_len: u32) -> Result<u32, DeviceError> {
    let header = core::mem::size_of::<CmdResp>() as u32;
    let max_len = header
        .saturating_add(data_out_len)
        .saturating_add(data_in_len);
    if used_len > max_len {
        return Err(DeviceError::UsedLengthTooLarge { used_len, max_len });
    }
    Ok(header)
}

/// [`check_response`] of a typed response header (the driver's own, which the device wrote
/// in place): the used length, the response code and the residual judged without a parse.
#[inline]
pub fn check_header(
    parsed: &CmdResp,
    used_len: u32,
    data_out_len: u32,
    data_in_len: u32,
) -> Result<CommandResponse<'_>, DeviceError> {
    let header = check_used_len(used_len, data_out_len, data_in_len)?;
    if used_len < header {
        return Err(DeviceError::ShortResponse {
            used_len,
            need: header,
        });
    }
    if parsed.response > response::MAX {
        return Err(DeviceError::UnknownResponse(parsed.response));
    }
    let data_len = data_out_len.max(data_in_len);
    let resid = parsed.resid.get();
    if resid > data_len {
        return Err(DeviceError::ResidTooLarge { resid, data_len });
    }
    Ok(CommandResponse {
        response: parsed.response,
        status: parsed.status,
        status_qualifier: parsed.status_qualifier.get(),
        resid,
        sense: &parsed.sense[..(parsed.sense_len.get() as usize).min(SENSE_SIZE)],
    })
}

#[cfg(test)]
mod tests {
    use zerocopy::IntoBytes;

    use super::*;

    fn resp(response: u8, status: u8, resid: u32, sense_len: u32) -> CmdResp {
        CmdResp {
            sense_len: sense_len.into(),
            resid: resid.into(),
            status_qualifier: 0.into(),
            status,
            response,
            sense: [0x70; SENSE_SIZE],
        }
    }

    #[test]
    fn a_good_read_is_believed() {
        let r = resp(response::OK, 0, 512, 0);
        let ok = check_response(r.as_bytes(), 108 + 4096, 0, 4096).unwrap();
        assert_eq!(
            (ok.response, ok.status, ok.resid, ok.sense.len()),
            (0, 0, 512, 0)
        );
    }

    #[test]
    fn qemu_write_lengths_count_the_data_out_buffer() {
        let r = resp(response::OK, 0, 0, 0);
        assert!(check_response(r.as_bytes(), 108 + 4096, 4096, 0).is_ok());
    }

    #[test]
    fn nonsense_is_refused_with_the_value_named() {
        let r = resp(response::OK, 0, 0, 0);
        assert_eq!(
            check_response(r.as_bytes(), 108 + 4097, 0, 4096),
            Err(DeviceError::UsedLengthTooLarge {
                used_len: 4205,
                max_len: 4204
            })
        );
        assert_eq!(
            check_response(r.as_bytes(), 100, 0, 0),
            Err(DeviceError::ShortResponse {
                used_len: 100,
                need: 108
            })
        );
        let r = resp(13, 0, 0, 0);
        assert_eq!(
            check_response(r.as_bytes(), 108, 0, 0),
            Err(DeviceError::UnknownResponse(13))
        );
        let r = resp(response::OK, 0, 4097, 0);
        assert_eq!(
            check_response(r.as_bytes(), 108, 0, 4096),
            Err(DeviceError::ResidTooLarge {
                resid: 4097,
                data_len: 4096
            })
        );
    }

    #[test]
    fn oversized_sense_len_is_clamped() {
        let r = resp(response::OK, 2, 0, 10_000);
        assert_eq!(
            check_response(r.as_bytes(), 108, 0, 0).unwrap().sense.len(),
            SENSE_SIZE
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn arbitrary_responses_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                           used in proptest::prelude::any::<u32>(),
                                           out in 0u32..1 << 20, inn in 0u32..1 << 20) {
            if let Ok((parsed, _)) = CmdResp::ref_from_prefix(&bytes) {
                proptest::prop_assert_eq!(
                    check_header(parsed, used, out, inn),
                    check_response(&bytes, used, out, inn)
                );
            }
            if let Ok(ok) = check_response(&bytes, used, out, inn) {
                proptest::prop_assert!(ok.sense.len() <= SENSE_SIZE);
                proptest::prop_assert!(ok.resid <= out.max(inn));
                proptest::prop_assert!(ok.response <= response::MAX);
                proptest::prop_assert!(used <= 108 + out + inn);
            }
        }
    }
}
