//! A latency histogram with log-linear buckets (16 per power of two, so a reported percentile is
//! within 1/16 of the true value), fixed size and allocation-free to record into. Beside the
//! buckets it keeps the exact count, sum, sum of squares, minimum and maximum, so mean, standard
//! deviation and the extremes are exact; [`Histogram::bins`] hands the non-empty buckets out in
//! the shape of fio's json+ `bins` (lower bound in ns, count) for tools that read those.

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

/// The reported percentiles (fio's default completion-latency set): label and quantile in parts
/// per million.
pub const PERCENTILES: [(&str, u64); 5] = [
    ("p50", 500_000),
    ("p90", 900_000),
    ("p99", 990_000),
    ("p99.9", 999_000),
    ("p99.99", 999_900),
];

/// Latencies in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    /// Samples per bucket; their sum is the sample count (not kept apart: one add less per
    /// sample).
    counts: [u64; BUCKETS],
    sum_ns: u128,
    /// Sum of squared samples, the low 128 bits (2^128 holds 10^8 samples of 100 s each)...
    sum_squares_ns: u128,
    /// ... and the carries out of them: the sum is exact to 2^192, and a report reads it as
    /// `u128::MAX` when this is not 0 (what a saturating sum gave, without the saturation's
    /// compare and two selects per sample).
    sum_squares_carries: u64,
    /// `u64::MAX` while empty.
    min_ns: u64,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            sum_ns: 0,
            sum_squares_ns: 0,
            sum_squares_carries: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

/// The bucket of `ns`: exact below 32 (shift 0), then 16 per power of two. Above 16 the value
/// shifted right by `shift` (its top bit less four) lies in 16..32, so `shift * 16` plus that is
/// `(msb - 3) * 16 + sub`, the log-linear index; below 16 the shift is 0 and the index is the
/// value. Branch-free: one `bsr`, two shifts and an add per sample. The mask only tells the
/// compiler what is true (the largest index, of `u64::MAX`, is 975), so the count's index
/// needs no bounds check.
#[inline]
fn bucket(ns: u64) -> usize {
    let shift = ((ns >> SUB_BITS) | 1).ilog2();
    ((u64::from(shift) << SUB_BITS) + (ns >> shift)) as usize & (BUCKETS - 1)
}

/// `a * b` as (low 128 bits, the bits above them, saturated to 64).
fn widening_mul(a: u128, b: u64) -> (u128, u64) {
    let b = u128::from(b);
    let (a_high, a_low) = (a >> 64, a & u128::from(u64::MAX));
    let low = a_low * b;
    let mid = a_high * b + (low >> 64);
    let high = u64::try_from(mid >> 64).unwrap_or(u64::MAX);
    ((mid << 64) | (low & u128::from(u64::MAX)), high)
}

/// The smallest value that lands in `index` (values are reported at the bucket's lower bound).
fn bucket_floor(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let msb = (index / SUB) as u32 + SUB_BITS - 1;
    (1u64 << msb) | ((index % SUB) as u64) << (msb - SUB_BITS)
}

impl core::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("mean_ns", &self.mean_ns())
            .field("p99_ns", &self.quantile_ns(990))
            .field("max_ns", &self.max_ns)
            .finish()
    }
}

impl Histogram {
    /// Adds `n` samples of `ns` each (a batch completed at one instant).
    pub fn record_n(&mut self, ns: u64, n: u64) {
        self.counts[bucket(ns)] += n;
        self.sum_ns += u128::from(ns) * u128::from(n);
        let (low, high) = widening_mul(u128::from(ns) * u128::from(ns), n);
        self.add_squares(low, high);
        self.note_extremes(ns);
    }

