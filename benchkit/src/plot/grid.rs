//! A verdict map: a table of colored, labelled cells (rows × columns), for matrices whose
//! result per cell is a category rather than a number (sense-reserve's OK / STALL / LIVELOCK
//! per scenario and mode).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot_error;
use harness::error::{Error, Result};

/// One cell: its text and its fill color (RGB).
#[derive(Clone, Debug, PartialEq)]
pub struct GridCell {
    pub text: String,
    pub rgb: (u8, u8, u8),
}

/// Rows × columns of cells, `cells[row][column]`, `None` where nothing was measured.
#[derive(Clone, Debug)]
pub struct Grid {
    pub title: String,
    pub rows: Vec<String>,
    pub columns: Vec<String>,
    pub cells: Vec<Vec<Option<GridCell>>>,
}

const CELL: (i32, i32) = (96, 40);
const LEFT: i32 = 120;
const TOP: i32 = 80;

/// Draws `grid` as an SVG table.
pub fn draw_grid(path: &Path, grid: &Grid) -> Result<()> {
    let fail = plot_error(path);
    if grid.rows.is_empty() || grid.columns.is_empty() {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "empty grid".into(),
        });
    }
    let width = LEFT + CELL.0 * grid.columns.len() as i32 + 16;
    let height = TOP + CELL.1 * grid.rows.len() as i32 + 16;
    let root = SVGBackend::new(path, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let centered = Pos::new(HPos::Center, VPos::Center);
    let text = |s: &str, at: (i32, i32), size: u32| {
        Text::new(
            s.to_owned(),
            at,
            TextStyle::from(("sans-serif", size).into_font()).pos(centered),
        )
    };
    root.draw(&Text::new(
        grid.title.clone(),
        (8, 16),
        ("sans-serif", 18).into_font(),
    ))
    .map_err(|e| fail(&e))?;
    for (c, column) in grid.columns.iter().enumerate() {
        let x = LEFT + CELL.0 * c as i32 + CELL.0 / 2;
        root.draw(&text(column, (x, TOP - 14), 14))
            .map_err(|e| fail(&e))?;
    }
    for (r, row) in grid.rows.iter().enumerate() {
        let y = TOP + CELL.1 * r as i32;
        root.draw(&text(row, (LEFT / 2, y + CELL.1 / 2), 14))
            .map_err(|e| fail(&e))?;
        for c in 0..grid.columns.len() {
            let x = LEFT + CELL.0 * c as i32;
            let cell = grid
                .cells
                .get(r)
                .and_then(|row| row.get(c))
                .cloned()
                .flatten();
            let (label, rgb) = match cell {
                Some(cell) => (cell.text, cell.rgb),
                None => ("-".to_owned(), (235, 235, 235)),
            };
            let color = RGBColor(rgb.0, rgb.1, rgb.2);
            root.draw(&Rectangle::new(
                [(x + 1, y + 1), (x + CELL.0 - 1, y + CELL.1 - 1)],
                color.filled(),
            ))
            .map_err(|e| fail(&e))?;
            root.draw(&text(&label, (x + CELL.0 / 2, y + CELL.1 / 2), 13))
                .map_err(|e| fail(&e))?;
        }
    }
    root.present().map_err(|e| fail(&e))
}
