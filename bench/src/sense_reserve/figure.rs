//! The sense-reserve figures, scenario (rows, panels) by sense mode (columns, x), in the order
//! the guest ran them:
//! - `-verdicts`: which reserve keeps I/O going, per cell (OK / LIVELOCK / STALL, time to
//!   stall);
//! - `-ratio`: what each reserve costs, IOPS relative to slab per cell, the median of the
//!   per-round ratios with their min–max;
//! - `-iops` and `-p99`: small multiples, one panel per scenario with every mode's IOPS (median,
//!   min–max over the rounds) or p99 latency, a cross where the cell stalled;
//! - `-bytes`: what each reserve holds idle.

use std::path::{Path, PathBuf};

use benchkit::plot::palette::RGBColor;
use protocol::result::CellVerdict;
use serde_json::Value;

use super::{Cell, SenseReserveRecord};
use benchkit::plot::palette::{COLORS, tint};
use benchkit::plot::ticks::{format_compact, format_value};
use benchkit::plot::{
    self, Bar, BarRow, Grid, GridCell, HBars, Header, Multiples, Point, RowGroup, SmallPanel,
};
use harness::error::Result;

/// Draws every sense-reserve figure of `document` into `dir` as `<stem>-<figure>.svg`, per slab
/// cache: the magazine slab's under those names, the SLUB-shaped cache's as
/// `<stem>-slub-<figure>.svg`.
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let cells: Vec<SenseReserveRecord> =
        crate::document::results(document, "sense-reserve RESULT")?;
    let mut slabs: Vec<&str> = Vec::new();
    for cell in &cells {
        if !slabs.contains(&cell.slab()) {
            slabs.push(cell.slab());
        }
    }
    let mut paths = Vec::new();
    for slab in slabs {
        let mine: Vec<SenseReserveRecord> =
            cells.iter().filter(|c| c.slab() == slab).cloned().collect();
        let stem = match slab {
            "slab" => stem.to_owned(),
            other => format!("{stem}-{other}"),
        };
        paths.extend(draw_one(
            &stem,
            &mine,
            crate::document::place(document),
            dir,
        )?);
    }
    Ok(paths)
}

/// The figures of one slab cache's cells.
fn draw_one(
    stem: &str,
    cells: &[SenseReserveRecord],
    place: String,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    if cells.is_empty() {
        return Ok(Vec::new());
    }
    let matrix = Matrix::of(cells, place);
    let path = |figure: &str| dir.join(format!("{stem}-{figure}.svg"));
    let mut paths = vec![path("verdicts"), path("ratio")];
    plot::draw_grid(&paths[0], &matrix.verdicts())?;
    plot::draw_grid(&paths[1], &matrix.ratios())?;
    // A figure whose cells all stalled (or report no rate), or whose reserves hold nothing,
    // has nothing to show.
    for (name, chart) in [("iops", matrix.iops()), ("p99", matrix.p99())] {
        let measured = chart.panels.iter().flat_map(|p| &p.points);
        if measured.into_iter().any(|p| matches!(p, Point::Value(_))) {
            plot::draw_multiples(&path(name), &chart)?;
            paths.push(path(name));
        }
    }
    if let Some(bytes) = matrix.bytes() {
        plot::draw_hbars(&path("bytes"), &bytes)?;
        paths.push(path("bytes"));
    }
    Ok(paths)
}

/// The cells by scenario and mode.
struct Matrix<'a> {
    cells: &'a [SenseReserveRecord],
    scenarios: Vec<&'a str>,
    modes: Vec<&'a str>,
    place: String,
    rounds: u64,
}

fn rgb(color: RGBColor) -> (u8, u8, u8) {
    (color.0, color.1, color.2)
}

impl<'a> Matrix<'a> {
    fn of(cells: &'a [SenseReserveRecord], place: String) -> Matrix<'a> {
        let (mut scenarios, mut modes): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
        for cell in cells {
            if !scenarios.contains(&cell.case()) {
                scenarios.push(cell.case());
            }
            if !modes.contains(&cell.mode()) {
                modes.push(cell.mode());
            }
        }
        let rounds = cells.iter().map(|c| c.result.rounds).max().unwrap_or(0);
        Matrix {
            cells,
            scenarios,
            modes,
            place,
            rounds,
        }
    }

    fn cell(&self, scenario: &str, mode: &str) -> Option<&'a SenseReserveRecord> {
        self.cells
            .iter()
            .find(|c| c.case() == scenario && c.mode() == mode)
    }

