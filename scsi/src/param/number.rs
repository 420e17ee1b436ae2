//! The one number syntax of every `key=value` word, on the kernel command line and in the host
//! examples alike.
//!
//! A count is decimal or `0x` hex digits with an optional binary suffix `k`, `m` or `g` (fio's
//! `bs=4k`; either case), so `4k`, `4096` and `0x1000` are the same count wherever a count is
//! read. A duration is the same digits (no size suffix) with an optional unit `ns`, `us`, `ms`
//! or `s`; a bare number is in the key's own unit (seconds for fio's `runtime=`). `1m` is
//! therefore a count (1 MiB), never a duration: fio would read it as a minute.

/// Why a number was rejected. The caller names the key and the value beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// Not digits of the count syntax.
    #[error("not a number: expected decimal or 0x hex digits with an optional k, m or g suffix")]
    Syntax,
    /// Not digits of the duration syntax.
    #[error(
        "not a duration: expected decimal or 0x hex digits with an optional ns, us, ms or s unit"
    )]
    DurationSyntax,
    /// The digits, or the digits times the suffix, exceed 64 bits.
    #[error("does not fit in 64 bits")]
    Overflow,
    /// A valid number outside the key's bounds.
    #[error("out of range {min}..={max}")]
    Range {
        /// Smallest value the key takes.
        min: u64,
        /// Largest value the key takes.
        max: u64,
    },
    /// A signed value outside the key's bounds.
    #[error("out of range {min}..={max}")]
    SignedRange {
        /// Smallest value the key takes.
        min: i64,
        /// Largest value the key takes.
        max: i64,
    },
    /// A valid duration outside the key's bounds.
    #[error("out of range {min_ns} ns..={max_ns} ns")]
    DurationRange {
        /// Shortest duration the key takes.
        min_ns: u64,
        /// Longest duration the key takes.
        max_ns: u64,
    },
}

/// Decimal or `0x`/`0X` hex digits, nothing else (no sign, no spaces, no `_`).
fn digits(text: &str, syntax: NumberError) -> Result<u64, NumberError> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(syntax);
    }
    // Only digits remain, so the one possible failure is overflow.
    u64::from_str_radix(digits, radix).map_err(|_| NumberError::Overflow)
}

/// Parses a count: `4096`, `0x1000`, `4k`, `1M`, `2g`.
pub fn parse_u64(text: &str) -> Result<u64, NumberError> {
    let (number, shift) = match text.as_bytes().last().map(u8::to_ascii_lowercase) {
        Some(b'k') => (&text[..text.len() - 1], 10),
        Some(b'm') => (&text[..text.len() - 1], 20),
        Some(b'g') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let value = digits(number, NumberError::Syntax)?;
    value.checked_mul(1 << shift).ok_or(NumberError::Overflow)
}

/// Parses a count within `min..=max` and converts it to the field's type (a `max` beyond the
/// type is clamped to the type, so the conversion cannot fail for an accepted value).
pub fn count<T: TryFrom<u64>>(text: &str, min: u64, max: u64) -> Result<T, NumberError> {
    let value = parse_u64(text)?;
    if !(min..=max).contains(&value) {
        return Err(NumberError::Range { min, max });
    }
    T::try_from(value).map_err(|_| NumberError::Range { min, max })
}

/// Parses a count with an optional leading `-` (scsi_debug's `every_nth=-3`), within
/// `min..=max`.
pub fn signed(text: &str, min: i64, max: i64) -> Result<i64, NumberError> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let magnitude = parse_u64(magnitude)?;
    let value = if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
    .ok_or(NumberError::Overflow)?;
    if !(min..=max).contains(&value) {
        return Err(NumberError::SignedRange { min, max });
    }
    Ok(value)
}

