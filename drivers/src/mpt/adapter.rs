//! [`Mpt`]: one SAS1068 adapter, from bring-up to shutdown, with recovery.
//!
//! The adapter owns its registers, a delay source, the request frame array (one frame per
//! slot), the reply frame array and the chain pool. Bring-up is the `ioc` sequence plus
//! memory: frames are allocated after IOC_FACTS sized them and before IOC_INIT names their
//! 4 GiB window. Recovery is a message-unit reset and the same sequence again, after every
//! outstanding command has been failed back to its owner with [`Outcome::HostReset`].
//!
//! An IOC that does not come back (the message-unit reset never reaches READY, a handshake
//! times out, it faults again after IOC_INIT) may still write whatever it was given: the
//! request frames, the reply frames, the chain frames of outstanding requests. The adapter
//! is then *dead* ([`Mpt::is_dead`]): those are leaked (chain frames never go back to the
//! pool, the frame arrays are never freed), outstanding requests are handed back once, and
//! nothing touches the registers again, not even `Drop`.

use alloc::vec;
use alloc::vec::Vec;
use core::mem::ManuallyDrop;

use crate::delay::Delay;
use crate::dma::{BusAddr, DmaAddr, DmaAlloc, DmaMemory};

use super::command::{Completion, Outcome};
use super::error::MptError;
use super::ioc::{self, Geometry, IocFacts, MptConfig, PortFacts};
use super::regs::{MptRegisters, Register, him};
use super::sgl::{ChainPool, SglLayout};
pub use interrupt::Armed;
pub use queue::ReplySink;
use queue::Slot;

mod interrupt;
mod queue;

/// Counters for the adapter's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MptStats {
    /// Requests posted.
    pub submitted: u64,
    /// Context-only (success) replies.
    pub turbo_replies: u64,
    /// Full reply frames.
    pub address_replies: u64,
    /// Replies rejected (unknown context, bad frame address, inconsistent contents).
    pub bad_replies: u64,
    /// Recoveries (message-unit reset and re-init).
    pub resets: u64,
    /// Most chain frames one request used.
    pub max_chains_per_io: usize,
    /// Times the reply interrupt was armed before a halt.
    pub interrupt_arms: u64,
    /// Of those, arms whose re-check found replies already waiting (the race it closes).
    pub arms_with_replies_waiting: u64,
}

