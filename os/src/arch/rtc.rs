//! The CMOS real-time clock's registers through ports 0x70 (index) and 0x71 (data); what they
//! mean is `platform::rtc`'s business.

use x86_64::instructions::port::Port;

use crate::platform::rtc::CmosTime;

const INDEX: u16 = 0x70;
const DATA: u16 = 0x71;
/// Status A bit 7: an update is in progress (the registers may be mid-change).
const UPDATE_IN_PROGRESS: u8 = 1 << 7;

fn register(index: u8) -> u8 {
    // SAFETY: the CMOS index and data ports have no memory effects; bit 7 of the index (NMI
    // disable) is left clear, as it was.
    unsafe {
        Port::<u8>::new(INDEX).write(index & 0x7f);
        Port::<u8>::new(DATA).read()
    }
}

fn snapshot() -> CmosTime {
    CmosTime {
        seconds: register(0x00),
        minutes: register(0x02),
        hours: register(0x04),
        day: register(0x07),
        month: register(0x08),
        year: register(0x09),
        century: register(0x32),
        status_b: register(0x0b),
    }
}

/// Seconds since 1970 UTC from the CMOS clock: two equal reads outside an update (the
/// registers change together once a second), or `None` if the clock never settles or holds
/// nonsense.
pub fn unix_seconds() -> Option<u64> {
    for _ in 0..1000 {
        if register(0x0a) & UPDATE_IN_PROGRESS != 0 {
            continue;
        }
        let first = snapshot();
        if register(0x0a) & UPDATE_IN_PROGRESS == 0 && snapshot() == first {
            return first.unix_seconds();
        }
    }
    None
}