    fn grid(&self, header: Header, cell: impl Fn(&SenseReserveRecord) -> GridCell) -> Grid {
        Grid {
            title: header.title,
            subtitle: header.subtitle,
            rows: self.scenarios.iter().map(|s| (*s).to_owned()).collect(),
            columns: self.modes.iter().map(|m| (*m).to_owned()).collect(),
            cells: self
                .scenarios
                .iter()
                .map(|s| {
                    self.modes
                        .iter()
                        .map(|m| self.cell(s, m).map(&cell))
                        .collect()
                })
                .collect(),
            key: Vec::new(),
        }
    }

    fn verdicts(&self) -> Grid {
        let header = Header {
            title: "Which sense-buffer reserve keeps I/O going under each kind of memory \
                    pressure?"
                .into(),
            subtitle: format!(
                "how each cell ended, with the time the stall watchdog fired; fake_rw 4 KiB \
                 qd32, {} rounds, {}",
                self.rounds, self.place
            ),
        };
        let mut grid = self.grid(header, |r| {
            let stall_ms = r.result.stall_at_ns as f64 / 1e6;
            let verdict = r.verdict();
            GridCell {
                text: verdict.name().into(),
                detail: match verdict {
                    CellVerdict::Ok => String::new(),
                    _ => format!("after {stall_ms:.0} ms"),
                },
                rgb: verdict_color(verdict),
            }
        });
        grid.key = [
            (CellVerdict::Ok, "every round ran to its end"),
            (CellVerdict::Livelock, "elements moved, I/O did not"),
            (CellVerdict::Stall, "nothing moved"),
        ]
        .map(|(verdict, meaning)| GridCell {
            text: verdict.name().into(),
            detail: meaning.into(),
            rgb: verdict_color(verdict),
        })
        .to_vec();
        grid
    }

    fn ratios(&self) -> Grid {
        let header = Header {
            title: "What does each reserve cost in IOPS against slab, scenario by scenario?".into(),
            subtitle: format!(
                "IOPS relative to slab in the same round: median of the {} rounds' ratios, their \
                 min–max below; blue faster than slab, orange slower; {}",
                self.rounds, self.place
            ),
        };
        let mut grid = self.grid(header, ratio_cell);
        grid.key = [0.5, 0.9, 1.0, 1.1, 2.0]
            .map(|ratio| GridCell {
                text: format!("{}×", format_compact(ratio)),
                detail: String::new(),
                rgb: ratio_color(ratio),
            })
            .to_vec();
        grid
    }

    fn multiples(
        &self,
        header: Header,
        y_axis: &str,
        point: fn(&SenseReserveRecord) -> Point,
    ) -> Multiples {
        Multiples {
            header,
            y_axis: y_axis.into(),
            log: true,
            categories: self.modes.iter().map(|m| (*m).to_owned()).collect(),
            panels: self
                .scenarios
                .iter()
                .map(|s| SmallPanel {
                    name: (*s).to_owned(),
                    points: self
                        .modes
                        .iter()
                        .map(|m| self.cell(s, m).map_or(Point::Absent, point))
                        .collect(),
                })
                .collect(),
            per_row: 4,
            value: String::new(),
            spread: String::new(),
            missing: "STALL: no steady rate".into(),
        }
    }

    fn iops(&self) -> Multiples {
        let header = Header {
            title: "How many IOPS does each reserve sustain under each kind of pressure?".into(),
            subtitle: format!("fake_rw 4 KiB qd32, one panel per scenario, {}", self.place),
        };
        let mut chart = self.multiples(header, "IOPS (log scale)", |r| match r.verdict() {
            CellVerdict::Stall => Point::Missing,
            _ if r.result.iops == 0 => Point::Missing,
            _ => Point::Value(Bar {
                value: r.result.iops as f64,
                min: r.result.iops_min as f64,
                max: r.result.iops_max as f64,
            }),
        });
        chart.value = "median IOPS".into();
        chart.spread = format!("min–max over the {} rounds", self.rounds);
        chart
    }