/// One MPT adapter.
pub struct Mpt<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> {
    regs: R,
    delay: D,
    config: MptConfig,
    facts: IocFacts,
    port: PortFacts,
    geometry: Geometry,
    layout: SglLayout,
    /// Request frames; leaked (never dropped) once the adapter is dead.
    requests: ManuallyDrop<M>,
    /// Bus address of request frame 0 (`requests` never moves): what the request post FIFO
    /// is told, plus the slot's offset.
    request_base: DmaAddr,
    /// Reply frames; leaked (never dropped) once the adapter is dead.
    replies: ManuallyDrop<M>,
    window_high32: u32,
    pool: P,
    /// Request slots: `0..can_queue` are the SCSI commands' (a command's tag is its slot), the
    /// rest task management's.
    slots: Vec<Slot<P::Frame>>,
    /// Free task management slots.
    free_slots: Vec<u16>,
    outstanding_io: usize,
    /// `true` while the IOC holds reply frame `i` (posted to the free FIFO).
    reply_with_ioc: Vec<bool>,
    frame_buf: Vec<u8>,
    operational: bool,
    /// The reply interrupt is unmasked (see `interrupt`).
    reply_interrupt_on: bool,
    /// Set once the IOC has been reset for good, so Drop need not reset it again.
    stopped: bool,
    /// The IOC failed to come back and was abandoned: its memory is leaked and nothing
    /// touches it again.
    dead: bool,
    stats: MptStats,
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> core::fmt::Debug for Mpt<R, D, M, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mpt")
            .field("facts", &self.facts)
            .field("geometry", &self.geometry)
            .field("outstanding_io", &self.outstanding_io)
            .field("operational", &self.operational)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> Drop for Mpt<R, D, M, P> {
    /// An adapter dropped without [`Mpt::shutdown`] still resets the IOC (bounded wait)
    /// before its frame arrays are freed, so the IOC cannot write into freed memory. If
    /// that reset fails, or the adapter is dead, the frame arrays are leaked instead.
    fn drop(&mut self) {
        if self.dead {
            return;
        }
        if !self.stopped
            && ioc::message_unit_reset(&mut self.regs, &mut self.delay, &self.config).is_err()
        {
            log::error!("mptsas: IOC did not reset on drop; leaking its frame arrays");
            return;
        }
        // SAFETY: this is `drop`; neither field is used again. The IOC is READY (reset
        // above, or by `shutdown`), so it no longer reads request frames or writes reply
        // frames.
        unsafe {
            ManuallyDrop::drop(&mut self.requests);
            ManuallyDrop::drop(&mut self.replies);
        }
    }
}

/// The request and reply frames, `geometry.slots` of each, in one 4 GiB window (the IOC takes
/// one high address word for both), and that window's high half.
fn frame_memory<M: DmaMemory>(
    memory: &mut impl DmaAlloc<Region = M>,
    geometry: &Geometry,
    config: &MptConfig,
) -> Result<(M, M, u32), MptError> {
    let request_bytes = geometry.slots * geometry.frame_size_bytes;
    let requests = memory
        .alloc(request_bytes, 64)
        .ok_or(MptError::OutOfDmaMemory {
            what: "request frames",
            len_bytes: request_bytes,
        })?;
    let reply_bytes = geometry.slots * usize::from(config.reply_frame_size_bytes);
    let replies = memory
        .alloc(reply_bytes, 64)
        .ok_or(MptError::OutOfDmaMemory {
            what: "reply frames",
            len_bytes: reply_bytes,
        })?;
    let window_high32 = window_of("request frames", &requests)?;
    if window_of("reply frames", &replies)? != window_high32 {
        return Err(MptError::HighAddressMismatch {
            what: "reply frames",
            addr: replies.bus_addr(),
            window_high32,
        });
    }
    Ok((requests, replies, window_high32))
}

/// Checks that `region` lies in one 4 GiB window and returns its high half.
fn window_of(what: &'static str, region: &impl DmaMemory) -> Result<u32, MptError> {
    let start = region.bus_addr();
    let last = start
        .checked_add(region.len_bytes().saturating_sub(1) as u64)
        .unwrap_or(DmaAddr(u64::MAX));
    if start.high32() != last.high32() {
        return Err(MptError::HighAddressMismatch {
            what,
            addr: last,
            window_high32: start.high32(),
        });
    }
    Ok(start.high32())
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> Mpt<R, D, M, P> {
    /// Brings the IOC up: reset, facts, memory, IOC_INIT, reply priming, PORT_ENABLE.
    pub fn init(
        mut regs: R,
        mut delay: D,
        config: MptConfig,
        memory: &mut impl DmaAlloc<Region = M>,
        pool: P,
    ) -> Result<Self, MptError> {
        ioc::message_unit_reset(&mut regs, &mut delay, &config)?;
        let facts = ioc::ioc_facts(&mut regs, &mut delay, &config)?;
        let port = ioc::port_facts(&mut regs, &mut delay, &config, 0)?;
        let geometry = Geometry::new(&facts, &config)?;
        let layout = SglLayout::new(geometry.frame_size_bytes, geometry.max_chain_depth)?;

        let (requests, replies, window_high32) = frame_memory(memory, &geometry, &config)?;

        let mut adapter = Self {
            regs,
            delay,
            config,
            facts,
            port,
            geometry,
            layout,
            request_base: requests.bus_addr(),
            requests: ManuallyDrop::new(requests),
            replies: ManuallyDrop::new(replies),
            window_high32,
            pool,
            slots: (0..geometry.slots).map(|_| Slot::default()).collect(),
            // Task management's slots: the I/O slots are their tags.
            free_slots: (geometry.can_queue as u16..geometry.slots as u16)
                .rev()
                .collect(),
            outstanding_io: 0,
            reply_with_ioc: vec![false; geometry.slots],
            frame_buf: vec![0; geometry.frame_size_bytes],
            operational: false,
            reply_interrupt_on: false,
            stopped: false,
            dead: false,
            stats: MptStats::default(),
        };
        adapter.start()?;
        Ok(adapter)
    }

    /// IOC_INIT, reply priming and PORT_ENABLE on an IOC that is READY.
    fn start(&mut self) -> Result<(), MptError> {
        // Polled until a waiter arms the reply interrupt (`interrupt`); a reset keeps QEMU's
        // mask, so it is written here every time.
        self.regs.write32(
            Register::HostInterruptMask,
            him::REPLY_MASK | him::DOORBELL_MASK,
        );
        self.reply_interrupt_on = false;
        ioc::ioc_init(
            &mut self.regs,
            &mut self.delay,
            &self.config,
            self.window_high32,
        )?;
        let reply_size = usize::from(self.config.reply_frame_size_bytes);
        for index in 0..self.geometry.slots {
            let addr = self.replies.bus_addr().0 + (index * reply_size) as u64;
            self.regs.write32(Register::ReplyFifo, addr as u32);
            self.reply_with_ioc[index] = true;
        }
        ioc::port_enable(&mut self.regs, &mut self.delay, &self.config, 0)?;
        self.operational = true;
        Ok(())
    }

    /// Resets the IOC and brings it up again; then fails every outstanding command with
    /// [`Outcome::HostReset`] (their chain frames go back to the pool: the IOC is past a
    /// reset and no longer reads them).
    ///
    /// If the IOC does not come back (no READY after the reset, a handshake or IOC_INIT
    /// failure, FAULT again), the adapter is abandoned ([`Mpt::is_dead`]): outstanding
    /// commands are handed back with [`Outcome::HostReset`] but their chain frames, and the
    /// frame arrays, are leaked, because the IOC may still write them; `Err` says so.
    pub fn recover(&mut self, mut on_complete: impl FnMut(Completion)) -> Result<(), MptError> {
        if self.dead {
            return Err(MptError::NotOperational);
        }
        self.operational = false;
        self.stats.resets += 1;
        self.reply_with_ioc
            .iter_mut()
            .for_each(|owned| *owned = false);
        let result = ioc::message_unit_reset(&mut self.regs, &mut self.delay, &self.config)
            .and_then(|()| self.start());
        match result {
            Ok(()) => {
                self.fail_all(&mut on_complete);
                Ok(())
            }
            Err(error) => {
                self.abandon(&mut on_complete);
                Err(error)
            }
        }
    }

    fn fail_all(&mut self, on_complete: &mut impl FnMut(Completion)) {
        for index in 0..self.slots.len() {
            if let Some(done) = self.release(index, |_| Outcome::HostReset) {
                on_complete(done);
            }
        }
    }

    /// Gives the IOC up: hands back every outstanding command with [`Outcome::HostReset`],
    /// leaking its chain frames (the IOC may still read them; they must not be reused),
    /// and marks the adapter dead, so it takes no more work, polls nothing and its drop
    /// neither touches the registers nor frees the frame arrays.
    fn abandon(&mut self, on_complete: &mut impl FnMut(Completion)) {
        self.dead = true;
        self.operational = false;
        self.stopped = true;
        for index in 0..self.slots.len() {
            self.slots[index].leak_chains();
            if let Some(done) = self.release(index, |_| Outcome::HostReset) {
                on_complete(done);
            }
        }
        log::error!("mptsas: IOC abandoned; its frames are leaked and the adapter is dead");
    }

    /// Stops the IOC (message-unit reset, so it no longer touches host memory) and fails
    /// whatever was outstanding, returning their chain frames to the pool. The frame arrays
    /// are freed when the adapter drops; after this, dropping it touches no register. If
    /// the reset fails the adapter is abandoned instead (see [`Mpt::recover`]).
    pub fn shutdown(&mut self, mut on_complete: impl FnMut(Completion)) -> Result<(), MptError> {
        if self.dead {
            return Err(MptError::NotOperational);
        }
        self.operational = false;
        self.stopped = true;
        match ioc::message_unit_reset(&mut self.regs, &mut self.delay, &self.config) {
            Ok(()) => {
                self.fail_all(&mut on_complete);
                Ok(())
            }
            Err(error) => {
                self.abandon(&mut on_complete);
                Err(error)
            }
        }
    }

    /// Whether the IOC failed to come back and was abandoned (see [`Mpt::recover`]).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Reads the IOC state; FAULT marks the adapter non-operational (call [`Mpt::recover`]).
    pub fn check_health(&mut self) -> Result<(), MptError> {
        if self.dead {
            return Err(MptError::NotOperational);
        }
        let value = self.regs.read32(Register::Doorbell);
        match super::mpi::IocState::from_doorbell(value) {
            super::mpi::IocState::Operational => Ok(()),
            super::mpi::IocState::Fault => {
                self.operational = false;
                Err(MptError::Fault {
                    code: (value & super::regs::doorbell::DATA_MASK) as u16,
                })
            }
            state => {
                self.operational = false;
                Err(MptError::StateTimeout {
                    state,
                    wanted: super::mpi::IocState::Operational,
                    waited_us: 0,
                })
            }
        }
    }

    /// IOC_FACTS as reported.
    pub fn facts(&self) -> &IocFacts {
        &self.facts
    }

    /// PORT_FACTS of port 0.
    pub fn port_facts(&self) -> &PortFacts {
        &self.port
    }

    /// Slots, can_queue and frame sizes in use.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// SGL geometry: the host's sg_tablesize is `layout().max_segments()`.
    pub fn layout(&self) -> &SglLayout {
        &self.layout
    }

    /// Counters.
    pub fn stats(&self) -> &MptStats {
        &self.stats
    }

    /// SCSI I/O requests outstanding.
    pub fn outstanding(&self) -> usize {
        self.outstanding_io
    }

    /// Whether the adapter takes commands.
    pub fn is_operational(&self) -> bool {
        self.operational
    }

    /// Busy-waits `us` microseconds on the adapter's delay source (for bounded waits
    /// built on [`Mpt::poll`]).
    pub fn pause_us(&mut self, us: u32) {
        self.delay.delay_us(us);
    }

    /// The sense window (high 32 bits) given to IOC_INIT.
    pub fn config_sense_high32(&self) -> u32 {
        self.config.sense_high32
    }

    /// The chain pool (for its statistics).
    pub fn chain_pool(&self) -> &P {
        &self.pool
    }
}
