//! Which bench draws the figures of which results file, for `cargo xtask report`: each bench
//! draws its figures from the JSON document it writes ([`crate::document`]) when it finishes,
//! and the report draws them again from the same JSON into `docs/results/`, so a page's figure
//! is always the one its data gives, drawn by today's code. Each figure's title is the question
//! the bench answers (the sentence its results page opens with, [`crate::questions`]).

use std::path::{Path, PathBuf};

use serde_json::Value;

use harness::error::Result;

/// Draws the figures of the results file `<stem>.json` (its parsed `document`) into `dir` and
/// returns their paths; `None` for a file no bench here draws (its SVGs, if any, are copied as
/// they are).
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let drawn = match stem {
        "dmapool" | "dmapool-guest" => crate::dmapool::draw(stem, document, dir)?,
        "fake-rw" | "fake-rw-host" => crate::fake_rw::draw_figure(stem, document, dir)?,
        "fake-rw-os" => crate::fake_rw_os::draw_figure(stem, document, dir)?,
        "device" => crate::device::figure::draw(stem, document, dir)?,
        "device-os" => crate::device::figure_os::draw(stem, document, dir)?,
        "linux" => crate::linux::figure::draw(stem, document, dir)?,
        "linux-sense" => crate::linux::sense::figure::draw(stem, document, dir)?,
        "nbd" => crate::nbd::draw(stem, document, dir)?,
        "sense-reserve" | "sense-reserve-host" => {
            crate::sense_reserve::draw_figures(stem, document, dir)?
        }
        "numa" => crate::numa::draw_figure(stem, document, dir)?,
        _ => return Ok(None),
    };
    Ok(Some(drawn))
}
