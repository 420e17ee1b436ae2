//! Value axes: where a value falls between an axis' ends, and tick labels written to the
//! precision the ticks have (`1.6`, never `1.5999999999999999`; `0.5`, `1.0`, `1.5` on one
//! axis, never `0.50`, `1`, `1.5`).

/// A value axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear {
        low: f64,
        high: f64,
    },
    /// Whole decades, `low` and `high` powers of ten.
    Log {
        low: f64,
        high: f64,
    },
}

/// A tick: where, and what it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: String,
}

/// How many ticks a linear axis aims for.
const LINEAR_TICKS: f64 = 5.0;

/// The round step (1, 2 or 5 times a power of ten) that cuts `span` into about `count` parts.
pub fn nice_step(span: f64, count: f64) -> f64 {
    let raw = (span / count).abs();
    if !raw.is_finite() || raw == 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let mantissa = match raw / magnitude {
        m if m <= 1.0 => 1.0,
        m if m <= 2.0 => 2.0,
        m if m <= 5.0 => 5.0,
        _ => 10.0,
    };
    mantissa * magnitude
}

impl Scale {
    /// A linear axis from 0 to a round value at or above `max` (and the finite values'
    /// minimum, when that is negative).
    pub fn linear(values: impl IntoIterator<Item = f64>) -> Scale {
        let (min, max) = values
            .into_iter()
            .filter(|v| v.is_finite())
            .fold((0.0_f64, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let max = if max > min { max } else { min + 1.0 };
        let step = nice_step(max - min, LINEAR_TICKS);
        Scale::Linear {
            low: (min / step).floor() * step,
            high: ((max / step).ceil() * step).max(step),
        }
    }

    /// A log axis over the whole decades around the positive, finite `values`; `None` when
    /// there is none.
    pub fn log(values: impl IntoIterator<Item = f64>) -> Option<Scale> {
        let (min, max) = values
            .into_iter()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if max <= 0.0 {
            return None;
        }
        let low = 10f64.powf(min.log10().floor());
        let high = 10f64.powf(max.log10().ceil()).max(low * 10.0);
        Some(Scale::Log { low, high })
    }

    /// The same axis reaching one step (linear) or one decade (log) further down or up.
    pub fn widened(self, down: bool) -> Scale {
        match self {
            Scale::Linear { low, high } => {
                let step = nice_step(high - low, LINEAR_TICKS);
                match down {
                    true => Scale::Linear {
                        low: low - step,
                        high,
                    },
                    false => Scale::Linear {
                        low,
                        high: high + step,
                    },
                }
            }
            Scale::Log { low, high } => match down {
                true => Scale::Log {
                    low: low / 10.0,
                    high,
                },
                false => Scale::Log {
                    low,
                    high: high * 10.0,
                },
            },
        }
    }

    /// Where `value` falls, 0 at the low end and 1 at the high end (outside for values
    /// outside; a non-positive value on a log axis falls at its low end).
    pub fn fraction(&self, value: f64) -> f64 {
        match *self {
            Scale::Linear { low, high } => (value - low) / (high - low),
            Scale::Log { low, high } => {
                if value <= 0.0 {
                    return 0.0;
                }
                (value.log10() - low.log10()) / (high.log10() - low.log10())
            }
        }
    }

    /// The ticks, each labelled to the precision of the step between them.
    pub fn ticks(&self) -> Vec<Tick> {
        match *self {
            Scale::Linear { low, high } => linear_ticks(low, high),
            Scale::Log { low, high } => log_ticks(low, high),
        }
    }
}

fn linear_ticks(low: f64, high: f64) -> Vec<Tick> {
    let step = nice_step(high - low, LINEAR_TICKS);
    let first = (low / step - 1e-9).ceil() as i64;
    let last = (high / step + 1e-9).floor() as i64;
    let largest = low.abs().max(high.abs());
    let (divisor, suffix) = si_prefix(largest);
    let decimals = decimals_for(step / divisor);
    (first..=last)
        .map(|k| {
            let value = k as f64 * step;
            // Zero needs no prefix: `0`, not `0k` or `0.0M`.
            let label = match (k, suffix) {
                (0, "") => fixed(0.0, decimals),
                (0, _) => "0".to_owned(),
                _ => format!("{}{suffix}", fixed(value / divisor, decimals)),
            };
            Tick { value, label }
        })
        .collect()
}

/// Decades, and 2 and 5 between them when the axis spans two decades or less.
fn log_ticks(low: f64, high: f64) -> Vec<Tick> {
    let (first, last) = (low.log10().round() as i32, high.log10().round() as i32);
    let between: &[f64] = if last - first <= 2 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    for exponent in first..=last {
        for &mantissa in between {
            let value = mantissa * 10f64.powi(exponent);
            if value <= high * (1.0 + 1e-9) {
                ticks.push(Tick {
                    value,
                    label: format_round(value),
                });
            }
        }
    }
    ticks
}

/// `1`, `20`, `500`, `2k`, `10k`, `1M`, `0.5`, `0.01`: a round value (one significant digit)
/// the way a tick reads it.
pub fn format_round(value: f64) -> String {
    let (divisor, suffix) = si_prefix(value.abs());
    let scaled = value / divisor;
    format!("{}{suffix}", fixed(scaled, decimals_for(scaled.abs())))
}

/// A measured value with three significant digits (`1393`, `41.9`, `2.66`, `0.969`,
/// `0.00221`), a whole number as one (`96`, `2`), with `k` and `M` from ten thousand up.
pub fn format_value(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    let magnitude = value.abs();
    if magnitude < 1e4 && value.fract() == 0.0 {
        return fixed(value, 0);
    }
    if magnitude >= 1e4 {
        let (divisor, suffix) = si_prefix(magnitude);
        return format!("{}{suffix}", format_value(value / divisor));
    }
    let decimals = match magnitude {
        0.0 => 0,
        m if m >= 100.0 => 0,
        m => (2 - m.log10().floor() as i32).max(0) as usize,
    };
    fixed(value, decimals)
}

/// [`format_value`] without trailing zeros after the point (`0.8`, `1.1`, `2`): for a key or
/// a reference value, which carries no measured precision.
pub fn format_compact(value: f64) -> String {
    let text = format_value(value);
    let (number, suffix) = text.split_at(text.trim_end_matches(|c: char| c.is_alphabetic()).len());
    if !number.contains('.') {
        return text;
    }
    format!(
        "{}{suffix}",
        number.trim_end_matches('0').trim_end_matches('.')
    )
}

/// `k` from 10 000, `M` from a million and `G` from a billion, so a thousand still reads `1000`.
fn si_prefix(magnitude: f64) -> (f64, &'static str) {
    match magnitude {
        m if m >= 1e9 => (1e9, "G"),
        m if m >= 1e6 => (1e6, "M"),
        m if m >= 1e4 => (1e3, "k"),
        _ => (1.0, ""),
    }
}

/// Digits after the point that a step (or round value) of this size needs.
fn decimals_for(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() || step >= 1.0 {
        return 0;
    }
    (-(step.log10() + 1e-9).floor()) as usize
}

/// `value` with `decimals` digits after the point; never `-0`.
fn fixed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    match text.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_owned(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(scale: Scale) -> Vec<String> {
        scale.ticks().into_iter().map(|t| t.label).collect()
    }

    #[test]
    fn a_host_cpu_axis_reads_to_its_step() {
        // The axis that printed 1.5999999999999999 (QEMU host CPUs, 0–1.9).
        let scale = Scale::linear([0.8, 1.9]);
        assert_eq!(
            scale,
            Scale::Linear {
                low: 0.0,
                high: 2.0
            }
        );
        assert_eq!(labels(scale), ["0.0", "0.5", "1.0", "1.5", "2.0"]);
    }

    #[test]
    fn large_values_take_a_prefix() {
        assert_eq!(
            labels(Scale::linear([137_000.0])),
            ["0", "50k", "100k", "150k"]
        );
        assert_eq!(
            labels(Scale::linear([2.3e7])),
            ["0", "5M", "10M", "15M", "20M", "25M"]
        );
        assert_eq!(
            labels(Scale::linear([2.47e6])),
            ["0", "0.5M", "1.0M", "1.5M", "2.0M", "2.5M"]
        );
        assert_eq!(
            labels(Scale::linear([2.26])),
            ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5"]
        );
        assert_eq!(
            labels(Scale::linear([100.0])),
            ["0", "20", "40", "60", "80", "100"]
        );
        assert_eq!(
            labels(Scale::linear([0.0])),
            ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
        );
    }

    #[test]
    fn log_axes_label_decades() {
        let scale = Scale::log([0.002, 1393.0]).unwrap();
        assert_eq!(
            scale,
            Scale::Log {
                low: 0.001,
                high: 10_000.0
            }
        );
        assert_eq!(
            labels(scale),
            ["0.001", "0.01", "0.1", "1", "10", "100", "1000", "10k"]
        );
        assert_eq!(
            labels(Scale::log([15.0, 80.0]).unwrap()),
            ["10", "20", "50", "100"]
        );
        assert_eq!(Scale::log([0.0, -1.0]), None);
        assert_eq!(
            Scale::log([100.0]),
            Some(Scale::Log {
                low: 100.0,
                high: 1000.0
            })
        );
    }

    #[test]
    fn values_keep_three_significant_digits() {
        let shown: Vec<String> = [
            1393.2, 41.88, 2.664, 0.9689, 0.002_21, 0.0, 373_959.0, -0.0, 96.0, 1.5,
        ]
        .into_iter()
        .map(format_value)
        .collect();
        assert_eq!(
            shown,
            [
                "1393", "41.9", "2.66", "0.969", "0.00221", "0", "374k", "0", "96", "1.50"
            ]
        );
        assert_eq!(format_round(0.5), "0.5");
        let compact: Vec<String> = [0.8, 1.1, 2.0, 0.969, 12_500.0]
            .map(format_compact)
            .to_vec();
        assert_eq!(compact, ["0.8", "1.1", "2", "0.969", "12.5k"]);
        assert_eq!(format_round(20_000.0), "20k");
    }

    #[test]
    fn positions_run_from_zero_to_one() {
        let scale = Scale::Log {
            low: 1.0,
            high: 100.0,
        };
        assert_eq!(scale.fraction(10.0), 0.5);
        assert_eq!(scale.fraction(0.0), 0.0);
        let linear = Scale::Linear {
            low: 0.0,
            high: 4.0,
        };
        assert_eq!(linear.fraction(1.0), 0.25);
        assert_eq!(
            linear.widened(false),
            Scale::Linear {
                low: 0.0,
                high: 5.0
            }
        );
    }
}
