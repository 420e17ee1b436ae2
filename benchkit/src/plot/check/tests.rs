use super::*;

fn svg(body: &str) -> String {
    format!(
        r#"<svg width="200" height="100" viewBox="0 0 200 100" xmlns="http://www.w3.org/2000/svg">{body}</svg>"#
    )
}

fn text(x: f64, y: f64, anchor: &str, extra: &str, content: &str) -> String {
    format!(
        r#"<text x="{x}" y="{y}" dy="0.76em" text-anchor="{anchor}" font-family="sans-serif" font-size="10" {extra}>
{content}
</text>"#
    )
}

#[test]
fn clean_labels_pass() {
    let body = [
        text(10.0, 10.0, "start", "", "left"),
        text(100.0, 10.0, "middle", "", "middle"),
        text(190.0, 10.0, "end", "", "right"),
        text(10.0, 30.0, "start", "", "1.6"),
    ]
    .concat();
    assert_eq!(check(&svg(&body)), []);
}

#[test]
fn overlapping_labels_on_one_line_fail() {
    // "scsi_debug" is about 54 px wide at 10 px: a label 30 px further right collides.
    let body = [
        text(10.0, 10.0, "start", "", "scsi_debug"),
        text(40.0, 10.0, "start", "", "virtio"),
    ]
    .concat();
    assert_eq!(
        check(&svg(&body)),
        [Problem::Overlap {
            first: "scsi_debug".into(),
            second: "virtio".into()
        }]
    );
    // One line lower, no collision.
    let body = [
        text(10.0, 10.0, "start", "", "scsi_debug"),
        text(40.0, 22.0, "start", "", "virtio"),
    ]
    .concat();
    assert_eq!(check(&svg(&body)), []);
}

#[test]
fn rotated_labels_are_turned_before_comparing() {
    // Turned upright about its anchor, the long label no longer reaches its neighbour.
    let upright = r#"transform="rotate(270, 20, 90)""#;
    let body = [
        text(20.0, 90.0, "start", upright, "a long axis title"),
        text(40.0, 80.0, "start", "", "12k"),
    ]
    .concat();
    assert_eq!(check(&svg(&body)), []);
    // Unturned, it would run across `12k`.
    let body = [
        text(20.0, 80.0, "start", "", "a long axis title"),
        text(40.0, 80.0, "start", "", "12k"),
    ]
    .concat();
    assert_eq!(check(&svg(&body)).len(), 1);
    // Turned, it runs off the top of the canvas.
    let body = text(20.0, 40.0, "start", upright, "a long axis title");
    assert!(matches!(
        check(&svg(&body))[..],
        [Problem::OffCanvas { .. }]
    ));
}

#[test]
fn labels_past_the_canvas_fail() {
    let body = [
        text(195.0, 10.0, "start", "", "past the right"),
        text(5.0, 40.0, "end", "", "1.5999999999999999"),
        text(100.0, 95.0, "middle", "", "below"),
    ]
    .concat();
    let problems = check(&svg(&body));
    let off: Vec<&Problem> = problems
        .iter()
        .filter(|p| matches!(p, Problem::OffCanvas { .. }))
        .collect();
    assert_eq!(off.len(), 3, "{problems:?}");
    assert!(problems.contains(&Problem::FloatArtefact {
        label: "1.5999999999999999".into()
    }));
}

#[test]
fn float_artefacts_need_six_digits_after_a_point() {
    assert!(has_float_artefact("1.999999999999998"));
    assert!(has_float_artefact("x 0.1000001 y"));
    assert!(!has_float_artefact("1.99999"));
    assert!(!has_float_artefact("v1.2.3"));
    assert!(!has_float_artefact("373959 blocks, 0.969×"));
    assert!(!has_float_artefact("...123456"));
}

fn rect(x: f64, y: f64, w: f64, h: f64, fill: &str) -> String {
    format!(r#"<rect x="{x}" y="{y}" width="{w}" height="{h}" opacity="1" fill="{fill}"/>"#)
}

#[test]
fn every_colour_of_several_needs_a_legend_entry() {
    let bars = [
        rect(20.0, 50.0, 10.0, 40.0, "#0072B2"),
        rect(40.0, 60.0, 10.0, 30.0, "#E69F00"),
    ]
    .concat();
    let swatch = rect(120.0, 10.0, 10.0, 8.0, "#0072B2");
    let named = text(134.0, 9.0, "start", "", "poll");
    let problems = check(&svg(&[bars.clone(), swatch, named].concat()));
    assert_eq!(
        problems,
        [Problem::NoLegendEntry {
            color: "#e69f00".into()
        }]
    );
    // One colour alone is named by the title and axes.
    assert_eq!(check(&svg(&rect(20.0, 50.0, 10.0, 40.0, "#0072B2"))), []);
    // Greys (grid, whiskers, text) are no series.
    let grey = rect(0.0, 0.0, 200.0, 100.0, "#EEEEEE");
    assert_eq!(
        check(&svg(
            &[grey, rect(20.0, 50.0, 10.0, 40.0, "#0072B2")].concat()
        )),
        []
    );
}

#[test]
fn a_cell_holding_its_label_is_named() {
    let body = [
        rect(10.0, 10.0, 60.0, 20.0, "#B7E4C7"),
        text(40.0, 14.0, "middle", "", "OK"),
        rect(70.0, 10.0, 60.0, 20.0, "#F4A582"),
        text(100.0, 14.0, "middle", "", "STALL"),
    ]
    .concat();
    assert_eq!(check(&svg(&body)), []);
}

#[test]
fn what_is_no_svg_says_so() {
    assert!(matches!(check("<html/>")[..], [Problem::Unreadable { .. }]));
    assert!(matches!(check("<svg")[..], [Problem::Unreadable { .. }]));
}
