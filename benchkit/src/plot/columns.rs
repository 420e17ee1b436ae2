//! Grouped columns in stacked panels: several measures (one panel each) over the same groups,
//! one coloured column per series in each group with a min–max whisker (bench device's
//! io_modes, bench numa's pool modes). One legend above the panels names the series.

use std::path::Path;

use super::axis::{self, Frame, TICK_PX};
use super::canvas::{Anchor, Canvas};
use super::legend::{self, Entry, Header, MARGIN, Swatch};
use super::metrics::wrap;
use super::palette::{MUTED, style};
use super::ticks::Scale;
use super::{Bar, GroupedBars, Panel};
use harness::error::{Error, Result};

const WIDTH: i32 = 1200;
const PANEL_HEIGHT: i32 = 240;
const PANEL_GAP: i32 = 18;
const LINE_PX: i32 = 15;

impl GroupedBars {
    fn legend(&self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, name)| Entry {
                swatch: Swatch::Bar(style(i).color),
                label: name.clone(),
            })
            .collect();
        if !self.spread.is_empty() {
            entries.push(Entry {
                swatch: Swatch::Whisker,
                label: self.spread.clone(),
            });
        }
        entries
    }

    /// Each group's label, wrapped to its slot.
    fn group_lines(&self, slot: i32) -> Vec<Vec<String>> {
        self.groups
            .iter()
            .map(|g| wrap(g, TICK_PX, f64::from(slot - 8)))
            .collect()
    }
}

fn scale_of(panel: &Panel) -> Option<Scale> {
    let values: Vec<f64> = panel
        .bars
        .iter()
        .flatten()
        .flatten()
        .flat_map(|b| [b.value, b.max, if panel.log { b.min } else { b.value }])
        .filter(|v| v.is_finite())
        .collect();
    if panel.log {
        // The whiskers' low ends too: a log axis has no zero for them to fall back to.
        return Scale::log(values);
    }
    values
        .iter()
        .any(|v| *v > 0.0)
        .then(|| Scale::linear(values))
}

/// Draws each panel of `chart` in its own band, top to bottom. A panel with no bar says so
/// instead of drawing empty axes.
pub fn draw_grouped(path: &Path, chart: &GroupedBars) -> Result<()> {
    if chart.groups.is_empty() || chart.panels.is_empty() {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "no group or no panel".into(),
        });
    }
    let scales: Vec<Option<Scale>> = chart.panels.iter().map(scale_of).collect();
    let left = MARGIN
        + chart
            .panels
            .iter()
            .zip(&scales)
            .filter_map(|(panel, scale)| {
                Some(axis::left_room(
                    scale.as_ref()?,
                    &panel.y_label,
                    PANEL_HEIGHT,
                ))
            })
            .max()
            .unwrap_or(0);
    let right = WIDTH - MARGIN;
    let slot = (right - left) / chart.groups.len() as i32;
    let lines = chart.group_lines(slot);
    let label_room = lines.iter().map(Vec::len).max().unwrap_or(1) as i32 * LINE_PX + 10;
    let legend = chart.legend();
    let inner = WIDTH - 2 * MARGIN;
    let header = Header {
        title: chart.title.clone(),
        subtitle: chart.subtitle.clone(),
    };
    let legend_top = header.height(WIDTH);
    let first_top = legend_top + legend::height(&legend, inner) + 8;
    let band = PANEL_HEIGHT + label_room + PANEL_GAP;
    let height = first_top + band * chart.panels.len() as i32 + MARGIN;
    let canvas = Canvas::new(path, WIDTH, height)?;
    header.draw(&canvas)?;
    legend::draw(&canvas, &legend, (MARGIN, legend_top), inner)?;
    for (index, (panel, scale)) in chart.panels.iter().zip(&scales).enumerate() {
        let top = first_top + band * index as i32;
        let frame = Frame {
            left,
            top,
            right,
            bottom: top + PANEL_HEIGHT,
        };
        match scale {
            Some(scale) => draw_panel(&canvas, chart, panel, &frame, scale, &lines)?,
            None => canvas.text_in(
                &format!("{}: not reported by this guest", panel.y_label),
                (left, top + 20),
                14.0,
                Anchor::Left,
                MUTED,
            )?,
        }
    }
    canvas.finish()
}

fn draw_panel(
    canvas: &Canvas<'_>,
    chart: &GroupedBars,
    panel: &Panel,
    frame: &Frame,
    scale: &Scale,
    lines: &[Vec<String>],
) -> Result<()> {
    axis::draw_y(canvas, frame, scale, &panel.y_label)?;
    let slot = f64::from(frame.right - frame.left) / chart.groups.len() as f64;
    let series = chart.series.len().max(1) as f64;
    let width = slot * 0.8 / series;
    for (group, row) in panel.bars.iter().enumerate() {
        let center = f64::from(frame.left) + slot * (group as f64 + 0.5);
        let label_top = frame.bottom + 6;
        for (i, line) in lines.get(group).into_iter().flatten().enumerate() {
            let at = (center as i32, label_top + i as i32 * LINE_PX);
            canvas.text(line, at, TICK_PX, Anchor::Top)?;
        }
        for (index, bar) in row.iter().enumerate() {
            let Some(Bar { value, min, max }) = *bar else {
                continue;
            };
            let x0 = center - slot * 0.4 + width * index as f64;
            let (a, b) = (x0 as i32 + 1, (x0 + width) as i32 - 1);
            let y = frame.y(scale, value);
            canvas.rect((a, y), (b, frame.bottom), style(index).color)?;
            let middle = (a + b) / 2;
            canvas.whisker((middle, frame.y(scale, min)), (middle, frame.y(scale, max)))?;
        }
    }
    frame.draw_edges(canvas)
}
