//! Colours a colour-blind reader tells apart, and marks that tell series apart in greyscale.
//!
//! The colours are Okabe and Ito's (2008) colour-blind-safe set, ordered so that the first
//! three, the most a bench compares, also differ in lightness (greyscale luminance 0.15, 0.42,
//! 0.26). Series beyond the colours repeat a colour with another marker and dash, and every
//! series of a line chart has its own marker anyway, so a greyscale print still tells them
//! apart. Whiskers, grids and text are greys, which the readability check knows are no series.

pub use plotters::style::RGBColor;

/// Okabe–Ito: blue, orange, bluish green, vermillion, sky blue, reddish purple, yellow.
pub const COLORS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xF0, 0xE4, 0x42),
];

/// Text, axes and whiskers.
pub const INK: RGBColor = RGBColor(0x1A, 0x1A, 0x1A);
/// Secondary text: subtitles, notes in place of a missing value.
pub const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
/// Grid lines and the fill of an empty cell.
pub const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);

/// The shape drawn at each point of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    Cross,
}

const MARKERS: [Marker; 5] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::Cross,
];

/// How a line is stroked: solid, or dashes of `(on, off)` pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dash {
    Solid,
    Dashed(u32, u32),
}

const DASHES: [Dash; 3] = [Dash::Solid, Dash::Dashed(8, 4), Dash::Dashed(2, 3)];

/// The look of series number `index`: its colour, marker and dash.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    pub color: RGBColor,
    pub marker: Marker,
    pub dash: Dash,
}

/// Series `index`'s look: a colour each for the first seven, then the colours again with the
/// next marker and dash.
pub fn style(index: usize) -> Style {
    let round = index / COLORS.len();
    Style {
        color: COLORS[index % COLORS.len()],
        marker: MARKERS[(index + round) % MARKERS.len()],
        dash: DASHES[round % DASHES.len()],
    }
}

/// Blends `color` towards white: `amount` 0 keeps it, 1 is white (heat-map cells, tints).
pub fn tint(color: RGBColor, amount: f64) -> RGBColor {
    let amount = amount.clamp(0.0, 1.0);
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * amount).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative luminance (sRGB), what a greyscale print keeps.
    fn luminance(c: RGBColor) -> f64 {
        let linear = |v: u8| {
            let v = f64::from(v) / 255.0;
            if v <= 0.04045 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * linear(c.0) + 0.7152 * linear(c.1) + 0.0722 * linear(c.2)
    }

    #[test]
    fn the_first_three_differ_in_greyscale() {
        let mut greys: Vec<f64> = (0..3).map(|i| luminance(style(i).color)).collect();
        greys.sort_by(f64::total_cmp);
        assert!(greys.windows(2).all(|w| w[1] - w[0] > 0.08), "{greys:?}");
    }

    #[test]
    fn series_past_the_colours_change_marker_and_dash() {
        assert_eq!(style(7).color, style(0).color);
        assert_ne!(style(7).marker, style(0).marker);
        assert_ne!(style(7).dash, style(0).dash);
        let looks: Vec<Style> = (0..16).map(style).collect();
        for (i, a) in looks.iter().enumerate() {
            assert!(looks[i + 1..].iter().all(|b| b != a), "series {i} repeats");
        }
    }

    #[test]
    fn tints_run_to_white() {
        assert_eq!(tint(COLORS[0], 1.0), RGBColor(255, 255, 255));
        assert_eq!(tint(COLORS[0], 0.0), COLORS[0]);
    }
}
