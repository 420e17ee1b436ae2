//! When and under what load a benchmark ran: the UTC date and the host's load averages, which
//! every results page shows beside its figures (on a shared machine they explain the spread).

use std::sync::OnceLock;

use serde_json::{Value, json};

static LOAD_AT_START: OnceLock<Option<[f64; 3]>> = OnceLock::new();

/// Notes the load averages as xtask starts, before a bench adds its own load.
pub fn note_start() {
    load_at_start();
}

/// The load averages when xtask started (or when first asked, without [`note_start`]).
pub(crate) fn load_at_start() -> Option<[f64; 3]> {
    *LOAD_AT_START.get_or_init(load_averages)
}

/// The host's 1-, 5- and 15-minute load averages from `/proc/loadavg`, if readable.
pub(crate) fn load_averages() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    let mut next = || fields.next()?.ok();
    Some([next()?, next()?, next()?])
}

/// `{"start": [1, 5, 15], "end": [...]}`, `null` for a side that could not be read.
pub(crate) fn load_json(start: Option<[f64; 3]>, end: Option<[f64; 3]>) -> Value {
    json!({ "start": start, "end": end })
}

/// The current time as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    utc_from_unix(seconds)
}

/// `seconds` since 1970-01-01 00:00:00 UTC as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian
/// calendar; the days-to-civil conversion of H. Hinnant's `chrono`-compatible date algorithms).
pub(crate) fn utc_from_unix(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let of_day = seconds % 86_400;
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_become_utc_dates() {
        assert_eq!(utc_from_unix(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.
        assert_eq!(utc_from_unix(951_827_696), "2000-02-29 12:34:56 UTC");
        // 2026-12-01 21:08:31, the day this was written.
        assert_eq!(utc_from_unix(1_796_159_311), "2026-12-01 21:08:31 UTC");
        assert_eq!(utc_from_unix(1_796_169_599), "2026-12-01 23:59:59 UTC");
    }

    #[test]
    fn load_averages_read_three_numbers() {
        // /proc/loadavg exists on every Linux host this runs on.
        let load = load_averages().expect("/proc/loadavg");
        assert!(load.iter().all(|value| *value >= 0.0));
    }
}
