//! Horizontal bars: one row per case, with a readable label of any length on the left, rows
//! grouped under a heading, one bar per series in each row with its spread as a whisker and
//! its value printed at its end. On a log axis with a baseline (1× for a ratio), a bar runs
//! from the baseline to its value, so better and worse point opposite ways.

use std::path::Path;

use super::Bar;
use super::axis::{self, Frame};
use super::canvas::{Anchor, Canvas};
use super::legend::{self, Entry, Header, MARGIN, Swatch};
use super::metrics::{text_width, wrap};
use super::palette::{Dash, INK, MUTED, style};
use super::ticks::{Scale, format_value};
use harness::error::{Error, Result};

/// A row of bars: the case's label and one bar per series (`None` where not measured).
#[derive(Clone, Debug, PartialEq)]
pub struct BarRow {
    pub label: String,
    pub bars: Vec<Option<Bar>>,
}

/// Rows under one heading.
#[derive(Clone, Debug, PartialEq)]
pub struct RowGroup {
    /// The heading; empty for a chart without groups.
    pub name: String,
    pub rows: Vec<BarRow>,
}

/// Where bars start, with a rule across the plot: 1 for a ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Baseline {
    pub value: f64,
}

/// A horizontal bar chart.
#[derive(Clone, Debug, PartialEq)]
pub struct HBars {
    pub header: Header,
    /// The value axis' title, with its unit.
    pub axis: String,
    pub log: bool,
    pub baseline: Option<Baseline>,
    /// One name per series; a single unnamed series needs no legend.
    pub series: Vec<String>,
    pub groups: Vec<RowGroup>,
    /// What a whisker spans, for the legend ("min–max of 3 repetitions"); empty when no bar
    /// has a spread.
    pub spread: String,
    /// Printed after each bar's value ("×"); values are printed when `Some`.
    pub value_suffix: Option<String>,
}

const WIDTH: i32 = 1200;
const LABEL_PX: f64 = 12.0;
const GROUP_PX: f64 = 14.0;
const BAR_PX: i32 = 14;
const ROW_GAP: i32 = 8;
const GROUP_HEAD: i32 = 26;
const MAX_LABEL: f64 = 340.0;
const VALUE_ROOM: i32 = 64;

impl HBars {
    fn row_height(&self, row: &BarRow) -> i32 {
        let lines = wrap(&row.label, LABEL_PX, MAX_LABEL).len().max(1) as i32;
        (self.series.len().max(1) as i32 * BAR_PX).max(lines * 15) + ROW_GAP
    }