    /// Adds one sample of `ns`: [`Self::record_n`] of one, with one square to add.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.sum_ns += u128::from(ns);
        let (sum, carry) = self
            .sum_squares_ns
            .overflowing_add(u128::from(ns) * u128::from(ns));
        self.sum_squares_ns = sum;
        // One carry at most per sample, and the samples fit a `u64` count: this cannot wrap.
        self.sum_squares_carries = self.sum_squares_carries.wrapping_add(u64::from(carry));
        self.note_extremes(ns);
    }

    /// Stores the minimum and maximum only when `ns` moves them: after the first samples
    /// almost never, so a sample costs two compares rather than two selects and two stores.
    #[inline]
    fn note_extremes(&mut self, ns: u64) {
        if ns < self.min_ns {
            self.min_ns = ns;
        }
        if ns > self.max_ns {
            self.max_ns = ns;
        }
    }

    /// Adds `high * 2^128 + low` to the 192-bit sum of squares, the carries saturating.
    fn add_squares(&mut self, low: u128, high: u64) {
        let (sum, carry) = self.sum_squares_ns.overflowing_add(low);
        self.sum_squares_ns = sum;
        self.sum_squares_carries = self
            .sum_squares_carries
            .saturating_add(high)
            .saturating_add(u64::from(carry));
    }

    /// The sum of squares as the report uses it: saturated at `u128::MAX`.
    fn sum_squares(&self) -> u128 {
        if self.sum_squares_carries == 0 {
            self.sum_squares_ns
        } else {
            u128::MAX
        }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The exact mean (from the running sum, not the buckets); 0 when empty.
    pub fn mean_ns(&self) -> u64 {
        match self.count() {
            0 => 0,
            n => (self.sum_ns / u128::from(n)) as u64,
        }
    }

    /// The largest sample, exactly.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The smallest sample, exactly; 0 when empty.
    pub fn min_ns(&self) -> u64 {
        if self.min_ns == u64::MAX && self.count() == 0 {
            0
        } else {
            self.min_ns
        }
    }

    /// The population standard deviation (fio's `stddev`), from the exact sums, rounded down to
    /// whole ns; 0 when empty.
    pub fn stddev_ns(&self) -> u64 {
        let n = u128::from(self.count());
        if n == 0 {
            return 0;
        }
        let mean = self.sum_ns / n;
        // E[x²] − mean², both rounded down: the error is under 1 ns² of variance.
        let variance = (self.sum_squares() / n).saturating_sub(mean * mean);
        variance.isqrt() as u64
    }

    /// The non-empty buckets as (lower bound in ns, samples), in increasing order.
    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, count)| **count > 0)
            .map(|(index, count)| (bucket_floor(index), *count))
    }

    /// The `per_mille`/1000 quantile (990 for p99).
    pub fn quantile_ns(&self, per_mille: u64) -> u64 {
        self.quantile_ppm_ns(per_mille * 1000)
    }

    /// The `ppm`/1 000 000 quantile (999 900 for p99.99); the bucket's lower bound, so within
    /// 1/16 below the true value.
    pub fn quantile_ppm_ns(&self, ppm: u64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = (u128::from(total) * u128::from(ppm))
            .div_ceil(1_000_000)
            .max(1) as u64;
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_floor(index);
            }
        }
        self.max_ns
    }

    /// The percentiles fio prints by default for completion latency, as
    /// `(name, ppm, value_ns)`: p50, p90, p99, p99.9, p99.99.
    pub fn percentiles(&self) -> [(&'static str, u64, u64); 5] {
        PERCENTILES.map(|(name, ppm)| (name, ppm, self.quantile_ppm_ns(ppm)))
    }

    /// `p50 N, p90 N, p99 N, p99.9 N, p99.99 N, max N ns` for a console line.
    pub fn summary(&self) -> Summary<'_> {
        Summary(self)
    }

    /// Adds `other`'s samples (to sum the histograms of several jobs or queues).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum_ns += other.sum_ns;
        self.add_squares(other.sum_squares_ns, other.sum_squares_carries);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

