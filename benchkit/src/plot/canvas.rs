//! The drawing surface every figure uses: an SVG of a fixed size in pixels, with text set in
//! pixels (plotters' SVG backend writes a font size of its own size / 1.24; this undoes that),
//! rectangles, lines (solid or dashed), markers and whiskers. Coordinates are canvas pixels;
//! the charts map values to them through [`super::ticks::Scale`].

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::palette::{Dash, INK, Marker};
use harness::error::{Error, Result};

/// A point in canvas pixels.
pub type Px = (i32, i32);

/// Where a label's anchor sits on the label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// Left end, vertically centred.
    Left,
    /// Right end, vertically centred.
    Right,
    /// Centre of the top edge.
    Top,
    /// Centre of the label.
    Center,
    /// Left end of the top edge.
    TopLeft,
}

/// An SVG being drawn.
pub struct Canvas<'a> {
    area: DrawingArea<SVGBackend<'a>, Shift>,
    path: PathBuf,
    pub width: i32,
    pub height: i32,
}

impl<'a> Canvas<'a> {
    /// A white canvas of `width` × `height` pixels that [`Canvas::finish`] writes to `path`.
    pub fn new(path: &'a Path, width: i32, height: i32) -> Result<Canvas<'a>> {
        let area = SVGBackend::new(path, (width as u32, height as u32)).into_drawing_area();
        let canvas = Canvas {
            area,
            path: path.to_owned(),
            width,
            height,
        };
        canvas.area.fill(&WHITE).map_err(|e| canvas.fail(&e))?;
        Ok(canvas)
    }

    fn fail(&self, error: &dyn std::fmt::Display) -> Error {
        Error::Plot {
            path: self.path.clone(),
            reason: error.to_string(),
        }
    }

    fn draw<E>(&self, element: &E) -> Result<()>
    where
        for<'b> &'b E: PointCollection<'b, Px>,
        E: Drawable<SVGBackend<'a>>,
    {
        self.area.draw(element).map_err(|e| self.fail(&e))
    }

    /// `text` at `at`, `size_px` high, in `color`.
    pub fn text_in(
        &self,
        text: &str,
        at: Px,
        size_px: f64,
        anchor: Anchor,
        color: RGBColor,
    ) -> Result<()> {
        self.label(text, at, size_px, anchor, color, FontTransform::None)
    }

    /// `text` at `at` in ink.
    pub fn text(&self, text: &str, at: Px, size_px: f64, anchor: Anchor) -> Result<()> {
        self.text_in(text, at, size_px, anchor, INK)
    }

    /// `text` turned to read upwards (a vertical axis title), centred on `at`.
    pub fn text_up(&self, text: &str, at: Px, size_px: f64, anchor: Anchor) -> Result<()> {
        self.label(text, at, size_px, anchor, INK, FontTransform::Rotate270)
    }

    fn label(
        &self,
        text: &str,
        at: Px,
        size_px: f64,
        anchor: Anchor,
        color: RGBColor,
        transform: FontTransform,
    ) -> Result<()> {
        let (h, v) = match anchor {
            Anchor::Left => (HPos::Left, VPos::Center),
            Anchor::Right => (HPos::Right, VPos::Center),
            Anchor::Top => (HPos::Center, VPos::Top),
            Anchor::Center => (HPos::Center, VPos::Center),
            Anchor::TopLeft => (HPos::Left, VPos::Top),
        };
        let style = TextStyle::from(("sans-serif", size_px * 1.24).into_font())
            .pos(Pos::new(h, v))
            .color(&color)
            .transform(transform);
        self.draw(&Text::new(text.to_owned(), at, style))
    }

    /// A filled rectangle between two corners.
    pub fn rect(&self, a: Px, b: Px, fill: RGBColor) -> Result<()> {
        self.draw(&Rectangle::new([a, b], fill.filled()))
    }

    /// A rectangle's outline.
    pub fn outline(&self, a: Px, b: Px, color: RGBColor) -> Result<()> {
        self.draw(&Rectangle::new([a, b], color.stroke_width(1)))
    }

    /// A line through `points`, `width` pixels wide, solid or dashed.
    pub fn line(&self, points: &[Px], color: RGBColor, width: u32, dash: Dash) -> Result<()> {
        let style = color.stroke_width(width);
        match dash {
            Dash::Solid => self.draw(&PathElement::new(points.to_vec(), style)),
            Dash::Dashed(on, off) => {
                for segment in dashes(points, f64::from(on), f64::from(off)) {
                    self.draw(&PathElement::new(segment, style))?;
                }
                Ok(())
            }
        }
    }

    /// A marker of `radius` pixels centred on `at`.
    pub fn marker(&self, at: Px, marker: Marker, radius: i32, color: RGBColor) -> Result<()> {
        let (x, y, r) = (at.0, at.1, radius);
        match marker {
            Marker::Circle => self.draw(&Circle::new(at, r, color.filled())),
            Marker::Square => self.rect((x - r, y - r), (x + r, y + r), color),
            Marker::Triangle => self.draw(&Polygon::new(
                vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
                color.filled(),
            )),
            Marker::Diamond => self.draw(&Polygon::new(
                vec![
                    (x, y - r - 1),
                    (x + r + 1, y),
                    (x, y + r + 1),
                    (x - r - 1, y),
                ],
                color.filled(),
            )),
            Marker::Cross => {
                let style = color.stroke_width(2);
                self.draw(&PathElement::new(
                    vec![(x - r, y - r), (x + r, y + r)],
                    style,
                ))?;
                self.draw(&PathElement::new(
                    vec![(x - r, y + r), (x + r, y - r)],
                    style,
                ))
            }
        }
    }

    /// A whisker from `a` to `b` (horizontal or vertical) with caps across its ends.
    pub fn whisker(&self, a: Px, b: Px) -> Result<()> {
        if a == b {
            return Ok(());
        }
        let style = INK.stroke_width(1);
        self.draw(&PathElement::new(vec![a, b], style))?;
        let cap = 4;
        for end in [a, b] {
            let (from, to) = if a.1 == b.1 {
                ((end.0, end.1 - cap), (end.0, end.1 + cap))
            } else {
                ((end.0 - cap, end.1), (end.0 + cap, end.1))
            };
            self.draw(&PathElement::new(vec![from, to], style))?;
        }
        Ok(())
    }

    /// Writes the SVG.
    pub fn finish(self) -> Result<()> {
        self.area.present().map_err(|e| self.fail(&e))
    }
}

/// The dashes of the polyline `points`: pieces `on` pixels long with `off`-pixel gaps.
fn dashes(points: &[Px], on: f64, off: f64) -> Vec<Vec<Px>> {
    let mut pieces = Vec::new();
    let mut current: Vec<Px> = Vec::new();
    // How far into the current on+off period the pen is.
    let mut phase = 0.0;
    for pair in points.windows(2) {
        let (a, b) = (
            (f64::from(pair[0].0), f64::from(pair[0].1)),
            (f64::from(pair[1].0), f64::from(pair[1].1)),
        );
        let length = (b.0 - a.0).hypot(b.1 - a.1);
        let at = |t: f64| {
            let f = if length == 0.0 { 0.0 } else { t / length };
            (
                (a.0 + (b.0 - a.0) * f).round() as i32,
                (a.1 + (b.1 - a.1) * f).round() as i32,
            )
        };
        let mut t = 0.0;
        while t < length {
            let drawing = phase < on;
            let room = if drawing {
                on - phase
            } else {
                on + off - phase
            };
            let step = room.min(length - t);
            if drawing {
                if current.is_empty() {
                    current.push(at(t));
                }
                current.push(at(t + step));
            }
            t += step;
            phase += step;
            if phase >= on && drawing && !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            if phase >= on + off {
                phase = 0.0;
            }
        }
    }
    if current.len() > 1 {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashes_alternate_along_the_line() {
        let pieces = dashes(&[(0, 0), (30, 0)], 8.0, 4.0);
        assert_eq!(
            pieces,
            [
                vec![(0, 0), (8, 0)],
                vec![(12, 0), (20, 0)],
                vec![(24, 0), (30, 0)]
            ]
        );
        // A dash carries on round a corner.
        let pieces = dashes(&[(0, 0), (5, 0), (5, 5)], 8.0, 4.0);
        assert_eq!(pieces[0], vec![(0, 0), (5, 0), (5, 3)]);
    }
}