    fn p99(&self) -> Multiples {
        let header = Header {
            title: "How long does the slowest 1% of I/O wait under each reserve and pressure?"
                .into(),
            subtitle: format!(
                "p99 completion latency over all rounds together (no per-round spread), fake_rw \
                 4 KiB qd32, {}",
                self.place
            ),
        };
        let mut chart = self.multiples(header, "p99 latency, ms (log scale)", |r| {
            match r.verdict() {
                CellVerdict::Stall => Point::Missing,
                _ if r.result.lat_p99_ns == 0 => Point::Missing,
                _ => Point::Value(Bar::single(r.result.lat_p99_ns as f64 / 1e6)),
            }
        });
        chart.value = "p99 latency".into();
        chart
    }

    /// The bytes each mode holds in scenario `none` (or the first); `None` when no reserve
    /// holds any.
    fn bytes(&self) -> Option<HBars> {
        let scenario = match self.scenarios.contains(&"none") {
            true => "none",
            false => self.scenarios.first().copied()?,
        };
        let cells: Vec<&SenseReserveRecord> = self
            .modes
            .iter()
            .filter_map(|m| self.cell(scenario, m))
            .collect();
        if cells.iter().all(|r| r.result.reserve_bytes == 0) {
            return None;
        }
        let rows = cells
            .iter()
            .map(|r| BarRow {
                label: r.mode().to_owned(),
                bars: vec![Some(Bar::single(r.result.reserve_bytes as f64))],
            })
            .collect();
        Some(HBars {
            header: Header {
                title: "What does each reserve hold while the device is idle?".into(),
                subtitle: format!(
                    "bytes the reserve keeps aside, counted in scenario `{scenario}` (a count, \
                     the same every round), {}",
                    self.place
                ),
            },
            axis: "bytes held idle (log scale)".into(),
            log: true,
            baseline: None,
            series: Vec::new(),
            groups: vec![RowGroup {
                name: String::new(),
                rows,
            }],
            spread: String::new(),
            value_suffix: Some(" B".into()),
        })
    }
}

/// OK pale, LIVELOCK yellow, STALL vermillion: problems stand out, and every cell says which.
fn verdict_color(verdict: CellVerdict) -> (u8, u8, u8) {
    rgb(match verdict {
        CellVerdict::Ok => tint(COLORS[2], 0.8),
        CellVerdict::Livelock => tint(COLORS[6], 0.2),
        CellVerdict::Stall => tint(COLORS[3], 0.35),
    })
}

/// White at 1×, deepening to blue (faster) or orange (slower) at 2× either way.
fn ratio_color(ratio: f64) -> (u8, u8, u8) {
    let strength = (ratio.log2().abs()).min(1.0);
    let color = if ratio >= 1.0 { COLORS[4] } else { COLORS[1] };
    rgb(tint(color, 1.0 - 0.85 * strength))
}

fn ratio_cell(r: &SenseReserveRecord) -> GridCell {
    let result = &r.result;
    let grey = (225, 225, 225);
    if r.verdict() != CellVerdict::Ok {
        return GridCell {
            text: r.verdict().name().into(),
            detail: "no steady rate".into(),
            rgb: grey,
        };
    }
    if r.mode() == "slab" {
        return GridCell {
            text: "baseline".into(),
            detail: format!("{} IOPS", format_value(result.iops as f64)),
            rgb: (255, 255, 255),
        };
    }
    match result.ratio_vs_slab {
        Some(ratio) => GridCell {
            text: format!("{}×", format_value(ratio)),
            detail: match (result.ratio_min, result.ratio_max) {
                (Some(min), Some(max)) => format!("{}–{}", format_value(min), format_value(max)),
                _ => String::new(),
            },
            rgb: ratio_color(ratio),
        },
        None => GridCell {
            text: "-".into(),
            detail: "slab stalled".into(),
            rgb: grey,
        },
    }
}
