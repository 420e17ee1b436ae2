//! Is a figure readable? The check reads an SVG's labels and coloured marks and names what a
//! reader would stumble on:
//!
//! - two labels whose boxes overlap (widths from the font's advance widths, [`super::metrics`];
//!   rotated labels turned with their `rotate(…)`; a pixel of slack for glyphs that do not fill
//!   their box);
//! - a label that runs past the canvas;
//! - a label showing a floating-point artefact: six or more digits after a decimal point
//!   (`1.5999999999999999`), which no measurement on these machines has;
//! - a series without a legend entry: a colour (not a grey) used for marks with no swatch of
//!   that colour just left of a label, and no cell of that colour holding a label (tables and
//!   heat maps label their cells). A figure with a single colour needs no legend: its title
//!   and axes name what it shows.
//!
//! What it cannot see: whether a label is true, whether a legend covers data, whether an axis
//! names its unit. Those are the figure helpers' job ([`super`]).

mod read;

use std::fmt;
use std::path::Path;

use harness::error::{Error, Result};

pub use read::{Bounds, Drawing, Label, Mark, drawing};

/// Slack, in pixels, before two boxes count as overlapping or a box as off the canvas.
const SLACK: f64 = 1.0;

/// One thing that makes a figure hard to read.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The file is no SVG the check can read.
    Unreadable {
        reason: String,
    },
    Overlap {
        first: String,
        second: String,
    },
    OffCanvas {
        label: String,
    },
    FloatArtefact {
        label: String,
    },
    /// A colour of data marks that no legend entry names (`#rrggbb`).
    NoLegendEntry {
        color: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unreadable { reason } => write!(f, "unreadable: {reason}"),
            Problem::Overlap { first, second } => {
                write!(f, "labels overlap: `{first}` and `{second}`")
            }
            Problem::OffCanvas { label } => write!(f, "label runs off the canvas: `{label}`"),
            Problem::FloatArtefact { label } => {
                write!(f, "label shows a floating-point artefact: `{label}`")
            }
            Problem::NoLegendEntry { color } => {
                write!(f, "a series drawn in {color} has no legend entry")
            }
        }
    }
}

/// Every problem of the SVG text `svg`; empty when the figure reads cleanly.
pub fn check(svg: &str) -> Vec<Problem> {
    let drawing = match drawing(svg) {
        Ok(drawing) => drawing,
        Err(unreadable) => return vec![unreadable],
    };
    let mut problems = Vec::new();
    let labels = &drawing.labels;
    for (i, first) in labels.iter().enumerate() {
        for second in &labels[i + 1..] {
            if overlap(first, second) {
                problems.push(Problem::Overlap {
                    first: first.text.clone(),
                    second: second.text.clone(),
                });
            }
        }
    }
    for label in labels {
        let b = label.bounds();
        if b.left < -SLACK
            || b.top < -SLACK
            || b.right > drawing.width + SLACK
            || b.bottom > drawing.height + SLACK
        {
            problems.push(Problem::OffCanvas {
                label: label.text.clone(),
            });
        }
        if has_float_artefact(&label.text) {
            problems.push(Problem::FloatArtefact {
                label: label.text.clone(),
            });
        }
    }
    problems.extend(unnamed_colors(&drawing));
    problems
}

/// [`check`] of the file at `path`.
pub fn check_file(path: &Path) -> Result<Vec<Problem>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    Ok(check(&text))
}

/// Six or more digits straight after a decimal point.
pub fn has_float_artefact(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b == b'.'
            && i > 0
            && bytes[i - 1].is_ascii_digit()
            && bytes[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
                >= 6
    })
}

/// Whether the boxes of `a` and `b` overlap by more than [`SLACK`] (separating-axis test on
/// the two rectangles, so turned labels compare as drawn).
fn overlap(a: &Label, b: &Label) -> bool {
    let axes = [a, b].map(|label| {
        let [p0, p1, _, p3] = label.corners;
        [(p1.0 - p0.0, p1.1 - p0.1), (p3.0 - p0.0, p3.1 - p0.1)]
    });
    axes.iter().flatten().all(|&(dx, dy)| {
        let length = dx.hypot(dy);
        if length == 0.0 {
            return false;
        }
        let project = |label: &Label| {
            label
                .corners
                .iter()
                .map(|p| (p.0 * dx + p.1 * dy) / length)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                })
        };
        let ((a_lo, a_hi), (b_lo, b_hi)) = (project(a), project(b));
        a_hi.min(b_hi) - a_lo.max(b_lo) > SLACK
    })
}

/// The colours of marks that neither a legend swatch nor a labelled cell names, when the
/// figure uses more than one.
fn unnamed_colors(drawing: &Drawing) -> Vec<Problem> {
    let mut colors: Vec<(u8, u8, u8)> = Vec::new();
    for mark in &drawing.marks {
        if !colors.contains(&mark.rgb) {
            colors.push(mark.rgb);
        }
    }
    if colors.len() < 2 {
        return Vec::new();
    }
    colors
        .into_iter()
        .filter(|rgb| {
            !drawing
                .marks
                .iter()
                .filter(|mark| mark.rgb == *rgb)
                .any(|mark| names(mark, &drawing.labels))
        })
        .map(|(r, g, b)| Problem::NoLegendEntry {
            color: format!("#{r:02x}{g:02x}{b:02x}"),
        })
        .collect()
}

/// A cell holding a label, or a swatch (at most 40 × 24 px) with a label starting just right
/// of it on the same line.
fn names(mark: &Mark, labels: &[Label]) -> bool {
    let m = mark.bounds;
    let cell = |label: &Label| mark.is_rect && m.contains(label.center());
    let swatch = |label: &Label| {
        let b = label.bounds();
        m.right - m.left <= 40.0
            && m.bottom - m.top <= 24.0
            && !label.rotated
            && (m.right - 2.0..=m.right + 24.0).contains(&b.left)
            && b.top.max(m.top - 4.0) < b.bottom.min(m.bottom + 4.0)
    };
    labels.iter().any(|label| cell(label) || swatch(label))
}

#[cfg(test)]
mod tests;
