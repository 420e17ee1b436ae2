//! Small multiples: one small panel per case (sense-reserve's scenarios), the same categories
//! across every panel's x axis (the sense modes) and one y scale shared by all, so a reader
//! compares panels by position instead of untangling sixteen lines in one axes. A value is a
//! marker with its whisker; a cell that produced no value (a stall) is a cross on the floor.

use std::path::Path;

use super::Bar;
use super::axis::{self, Frame, TICK_PX};
use super::canvas::{Anchor, Canvas};
use super::legend::{self, Entry, Header, MARGIN, Swatch};
use super::metrics::text_width;
use super::palette::{Marker, style};
use super::ticks::Scale;
use harness::error::{Error, Result};

/// What one category of one panel holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Point {
    Value(Bar),
    /// Measured, but the run produced no value (it stalled).
    Missing,
    /// Not run.
    Absent,
}

/// One panel: its name and a point per category.
#[derive(Clone, Debug, PartialEq)]
pub struct SmallPanel {
    pub name: String,
    pub points: Vec<Point>,
}

/// Panels in rows of `per_row`.
#[derive(Clone, Debug, PartialEq)]
pub struct Multiples {
    pub header: Header,
    /// The shared y axis' title, with its unit.
    pub y_axis: String,
    pub log: bool,
    pub categories: Vec<String>,
    pub panels: Vec<SmallPanel>,
    pub per_row: usize,
    /// The legend's words for a value's marker, its whisker (empty: no whisker) and a
    /// missing value.
    pub value: String,
    pub spread: String,
    pub missing: String,
}

const WIDTH: i32 = 1200;
const PANEL_HEIGHT: i32 = 130;
const PANEL_TITLE: i32 = 22;
const GAP: i32 = 14;

fn scale_of(chart: &Multiples) -> Option<Scale> {
    let values: Vec<f64> = chart
        .panels
        .iter()
        .flat_map(|p| &p.points)
        .filter_map(|p| match p {
            Point::Value(bar) => Some([bar.value, bar.min, bar.max]),
            _ => None,
        })
        .flatten()
        .collect();
    if chart.log {
        Scale::log(values)
    } else {
        (!values.is_empty()).then(|| Scale::linear(values))
    }
}

impl Multiples {
    fn legend(&self) -> Vec<Entry> {
        let mut entries = vec![Entry {
            swatch: Swatch::Point(Marker::Circle, style(0).color),
            label: self.value.clone(),
        }];
        if !self.spread.is_empty() {
            entries.push(Entry {
                swatch: Swatch::Whisker,
                label: self.spread.clone(),
            });
        }
        let any_missing = self
            .panels
            .iter()
            .any(|p| p.points.contains(&Point::Missing));
        if any_missing {
            entries.push(Entry {
                swatch: Swatch::Point(Marker::Cross, style(3).color),
                label: self.missing.clone(),
            });
        }
        entries
    }
}

/// Draws `chart` to `path`.
pub fn draw_multiples(path: &Path, chart: &Multiples) -> Result<()> {
    let Some(scale) = scale_of(chart) else {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "no value in any panel".into(),
        });
    };
    let per_row = chart.per_row.max(1);
    let rows = chart.panels.len().div_ceil(per_row) as i32;
    let rows_height = (PANEL_TITLE + PANEL_HEIGHT) * rows;
    let left = MARGIN + axis::left_room(&scale, &chart.y_axis, rows_height);
    let panel_width = (WIDTH - MARGIN - left - GAP * (per_row as i32 - 1)) / per_row as i32;
    let label_room = chart
        .categories
        .iter()
        .map(|c| text_width(c, TICK_PX).ceil() as i32)
        .max()
        .unwrap_or(0)
        + 12;
    let legend = chart.legend();
    let inner = WIDTH - 2 * MARGIN;
    let legend_top = chart.header.height(WIDTH);
    let top = legend_top + legend::height(&legend, inner) + 6;
    let band = PANEL_TITLE + PANEL_HEIGHT + label_room + GAP;
    let canvas = Canvas::new(path, WIDTH, top + band * rows + MARGIN)?;
    chart.header.draw(&canvas)?;
    legend::draw(&canvas, &legend, (MARGIN, legend_top), inner)?;
    for (index, panel) in chart.panels.iter().enumerate() {
        let (row, column) = ((index / per_row) as i32, (index % per_row) as i32);
        let frame_top = top + band * row + PANEL_TITLE;
        let frame = Frame {
            left: left + (panel_width + GAP) * column,
            top: frame_top,
            right: left + (panel_width + GAP) * column + panel_width,
            bottom: frame_top + PANEL_HEIGHT,
        };
        // Tick labels on the first column only; category names under every panel (the rows
        // are far enough apart that they never meet the next row's title).
        draw_panel(&canvas, chart, panel, &frame, &scale, column == 0)?;
    }
    let title_right = MARGIN + axis::title_room(&chart.y_axis, rows_height);
    axis::draw_y_title(
        &canvas,
        &chart.y_axis,
        title_right,
        (top, top + band * rows),
    )?;
    canvas.finish()
}

fn draw_panel(
    canvas: &Canvas<'_>,
    chart: &Multiples,
    panel: &SmallPanel,
    frame: &Frame,
    scale: &Scale,
    ticks: bool,
) -> Result<()> {
    canvas.text(
        &panel.name,
        (frame.left, frame.top - PANEL_TITLE / 2),
        13.0,
        Anchor::Left,
    )?;
    if ticks {
        axis::draw_y(canvas, frame, scale, "")?;
    } else {
        for tick in scale.ticks() {
            let y = frame.y(scale, tick.value);
            canvas.line(
                &[(frame.left, y), (frame.right, y)],
                super::palette::GRID,
                1,
                super::palette::Dash::Solid,
            )?;
        }
    }
    let slot = f64::from(frame.right - frame.left) / chart.categories.len().max(1) as f64;
    for (i, category) in chart.categories.iter().enumerate() {
        let x = frame.left + (slot * (i as f64 + 0.5)) as i32;
        canvas.text_up(category, (x, frame.bottom + 6), TICK_PX, Anchor::Right)?;
        match panel.points.get(i).copied().unwrap_or(Point::Absent) {
            Point::Value(bar) => {
                let y = frame.y(scale, bar.value);
                canvas.whisker((x, frame.y(scale, bar.min)), (x, frame.y(scale, bar.max)))?;
                canvas.marker((x, y), Marker::Circle, 4, style(0).color)?;
            }
            Point::Missing => {
                canvas.marker((x, frame.bottom - 7), Marker::Cross, 4, style(3).color)?;
            }
            Point::Absent => {}
        }
    }
    frame.draw_edges(canvas)
}
