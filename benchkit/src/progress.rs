//! Progress lines for benchmarks that boot many guests: which case of how many, the time spent
//! so far and, once a case has finished, a rough estimate of the time left.
//!
//! The estimate is the mean time per finished case times the cases left. Cases of one bench
//! often differ in cost (a dmapool sweep grows with n), so the line says "about" and never
//! claims more than that.

use std::time::{Duration, Instant};

/// Counts the cases of one benchmark run and formats a line as each one starts.
#[derive(Debug)]
pub struct Progress {
    total: usize,
    started: usize,
    clock: Instant,
}

impl Progress {
    /// A run of `total` cases starting now.
    pub fn new(total: usize) -> Self {
        Self {
            total,
            started: 0,
            clock: Instant::now(),
        }
    }

    /// Marks the next case as started and prints its line to stderr, so that a table printed to
    /// stdout stays clean when stdout is redirected.
    pub fn start(&mut self, label: &str) {
        eprintln!("{}", self.next_line(label));
    }

    /// Marks the next case as started and returns its line.
    pub(crate) fn next_line(&mut self, label: &str) -> String {
        self.started += 1;
        line(self.started, self.total, label, self.clock.elapsed())
    }
}

/// `[3/12] label · 1m20s elapsed, about 2m40s left` for case `number` (1-based) of `total`,
/// `elapsed` after the first case started.
pub fn line(number: usize, total: usize, label: &str, elapsed: Duration) -> String {
    let finished = number.saturating_sub(1);
    let mut text = format!("[{number}/{total}] {label} · {} elapsed", clock(elapsed));
    if let Some(left) = estimate_left(finished, total, elapsed) {
        text.push_str(&format!(", about {} left", clock(left)));
    }
    text
}

/// The time left if each of the `total - finished` cases takes the mean of the `finished` ones;
/// `None` before any case has finished or when the count is inconsistent.
pub(crate) fn estimate_left(finished: usize, total: usize, elapsed: Duration) -> Option<Duration> {
    if finished == 0 || finished > total {
        return None;
    }
    let left = u32::try_from(total - finished).ok()?;
    let finished = u32::try_from(finished).ok()?;
    Some(elapsed / finished * left)
}

/// `45s`, `3m05s` or `1h02m`: whole seconds, the two largest units.
pub fn clock(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, seconds / 60 % 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_case_has_no_estimate() {
        assert_eq!(
            line(1, 12, "virtio-scsi poll", Duration::from_millis(300)),
            "[1/12] virtio-scsi poll · 0s elapsed"
        );
    }

    #[test]
    fn later_cases_extrapolate_the_mean_of_the_finished_ones() {
        // Two cases took 80 s together: ten more take about 400 s.
        assert_eq!(
            line(3, 12, "mptsas irq", Duration::from_secs(80)),
            "[3/12] mptsas irq · 1m20s elapsed, about 6m40s left"
        );
        assert_eq!(
            estimate_left(12, 12, Duration::from_secs(80)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_count_past_the_total_gives_no_estimate() {
        assert_eq!(estimate_left(13, 12, Duration::from_secs(80)), None);
        assert_eq!(estimate_left(0, 0, Duration::from_secs(80)), None);
    }

    #[test]
    fn clocks_show_the_two_largest_units() {
        assert_eq!(clock(Duration::from_millis(59_999)), "59s");
        assert_eq!(clock(Duration::from_secs(185)), "3m05s");
        assert_eq!(clock(Duration::from_secs(3725)), "1h02m");
    }

    #[test]
    fn each_start_counts_one_case() {
        let mut progress = Progress::new(2);
        assert!(progress.next_line("a").starts_with("[1/2] a"));
        assert!(progress.next_line("b").starts_with("[2/2] b"));
    }
}
