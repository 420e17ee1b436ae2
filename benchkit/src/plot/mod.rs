//! The benches' figures, drawn as SVG with plotters (pure Rust, no font libraries: the SVG
//! carries its text as text), and the check that they can be read ([`check`]).
//!
//! Every figure answers one question, which its title states; its subtitle says what was
//! measured and where. The hygiene lives here, once, not in each bench:
//! - tick labels carry the precision of the step between ticks ([`ticks`]), never a
//!   floating-point artefact;
//! - labels are laid out with the font's own widths ([`metrics`]): long category names go on
//!   horizontal bars or wrap, nothing runs past the canvas;
//! - the legend sits between the subtitle and the plot, so it never covers data, and names
//!   every series and what a whisker spans;
//! - measured values carry their spread (a whisker) wherever the data has one;
//! - colours are Okabe–Ito's colour-blind-safe set, with markers and dashes that survive a
//!   greyscale print ([`palette`]);
//! - every axis has a title with its unit.
//!
//! The shapes: [`HBars`] (a row per case, grouped, a bar per series with its whisker, on a
//! linear or log axis, from a baseline such as 1× for ratios), [`GroupedBars`] (panels of
//! grouped columns over the same groups), [`LineChart`] (log-log lines, a cost against a size),
//! [`Grid`] (a verdict or heat map whose cells print their value), and [`Multiples`] (small
//! panels sharing their axes, one per case).

mod axis;
mod canvas;
pub mod check;
mod columns;
mod grid;
mod hbars;
mod legend;
mod lines;
pub mod metrics;
mod multiples;
pub mod palette;
pub mod ticks;

pub use columns::draw_grouped;
pub use grid::{Grid, GridCell, draw_grid};
pub use hbars::{BarRow, Baseline, HBars, RowGroup, draw_hbars};
pub use legend::Header;
pub use lines::draw_log_log;
pub use multiples::{Multiples, Point, SmallPanel, draw_multiples};

use std::path::Path;

use harness::error::Result;

/// One line of a [`LineChart`].
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// An interval per point, `(x, low, high)`, drawn as a whisker; may be empty.
    pub spread: Vec<(f64, f64, f64)>,
    /// Series that belong together (one implementation) share a color index.
    pub color: usize,
    /// Dashed lines tell a second measure of the same thing apart (free next to alloc).
    pub dashed: bool,
}

/// Several series over shared log-log axes.
#[derive(Clone, Debug, Default)]
pub struct LineChart {
    /// The question the figure answers.
    pub title: String,
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// What the series' whiskers span, for the legend; empty when none has one.
    pub spread: String,
}

/// One labelled value per bar, with no spread: drawn as [`HBars`] with one series.
#[derive(Clone, Debug)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<(String, f64)>,
}

/// A value and the spread around it (min–max, or an interval the caller names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub min: f64,
    pub max: f64,
}

impl Bar {
    /// A value measured once: no spread to show.
    pub fn single(value: f64) -> Bar {
        Bar {
            value,
            min: value,
            max: value,
        }
    }
}

/// One measure of a [`GroupedBars`] chart: `bars[group][series]`, `None` where not measured.
#[derive(Clone, Debug)]
pub struct Panel {
    /// The measure, with its unit.
    pub y_label: String,
    pub bars: Vec<Vec<Option<Bar>>>,
    /// A logarithmic axis, for a measure whose cases span decades (bars then start at the
    /// axis's lowest decade, and a non-positive value sits on it).
    pub log: bool,
}

impl Panel {
    /// A panel whose axis is logarithmic when its positive values span more than two decades
    /// (one bar would otherwise flatten the rest), its label then saying so.
    pub fn fitted(y_label: &str, bars: Vec<Vec<Option<Bar>>>) -> Panel {
        let positive = || {
            bars.iter()
                .flatten()
                .flatten()
                .map(|bar| bar.value)
                .filter(|value| value.is_finite() && *value > 0.0)
        };
        let low = positive().fold(f64::INFINITY, f64::min);
        let high = positive().fold(0.0, f64::max);
        let log = high > 100.0 * low;
        Panel {
            y_label: if log {
                format!("{y_label} (log scale)")
            } else {
                y_label.to_owned()
            },
            bars,
            log,
        }
    }
}

/// Panels stacked over shared groups (x) and series (colors).
#[derive(Clone, Debug)]
pub struct GroupedBars {
    /// The question the figure answers.
    pub title: String,
    pub subtitle: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub panels: Vec<Panel>,
    /// What the whiskers span, for the legend; empty when no bar has a spread.
    pub spread: String,
}

/// Draws `chart` as horizontal bars, one per entry, on a linear axis from zero.
pub fn draw_bars(path: &Path, chart: &BarChart) -> Result<()> {
    draw_hbars(
        path,
        &HBars {
            header: Header {
                title: chart.title.clone(),
                subtitle: String::new(),
            },
            axis: chart.y_label.clone(),
            log: false,
            baseline: None,
            series: Vec::new(),
            groups: vec![RowGroup {
                name: String::new(),
                rows: chart
                    .bars
                    .iter()
                    .map(|(label, value)| BarRow {
                        label: label.clone(),
                        bars: vec![Some(Bar::single(*value))],
                    })
                    .collect(),
            }],
            spread: String::new(),
            value_suffix: Some(String::new()),
        },
    )
}

#[cfg(test)]
mod tests;
