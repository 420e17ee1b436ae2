//! Conditions on the fields of a boot's `RESULT` lines (`tests/guest.toml`):
//!
//! ```toml
//! [test.result_at_least]     # every RESULT line: these numbers at least this
//! irq_interrupts = 1
//! [test.result_at_most]      # every RESULT line: these numbers at most this
//! irq_lost = 0
//! [test.result_equals]       # every RESULT line: these strings exactly
//! io_mode = "irq"
//! ```
//!
//! So a test can say "this run took interrupts and halted" instead of only "it printed a
//! RESULT": a boot that silently busy-polled in `io_mode=irq` fails it.

use std::collections::BTreeMap;

use harness::console::ResultLine;
use serde_json::Value;

/// Checks every `RESULT` line against the three tables; at least one line must exist when
/// any table is non-empty. Returns a description of what was checked. The tables name fields
/// of whatever type a test's lines have (`schema.rs` checks the names against the types), so
/// each is looked up by name.
pub fn check(
    results: &[ResultLine],
    at_least: &BTreeMap<String, u64>,
    at_most: &BTreeMap<String, u64>,
    equals: &BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    if at_least.is_empty() && at_most.is_empty() && equals.is_empty() {
        return Ok(None);
    }
    if results.is_empty() {
        return Err("no RESULT line to check the result conditions on".into());
    }
    for (index, result) in results.iter().enumerate() {
        for (key, min) in at_least {
            match result.field(key).as_ref().and_then(Value::as_u64) {
                Some(value) if value >= *min => {}
                Some(value) => {
                    return Err(format!(
                        "RESULT {index}: {key} = {value}, expected >= {min}"
                    ));
                }
                None => return Err(format!("RESULT {index}: no unsigned number {key:?}")),
            }
        }
        for (key, max) in at_most {
            match result.field(key).as_ref().and_then(Value::as_u64) {
                Some(value) if value <= *max => {}
                Some(value) => {
                    return Err(format!(
                        "RESULT {index}: {key} = {value}, expected <= {max}"
                    ));
                }
                None => return Err(format!("RESULT {index}: no unsigned number {key:?}")),
            }
        }
        for (key, expected) in equals {
            match result.field(key).as_ref().and_then(Value::as_str) {
                Some(value) if value == expected => {}
                other => {
                    return Err(format!(
                        "RESULT {index}: {key} = {other:?}, expected {expected:?}"
                    ));
                }
            }
        }
    }
    Ok(Some(format!(
        "{} RESULT line(s) met {} condition(s)",
        results.len(),
        at_least.len() + at_most.len() + equals.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: &str) -> ResultLine {
        harness::console::parse_result(json).unwrap()
    }

    #[test]
    fn every_line_must_meet_every_condition() {
        let at_least = BTreeMap::from([("irq_interrupts".to_string(), 1)]);
        let equals = BTreeMap::from([("io_mode".to_string(), "irq".to_string())]);
        let none = BTreeMap::new();
        let good = result(r#"{"io_mode":"irq","irq_interrupts":5}"#);
        assert!(check(std::slice::from_ref(&good), &at_least, &none, &equals).is_ok());
        let polled = result(r#"{"io_mode":"irq","irq_interrupts":0}"#);
        let err = check(&[good.clone(), polled], &at_least, &none, &equals).unwrap_err();
        assert!(err.contains("RESULT 1: irq_interrupts = 0"), "{err}");
        let poll = result(r#"{"io_mode":"poll","irq_interrupts":5}"#);
        assert!(check(&[poll], &at_least, &none, &equals).is_err());
        let missing = result(r#"{"io_mode":"irq"}"#);
        assert!(check(&[missing], &at_least, &none, &equals).is_err());
        assert!(check(&[], &at_least, &none, &equals).is_err());
        assert_eq!(
            check(&[], &BTreeMap::new(), &BTreeMap::new(), &BTreeMap::new()),
            Ok(None)
        );
    }

    #[test]
    fn at_most_fails_a_line_above_the_limit() {
        let none = BTreeMap::new();
        let at_most = BTreeMap::from([("irq_lost".to_string(), 0)]);
        let clean = result(r#"{"irq_lost":0,"irq_safety_recoveries":3}"#);
        assert!(
            check(
                std::slice::from_ref(&clean),
                &none,
                &at_most,
                &BTreeMap::new()
            )
            .is_ok()
        );
        let lossy = result(r#"{"irq_lost":2}"#);
        let err = check(&[clean, lossy], &none, &at_most, &BTreeMap::new()).unwrap_err();
        assert!(
            err.contains("RESULT 1: irq_lost = 2, expected <= 0"),
            "{err}"
        );
    }
}
