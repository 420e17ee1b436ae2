//! A plot's frame and value axes: grid lines at the ticks, tick labels sized by the font
//! metrics, and an axis title (which names the unit) beside them.

use super::canvas::{Anchor, Canvas, Px};
use super::metrics::{text_width, wrap};
use super::palette::{Dash, GRID, INK};
use super::ticks::Scale;
use harness::error::Result;

pub const TICK_PX: f64 = 12.0;
pub const AXIS_TITLE_PX: f64 = 13.0;
const TICK_GAP: i32 = 6;

/// The rectangle data is drawn in, canvas pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Frame {
    /// The x pixel of `value` on `scale` across the frame.
    pub fn x(&self, scale: &Scale, value: f64) -> i32 {
        let f = scale.fraction(value).clamp(-0.05, 1.05);
        self.left + (f * f64::from(self.right - self.left)).round() as i32
    }

    /// The y pixel of `value` on `scale` up the frame.
    pub fn y(&self, scale: &Scale, value: f64) -> i32 {
        let f = scale.fraction(value).clamp(-0.05, 1.05);
        self.bottom - (f * f64::from(self.bottom - self.top)).round() as i32
    }

    /// Draws the frame's left and bottom edges.
    pub fn draw_edges(&self, canvas: &Canvas<'_>) -> Result<()> {
        canvas.line(
            &[
                (self.left, self.top),
                (self.left, self.bottom),
                (self.right, self.bottom),
            ],
            INK,
            1,
            Dash::Solid,
        )
    }
}

/// How wide the widest tick label of `scale` is.
fn widest_tick(scale: &Scale) -> i32 {
    scale
        .ticks()
        .iter()
        .map(|tick| text_width(&tick.label, TICK_PX).ceil() as i32)
        .max()
        .unwrap_or(0)
}

/// The width of one line of a turned axis title.
const TITLE_LINE: i32 = (AXIS_TITLE_PX * 1.3) as i32;

/// A vertical axis title broken into lines no longer than the axis (`height` pixels).
fn title_lines(title: &str, height: i32) -> Vec<String> {
    wrap(title, AXIS_TITLE_PX, f64::from(height))
}

/// The room a vertical axis `height` pixels tall needs left of its frame: tick labels and the
/// turned title (empty: none).
pub fn left_room(scale: &Scale, title: &str, height: i32) -> i32 {
    widest_tick(scale) + TICK_GAP * 2 + title_room(title, height)
}

/// The room the turned `title` of an axis `height` pixels tall takes.
pub fn title_room(title: &str, height: i32) -> i32 {
    title_lines(title, height).len() as i32 * TITLE_LINE + 2
}

/// `title` turned to read upwards, centred on `top`–`bottom`, its lines ending `right`.
pub fn draw_y_title(
    canvas: &Canvas<'_>,
    title: &str,
    right: i32,
    (top, bottom): (i32, i32),
) -> Result<()> {
    let lines = title_lines(title, bottom - top);
    let count = lines.len() as i32;
    for (i, line) in lines.iter().enumerate() {
        let x = right - (count - i as i32) * TITLE_LINE + TITLE_LINE / 2;
        canvas.text_up(line, (x, (top + bottom) / 2), AXIS_TITLE_PX, Anchor::Center)?;
    }
    Ok(())
}

/// The room a horizontal axis needs below its frame: tick labels and the title.
pub fn bottom_room() -> i32 {
    (TICK_PX * 1.3) as i32 + TICK_GAP * 2 + (AXIS_TITLE_PX * 1.4) as i32
}

/// A vertical value axis on the frame's left: grid lines across it, tick labels, and `title`
/// turned upright (omitted when empty, for panels that share one).
pub fn draw_y(canvas: &Canvas<'_>, frame: &Frame, scale: &Scale, title: &str) -> Result<()> {
    for tick in scale.ticks() {
        let y = frame.y(scale, tick.value);
        grid_line(canvas, (frame.left, y), (frame.right, y))?;
        canvas.text(
            &tick.label,
            (frame.left - TICK_GAP, y),
            TICK_PX,
            Anchor::Right,
        )?;
    }
    let right = frame.left - widest_tick(scale) - TICK_GAP * 2;
    draw_y_title(canvas, title, right, (frame.top, frame.bottom))
}

/// A horizontal value axis under the frame: grid lines up it, tick labels, `title` below.
pub fn draw_x(canvas: &Canvas<'_>, frame: &Frame, scale: &Scale, title: &str) -> Result<()> {
    for tick in scale.ticks() {
        let x = frame.x(scale, tick.value);
        grid_line(canvas, (x, frame.top), (x, frame.bottom))?;
        canvas.text(
            &tick.label,
            (x, frame.bottom + TICK_GAP),
            TICK_PX,
            Anchor::Top,
        )?;
    }
    let y = frame.bottom + TICK_GAP * 2 + (TICK_PX * 1.3) as i32;
    canvas.text(
        title,
        ((frame.left + frame.right) / 2, y),
        AXIS_TITLE_PX,
        Anchor::Top,
    )
}

fn grid_line(canvas: &Canvas<'_>, a: Px, b: Px) -> Result<()> {
    canvas.line(&[a, b], GRID, 1, Dash::Solid)
}
