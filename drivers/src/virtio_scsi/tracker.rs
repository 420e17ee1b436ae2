//! Request tracking: from a used-ring id back to the command, with everything the device
//! says checked before anyone believes it.
//!
//! virtio-drivers identifies a request by its head descriptor index (the *token*), and its
//! `pop_used` only pops the entry at the head of the used ring, which must be given the
//! exact buffers that were added. So the driver peeks the next used id, looks it up here,
//! and only then pops it with the buffers stored here. An id that matches nothing can't be
//! popped at all (the queue is wedged): that is [`TrackError::UnknownId`], and the caller
//! resets the device.
//!
//! A completion is then judged by [`check_response`] (the `virtio_scsi_resp` header of
//! virtio 1.2 §5.6.6.1 and the used ring's length): the used length, the response code
//! and the residual must make sense for the buffers of *that* command, or the command
//! fails with a [`DeviceError`] that names the bad value. The device's numbers are only
//! ever compared, never used to index.
//!
//! QEMU reports used length as data buffer size + response size for every command, reads
//! included *and writes included* (whose data buffers the device only reads), so the
//! length bound is all of the command's buffers, not just the device-writable ones.

use alloc::vec::Vec;

use zerocopy::FromBytes;

use super::wire::{CmdResp, SENSE_SIZE, response};

/// Errors of the tracking layer itself (not of one command).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrackError {
    /// The used ring returned an id no outstanding command has.
    #[error("device returned used id {id}, which no outstanding command has")]
    UnknownId {
        /// The id.
        id: u16,
    },
    /// The queue handed out an id that is still outstanding (a queue bug).
    #[error("id {id} is already outstanding")]
    DuplicateId {
        /// The id.
        id: u16,
    },
    /// More commands than the queue or host allows.
    #[error("{in_flight} commands in flight, limit {limit}")]
    Full {
        /// In flight.
        in_flight: usize,
        /// Limit.
        limit: usize,
    },
}

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

/// A decoded, checked command response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResponse {
    /// `response::*` (checked to be defined).
    pub response: u8,
    /// SAM status (meaningful when `response` is OK).
    pub status: u8,
    /// Status qualifier.
    pub status_qualifier: u16,
    /// Bytes not transferred (checked `<=` the transfer).
    pub resid: u32,
    /// Sense bytes available in `sense` (clamped to `SENSE_SIZE`).
    pub sense_len: usize,
    /// Sense data.
    pub sense: [u8; SENSE_SIZE],
}

/// Judges a completion. `resp` is the device-written response header, `used_len` the
/// used-ring length, and the byte counts describe the command's own buffers.
pub fn check_response(
    resp: &[u8],
    used_len: u32,
    data_out_len: u32,
    data_in_len: u32,
) -> Result<CommandResponse, DeviceError> {
    let header = core::mem::size_of::<CmdResp>() as u32;
    let max_len = header
        .saturating_add(data_out_len)
        .saturating_add(data_in_len);
    if used_len > max_len {
        return Err(DeviceError::UsedLengthTooLarge { used_len, max_len });
    }
    let short = DeviceError::ShortResponse {
        used_len,
        need: header,
    };
    if used_len < header {
        return Err(short);
    }
    let (parsed, _) = CmdResp::read_from_prefix(resp).map_err(|_| short)?;
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
        sense_len: (parsed.sense_len.get() as usize).min(SENSE_SIZE),
        sense: parsed.sense,
    })
}

/// Outstanding commands by used-ring id, each with whatever the caller stores for it
/// (buffers, tag).
#[derive(Debug)]
pub struct RequestTable<T> {
    slots: Vec<Option<T>>,
    in_flight: usize,
    limit: usize,
}

impl<T> RequestTable<T> {
    /// A table for ids `0..queue_size`, admitting at most `limit` commands at once (the
    /// host's can_queue).
    #[must_use]
    pub fn new(queue_size: usize, limit: usize) -> Self {
        Self {
            slots: (0..queue_size).map(|_| None).collect(),
            in_flight: 0,
            limit: limit.min(queue_size),
        }
    }

    /// Whether another command may be added.
    #[must_use]
    pub fn has_room(&self) -> bool {
        self.in_flight < self.limit
    }

    /// Most commands admitted at once.
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Commands in flight.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Fails unless another command may be added.
    pub fn reserve(&self) -> Result<(), TrackError> {
        if self.has_room() {
            Ok(())
        } else {
            Err(TrackError::Full {
                in_flight: self.in_flight,
                limit: self.limit,
            })
        }
    }

