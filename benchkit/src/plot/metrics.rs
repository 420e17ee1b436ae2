//! How wide a label is, before it is drawn (to lay a figure out) and after (to check one).
//!
//! The SVGs name the font `sans-serif`, which librsvg and the browsers on these machines
//! resolve to DejaVu Sans (`fc-match sans-serif`). Its advance widths, in 1/2048 em, are below:
//! printed by `python3 benchkit/tools/dejavu-widths.py` from `DejaVuSans.ttf` 2.37 (Debian
//! `fonts-dejavu-core`). No kerning: a string's width is the sum of its characters'. A
//! character outside the table counts as wide as `M`, so an estimate errs towards overlap.

/// Advance widths of U+0020 ' ' to U+007E '~'.
const ASCII: [u16; 95] = [
    651, 821, 942, 1716, 1303, 1946, 1597, 563, 799, 799, 1024, 1716, 651, 739, 651, 690, 1303,
    1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 690, 690, 1716, 1716, 1716, 1087, 2048,
    1401, 1405, 1430, 1577, 1294, 1178, 1587, 1540, 604, 604, 1343, 1141, 1767, 1532, 1612, 1235,
    1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251, 1403, 799, 690, 799, 1716, 1024, 1024,
    1255, 1300, 1126, 1300, 1260, 721, 1300, 1298, 569, 569, 1186, 569, 1995, 1298, 1253, 1300,
    1300, 842, 1067, 803, 1298, 1212, 1675, 1212, 1212, 1075, 1303, 690, 1303, 1716,
];

/// The few other characters the benches' labels use.
const OTHERS: [(char, u16); 14] = [
    ('×', 1716),
    ('–', 1024),
    ('—', 2048),
    ('−', 1716),
    ('µ', 1303),
    ('±', 1716),
    ('≥', 1716),
    ('≤', 1716),
    ('…', 2048),
    ('°', 1024),
    ('·', 651),
    ('→', 1716),
    ('←', 1716),
    ('≈', 1716),
];

const UNITS_PER_EM: f64 = 2048.0;

/// How far a line of text reaches above its baseline (DejaVu's digits and capitals stand
/// 0.73 em) and below it (descenders), in em; SVG's `dy="0.76em"` hangs text from its top.
pub const ASCENT: f64 = 0.76;
pub const DESCENT: f64 = 0.24;
/// DejaVu Sans' x-height in em: what SVG's `ex` unit is.
pub const X_HEIGHT: f64 = 1120.0 / UNITS_PER_EM;

fn advance(c: char) -> u16 {
    let code = c as u32;
    if (0x20..0x7f).contains(&code) {
        return ASCII[(code - 0x20) as usize];
    }
    OTHERS
        .iter()
        .find(|(other, _)| *other == c)
        .map_or(ASCII[usize::from(b'M' - 0x20)], |(_, width)| *width)
}

/// The width in pixels of `text` set at `size_px`.
pub fn text_width(text: &str, size_px: f64) -> f64 {
    let units: u32 = text.chars().map(|c| u32::from(advance(c))).sum();
    f64::from(units) * size_px / UNITS_PER_EM
}

/// `text` broken at spaces into lines no wider than `max_width` (a single word wider than that
/// stays whole on its line).
pub fn wrap(text: &str, size_px: f64, max_width: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}"), size_px) <= max_width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_the_font() {
        // Digits are tabular in DejaVu Sans: 0.636 em each.
        assert!((text_width("1000", 10.0) - 4.0 * 6.362).abs() < 0.01);
        assert!(text_width("W", 12.0) > text_width("i", 12.0) * 3.0);
        assert_eq!(text_width("", 12.0), 0.0);
        // Outside the table: as wide as M.
        assert_eq!(text_width("漢", 10.0), text_width("M", 10.0));
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_keeps_long_words() {
        let lines = wrap("scsi_debug randread bs=4096 qd32 j1 libaio", 12.0, 120.0);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|line| text_width(line, 12.0) <= 120.0));
        assert_eq!(
            lines.join(" "),
            "scsi_debug randread bs=4096 qd32 j1 libaio"
        );
        assert_eq!(wrap("unbreakable", 12.0, 10.0), ["unbreakable"]);
        assert!(wrap("  ", 12.0, 10.0).is_empty());
    }
}
