//! SVG charts for the benchmarks, drawn with plotters (pure Rust, no font libraries: the SVG
//! carries its text as text).
//!
//! Three shapes cover the benchmarks: [`LineChart`] for a cost against a size on log-log axes
//! (dmapool's ns/op against n, where O(n) and O(1) separate as slopes), [`BarChart`] for
//! side-by-side cases (fake-rw IOPS per configuration, sense-reserve modes), and
//! [`GroupedBars`] for a matrix: several measures stacked in panels over the same groups, one
//! colored bar per series in each group, with a min–max whisker (bench device's io_modes).
//! A [`Grid`] is a verdict map: categories per cell of a matrix (sense-reserve's verdicts).

pub mod check;
mod grid;
pub mod metrics;

pub use grid::{Grid, GridCell, draw_grid};

use std::fmt::Display;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use harness::error::{Error, Result};

/// One line of a [`LineChart`].
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Series that belong together (one implementation) share a color index.
    pub color: usize,
    /// Dashed lines tell a second measure of the same thing apart (free next to alloc).
    pub dashed: bool,
}

/// Well-separated colors that stay readable on white.
const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// Several series over shared log-log axes.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// One labelled value per bar.
#[derive(Clone, Debug)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<(String, f64)>,
}

/// One bar of a [`GroupedBars`] panel: the median and the spread around it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub min: f64,
    pub max: f64,
}

/// One measure of a [`GroupedBars`] chart: `bars[group][series]`, `None` where not measured.
#[derive(Clone, Debug)]
pub struct Panel {
    pub y_label: String,
    pub bars: Vec<Vec<Option<Bar>>>,
}

/// Panels stacked over shared groups (x) and series (colors).
#[derive(Clone, Debug)]
pub struct GroupedBars {
    pub title: String,
    pub groups: Vec<String>,
    pub series: Vec<String>,
    pub panels: Vec<Panel>,
}

const SIZE: (u32, u32) = (960, 640);

fn plot_error(path: &Path) -> impl Fn(&dyn Display) -> Error + '_ {
    move |error| Error::Plot {
        path: path.to_owned(),
        reason: error.to_string(),
    }
}

/// Widens `[min, max]` of positive values to whole decades, for log axes.
fn decade_bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (min, max) = values
        .filter(|value| value.is_finite() && *value > 0.0)
        .fold((f64::INFINITY, 0.0_f64), |(min, max), value| {
            (min.min(value), max.max(value))
        });
    if max <= 0.0 {
        return None;
    }
    let low = 10f64.powf(min.log10().floor());
    let high = 10f64.powf(max.log10().ceil()).max(low * 10.0);
    Some((low, high))
}

/// A compact label for a log axis tick.
fn tick(value: &f64) -> String {
    match *value {
        value if value >= 1e6 => format!("{}M", value / 1e6),
        value if value >= 1e3 => format!("{}k", value / 1e3),
        value if value >= 1.0 => format!("{value}"),
        value => format!("{value:.2}"),
    }
}

