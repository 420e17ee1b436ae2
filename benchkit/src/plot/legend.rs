//! What sits above every plot: the title (the bench's question, wrapped to the canvas), a
//! subtitle (what was measured, where, what the whiskers span), and the legend, laid out in
//! rows between the subtitle and the plot so that it never covers data.

use plotters::style::RGBColor;

use super::canvas::{Anchor, Canvas};
use super::metrics::{text_width, wrap};
use super::palette::{MUTED, Marker, Style};
use harness::error::Result;

/// Canvas margin, pixels.
pub const MARGIN: i32 = 16;
pub const TITLE_PX: f64 = 18.0;
pub const SUBTITLE_PX: f64 = 13.0;
pub const LEGEND_PX: f64 = 13.0;
const LINE_GAP: f64 = 1.3;

/// A figure's title and subtitle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    /// The question the figure answers.
    pub title: String,
    /// What was measured and where; may be empty.
    pub subtitle: String,
}

impl Header {
    fn lines(&self, width: i32) -> (Vec<String>, Vec<String>) {
        let room = f64::from(width - 2 * MARGIN);
        (
            wrap(&self.title, TITLE_PX, room),
            wrap(&self.subtitle, SUBTITLE_PX, room),
        )
    }

    /// How tall the header is on a canvas `width` pixels wide.
    pub fn height(&self, width: i32) -> i32 {
        let (title, subtitle) = self.lines(width);
        let height = title.len() as f64 * TITLE_PX * LINE_GAP
            + subtitle.len() as f64 * SUBTITLE_PX * LINE_GAP;
        MARGIN + height.ceil() as i32 + 8
    }

    /// Draws the header; returns the y below it.
    pub fn draw(&self, canvas: &Canvas<'_>) -> Result<i32> {
        let (title, subtitle) = self.lines(canvas.width);
        let mut y = f64::from(MARGIN);
        for line in &title {
            canvas.text(line, (MARGIN, y as i32), TITLE_PX, Anchor::TopLeft)?;
            y += TITLE_PX * LINE_GAP;
        }
        for line in &subtitle {
            canvas.text_in(
                line,
                (MARGIN, y as i32),
                SUBTITLE_PX,
                Anchor::TopLeft,
                MUTED,
            )?;
            y += SUBTITLE_PX * LINE_GAP;
        }
        Ok(self.height(canvas.width))
    }
}

/// What a legend entry shows beside its label.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Swatch {
    /// A bar's fill.
    Bar(RGBColor),
    /// A line with its marker.
    Line(Style),
    /// A marker alone.
    Point(Marker, RGBColor),
    /// A whisker (min–max and the like).
    Whisker,
}

/// One legend entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub swatch: Swatch,
    pub label: String,
}

const SWATCH_WIDTH: i32 = 24;
const SWATCH_GAP: i32 = 6;
const ENTRY_GAP: i32 = 22;
const ROW_HEIGHT: i32 = 20;

fn entry_width(entry: &Entry) -> i32 {
    SWATCH_WIDTH + SWATCH_GAP + text_width(&entry.label, LEGEND_PX).ceil() as i32
}

/// The rows of entries (indices) that fit in `width` pixels.
fn rows(entries: &[Entry], width: i32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut used = 0;
    for (index, entry) in entries.iter().enumerate() {
        let needed = entry_width(entry);
        match rows.last_mut() {
            Some(row) if used + ENTRY_GAP + needed <= width => {
                row.push(index);
                used += ENTRY_GAP + needed;
            }
            _ => {
                rows.push(vec![index]);
                used = needed;
            }
        }
    }
    rows
}

/// How tall the legend of `entries` is within `width` pixels (0 without entries).
pub fn height(entries: &[Entry], width: i32) -> i32 {
    match rows(entries, width).len() as i32 {
        0 => 0,
        n => n * ROW_HEIGHT + 6,
    }
}

/// Draws the legend with its top-left corner at `at`, within `width` pixels.
pub fn draw(canvas: &Canvas<'_>, entries: &[Entry], at: (i32, i32), width: i32) -> Result<()> {
    for (row_index, row) in rows(entries, width).iter().enumerate() {
        let y = at.1 + row_index as i32 * ROW_HEIGHT + ROW_HEIGHT / 2;
        let mut x = at.0;
        for &index in row {
            let entry = &entries[index];
            draw_swatch(canvas, entry.swatch, (x, y))?;
            canvas.text(
                &entry.label,
                (x + SWATCH_WIDTH + SWATCH_GAP, y),
                LEGEND_PX,
                Anchor::Left,
            )?;
            x += entry_width(entry) + ENTRY_GAP;
        }
    }
    Ok(())
}

fn draw_swatch(canvas: &Canvas<'_>, swatch: Swatch, (x, y): (i32, i32)) -> Result<()> {
    let right = x + SWATCH_WIDTH;
    match swatch {
        Swatch::Bar(color) => canvas.rect((x + 4, y - 6), (right - 4, y + 6), color),
        Swatch::Line(style) => {
            canvas.line(&[(x, y), (right, y)], style.color, 2, style.dash)?;
            canvas.marker((x + SWATCH_WIDTH / 2, y), style.marker, 4, style.color)
        }
        Swatch::Point(marker, color) => canvas.marker((x + SWATCH_WIDTH / 2, y), marker, 4, color),
        Swatch::Whisker => canvas.whisker((x + 2, y), (right - 2, y)),
    }
}