/// A histogram's percentiles and maximum as text (see [`Histogram::summary`]).
pub struct Summary<'a>(&'a Histogram);

impl core::fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (name, _, ns) in self.0.percentiles() {
            write!(f, "{name} {ns}, ")?;
        }
        write!(f, "max {} ns", self.0.max_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn buckets_are_monotonic_and_tight(ns in any::<u64>()) {
            let b = bucket(ns);
            prop_assert!(b < BUCKETS);
            let floor = bucket_floor(b);
            prop_assert!(floor <= ns);
            // Within 1/16 of the value.
            prop_assert!(ns - floor <= ns / SUB as u64);
            if ns > 0 {
                prop_assert!(bucket(ns - 1) <= b);
            }
        }
    }

    /// Count, mean, min, max, standard deviation, percentiles and bins.
    type Printed = (u64, u64, u64, u64, u64, [u64; 5], Vec<(u64, u64)>);

    /// The statistics a report prints, as a reference computes them from the samples
    /// themselves: count, exact mean, min, max and population standard deviation (the same
    /// rounding as [`Histogram::stddev_ns`]), each percentile as the bucket floor of the sample
    /// at its rank, and the bins (bucket floor, samples) in increasing order, with the bucket
    /// layout written out the long way (16 per power of two, exact below 16).
    fn reference(samples: &[u64]) -> Printed {
        let floor = |ns: u64| -> u64 {
            if ns < 16 {
                return ns;
            }
            let msb = 63 - ns.leading_zeros();
            let step = 1u64 << (msb - 4);
            ns - ns % step
        };
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let n = sorted.len() as u128;
        if n == 0 {
            return (0, 0, 0, 0, 0, [0; 5], Vec::new());
        }
        let sum: u128 = sorted.iter().map(|&x| u128::from(x)).sum();
        let squares = sorted.iter().fold(0u128, |acc, &x| {
            acc.saturating_add(u128::from(x) * u128::from(x))
        });
        let mean = sum / n;
        let stddev = (squares / n).saturating_sub(mean * mean).isqrt() as u64;
        let percentiles = PERCENTILES.map(|(_, ppm)| {
            let rank = (n * u128::from(ppm)).div_ceil(1_000_000).max(1) as usize;
            floor(sorted[rank - 1])
        });
        let mut bins: Vec<(u64, u64)> = Vec::new();
        for &x in &sorted {
            match bins.last_mut() {
                Some((f, count)) if *f == floor(x) => *count += 1,
                _ => bins.push((floor(x), 1)),
            }
        }
        let min = sorted[0];
        let max = sorted[sorted.len() - 1];
        (n as u64, mean as u64, min, max, stddev, percentiles, bins)
    }

    fn observed(h: &Histogram) -> Printed {
        (
            h.count(),
            h.mean_ns(),
            h.min_ns(),
            h.max_ns(),
            h.stddev_ns(),
            h.percentiles().map(|(_, _, ns)| ns),
            h.bins().collect(),
        )
    }

    proptest! {
        /// What a report prints from a histogram is what the samples give, for any samples
        /// (recorded one by one, or split over two histograms and merged).
        #[test]
        fn the_report_is_what_the_samples_give(
            samples in proptest::collection::vec(
                prop_oneof![0u64..64, 0u64..5_000_000, any::<u64>()],
                0..200,
            ),
            split in 0usize..200,
        ) {
            let mut h = Histogram::default();
            for &ns in &samples {
                h.record(ns);
            }
            prop_assert_eq!(observed(&h), reference(&samples));
            let (a, b) = samples.split_at(split.min(samples.len()));
            let (mut left, mut right) = (Histogram::default(), Histogram::default());
            a.iter().for_each(|&ns| left.record(ns));
            b.iter().for_each(|&ns| right.record(ns));
            left.merge(&right);
            prop_assert_eq!(observed(&left), reference(&samples));
        }
    }

    /// A fixed sample set and the report it gave before the record path was made leaner
    /// (2026-12-04): pinned, so a cheaper `record` cannot change a printed figure.
    #[test]
    fn a_fixed_sample_set_reports_as_before() {
        let mut h = Histogram::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..10_000u64 {
            // xorshift64: latencies from 0 to about 2^24 ns, and a few huge ones.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ns = if i % 1000 == 999 {
                x
            } else {
                x >> (40 + i % 24)
            };
            h.record(ns);
        }
        let (count, mean, min, max, stddev, percentiles, bins) = observed(&h);
        assert_eq!(
            (count, mean, min, max, stddev, percentiles),
            (
                10_000,
                9_462_832_080_537_472,
                0,
                15_482_564_514_359_318_961,
                184_224_568_125_723_658,
                [
                    2_048,
                    1_835_008,
                    13_107_200,
                    16_252_928,
                    14_987_979_559_889_010_688
                ]
            ),
            "figures"
        );
        // The bins, folded: how many, and a checksum of (floor, count) in order.
        let fold = bins.iter().fold(0u64, |acc, &(floor, n)| {
            acc.rotate_left(5) ^ floor.wrapping_mul(31) ^ n
        });
        assert_eq!((bins.len(), fold), (345, 5_478_430_398_682_792_307), "bins");
    }

    #[test]
    fn min_stddev_and_bins_are_exact() {
        let mut h = Histogram::default();
        assert_eq!((h.min_ns(), h.stddev_ns(), h.bins().count()), (0, 0, 0));
        for ns in [2_000u64, 4_000, 4_000, 4_000, 5_000, 5_000, 7_000, 9_000] {
            h.record(ns);
        }
        assert_eq!((h.min_ns(), h.max_ns(), h.mean_ns()), (2_000, 9_000, 5_000));
        assert_eq!(h.stddev_ns(), 2_000, "the textbook example: sigma 2");
        let mut other = Histogram::default();
        other.record_n(1_000, 2);
        h.merge(&other);
        assert_eq!(h.min_ns(), 1_000);
        let bins: alloc::vec::Vec<(u64, u64)> = h.bins().collect();
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 10);
        assert!(bins.windows(2).all(|w| w[0].0 < w[1].0), "increasing");
        assert_eq!(bins[0], (bucket_floor(bucket(1_000)), 2));
        let other_bins: alloc::vec::Vec<(u64, u64)> = other.bins().collect();
        assert_eq!(other_bins, [(bucket_floor(bucket(1_000)), 2)]);
    }

    #[test]
    fn p99_of_a_known_distribution() {
        let mut h = Histogram::default();
        for ns in 1..=1000u64 {
            h.record(ns * 1000);
        }
        let p99 = h.quantile_ns(990);
        assert!((990_000 - 990_000 / 16..=990_000).contains(&p99), "{p99}");
        assert_eq!(h.mean_ns(), 500_500);
        assert_eq!(h.count(), 1000);
    }

    #[test]
    fn tail_percentiles_see_one_slow_command_in_ten_thousand() {
        let mut h = Histogram::default();
        for _ in 0..9_999 {
            h.record(1_024);
        }
        h.record(1 << 20);
        let [p50, p90, p99, p999, p9999] = h.percentiles().map(|(_, _, ns)| ns);
        assert_eq!((p50, p90, p99, p999), (1_024, 1_024, 1_024, 1_024));
        assert_eq!(p9999, 1_024, "rank 9999 of 10000 is still fast");
        h.record(1 << 20);
        assert!(
            h.quantile_ppm_ns(999_900) == 1 << 20,
            "two slow of 10001 reach p99.99"
        );
        assert_eq!(h.max_ns(), 1 << 20);
        assert_eq!(
            alloc::format!("{}", h.summary()),
            "p50 1024, p90 1024, p99 1024, p99.9 1024, p99.99 1048576, max 1048576 ns"
        );
    }
}