/// Parses a duration into nanoseconds: digits with an optional `ns`, `us`, `ms` or `s` unit;
/// bare digits are in `default_unit_ns`. The result must lie in `min_ns..=max_ns`.
pub fn duration_ns(
    text: &str,
    default_unit_ns: u64,
    min_ns: u64,
    max_ns: u64,
) -> Result<u64, NumberError> {
    let units = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ];
    let (number, unit_ns) = units
        .iter()
        .find_map(|&(suffix, unit)| text.strip_suffix(suffix).map(|rest| (rest, unit)))
        .unwrap_or((text, default_unit_ns));
    let ns = digits(number, NumberError::DurationSyntax)?
        .checked_mul(unit_ns)
        .ok_or(NumberError::Overflow)?;
    if !(min_ns..=max_ns).contains(&ns) {
        return Err(NumberError::DurationRange { min_ns, max_ns });
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_same_spellings_mean_the_same_count() {
        for text in ["4096", "4k", "4K", "0x1000", "0X1000"] {
            assert_eq!(parse_u64(text), Ok(4096), "{text}");
        }
        assert_eq!(parse_u64("1m"), Ok(1 << 20));
        assert_eq!(parse_u64("2G"), Ok(2 << 30));
        assert_eq!(parse_u64("0x10k"), Ok(16 << 10));
        assert_eq!(parse_u64("0"), Ok(0));
    }

    #[test]
    fn malformed_counts_are_syntax_errors() {
        for text in [
            "", "k", "0x", "0xk", "-1", "+1", " 1", "1 ", "1_000", "1kk", "1.5", "x10",
        ] {
            assert_eq!(parse_u64(text), Err(NumberError::Syntax), "{text:?}");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert_eq!(parse_u64("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_u64("18446744073709551616"),
            Err(NumberError::Overflow)
        );
        assert_eq!(parse_u64("0xffffffffffffffffk"), Err(NumberError::Overflow));
        assert_eq!(parse_u64("17179869184g"), Err(NumberError::Overflow));
        assert_eq!(signed("-9223372036854775808", i64::MIN, 0), Ok(i64::MIN));
        assert_eq!(
            signed("9223372036854775808", 0, i64::MAX),
            Err(NumberError::Overflow)
        );
    }

    #[test]
    fn ranges_and_narrow_types() {
        assert_eq!(count::<u16>("256", 1, 256), Ok(256));
        assert_eq!(
            count::<u16>("0", 1, 256),
            Err(NumberError::Range { min: 1, max: 256 })
        );
        assert_eq!(
            count::<u8>("300", 0, u64::MAX),
            Err(NumberError::Range {
                min: 0,
                max: u64::MAX
            })
        );
        assert_eq!(signed("-3", -10, 10), Ok(-3));
        assert_eq!(signed("0x10", -10, 100), Ok(16));
        assert!(matches!(
            signed("-11", -10, 10),
            Err(NumberError::SignedRange { .. })
        ));
    }

    #[test]
    fn durations_take_units_and_a_default() {
        const S: u64 = 1_000_000_000;
        let any = |text| duration_ns(text, S, 0, u64::MAX);
        assert_eq!(any("100ms"), Ok(100_000_000));
        assert_eq!(any("10"), Ok(10 * S));
        assert_eq!(any("10s"), Ok(10 * S));
        assert_eq!(any("200us"), Ok(200_000));
        assert_eq!(any("7ns"), Ok(7));
        assert_eq!(any("0x10ms"), Ok(16_000_000));
        assert_eq!(duration_ns("250", 1_000_000, 0, u64::MAX), Ok(250_000_000));
        for text in ["1m", "ms", "1k", "1 s", "1.5s", ""] {
            assert_eq!(any(text), Err(NumberError::DurationSyntax), "{text:?}");
        }
        assert_eq!(any("18446744073709551615s"), Err(NumberError::Overflow));
        assert_eq!(
            duration_ns("2s", S, 1, S),
            Err(NumberError::DurationRange {
                min_ns: 1,
                max_ns: S
            })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,24}") {
            let _ = parse_u64(&text);
            let _ = signed(&text, i64::MIN, i64::MAX);
            let _ = duration_ns(&text, 1, 0, u64::MAX);
            let _ = count::<u16>(&text, 0, u64::MAX);
        }

        #[test]
        fn arbitrary_number_like_text_never_panics(text in "-?(0[xX])?[0-9a-fA-F]{0,24}[kKmMgGsnu]{0,2}") {
            let _ = parse_u64(&text);
            let _ = signed(&text, i64::MIN, i64::MAX);
            let _ = duration_ns(&text, 1_000, 0, u64::MAX);
        }

        #[test]
        fn decimal_hex_and_suffixes_round_trip(value in 0u64..(1 << 34)) {
            prop_assert_eq!(parse_u64(&alloc::format!("{value}")), Ok(value));
            prop_assert_eq!(parse_u64(&alloc::format!("{value:#x}")), Ok(value));
            prop_assert_eq!(parse_u64(&alloc::format!("{value}k")), Ok(value << 10));
            prop_assert_eq!(parse_u64(&alloc::format!("{value}g")), Ok(value << 30));
        }
    }
}
