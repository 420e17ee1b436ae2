//! JSON read as types, with errors that say where.
//!
//! A guest's `RESULT` line ([`crate::console::ResultLine`]), a results file and fio's output are
//! read once, into the type their writer wrote, and stay typed until something writes JSON
//! again. Reading goes through `serde_path_to_error`, so a line that does not match says where:
//! `lat_p99_ns: invalid type: string "fast", expected f64`, not only the expectation (for the
//! fields of a flattened struct, see [`from_line`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

/// The JSON object `text` as a `T`, or an error that names `what` was read and the field that
/// did not match. serde reads the fields of a flattened struct (`#[serde(flatten)]`, as the
/// result types nest theirs) through a buffer and loses their names; for such an error each
/// field of `text` is put alone on a default `T` to find the one that fails.
pub fn from_line<T: DeserializeOwned + Serialize + Default>(text: &str, what: &str) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize(&mut deserializer) {
        Ok(value) => Ok(value),
        Err(error) => Err(named::<T>(&error, &serde_json::from_str(text).ok(), what)),
    }
}

/// [`from_line`] for an object already read as JSON (a record of a results file).
pub fn from_record<T: DeserializeOwned + Serialize + Default>(
    record: &Value,
    what: &str,
) -> Result<T> {
    match serde_path_to_error::deserialize(record.clone()) {
        Ok(value) => Ok(value),
        Err(error) => Err(named::<T>(&error, &Some(record.clone()), what)),
    }
}

/// The error of a `T` that did not read from `record`, naming the field.
fn named<T: DeserializeOwned + Serialize + Default>(
    error: &serde_path_to_error::Error<serde_json::Error>,
    record: &Option<Value>,
    what: &str,
) -> Error {
    let culprit = record.as_ref().and_then(flattened_culprit::<T>);
    let reason = match (error.path().to_string().as_str(), culprit) {
        (".", Some(key)) => format!("{key}: {}", error.inner()),
        _ => describe(error),
    };
    Error::BadResult {
        what: what.into(),
        reason,
    }
}

/// The field of the object `record` that a `T` cannot take (see [`from_line`]).
fn flattened_culprit<T: DeserializeOwned + Serialize + Default>(record: &Value) -> Option<String> {
    let Value::Object(fields) = record else {
        return None;
    };
    let Ok(Value::Object(base)) = serde_json::to_value(T::default()) else {
        return None;
    };
    fields
        .iter()
        .filter(|(key, _)| base.contains_key(*key))
        .find(|(key, value)| {
            let mut probe = base.clone();
            probe.insert((*key).clone(), (*value).clone());
            serde_json::from_value::<T>(Value::Object(probe)).is_err()
        })
        .map(|(key, _)| key.clone())
}

/// `value` as a `T`; the error says `what` was read and names the path of the field that did
/// not match.
pub fn from_value<T: DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|error| Error::BadResult {
        what: what.into(),
        reason: describe(&error),
    })
}

/// JSON text as a `T`; the error says `what` was read and names the path of the field that
/// did not match.
pub fn from_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| Error::BadResult {
        what: what.into(),
        reason: describe(&error),
    })
}

fn describe(error: &serde_path_to_error::Error<serde_json::Error>) -> String {
    match error.path().to_string().as_str() {
        "." => error.inner().to_string(),
        path => format!("{path}: {}", error.inner()),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Sample {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Flat {
        name: String,
        #[serde(flatten)]
        inner: Inner,
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Inner {
        iops: f64,
    }

    #[test]
    fn a_field_that_does_not_match_is_named_with_its_path() {
        let unread = |text: &str| from_str::<Sample>(text, "sample").unwrap_err().to_string();
        let wrong = unread(r#"{"name":"a","inner":{"iops":"fast"}}"#);
        assert!(
            wrong.starts_with("sample does not match its schema: inner.iops: invalid type"),
            "{wrong}"
        );
        let missing = unread(r#"{"name":"a","inner":{}}"#);
        assert!(missing.contains("missing field `iops`"), "{missing}");
        let sample = Sample {
            name: "a".into(),
            inner: Inner { iops: 2.0 },
        };
        let text = serde_json::to_string(&sample).unwrap();
        assert_eq!(from_line::<Sample>(&text, "sample").unwrap(), sample);
        let error = from_line::<Flat>(r#"{"name":"a","iops":"fast"}"#, "flat")
            .unwrap_err()
            .to_string();
        assert!(error.contains("iops: invalid type"), "{error}");
    }
}
