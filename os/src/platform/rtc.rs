//! The wall clock, from the PC's CMOS real-time clock (QEMU's `mc146818rtc`, which starts at the
//! host's UTC time unless told `-rtc base=...`). TLS needs it to judge certificate validity;
//! nothing else in the guest uses calendar time. The registers are read through ports in
//! `arch::rtc`; turning them into seconds since 1970 is here, pure and host-tested.
//!
//! Registers (the MC146818 data sheet, as every PC has them): seconds 0x00, minutes 0x02, hours
//! 0x04, day of the month 0x07, month 0x08, year 0x09 (two digits; QEMU keeps the century in
//! 0x32); status B (0x0B) bit 2 set means binary values (else BCD), bit 1 set means a 24-hour
//! clock (else bit 7 of the hour means PM).

/// The raw registers, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmosTime {
    pub seconds: u8,
    pub minutes: u8,
    pub hours: u8,
    pub day: u8,
    pub month: u8,
    pub year: u8,
    pub century: u8,
    pub status_b: u8,
}

const BINARY: u8 = 1 << 2;
const HOURS_24: u8 = 1 << 1;
const PM: u8 = 1 << 7;

fn bcd(value: u8) -> u8 {
    (value >> 4) * 10 + (value & 0x0f)
}

impl CmosTime {
    /// Seconds since 1970-01-01 UTC, or `None` for a value no clock holds.
    pub fn unix_seconds(&self) -> Option<u64> {
        let decode = |value: u8| match self.status_b & BINARY {
            0 => bcd(value),
            _ => value,
        };
        let mut hours = decode(self.hours & !PM);
        if self.status_b & HOURS_24 == 0 {
            // 12-hour clock: 12 AM is hour 0, 12 PM is hour 12.
            hours %= 12;
            if self.hours & PM != 0 {
                hours += 12;
            }
        }
        let century = match decode(self.century) {
            // A clock without the century register: this century.
            0 => 20,
            century => century,
        };
        let year = u64::from(century) * 100 + u64::from(decode(self.year));
        let (month, day) = (decode(self.month), decode(self.day));
        let (minutes, seconds) = (decode(self.minutes), decode(self.seconds));
        if !(1..=12).contains(&month)
            || !(1..=31).contains(&day)
            || hours > 23
            || minutes > 59
            || seconds > 59
            || year < 1970
        {
            return None;
        }
        let days = days_from_civil(year, u64::from(month), u64::from(day));
        Some(days * 86_400 + u64::from(hours) * 3600 + u64::from(minutes) * 60 + u64::from(seconds))
    }
}

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian; year >= 1970), after Howard
/// Hinnant's `days_from_civil`.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bcd_time(y: u8, mo: u8, d: u8, h: u8, mi: u8, s: u8) -> CmosTime {
        CmosTime {
            seconds: s,
            minutes: mi,
            hours: h,
            day: d,
            month: mo,
            year: y,
            century: 0x20,
            status_b: HOURS_24,
        }
    }

    #[test]
    fn bcd_and_binary_clocks_give_unix_time() {
        // 2026-12-04 07:30:15 UTC is 1796369415 (`date -u -d @1796369415`).
        let time = bcd_time(0x26, 0x12, 0x04, 0x07, 0x30, 0x15);
        assert_eq!(time.unix_seconds(), Some(1_796_369_415));
        let binary = CmosTime {
            seconds: 15,
            minutes: 30,
            hours: 7,
            day: 4,
            month: 12,
            year: 26,
            century: 20,
            status_b: BINARY | HOURS_24,
        };
        assert_eq!(binary.unix_seconds(), Some(1_796_369_415));
        // The epoch itself and a leap day.
        let epoch = CmosTime {
            century: 0x19,
            ..bcd_time(0x70, 0x01, 0x01, 0, 0, 0)
        };
        assert_eq!(epoch.unix_seconds(), Some(0));
        assert_eq!(
            bcd_time(0x24, 0x02, 0x29, 0, 0, 0).unix_seconds(),
            Some(1_709_164_800)
        );
    }

    #[test]
    fn a_twelve_hour_clock_and_nonsense_values() {
        let pm = CmosTime {
            status_b: 0,
            ..bcd_time(0x26, 0x12, 0x04, PM | 0x07, 0x30, 0x15)
        };
        assert_eq!(pm.unix_seconds(), Some(1_796_369_415 + 12 * 3600));
        let midnight = CmosTime {
            status_b: 0,
            ..bcd_time(0x26, 0x12, 0x04, 0x12, 0x30, 0x15)
        };
        assert_eq!(midnight.unix_seconds(), Some(1_796_369_415 - 7 * 3600));
        assert_eq!(bcd_time(0x26, 0x13, 0x04, 0, 0, 0).unix_seconds(), None);
        assert_eq!(bcd_time(0x26, 0x12, 0x00, 0, 0, 0).unix_seconds(), None);
        assert_eq!(bcd_time(0x26, 0x12, 0x04, 0x24, 0, 0).unix_seconds(), None);
    }
}