/// Draws `chart` with logarithmic x and y axes; non-positive points are skipped.
pub fn draw_log_log(path: &Path, chart: &LineChart) -> Result<()> {
    let fail = plot_error(path);
    let points = || chart.series.iter().flat_map(|series| series.points.iter());
    let no_data = || Error::Plot {
        path: path.to_owned(),
        reason: "no positive data points".into(),
    };
    let (x_low, x_high) = decade_bounds(points().map(|point| point.0)).ok_or_else(no_data)?;
    let (y_low, y_high) = decade_bounds(points().map(|point| point.1)).ok_or_else(no_data)?;

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut context = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d((x_low..x_high).log_scale(), (y_low..y_high).log_scale())
        .map_err(|e| fail(&e))?;
    context
        .configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()
        .map_err(|e| fail(&e))?;
    for series in &chart.series {
        draw_line(&mut context, series).map_err(|e| fail(&e))?;
    }
    context
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

/// The log-log chart [`draw_log_log`] draws into.
type LogLog<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// One series of a log-log chart: a line (dashed, with triangles, or solid, with circles)
/// through its positive points, and its legend entry.
fn draw_line(context: &mut LogLog<'_>, series: &Series) -> DrawResult {
    let color = COLORS[series.color % COLORS.len()];
    let style = color.stroke_width(2);
    let positive: Vec<(f64, f64)> = series
        .points
        .iter()
        .copied()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .collect();
    if series.dashed {
        let legend = move |(x, y): (i32, i32)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (8, 0)], style)
                + PathElement::new(vec![(12, 0), (20, 0)], style)
        };
        context
            .draw_series(DashedLineSeries::new(positive.clone(), 8, 5, style))?
            .label(&series.label)
            .legend(legend);
        let marker = |point| TriangleMarker::new(point, 4, color.filled());
        context.draw_series(positive.into_iter().map(marker))?;
    } else {
        let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 20, y)], style);
        context
            .draw_series(LineSeries::new(positive.clone(), style))?
            .label(&series.label)
            .legend(legend);
        let marker = |point| Circle::new(point, 3, color.filled());
        context.draw_series(positive.into_iter().map(marker))?;
    }
    Ok(())
}

