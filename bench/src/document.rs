//! The JSON document a bench writes (`target/bench/<stem>.json`), as its figures read it back:
//! the same reading for the bench's own run and for `cargo xtask report`.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use harness::error::Result;

/// The result objects of `document` (failed runs, which carry only an `error`, left out).
pub fn records(document: &Value) -> Vec<&Value> {
    document
        .get("results")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter(|record| record.is_object() && record.get("error").is_none())
        .collect()
}

/// The results of `document` read as `T`s (failed runs left out); one that does not read is
/// an error naming `what` and the field.
pub fn results<T: DeserializeOwned + Serialize + Default>(
    document: &Value,
    what: &str,
) -> Result<Vec<T>> {
    records(document)
        .into_iter()
        .map(|record| harness::typed::from_record(record, what))
        .collect()
}

/// Where the figures were measured, for subtitles: `host`, or `guest (tcg)`.
pub fn place(document: &Value) -> String {
    let text = |key: &str| document.get(key).and_then(Value::as_str);
    match (text("where"), text("accel")) {
        (Some(place), Some(accel)) => format!("{place} ({accel})"),
        (Some(place), None) => place.to_owned(),
        _ => "place not recorded".to_owned(),
    }
}