    /// Records `entry` under `id`.
    ///
    /// The caller has already posted the entry's buffers to the device under `id`, so an
    /// entry that cannot be recorded is leaked, never dropped: the device may write it.
    pub fn insert(&mut self, id: u16, entry: T) -> Result<(), TrackError> {
        let refused = match (self.reserve(), self.slots.get_mut(usize::from(id))) {
            (Ok(()), Some(slot @ None)) => {
                *slot = Some(entry);
                self.in_flight += 1;
                return Ok(());
            }
            (Err(error), _) => error,
            (Ok(()), Some(Some(_))) => TrackError::DuplicateId { id },
            (Ok(()), None) => TrackError::UnknownId { id },
        };
        core::mem::forget(entry);
        Err(refused)
    }

    /// Pops the entry under `id` from the device with `pop` (virtio-drivers' `pop_used`,
    /// given the entry's buffers) and only then takes it out of the table. If `pop` fails the
    /// descriptor is still posted, so the entry stays where it is: its buffers are not freed
    /// while the device may still write them.
    pub fn pop_with<R, E: From<TrackError>>(
        &mut self,
        id: u16,
        pop: impl FnOnce(&mut T) -> Result<R, E>,
    ) -> Result<(T, R), E> {
        let popped = pop(self.get_mut(id)?)?;
        Ok((self.take(id)?, popped))
    }

    /// The entry under `id`, if outstanding.
    pub fn get_mut(&mut self, id: u16) -> Result<&mut T, TrackError> {
        self.slots
            .get_mut(usize::from(id))
            .and_then(Option::as_mut)
            .ok_or(TrackError::UnknownId { id })
    }

    /// Removes and returns the entry under `id`.
    pub fn take(&mut self, id: u16) -> Result<T, TrackError> {
        let entry = self
            .slots
            .get_mut(usize::from(id))
            .and_then(Option::take)
            .ok_or(TrackError::UnknownId { id })?;
        self.in_flight -= 1;
        Ok(entry)
    }

    /// Removes every entry (after a device reset), in id order.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.in_flight = 0;
        self.slots.iter_mut().filter_map(Option::take)
    }
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
            (ok.response, ok.status, ok.resid, ok.sense_len),
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
            check_response(r.as_bytes(), 108, 0, 0).unwrap().sense_len,
            SENSE_SIZE
        );
    }

    #[test]
    fn table_maps_ids_and_refuses_unknown_duplicate_and_overflow() {
        let mut table = RequestTable::new(4, 2);
        table.insert(3, "a").unwrap();
        assert_eq!(table.insert(3, "b"), Err(TrackError::DuplicateId { id: 3 }));
        table.insert(0, "c").unwrap();
        assert_eq!(
            table.insert(1, "d"),
            Err(TrackError::Full {
                in_flight: 2,
                limit: 2
            })
        );
        assert_eq!(table.take(2), Err(TrackError::UnknownId { id: 2 }));
        assert_eq!(table.take(9), Err(TrackError::UnknownId { id: 9 }));
        assert_eq!(table.take(3), Ok("a"));
        assert_eq!(table.take(3), Err(TrackError::UnknownId { id: 3 }));
        assert_eq!(table.drain().collect::<Vec<_>>(), ["c"]);
        assert_eq!(table.in_flight(), 0);
    }

    #[test]
    fn a_failed_pop_leaves_the_entry_posted() {
        let mut table = RequestTable::new(4, 4);
        table.insert(2, alloc::vec![7u8; 16]).unwrap();
        let failed: Result<(Vec<u8>, u32), TrackError> =
            table.pop_with(2, |_| Err(TrackError::UnknownId { id: 99 }));
        assert_eq!(failed, Err(TrackError::UnknownId { id: 99 }));
        assert_eq!(table.in_flight(), 1, "still outstanding");
        assert_eq!(
            table.get_mut(2).map(|b| b.len()),
            Ok(16),
            "still in its slot"
        );
        let popped: Result<_, TrackError> = table.pop_with(2, |b| Ok(b.len()));
        assert_eq!(popped, Ok((alloc::vec![7u8; 16], 16)));
        assert_eq!(table.in_flight(), 0);
        let unknown: Result<(Vec<u8>, ()), TrackError> = table.pop_with(2, |_| Ok(()));
        assert_eq!(unknown, Err(TrackError::UnknownId { id: 2 }));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn arbitrary_responses_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                           used in proptest::prelude::any::<u32>(),
                                           out in 0u32..1 << 20, inn in 0u32..1 << 20) {
            if let Ok(ok) = check_response(&bytes, used, out, inn) {
                proptest::prop_assert!(ok.sense_len <= SENSE_SIZE);
                proptest::prop_assert!(ok.resid <= out.max(inn));
                proptest::prop_assert!(ok.response <= response::MAX);
                proptest::prop_assert!(used <= 108 + out + inn);
            }
        }
    }
}