    fn legend(&self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = if self.series.len() > 1 {
            self.series
                .iter()
                .enumerate()
                .map(|(i, name)| Entry {
                    swatch: Swatch::Bar(style(i).color),
                    label: name.clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
        if !self.spread.is_empty() {
            entries.push(Entry {
                swatch: Swatch::Whisker,
                label: self.spread.clone(),
            });
        }
        entries
    }

    fn bars(&self) -> impl Iterator<Item = &Bar> {
        self.groups
            .iter()
            .flat_map(|g| &g.rows)
            .flat_map(|r| &r.bars)
            .flatten()
    }

    fn start(&self, scale: &Scale) -> f64 {
        match (self.baseline, scale) {
            (Some(baseline), _) => baseline.value,
            (None, Scale::Log { low, .. }) => *low,
            (None, Scale::Linear { low, .. }) => low.max(0.0),
        }
    }

    fn value_text(&self, bar: &Bar) -> Option<String> {
        let suffix = self.value_suffix.as_ref()?;
        Some(format!("{}{suffix}", format_value(bar.value)))
    }
}

impl HBars {
    /// The value axis over every bar, whisker and the baseline; `None` without a bar (or, on a
    /// log axis, without a positive value).
    fn scale(&self) -> Option<Scale> {
        self.bars().next()?;
        let values = self
            .bars()
            .flat_map(|b| [b.value, b.min, b.max])
            .chain(self.baseline.map(|b| b.value));
        match self.log {
            true => Scale::log(values),
            false => Some(Scale::linear(values)),
        }
    }

    /// Where the bars go: right of the widest row label, below the header and legend (`top`).
    fn frame(&self, top: i32) -> Frame {
        let label_width = self
            .groups
            .iter()
            .flat_map(|g| &g.rows)
            .flat_map(|r| wrap(&r.label, LABEL_PX, MAX_LABEL))
            .map(|line| text_width(&line, LABEL_PX).ceil() as i32)
            .max()
            .unwrap_or(0);
        let rows_height: i32 = self
            .groups
            .iter()
            .map(|g| {
                let head = if g.name.is_empty() { 0 } else { GROUP_HEAD };
                head + g.rows.iter().map(|r| self.row_height(r)).sum::<i32>()
            })
            .sum();
        Frame {
            left: MARGIN + label_width + 12,
            top,
            right: WIDTH - MARGIN - VALUE_ROOM,
            bottom: top + rows_height,
        }
    }
}

/// Draws `chart` to `path`.
pub fn draw_hbars(path: &Path, chart: &HBars) -> Result<()> {
    let Some(scale) = chart.scale() else {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "no bar to draw".into(),
        });
    };
    let legend = chart.legend();
    let inner = WIDTH - 2 * MARGIN;
    let legend_top = chart.header.height(WIDTH);
    let frame = chart.frame(legend_top + legend::height(&legend, inner));
    let scale = fit_values(chart, &frame, scale);
    let height = frame.bottom + axis::bottom_room() + MARGIN;
    let canvas = Canvas::new(path, WIDTH, height)?;
    chart.header.draw(&canvas)?;
    legend::draw(&canvas, &legend, (MARGIN, legend_top), inner)?;
    axis::draw_x(&canvas, &frame, &scale, &chart.axis)?;
    draw_groups(&canvas, chart, &frame, &scale)?;
    if let Some(baseline) = chart.baseline {
        let x = frame.x(&scale, baseline.value);
        let rule = [(x, frame.top), (x, frame.bottom)];
        canvas.line(&rule, INK, 1, Dash::Dashed(4, 3))?;
    }
    // The value axis only: a left edge would cut through the group headings.
    let axis = [(frame.left, frame.bottom), (frame.right, frame.bottom)];
    canvas.line(&axis, INK, 1, Dash::Solid)?;
    canvas.finish()
}

/// Each group's heading with a rule under it, then its rows.
fn draw_groups(canvas: &Canvas<'_>, chart: &HBars, frame: &Frame, scale: &Scale) -> Result<()> {
    let mut y = frame.top;
    for group in &chart.groups {
        if !group.name.is_empty() {
            let at = (MARGIN, y + GROUP_HEAD / 2);
            canvas.text(&group.name, at, GROUP_PX, Anchor::Left)?;
            let rule = [
                (MARGIN, y + GROUP_HEAD - 3),
                (frame.right, y + GROUP_HEAD - 3),
            ];
            canvas.line(&rule, MUTED, 1, Dash::Solid)?;
            y += GROUP_HEAD;
        }
        for row in &group.rows {
            draw_row(canvas, chart, frame, scale, row, y)?;
            y += chart.row_height(row);
        }
    }
    Ok(())
}

/// Widens `scale` (up to three steps each way) until every printed value fits beside its bar.
fn fit_values(chart: &HBars, frame: &Frame, mut scale: Scale) -> Scale {
    for _ in 0..3 {
        let start = chart.start(&scale);
        let (mut short_left, mut short_right) = (false, false);
        for bar in chart.bars().filter(|bar| !(chart.log && bar.value <= 0.0)) {
            let width = chart
                .value_text(bar)
                .map_or(0, |text| text_width(&text, LABEL_PX).ceil() as i32 + 6);
            if bar.value >= start {
                let end = frame.x(&scale, bar.max.max(bar.value));
                short_right |= end + width > frame.right + VALUE_ROOM;
            } else {
                let end = frame.x(&scale, bar.min.min(bar.value));
                short_left |= end - width < frame.left;
            }
        }
        if !short_left && !short_right {
            break;
        }
        if short_left {
            scale = scale.widened(true);
        }
        if short_right {
            scale = scale.widened(false);
        }
    }
    scale
}

fn draw_row(
    canvas: &Canvas<'_>,
    chart: &HBars,
    frame: &Frame,
    scale: &Scale,
    row: &BarRow,
    top: i32,
) -> Result<()> {
    let height = chart.row_height(row) - ROW_GAP;
    let lines = wrap(&row.label, LABEL_PX, MAX_LABEL);
    let first = top + height / 2 - (lines.len() as i32 - 1) * 15 / 2;
    for (i, line) in lines.iter().enumerate() {
        let at = (frame.left - 8, first + i as i32 * 15);
        canvas.text(line, at, LABEL_PX, Anchor::Right)?;
    }
    let series = chart.series.len().max(1) as i32;
    let band_top = top + (height - series * BAR_PX) / 2;
    let start = chart.start(scale);
    let x0 = frame.x(scale, start);
    for (index, bar) in row.bars.iter().enumerate() {
        let (y0, y1) = (
            band_top + index as i32 * BAR_PX,
            band_top + (index as i32 + 1) * BAR_PX,
        );
        let middle = (y0 + y1) / 2;
        let Some(bar) = bar else {
            canvas.text_in("not measured", (x0 + 4, middle), 11.0, Anchor::Left, MUTED)?;
            continue;
        };
        if chart.log && bar.value <= 0.0 {
            // Nothing to draw on a log axis: the value, beside where bars start.
            let text = chart.value_text(bar).unwrap_or_else(|| "0".into());
            canvas.text(&text, (x0 + 5, middle), LABEL_PX, Anchor::Left)?;
            continue;
        }
        let x = frame.x(scale, bar.value);
        canvas.rect((x0.min(x), y0 + 1), (x0.max(x), y1 - 1), style(index).color)?;
        let (low, high) = (frame.x(scale, bar.min), frame.x(scale, bar.max));
        canvas.whisker((low, middle), (high, middle))?;
        if let Some(text) = chart.value_text(bar) {
            if bar.value >= start {
                canvas.text(&text, (x.max(high) + 5, middle), LABEL_PX, Anchor::Left)?;
            } else {
                canvas.text(&text, (x.min(low) - 5, middle), LABEL_PX, Anchor::Right)?;
            }
        }
    }
    Ok(())
}
