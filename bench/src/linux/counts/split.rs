//! Instructions per I/O from two Linux windows that differ only in fio's I/O count, whole and
//! split into kernel and user.

/// Instructions per I/O from two windows: `(window_b - window_a) / (ios_b - ios_a)`.
pub fn per_io(totals: [u64; 2], ios: [u64; 2]) -> Option<f64> {
    let extra_ios = ios[1].checked_sub(ios[0]).filter(|&n| n > 0)?;
    let extra_insns = totals[1].checked_sub(totals[0])?;
    Some(extra_insns as f64 / extra_ios as f64)
}

/// One Linux window: all its instructions, and those of the kernel (the plugin's `upper_half`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub insns: u64,
    pub kernel: u64,
}

/// A Linux count per I/O, split by where the instructions ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    pub total: f64,
    pub kernel: f64,
    pub user: f64,
}

/// [`per_io`] of the whole windows, of their kernel parts and of their user parts; `None` when
/// any of the three did not grow with the extra I/Os.
pub fn split_per_io(windows: [Window; 2], ios: [u64; 2]) -> Option<Split> {
    let of = |part: fn(&Window) -> u64| per_io(windows.map(|w| part(&w)), ios);
    Some(Split {
        total: of(|w| w.insns)?,
        kernel: of(|w| w.kernel)?,
        user: of(|w| w.insns.saturating_sub(w.kernel))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_io_is_the_difference_over_the_extra_ios() {
        assert_eq!(
            per_io([1_000_000, 3_000_000], [10_000, 30_000]),
            Some(100.0)
        );
        assert_eq!(
            per_io([5, 4], [1, 2]),
            None,
            "fewer instructions for more I/Os"
        );
        assert_eq!(per_io([1, 2], [3, 3]), None, "no extra I/Os");
    }

    #[test]
    fn each_part_is_its_own_difference_and_they_add_up() {
        let windows = [
            Window {
                insns: 1_000_000,
                kernel: 700_000,
            },
            Window {
                insns: 3_000_000,
                kernel: 2_300_000,
            },
        ];
        let split = split_per_io(windows, [10_000, 30_000]).unwrap();
        assert_eq!(
            split,
            Split {
                total: 100.0,
                kernel: 80.0,
                user: 20.0
            }
        );
        let user_shrank = [
            Window {
                insns: 1_000,
                kernel: 100,
            },
            Window {
                insns: 2_000,
                kernel: 1_500,
            },
        ];
        assert_eq!(split_per_io(user_shrank, [1, 2]), None);
    }
}
