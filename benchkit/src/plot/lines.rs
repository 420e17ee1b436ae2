//! Lines on log-log axes: a cost against a size, where O(n) and O(1) separate as slopes
//! (dmapool's ns/op against n). Every series has its own colour, marker and dash; a series may
//! carry an interval per point, drawn as a whisker.

use std::path::Path;

use super::axis::{self, Frame};
use super::canvas::Canvas;
use super::legend::{self, Entry, Header, MARGIN, Swatch};
use super::palette::{Dash, Style, style};
use super::ticks::Scale;
use super::{LineChart, Series};
use harness::error::{Error, Result};

const WIDTH: i32 = 1200;
const PLOT_HEIGHT: i32 = 560;

impl Series {
    /// The look of this series: its colour index picks the colour; `dashed` picks the dash
    /// and a second marker, so the two measures of one implementation share a colour only.
    fn look(&self) -> Style {
        let base = style(self.color);
        if self.dashed {
            Style {
                dash: Dash::Dashed(8, 4),
                marker: style(self.color + 1).marker,
                ..base
            }
        } else {
            Style {
                dash: Dash::Solid,
                ..base
            }
        }
    }

    fn positive(&self) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .collect()
    }
}

/// Draws `chart` with logarithmic x and y axes; non-positive points are skipped.
pub fn draw_log_log(path: &Path, chart: &LineChart) -> Result<()> {
    let points = || chart.series.iter().flat_map(|series| series.positive());
    let spreads = || chart.series.iter().flat_map(|series| &series.spread);
    let no_data = || Error::Plot {
        path: path.to_owned(),
        reason: "no positive data points".into(),
    };
    let x_scale = Scale::log(points().map(|p| p.0)).ok_or_else(no_data)?;
    let y_values = points()
        .map(|p| p.1)
        .chain(spreads().flat_map(|s| [s.1, s.2]));
    let y_scale = Scale::log(y_values).ok_or_else(no_data)?;
    let mut entries: Vec<Entry> = chart
        .series
        .iter()
        .map(|series| Entry {
            swatch: Swatch::Line(series.look()),
            label: series.label.clone(),
        })
        .collect();
    if !chart.spread.is_empty() {
        entries.push(Entry {
            swatch: Swatch::Whisker,
            label: chart.spread.clone(),
        });
    }
    let header = Header {
        title: chart.title.clone(),
        subtitle: chart.subtitle.clone(),
    };
    let inner = WIDTH - 2 * MARGIN;
    let legend_top = header.height(WIDTH);
    let top = legend_top + legend::height(&entries, inner) + 8;
    let frame = Frame {
        left: MARGIN + axis::left_room(&y_scale, &chart.y_label, PLOT_HEIGHT),
        top,
        right: WIDTH - MARGIN - 8,
        bottom: top + PLOT_HEIGHT,
    };
    let canvas = Canvas::new(path, WIDTH, frame.bottom + axis::bottom_room() + MARGIN)?;
    header.draw(&canvas)?;
    legend::draw(&canvas, &entries, (MARGIN, legend_top), inner)?;
    axis::draw_y(&canvas, &frame, &y_scale, &chart.y_label)?;
    axis::draw_x(&canvas, &frame, &x_scale, &chart.x_label)?;
    for series in &chart.series {
        draw_series(&canvas, &frame, (&x_scale, &y_scale), series)?;
    }
    frame.draw_edges(&canvas)?;
    canvas.finish()
}

/// One series: its line through the positive points, whiskers, then markers on top.
fn draw_series(
    canvas: &Canvas<'_>,
    frame: &Frame,
    (x_scale, y_scale): (&Scale, &Scale),
    series: &Series,
) -> Result<()> {
    let look = series.look();
    let mut points = series.positive();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pixels: Vec<(i32, i32)> = points
        .iter()
        .map(|&(x, y)| (frame.x(x_scale, x), frame.y(y_scale, y)))
        .collect();
    canvas.line(&pixels, look.color, 2, look.dash)?;
    for &(x, low, high) in &series.spread {
        let column = frame.x(x_scale, x);
        let (a, b) = (frame.y(y_scale, low), frame.y(y_scale, high));
        canvas.whisker((column, a), (column, b))?;
    }
    for pixel in pixels {
        canvas.marker(pixel, look.marker, 4, look.color)?;
    }
    Ok(())
}
