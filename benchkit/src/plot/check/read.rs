//! An SVG as the readability check sees it: the canvas, every label with the box its glyphs
//! cover, and every coloured mark with its bounds.

use roxmltree::{Document, Node};

use super::Problem;
use crate::plot::metrics::{ASCENT, DESCENT, X_HEIGHT, text_width};

/// A point in canvas pixels.
pub type Point = (f64, f64);

/// One `<text>` element: its string and the four corners of its box (rotation applied).
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub text: String,
    pub corners: [Point; 4],
    /// Turned by a `rotate(…)` that is not a whole turn.
    pub rotated: bool,
}

/// An axis-aligned box: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Bounds {
    fn around(points: &[Point]) -> Option<Bounds> {
        let first = points.first()?;
        Some(points.iter().fold(
            Bounds {
                left: first.0,
                top: first.1,
                right: first.0,
                bottom: first.1,
            },
            |b, p| Bounds {
                left: b.left.min(p.0),
                top: b.top.min(p.1),
                right: b.right.max(p.0),
                bottom: b.bottom.max(p.1),
            },
        ))
    }

    pub fn contains(&self, point: Point) -> bool {
        (self.left..=self.right).contains(&point.0) && (self.top..=self.bottom).contains(&point.1)
    }
}

impl Label {
    pub fn bounds(&self) -> Bounds {
        Bounds::around(&self.corners).expect("four corners")
    }

    pub fn center(&self) -> Point {
        let b = self.bounds();
        ((b.left + b.right) / 2.0, (b.top + b.bottom) / 2.0)
    }
}

/// A drawn shape in a colour that is not a grey: a bar, a line, a marker, a legend swatch.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub rgb: (u8, u8, u8),
    pub bounds: Bounds,
    /// A `<rect>`: one that holds a label is a labelled cell of a table or heat map.
    pub is_rect: bool,
}

/// What the check reads from one SVG.
#[derive(Clone, Debug, Default)]
pub struct Drawing {
    pub width: f64,
    pub height: f64,
    pub labels: Vec<Label>,
    pub marks: Vec<Mark>,
}

/// Reads `svg`, or says why it is no SVG the check can read ([`Problem::Unreadable`]).
pub fn drawing(svg: &str) -> std::result::Result<Drawing, Problem> {
    let unreadable = |reason: String| Problem::Unreadable { reason };
    let document = Document::parse(svg).map_err(|error| unreadable(format!("not XML: {error}")))?;
    let root = document.root_element();
    if root.tag_name().name() != "svg" {
        let name = root.tag_name().name();
        return Err(unreadable(format!("the root element is <{name}>")));
    }
    let view_box: Vec<f64> = root.attribute("viewBox").map(numbers).unwrap_or_default();
    let size = |name: &str, index: usize| {
        root.attribute(name)
            .and_then(|value| value.trim_end_matches("px").parse().ok())
            .or_else(|| view_box.get(index).copied())
    };
    let (Some(width), Some(height)) = (size("width", 2), size("height", 3)) else {
        return Err(unreadable(
            "the <svg> element gives no width and height".into(),
        ));
    };
    let mut drawing = Drawing {
        width,
        height,
        ..Drawing::default()
    };
    for node in root.descendants().filter(Node::is_element) {
        match node.tag_name().name() {
            "text" => drawing.labels.extend(label(&node)),
            _ => drawing.marks.extend(mark(&node)),
        }
    }
    Ok(drawing)
}

/// Every number in `text` (attribute lists such as `points` and `rotate(…)`).
fn numbers(text: &str) -> Vec<f64> {
    text.split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E')))
        .filter_map(|word| word.parse().ok())
        .collect()
}

fn number(node: &Node<'_, '_>, name: &str) -> f64 {
    node.attribute(name)
        .and_then(|value| value.trim_end_matches("px").parse().ok())
        .unwrap_or(0.0)
}

