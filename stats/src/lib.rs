//! The one home of each statistic sensepool publishes, so a figure means the same in the guest's
//! report, a bench's table and a results page.
//!
//! - [`median`]: the middle of the sorted values, and for an even count the **mean of the two
//!   middle ones** (the textbook definition, numpy's and R's). The other choice, the upper of
//!   the two, is an observed value, but it is biased: with two repetitions it is the larger one,
//!   so a "median" IOPS would be the best run. Integers take the midpoint rounded down.
//! - [`Spread`]: the median with the minimum, the maximum and the count: what a results page
//!   shows beside a figure measured more than once.
//! - [`ratios`]: paired ratios, `top / bottom` of the same round or repetition, leaving out a
//!   pair whose bottom is not positive or whose ratio is not finite; their [`Spread`] is how a
//!   comparison is reported (ratios taken within a round cancel what the host did to that round).
//! - [`order`]: which case runs in which position of a round, rotated so that over as many
//!   rounds as there are cases each case takes every position.
//!
//! `no_std` without `alloc`: the values are sorted in place in the caller's slice.

#![no_std]
#![forbid(unsafe_code)]

pub mod order;

use core::cmp::Ordering;

/// A value that has a total order and a midpoint: what [`median`] needs.
pub trait Value: Copy {
    /// The order values sort in (`f64::total_cmp` for floats, so a NaN sorts last and never
    /// breaks the sort).
    fn order(&self, other: &Self) -> Ordering;
    /// Halfway between `self` and `other` (rounded down for integers).
    fn midpoint(self, other: Self) -> Self;
}

impl Value for f64 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn midpoint(self, other: Self) -> Self {
        f64::midpoint(self, other)
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn order(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
            fn midpoint(self, other: Self) -> Self {
                <$t>::midpoint(self, other)
            }
        }
    )*};
}
unsigned!(u32, u64, usize);

/// Sorts `values` in place (see [`Value::order`]).
pub fn sort<T: Value>(values: &mut [T]) {
    values.sort_unstable_by(T::order);
}

/// The median of `values` (sorted in place): the middle value, or for an even count the
/// midpoint of the two middle ones; `None` when empty.
pub fn median<T: Value>(values: &mut [T]) -> Option<T> {
    sort(values);
    median_of_sorted(values)
}

fn median_of_sorted<T: Value>(sorted: &[T]) -> Option<T> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(sorted[n / 2 - 1].midpoint(sorted[n / 2])),
    }
}

/// A figure measured more than once: its [`median`], its range and how many values it has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread<T> {
    pub median: T,
    pub min: T,
    pub max: T,
    pub count: usize,
}

impl<T: Value> Spread<T> {
    /// The spread of `values` (sorted in place); `None` when empty.
    pub fn of(values: &mut [T]) -> Option<Self> {
        sort(values);
        Some(Spread {
            median: median_of_sorted(values)?,
            min: *values.first()?,
            max: *values.last()?,
            count: values.len(),
        })
    }
}

/// `top / bottom`, or `None` when `bottom` is not positive or the ratio is not finite (a
/// failed or empty run on either side).
pub fn ratio(top: f64, bottom: f64) -> Option<f64> {
    let ratio = top / bottom;
    (bottom > 0.0 && ratio.is_finite()).then_some(ratio)
}

/// The [`ratio`] of each `(top, bottom)` pair, measured in the same round or repetition; pairs
/// without one are left out.
pub fn ratios(pairs: impl IntoIterator<Item = (f64, f64)>) -> impl Iterator<Item = f64> {
    pairs
        .into_iter()
        .filter_map(|(top, bottom)| ratio(top, bottom))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_odd_count_takes_the_middle_value() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [5u64]), Some(5));
    }

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median(&mut [1.0, 9.0, 3.0, 5.0]), Some(4.0));
        // Integers round down: the midpoint of 3 and 4 is 3.
        assert_eq!(median(&mut [4u64, 3]), Some(3));
        assert_eq!(median(&mut [u64::MAX, u64::MAX - 2]), Some(u64::MAX - 1));
    }

    #[test]
    fn an_empty_slice_has_no_median_and_no_spread() {
        assert_eq!(median::<f64>(&mut []), None);
        assert_eq!(Spread::<u64>::of(&mut []), None);
    }

    #[test]
    fn a_nan_sorts_last_instead_of_breaking_the_sort() {
        let mut values = [f64::NAN, 1.0, 2.0];
        assert_eq!(median(&mut values), Some(2.0));
        assert!(values[2].is_nan());
    }

    #[test]
    fn a_spread_has_the_median_the_range_and_the_count() {
        let spread = Spread::of(&mut [3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            spread,
            Spread {
                median: 2.5,
                min: 1.0,
                max: 10.0,
                count: 4
            }
        );
        assert_eq!(
            Spread::of(&mut [7u64]),
            Some(Spread {
                median: 7,
                min: 7,
                max: 7,
                count: 1
            })
        );
    }

    #[test]
    fn paired_ratios_leave_out_pairs_without_a_ratio() {
        let pairs = [
            (2.0, 1.0),
            (1.0, 0.0),
            (3.0, 2.0),
            (0.0, -1.0),
            (f64::NAN, 1.0),
        ];
        let mut found = [0.0; 5];
        let mut count = 0;
        for (slot, ratio) in found.iter_mut().zip(ratios(pairs)) {
            *slot = ratio;
            count += 1;
        }
        assert_eq!(&found[..count], [2.0, 1.5]);
    }
}
