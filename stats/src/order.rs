//! The run order of a comparison: round `r` starts with case `r` (modulo the count) and goes on
//! in order, so over as many rounds as there are cases each case takes every position once: no
//! case always runs first on a cold cache or last on a warm one.

/// The case that runs in `position` of round `round` when there are `count` cases.
///
/// `count` must not be 0 (there is no position to fill).
pub fn case_at(position: usize, round: usize, count: usize) -> usize {
    (position + round) % count
}

/// The cases of round `round` in the order they run: `round % count`, then the next ones,
/// wrapping. Empty when `count` is 0.
pub fn rotated(count: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..count).map(move |position| case_at(position, round, count))
}

/// Puts `cases` in the order of round `round` (see [`rotated`]), in place.
pub fn rotate<T>(cases: &mut [T], round: usize) {
    if !cases.is_empty() {
        let by = round % cases.len();
        cases.rotate_left(by);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_takes_every_position_over_count_rounds() {
        let count = 3;
        let mut seen = [[false; 3]; 3];
        for round in 0..count {
            for (position, case) in rotated(count, round).enumerate() {
                assert!(!seen[case][position], "case {case} twice at {position}");
                seen[case][position] = true;
            }
        }
        assert!(seen.iter().flatten().all(|&s| s));
    }

    #[test]
    fn rotate_matches_rotated_and_two_cases_alternate() {
        let mut cases = ['a', 'b', 'c'];
        rotate(&mut cases, 4);
        assert_eq!(cases, ['b', 'c', 'a']);
        assert!(rotated(3, 4).eq([1, 2, 0]));
        let mut pair = [1, 2];
        rotate(&mut pair, 1);
        assert_eq!(pair, [2, 1]);
        rotate::<u8>(&mut [], 3);
        assert_eq!(rotated(0, 5).count(), 0);
    }
}
