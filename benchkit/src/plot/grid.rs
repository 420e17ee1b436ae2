//! A table of coloured, labelled cells (rows × columns): a verdict map (sense-reserve's OK /
//! STALL / LIVELOCK per scenario and mode) or a heat map (a ratio per cell, its spread on a
//! second line). Every cell prints what its colour means, so the colours only guide the eye
//! and a greyscale print loses nothing; the key under the table names each colour.

use std::path::Path;

use plotters::style::RGBColor;

use super::canvas::{Anchor, Canvas};
use super::legend::{Header, MARGIN};
use super::metrics::{text_width, wrap};
use super::palette::{GRID, MUTED};
use harness::error::{Error, Result};

/// One cell: its text, a second smaller line (may be empty), and its fill (RGB).
#[derive(Clone, Debug, PartialEq)]
pub struct GridCell {
    pub text: String,
    pub detail: String,
    pub rgb: (u8, u8, u8),
}

/// Rows × columns of cells, `cells[row][column]`, `None` where nothing was measured.
#[derive(Clone, Debug)]
pub struct Grid {
    pub title: String,
    pub subtitle: String,
    pub rows: Vec<String>,
    pub columns: Vec<String>,
    pub cells: Vec<Vec<Option<GridCell>>>,
    /// Sample cells naming each colour, drawn in a row under the table.
    pub key: Vec<GridCell>,
}

const TEXT_PX: f64 = 13.0;
const DETAIL_PX: f64 = 10.0;
const HEAD_PX: f64 = 13.0;
const MIN_CELL: i32 = 92;
const LINE: i32 = 16;

/// The width a cell needs for its own text.
fn width_of(cell: &GridCell) -> i32 {
    let widest = text_width(&cell.text, TEXT_PX).max(text_width(&cell.detail, DETAIL_PX));
    MIN_CELL.max(widest.ceil() as i32 + 12)
}

fn fill(rgb: (u8, u8, u8)) -> RGBColor {
    RGBColor(rgb.0, rgb.1, rgb.2)
}

impl Grid {
    fn all_cells(&self) -> impl Iterator<Item = &GridCell> {
        self.cells.iter().flatten().flatten().chain(&self.key)
    }

    /// One width for every cell of the table: room for the widest text.
    fn cell_width(&self) -> i32 {
        self.cells
            .iter()
            .flatten()
            .flatten()
            .map(width_of)
            .fold(MIN_CELL, i32::max)
    }

    fn cell_height(&self) -> i32 {
        if self.all_cells().any(|c| !c.detail.is_empty()) {
            44
        } else {
            34
        }
    }
}

/// Where a grid's parts go: the table's top-left corner, its cells' size, the column heads'
/// lines, the key's top and the canvas.
struct Layout {
    left: i32,
    top: i32,
    cell: (i32, i32),
    heads: Vec<Vec<String>>,
    key_top: i32,
    size: (i32, i32),
}

impl Grid {
    fn layout(&self) -> Layout {
        let (cell_w, cell_h) = (self.cell_width(), self.cell_height());
        let row_labels = self
            .rows
            .iter()
            .map(|r| text_width(r, HEAD_PX).ceil() as i32)
            .max()
            .unwrap_or(0);
        let left = MARGIN + row_labels + 12;
        let heads: Vec<Vec<String>> = self
            .columns
            .iter()
            .map(|c| wrap(c, HEAD_PX, f64::from(cell_w - 6)))
            .collect();
        let head_lines = heads.iter().map(Vec::len).max().unwrap_or(1) as i32;
        let table_width = cell_w * self.columns.len() as i32;
        let key_width: i32 = self.key.iter().map(width_of).sum::<i32>() + 60;
        let width = (left + table_width + MARGIN)
            .max(key_width + 2 * MARGIN)
            .max(720);
        let top = self.header().height(width) + head_lines * LINE + 8;
        let table_bottom = top + cell_h * self.rows.len() as i32;
        let key_top = table_bottom + 16;
        let height = match self.key.is_empty() {
            true => table_bottom + MARGIN,
            false => key_top + cell_h + MARGIN,
        };
        Layout {
            left,
            top,
            cell: (cell_w, cell_h),
            heads,
            key_top,
            size: (width, height),
        }
    }

    fn header(&self) -> Header {
        Header {
            title: self.title.clone(),
            subtitle: self.subtitle.clone(),
        }
    }
}

/// Draws `grid` as an SVG table.
pub fn draw_grid(path: &Path, grid: &Grid) -> Result<()> {
    if grid.rows.is_empty() || grid.columns.is_empty() {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "empty grid".into(),
        });
    }
    let layout = grid.layout();
    let (cell_w, cell_h) = layout.cell;
    let canvas = Canvas::new(path, layout.size.0, layout.size.1)?;
    grid.header().draw(&canvas)?;
    for (c, lines) in layout.heads.iter().enumerate() {
        let x = layout.left + cell_w * c as i32 + cell_w / 2;
        let first = layout.top - 6 - lines.len() as i32 * LINE;
        for (i, line) in lines.iter().enumerate() {
            canvas.text(line, (x, first + i as i32 * LINE), HEAD_PX, Anchor::Top)?;
        }
    }
    for (r, row) in grid.rows.iter().enumerate() {
        let y = layout.top + cell_h * r as i32;
        let at = (layout.left - 10, y + cell_h / 2);
        canvas.text(row, at, HEAD_PX, Anchor::Right)?;
        for c in 0..grid.columns.len() {
            let cell = grid
                .cells
                .get(r)
                .and_then(|row| row.get(c))
                .cloned()
                .flatten();
            let at = (layout.left + cell_w * c as i32, y);
            draw_cell(&canvas, cell.as_ref(), at, (cell_w, cell_h))?;
        }
    }
    draw_key(&canvas, &grid.key, layout.key_top, cell_h)?;
    canvas.finish()
}

/// The key: sample cells in a row, each as wide as its own text.
fn draw_key(canvas: &Canvas<'_>, key: &[GridCell], top: i32, height: i32) -> Result<()> {
    if key.is_empty() {
        return Ok(());
    }
    canvas.text("key:", (MARGIN, top + height / 2), HEAD_PX, Anchor::Left)?;
    let mut x = MARGIN + 50;
    for cell in key {
        draw_cell(canvas, Some(cell), (x, top), (width_of(cell), height))?;
        x += width_of(cell);
    }
    Ok(())
}

fn draw_cell(
    canvas: &Canvas<'_>,
    cell: Option<&GridCell>,
    (x, y): (i32, i32),
    (w, h): (i32, i32),
) -> Result<()> {
    let Some(cell) = cell else {
        canvas.rect((x + 1, y + 1), (x + w - 1, y + h - 1), GRID)?;
        return canvas.text_in("-", (x + w / 2, y + h / 2), TEXT_PX, Anchor::Center, MUTED);
    };
    canvas.rect((x + 1, y + 1), (x + w - 1, y + h - 1), fill(cell.rgb))?;
    if cell.detail.is_empty() {
        return canvas.text(&cell.text, (x + w / 2, y + h / 2), TEXT_PX, Anchor::Center);
    }
    canvas.text(
        &cell.text,
        (x + w / 2, y + h / 2 - 7),
        TEXT_PX,
        Anchor::Center,
    )?;
    canvas.text(
        &cell.detail,
        (x + w / 2, y + h / 2 + 10),
        DETAIL_PX,
        Anchor::Center,
    )
}
