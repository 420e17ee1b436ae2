//! A fake virtio-scsi device: a virtio-drivers `Transport` whose `notify` processes the split
//! virtqueues ([`super::ring`]) the way QEMU does.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::vec::Vec;

use drivers::virtio_scsi::wire::{CmdReq, CmdResp, Config, Event, TmfReq, feature, response};
use virtio_drivers::PhysAddr;
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::ring::{Piece, Queue, read_bytes, write_bytes};

/// A request the device holds back.
#[derive(Debug, Clone)]
struct Held {
    queue: u16,
    head: u16,
    pieces: Vec<Piece>,
    tag: u64,
    lun: [u8; 8],
}

#[derive(Debug)]
pub struct FakeState {
    pub status: DeviceStatus,
    pub config: Config,
    queues: BTreeMap<u16, Queue>,
    /// Disks by target id: 512-byte blocks.
    pub disks: BTreeMap<u8, Vec<u8>>,
    /// Hold every request instead of completing it.
    pub hold: bool,
    /// Hold this many more requests (whatever `hold` says), then complete them again.
    pub hold_next: usize,
    held: Vec<Held>,
    /// Used entries pushed before the next real one (on request queue `inject_queue`).
    pub inject_used: Vec<(u32, u32)>,
    /// The virtqueue `inject_used` goes to (2, the first request queue, unless set).
    pub inject_queue: u16,
    /// Requests completed, by virtqueue.
    pub completed_on: BTreeMap<u16, usize>,
    /// The tag field of every request the device saw, with its virtqueue.
    pub tags_seen: Vec<(u16, u64)>,
    /// The request header of every request the device saw, with its virtqueue.
    pub requests_seen: Vec<(u16, CmdReq)>,
    /// Added to the next real used length, then cleared.
    pub used_len_bonus: u32,
    /// Requests completed.
    pub completed: usize,
    /// Notifies of the request queue.
    pub request_notifies: usize,
    /// Device resets.
    pub resets: usize,
    /// Never finish a reset: a zero status write is ignored (the status never reads back
    /// 0) and the device keeps its queues and held requests, free to complete them later.
    pub never_reset: bool,
    /// Do not answer the control queue (task management times out).
    pub ignore_control: bool,
    /// Lies about responses, front first, one per completed request: each overwrites the
    /// start of the response header the device would have written (any response code,
    /// status, sense length or residual), as a misbehaving device may.
    pub lie_responses: VecDeque<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub struct FakeScsi(pub Rc<RefCell<FakeState>>);

impl FakeScsi {
    pub fn new() -> Self {
        let config = Config {
            num_queues: 1.into(),
            seg_max: 254.into(),
            max_sectors: 0xFFFF.into(),
            cmd_per_lun: 128.into(),
            event_info_size: 16.into(),
            sense_size: 96.into(),
            cdb_size: 32.into(),
            max_channel: 0.into(),
            max_target: 3.into(),
            max_lun: 0.into(),
        };
        let mut disks = BTreeMap::new();
        disks.insert(0, vec![0u8; 2048 * 512]);
        disks.insert(2, vec![0u8; 64 * 512]);
        Self(Rc::new(RefCell::new(FakeState {
            status: DeviceStatus::empty(),
            config,
            queues: BTreeMap::new(),
            disks,
            hold: false,
            hold_next: 0,
            held: Vec::new(),
            inject_used: Vec::new(),
            inject_queue: 2,
            completed_on: BTreeMap::new(),
            tags_seen: Vec::new(),
            requests_seen: Vec::new(),
            used_len_bonus: 0,
            completed: 0,
            request_notifies: 0,
            resets: 0,
            never_reset: false,
            ignore_control: false,
            lie_responses: VecDeque::new(),
        })))
    }

    pub fn state(&self) -> std::cell::RefMut<'_, FakeState> {
        self.0.borrow_mut()
    }
}

impl FakeState {
    fn pop_avail(&mut self, index: u16) -> Option<(u16, Vec<Piece>)> {
        self.queues.get_mut(&index)?.pop_avail()
    }

    fn push_used(&mut self, index: u16, id: u32, len: u32) {
        self.queues
            .get_mut(&index)
            .expect("queue set")
            .push_used(id, len);
    }

    fn process_requests(&mut self, queue: u16) {
        if queue == self.inject_queue {
            for (id, len) in std::mem::take(&mut self.inject_used) {
                self.push_used(queue, id, len);
            }
        }
        while let Some((head, pieces)) = self.pop_avail(queue) {
            let req = CmdReq::read_from_prefix(&read_bytes(pieces[0].addr, pieces[0].len as usize))
                .unwrap()
                .0;
            self.tags_seen.push((queue, req.tag.get()));
            self.requests_seen.push((queue, req));
            if self.hold || self.hold_next > 0 {
                self.hold_next = self.hold_next.saturating_sub(1);
                self.held.push(Held {
                    queue,
                    head,
                    pieces,
                    tag: req.tag.get(),
                    lun: req.lun,
                });
                continue;
            }
            self.complete(queue, head, &pieces, response::OK);
        }
    }

