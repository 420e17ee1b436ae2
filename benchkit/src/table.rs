//! Console tables of runs: a column per result field, one table per kind of result.
//!
//! A table is a writer, as the JSON file is: it takes typed rows and shows their fields by
//! name, so a row is serialized here and nowhere before.

use serde::Serialize;
use serde_json::{Map, Value};

/// A table column: a header and the result field it shows.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    pub header: &'a str,
    pub key: &'a str,
}

impl<'a> Column<'a> {
    /// A column headed `header` that shows each record's `key` field.
    pub const fn new(header: &'a str, key: &'a str) -> Self {
        Column { header, key }
    }
}

/// `row`'s fields by name (a row that is not a struct has none).
pub fn fields<T: Serialize>(row: &T) -> Map<String, Value> {
    match serde_json::to_value(row) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    }
}

/// Prints one table per `bench` value of `rows` (in order of first appearance). A bench listed
/// in `known` uses its columns; any other gets a column per field, so a new kind of result is
/// never hidden.
pub fn print_tables<T: Serialize>(rows: &[T], known: &[(&str, &[Column<'_>])]) {
    let rows: Vec<Map<String, Value>> = rows.iter().map(fields).collect();
    let bench_of = |row: &Map<String, Value>| {
        row.get("bench")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut benches: Vec<String> = Vec::new();
    for row in &rows {
        let bench = bench_of(row);
        if !benches.contains(&bench) {
            benches.push(bench);
        }
    }
    for bench in benches {
        let group: Vec<&Map<String, Value>> =
            rows.iter().filter(|row| bench_of(row) == bench).collect();
        let derived = derived_columns(group.iter().copied());
        let columns = known
            .iter()
            .find(|(name, _)| *name == bench)
            .map_or(&derived[..], |(_, columns)| columns);
        println!();
        print_fields(&group, columns);
    }
}

/// A column for every field of `rows` except the run-wide markers, in first-seen order: the
/// table of a result no bench lists columns for (console and results pages).
pub fn derived_columns<'a>(
    rows: impl IntoIterator<Item = &'a Map<String, Value>>,
) -> Vec<Column<'a>> {
    let mut columns: Vec<Column<'a>> = Vec::new();
    for key in rows.into_iter().flat_map(|row| row.keys()) {
        // The histogram (`lat_bins`) is for the fio JSON, not for a table cell.
        let hidden = ["where", "accel", "lat_bins"].contains(&key.as_str());
        if !hidden && !columns.iter().any(|column| column.key == key) {
            columns.push(Column::new(key, key));
        }
    }
    columns
}

/// Prints `rows` as an aligned table; missing fields show as `-`.
pub fn print_table<T: Serialize>(rows: &[T], columns: &[Column<'_>]) {
    let rows: Vec<Map<String, Value>> = rows.iter().map(fields).collect();
    print_fields(&rows.iter().collect::<Vec<_>>(), columns);
}

fn print_fields(rows: &[&Map<String, Value>], columns: &[Column<'_>]) {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|column| row.get(column.key).map_or("-".into(), format_value))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            cells
                .iter()
                .map(|row| row[index].len())
                .chain([column.header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:>width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    render(columns.iter().map(|column| column.header).collect());
    for row in &cells {
        render(row.iter().map(String::as_str).collect());
    }
}

/// Numbers with sensible precision; strings bare.
pub fn format_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) if number.is_f64() => {
            let float = number.as_f64().unwrap_or(f64::NAN);
            match float.abs() {
                magnitude if magnitude >= 100.0 => format!("{float:.0}"),
                magnitude if magnitude >= 1.0 => format!("{float:.2}"),
                _ => format!("{float:.3}"),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_benches_get_a_column_per_field() {
        let row = json!({"bench":"pairs","impl":"vec","live":10,"where":"host","lat_bins":"1:2"});
        let rows = [fields(&row)];
        let keys: Vec<&str> = derived_columns(&rows).iter().map(|c| c.key).collect();
        assert_eq!(keys, ["bench", "impl", "live"]);
    }

    #[test]
    fn values_format_by_magnitude() {
        assert_eq!(format_value(&json!(1234.567)), "1235");
        assert_eq!(format_value(&json!(12.345)), "12.35");
        assert_eq!(format_value(&json!(0.01234)), "0.012");
        assert_eq!(format_value(&json!(373959)), "373959");
        assert_eq!(format_value(&json!("legacy")), "legacy");
    }
}