/// Draws one vertical bar per entry, on a linear axis starting at zero.
pub fn draw_bars(path: &Path, chart: &BarChart) -> Result<()> {
    let fail = plot_error(path);
    let top = chart
        .bars
        .iter()
        .map(|bar| bar.1)
        .filter(|value| value.is_finite())
        .fold(0.0_f64, f64::max);
    if chart.bars.is_empty() || top <= 0.0 {
        return Err(Error::Plot {
            path: path.to_owned(),
            reason: "no positive bars".into(),
        });
    }
    let labels: Vec<&str> = chart.bars.iter().map(|bar| bar.0.as_str()).collect();
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut context = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d((0..labels.len() - 1).into_segmented(), 0.0..top * 1.1)
        .map_err(|e| fail(&e))?;
    let label_of = |segment: &SegmentValue<usize>| match segment {
        SegmentValue::CenterOf(index) => labels.get(*index).copied().unwrap_or("").to_owned(),
        _ => String::new(),
    };
    context
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(&chart.y_label)
        .x_label_formatter(&label_of)
        .y_label_formatter(&|value| tick(value))
        .draw()
        .map_err(|e| fail(&e))?;
    context
        .draw_series(
            Histogram::vertical(&context)
                .style(COLORS[1].filled())
                .margin(12)
                .data(
                    chart
                        .bars
                        .iter()
                        .enumerate()
                        .map(|(index, bar)| (index, bar.1)),
                ),
        )
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

/// Draws each panel of `chart` in its own band, top to bottom. A panel with no bar says so
/// instead of drawing empty axes.
pub fn draw_grouped(path: &Path, chart: &GroupedBars) -> Result<()> {
    let fail = plot_error(path);
    let height = 120 + 330 * chart.panels.len() as u32;
    let root = SVGBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let root = root
        .titled(&chart.title, ("sans-serif", 22))
        .map_err(|e| fail(&e))?;
    let bands = root.split_evenly((chart.panels.len().max(1), 1));
    for (panel, band) in chart.panels.iter().zip(&bands) {
        draw_panel(band, chart, panel).map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

type Band<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw_panel(band: &Band<'_>, chart: &GroupedBars, panel: &Panel) -> DrawResult {
    let top = panel
        .bars
        .iter()
        .flatten()
        .flatten()
        .map(|bar| bar.max.max(bar.value))
        .filter(|value| value.is_finite())
        .fold(0.0_f64, f64::max);
    if top <= 0.0 {
        band.draw(&Text::new(
            format!("{}: not reported by this guest", panel.y_label),
            (80, 40),
            ("sans-serif", 18),
        ))?;
        return Ok(());
    }
    let groups = chart.groups.len().max(1);
    let mut context = ChartBuilder::on(band)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5..groups as f64 - 0.5, 0.0..top * 1.1)?;
    let label_of = |x: &f64| {
        let index = x.round();
        if (x - index).abs() < 1e-6 && index >= 0.0 {
            chart
                .groups
                .get(index as usize)
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    context
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups)
        .x_label_formatter(&label_of)
        .y_desc(&panel.y_label)
        .y_label_formatter(&|value| tick(value))
        .draw()?;
    for (index, name) in chart.series.iter().enumerate() {
        draw_bar_series(&mut context, chart, panel, index, name)?;
    }
    context
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The linear chart of one [`draw_panel`] band.
type Linear<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Series `index` (`name`) of `panel`: a bar per group with a whisker from its min to its max.
fn draw_bar_series(
    context: &mut Linear<'_>,
    chart: &GroupedBars,
    panel: &Panel,
    index: usize,
    name: &str,
) -> DrawResult {
    let width = 0.8 / chart.series.len().max(1) as f64;
    let color = COLORS[index % COLORS.len()];
    let bars: Vec<(f64, Bar)> = panel
        .bars
        .iter()
        .enumerate()
        .filter_map(|(group, row)| Some((group as f64, (*row.get(index)?)?)))
        .collect();
    let left = move |group: f64| group - 0.4 + width * index as f64;
    context
        .draw_series(bars.iter().map(|(group, bar)| {
            let x = left(*group);
            Rectangle::new([(x, 0.0), (x + width * 0.9, bar.value)], color.filled())
        }))?
        .label(name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    context.draw_series(bars.iter().map(|(group, bar)| {
        let x = left(*group) + width * 0.45;
        PathElement::new(vec![(x, bar.min), (x, bar.max)], BLACK.stroke_width(2))
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_enclose_the_data() {
        assert_eq!(
            decade_bounds([15.0, 373959.0].into_iter()),
            Some((10.0, 1e6))
        );
        assert_eq!(decade_bounds([100.0].into_iter()), Some((100.0, 1000.0)));
        assert_eq!(decade_bounds([0.0, -1.0].into_iter()), None);
    }

    #[test]
    fn charts_render_to_svg() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = LineChart {
            title: "t".into(),
            x_label: "n".into(),
            y_label: "ns/op".into(),
            series: vec![Series {
                label: "legacy free".into(),
                points: vec![(1000.0, 50.0), (373959.0, 20000.0)],
                color: 0,
                dashed: true,
            }],
        };
        draw_log_log(&dir.join("line.svg"), &line).unwrap();
        let svg = std::fs::read_to_string(dir.join("line.svg")).unwrap();
        assert!(svg.contains("legacy free"));
        let bars = BarChart {
            title: "t".into(),
            y_label: "IOPS".into(),
            bars: vec![("slab".into(), 10.0), ("mempool:2".into(), 9.5)],
        };
        draw_bars(&dir.join("bars.svg"), &bars).unwrap();
        let bar = |value: f64| {
            Some(Bar {
                value,
                min: value * 0.9,
                max: value * 1.1,
            })
        };
        let grouped = GroupedBars {
            title: "t".into(),
            groups: vec!["virtio qd1 j1".into(), "mpt qd1 j1".into()],
            series: vec!["poll".into(), "irq".into()],
            panels: vec![
                Panel {
                    y_label: "IOPS".into(),
                    bars: vec![vec![bar(10.0), bar(8.0)], vec![bar(5.0), None]],
                },
                Panel {
                    y_label: "guest busy %".into(),
                    bars: vec![vec![None, None], vec![None, None]],
                },
            ],
        };
        draw_grouped(&dir.join("grouped.svg"), &grouped).unwrap();
        let svg = std::fs::read_to_string(dir.join("grouped.svg")).unwrap();
        assert!(
            svg.contains("mpt qd1 j1") && svg.contains("irq"),
            "labels and legend"
        );
        assert!(
            svg.contains("guest busy %: not reported"),
            "an empty panel says so"
        );
        assert!(
            std::fs::read_to_string(dir.join("bars.svg"))
                .unwrap()
                .contains("mempool:2")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