    /// Executes (or, for `ABORTED`, just answers) one request and pushes it to the used ring.
    fn complete(&mut self, queue: u16, head: u16, pieces: &[Piece], code: u8) {
        let req = CmdReq::read_from_prefix(&read_bytes(pieces[0].addr, pieces[0].len as usize))
            .unwrap()
            .0;
        let out: Vec<&Piece> = pieces.iter().skip(1).filter(|p| !p.writable).collect();
        let ins: Vec<&Piece> = pieces.iter().filter(|p| p.writable).collect();
        let mut resp = CmdResp::new_zeroed();
        resp.response = code;
        let data_in: &[&Piece] = ins.get(1..).unwrap_or(&[]);
        let in_len: u32 = data_in.iter().map(|p| p.len).sum();
        let out_len: u32 = out.iter().map(|p| p.len).sum();
        if code == response::OK {
            let target = req.lun[1];
            match self.disks.get_mut(&target) {
                None => resp.response = response::BAD_TARGET,
                Some(disk) => {
                    let data_out: Vec<u8> = out
                        .iter()
                        .flat_map(|p| read_bytes(p.addr, p.len as usize))
                        .collect();
                    let (status, bytes) =
                        execute(disk, &req.cdb, &data_out, in_len as usize, &mut resp);
                    resp.status = status;
                    let mut offset = 0;
                    for piece in data_in {
                        let n = (piece.len as usize).min(bytes.len().saturating_sub(offset));
                        write_bytes(piece.addr, &bytes[offset..offset + n]);
                        offset += n;
                    }
                    resp.resid = (in_len.max(out_len)
                        - if in_len > 0 { offset as u32 } else { out_len })
                    .into();
                }
            }
        }
        let mut header = resp.as_bytes().to_vec();
        if let Some(lie) = self.lie_responses.pop_front() {
            let n = lie.len().min(header.len());
            header[..n].copy_from_slice(&lie[..n]);
        }
        write_bytes(ins[0].addr, &header);
        let used_len = 108 + in_len + out_len + std::mem::take(&mut self.used_len_bonus);
        self.push_used(queue, u32::from(head), used_len);
        self.completed += 1;
        *self.completed_on.entry(queue).or_default() += 1;
    }

    fn process_control(&mut self) {
        while let Some((head, pieces)) = self.pop_avail(0) {
            let tmf = TmfReq::read_from_prefix(&read_bytes(pieces[0].addr, pieces[0].len as usize))
                .unwrap()
                .0;
            if tmf.subtype.get() == drivers::virtio_scsi::wire::tmf::ABORT_TASK {
                // Like QEMU: the request is looked up on the LUN the TMF addresses, by tag, and
                // completes (ABORTED) before the TMF does.
                let nexus = |h: &Held| h.tag == tmf.tag.get() && h.lun == tmf.lun;
                if let Some(i) = self.held.iter().position(nexus) {
                    let held = self.held.remove(i);
                    self.complete(held.queue, held.head, &held.pieces, response::ABORTED);
                }
            }
            write_bytes(pieces[1].addr, &[response::OK]);
            self.push_used(0, u32::from(head), 1);
        }
    }

    /// Whether the driver wants used-buffer notifications (interrupts) from `queue`.
    pub fn interrupts_wanted(&self, queue: u16) -> Option<bool> {
        self.queues.get(&queue).map(|q| q.avail_flags() & 1 == 0)
    }

    /// Releases held requests and completes them normally.
    pub fn release_held(&mut self) {
        for held in std::mem::take(&mut self.held) {
            self.complete(held.queue, held.head, &held.pieces, response::OK);
        }
    }

    /// Delivers `event` into the next posted event buffer; `false` if none is posted.
    pub fn fire_event(&mut self, event: Event) -> bool {
        let Some((head, pieces)) = self.pop_avail(1) else {
            return false;
        };
        write_bytes(pieces[0].addr, event.as_bytes());
        self.push_used(1, u32::from(head), 16);
        true
    }
}