fn label(node: &Node<'_, '_>) -> Option<Label> {
    let text: String = node
        .descendants()
        .filter(Node::is_text)
        .filter_map(|text| text.text())
        .collect::<String>()
        .trim()
        .to_owned();
    if text.is_empty() {
        return None;
    }
    let size = node
        .attribute("font-size")
        .and_then(|value| value.trim_end_matches("px").parse().ok())
        .unwrap_or(16.0);
    let (x, y) = (number(node, "x"), number(node, "y"));
    let width = text_width(&text, size);
    let left = match node.attribute("text-anchor") {
        Some("middle") => x - width / 2.0,
        Some("end") => x - width,
        _ => x,
    };
    let baseline = y + baseline_shift(node, size);
    let (top, bottom) = (baseline - ASCENT * size, baseline + DESCENT * size);
    let mut corners = [
        (left, top),
        (left + width, top),
        (left + width, bottom),
        (left, bottom),
    ];
    let mut rotated = false;
    if let Some(rotate) = node
        .attribute("transform")
        .and_then(|t| t.trim().strip_prefix("rotate("))
    {
        let turn = numbers(rotate);
        let angle = turn.first().copied().unwrap_or(0.0);
        let pivot = (
            turn.get(1).copied().unwrap_or(0.0),
            turn.get(2).copied().unwrap_or(0.0),
        );
        rotated = angle.rem_euclid(360.0) != 0.0;
        let (sin, cos) = angle.to_radians().sin_cos();
        for corner in &mut corners {
            let (dx, dy) = (corner.0 - pivot.0, corner.1 - pivot.1);
            *corner = (pivot.0 + dx * cos - dy * sin, pivot.1 + dx * sin + dy * cos);
        }
    }
    Some(Label {
        text,
        corners,
        rotated,
    })
}

/// Where the baseline sits below `y`: plotters hangs text by `dy` (`0.76em` from the top,
/// `0.5ex` centred, `-0.5ex` from the bottom); other writers use `dominant-baseline`.
fn baseline_shift(node: &Node<'_, '_>, size: f64) -> f64 {
    if let Some(dy) = node.attribute("dy") {
        let value = |suffix: &str| dy.strip_suffix(suffix)?.parse::<f64>().ok();
        return value("em")
            .map(|em| em * size)
            .or_else(|| value("ex").map(|ex| ex * X_HEIGHT * size))
            .or_else(|| value("px").or_else(|| dy.parse().ok()))
            .unwrap_or(0.0);
    }
    match node.attribute("dominant-baseline") {
        Some("middle" | "central") => (ASCENT - DESCENT) / 2.0 * size,
        Some("hanging" | "text-before-edge") => ASCENT * size,
        _ => 0.0,
    }
}

fn mark(node: &Node<'_, '_>) -> Option<Mark> {
    let opacity: f64 = node
        .attribute("opacity")
        .and_then(|o| o.parse().ok())
        .unwrap_or(1.0);
    if opacity < 0.3 {
        return None;
    }
    let paint = |name: &str| node.attribute(name).and_then(rgb);
    let rgb = paint("fill").or_else(|| paint("stroke"))?;
    if rgb.0 == rgb.1 && rgb.1 == rgb.2 {
        return None;
    }
    let n = |name: &str| number(node, name);
    let points: Vec<Point> = match node.tag_name().name() {
        "rect" => vec![
            (n("x"), n("y")),
            (n("x") + n("width"), n("y") + n("height")),
        ],
        "circle" => vec![
            (n("cx") - n("r"), n("cy") - n("r")),
            (n("cx") + n("r"), n("cy") + n("r")),
        ],
        "line" => vec![(n("x1"), n("y1")), (n("x2"), n("y2"))],
        "polyline" | "polygon" => numbers(node.attribute("points").unwrap_or(""))
            .chunks_exact(2)
            .map(|pair| (pair[0], pair[1]))
            .collect(),
        _ => Vec::new(),
    };
    Some(Mark {
        rgb,
        bounds: Bounds::around(&points)?,
        is_rect: node.tag_name().name() == "rect",
    })
}

/// `#rrggbb`, `#rgb` or `rgb(r, g, b)`; `none` and names other than black and white are no
/// colour the check can compare.
fn rgb(paint: &str) -> Option<(u8, u8, u8)> {
    let paint = paint.trim();
    if let Some(hex) = paint.strip_prefix('#') {
        let digits: Vec<u8> = hex
            .chars()
            .map(|c| c.to_digit(16).map(|d| d as u8))
            .collect::<Option<_>>()?;
        return match digits[..] {
            [r, g, b] => Some((r * 17, g * 17, b * 17)),
            [r1, r2, g1, g2, b1, b2] => Some((r1 * 16 + r2, g1 * 16 + g2, b1 * 16 + b2)),
            _ => None,
        };
    }
    if let Some(inner) = paint.strip_prefix("rgb(") {
        let parts: Vec<u8> = inner
            .trim_end_matches(')')
            .split(',')
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        return match parts[..] {
            [r, g, b] => Some((r, g, b)),
            _ => None,
        };
    }
    match paint {
        "black" => Some((0, 0, 0)),
        "white" => Some((255, 255, 255)),
        _ => None,
    }
}
