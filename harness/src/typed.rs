//! Result records read as types, and types written as records.
//!
//! A benchmark keeps its results as JSON objects ([`Record`]) because that is what the files
//! under `target/bench/` hold and what the tables and `cargo xtask report` show; what a bench
//! computes from them, it computes from a type (`workloads::result`'s, or an xtask record that
//! wraps one). Reading goes through `serde_path_to_error`, so a record that does not match says
//! where: `lat_p99_ns: invalid type: string "fast", expected f64`, not only the expectation
//! (for the fields of a flattened struct, see [`read`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Record;
use harness::error::{Error, Result};

/// `record` as a `T`, or an error that names `what` was read and the field that did not match.
pub fn read<T: DeserializeOwned + Serialize + Default>(record: &Record, what: &str) -> Result<T> {
    let error = match serde_path_to_error::deserialize(Value::Object(record.clone())) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let reason = match (
        error.path().to_string().as_str(),
        flattened_culprit::<T>(record),
    ) {
        (".", Some(key)) => format!("{key}: {}", error.inner()),
        _ => describe(&error),
    };
    Err(Error::BadResult {
        what: what.into(),
        reason,
    })
}

/// The field of `record` that a `T` cannot take. serde reads the fields of a flattened struct
/// (`#[serde(flatten)]`, as the result types nest theirs) through a buffer and loses their
/// names; putting each field of `record` alone on a default `T` finds the one that fails.
fn flattened_culprit<T: DeserializeOwned + Serialize + Default>(record: &Record) -> Option<String> {
    let base = self::record(&T::default());
    record
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

/// `value` as a record: the fields of a struct (a type that is not an object gives an empty
/// record, which no result type here is).
pub fn record<T: Serialize>(value: &T) -> Record {
    match serde_json::to_value(value) {
        Ok(Value::Object(fields)) => fields,
        _ => Record::new(),
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
        assert_eq!(read::<Sample>(&record(&sample), "sample").unwrap(), sample);
        let flat = harness::console::parse_result(r#"{"name":"a","iops":"fast"}"#).unwrap();
        let error = read::<Flat>(&flat, "flat").unwrap_err().to_string();
        assert!(error.contains("iops: invalid type"), "{error}");
    }
}