/// READ(10)/WRITE(10)/TEST UNIT READY/INQUIRY/READ CAPACITY(10); anything else is CHECK
/// CONDITION, ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
fn execute(
    disk: &mut [u8],
    cdb: &[u8],
    data_out: &[u8],
    in_len: usize,
    resp: &mut CmdResp,
) -> (u8, Vec<u8>) {
    match cdb[0] {
        0x00 => (0, Vec::new()),
        0x12 => {
            let mut inquiry = vec![0u8; 36];
            inquiry[2] = 5;
            inquiry[4] = 31;
            inquiry[8..16].copy_from_slice(b"QEMU    ");
            inquiry[16..32].copy_from_slice(b"QEMU HARDDISK   ");
            inquiry.truncate(in_len);
            (0, inquiry)
        }
        0x25 => {
            let mut cap = ((disk.len() / 512 - 1) as u32).to_be_bytes().to_vec();
            cap.extend_from_slice(&512u32.to_be_bytes());
            (0, cap)
        }
        op @ (0x28 | 0x2A) => {
            let lba = u32::from_be_bytes(cdb[2..6].try_into().unwrap()) as usize;
            let blocks = usize::from(u16::from_be_bytes([cdb[7], cdb[8]]));
            let range = lba * 512..(lba + blocks) * 512;
            if range.end > disk.len() {
                return check(resp, 0x21);
            }
            if op == 0x28 {
                (0, disk[range].to_vec())
            } else if data_out.len() < blocks * 512 {
                // Less data than the CDB says (a lying test can leave the device confused).
                check(resp, 0x24)
            } else {
                disk[range].copy_from_slice(&data_out[..blocks * 512]);
                (0, Vec::new())
            }
        }
        _ => check(resp, 0x20),
    }
}

fn check(resp: &mut CmdResp, asc: u8) -> (u8, Vec<u8>) {
    resp.sense[0] = 0x70;
    resp.sense[2] = 0x05;
    resp.sense[7] = 10;
    resp.sense[12] = asc;
    resp.sense_len = 18.into();
    (2, Vec::new())
}

impl Transport for FakeScsi {
    fn device_type(&self) -> DeviceType {
        DeviceType::ScsiHost
    }
    fn read_device_features(&mut self) -> u64 {
        // What QEMU offers too; the driver must decline EVENT_IDX (see `VirtioScsi::init`).
        feature::VERSION_1 | feature::HOTPLUG | feature::RING_EVENT_IDX
    }
    fn write_driver_features(&mut self, _driver_features: u64) {}
    fn max_queue_size(&mut self, _queue: u16) -> u32 {
        256
    }
    fn notify(&mut self, queue: u16) {
        let mut state = self.0.borrow_mut();
        match queue {
            0 if state.ignore_control => {}
            0 => state.process_control(),
            request if request >= 2 => {
                state.request_notifies += 1;
                state.process_requests(request);
            }
            _ => {}
        }
    }
    fn get_status(&self) -> DeviceStatus {
        self.0.borrow().status
    }
    fn set_status(&mut self, status: DeviceStatus) {
        let mut state = self.0.borrow_mut();
        if status.is_empty() {
            if state.never_reset {
                return;
            }
            state.resets += 1;
            state.queues.clear();
            state.held.clear();
        }
        state.status = status;
    }
    fn set_guest_page_size(&mut self, _guest_page_size: u32) {}
    fn requires_legacy_layout(&self) -> bool {
        false
    }
    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        self.0.borrow_mut().queues.insert(
            queue,
            Queue::new(size, descriptors, driver_area, device_area),
        );
    }
    fn queue_unset(&mut self, queue: u16) {
        self.0.borrow_mut().queues.remove(&queue);
    }
    fn queue_used(&mut self, queue: u16) -> bool {
        self.0.borrow().queues.contains_key(&queue)
    }
    fn ack_interrupt(&mut self) -> InterruptStatus {
        InterruptStatus::empty()
    }
    fn read_config_generation(&self) -> u32 {
        0
    }
    fn read_config_space<T: FromBytes + IntoBytes>(
        &self,
        offset: usize,
    ) -> virtio_drivers::Result<T> {
        let state = self.0.borrow();
        let bytes = state.config.as_bytes();
        T::read_from_prefix(
            bytes
                .get(offset..)
                .ok_or(virtio_drivers::Error::ConfigSpaceTooSmall)?,
        )
        .map(|(value, _)| value)
        .map_err(|_| virtio_drivers::Error::ConfigSpaceTooSmall)
    }
    fn write_config_space<T: IntoBytes + zerocopy::Immutable>(
        &mut self,
        offset: usize,
        value: T,
    ) -> virtio_drivers::Result<()> {
        let mut state = self.0.borrow_mut();
        let bytes = state.config.as_mut_bytes();
        let end = offset + core::mem::size_of::<T>();
        bytes
            .get_mut(offset..end)
            .ok_or(virtio_drivers::Error::ConfigSpaceTooSmall)?
            .copy_from_slice(value.as_bytes());
        Ok(())
    }
}
