//! One-line JSON objects, the format of every `RESULT {json}` and `BOOT {json}` line the
//! benchmarks and the kernel print and xtask reads.
//!
//! It lives in `pools`, the lowest crate that prints results, so `pools`, `scsi`, `drivers`
//! and the kernel share one writer. The results are flat objects of strings and numbers, so a
//! small builder beats pulling serde into `no_std` crates and the guest. Strings are escaped
//! per RFC 8259 §7 (quote, backslash and every control character); a non-finite float becomes
//! `null`, because JSON has no NaN or infinity. Members keep insertion order, so a line reads
//! the same from run to run.

use alloc::string::String;
use core::fmt::Write;

/// Builds `{"key":value,...}` in insertion order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JsonObject {
    /// `{` and the members so far, without the closing brace; empty when there are none.
    text: String,
}

impl JsonObject {
    /// An empty object.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&mut self, key: &str) {
        self.text.push(if self.text.is_empty() { '{' } else { ',' });
        push_string(&mut self.text, key);
        self.text.push(':');
    }

    /// Adds a string member (escaped).
    #[must_use]
    pub fn str(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        push_string(&mut self.text, value);
        self
    }

    /// Adds an unsigned integer member.
    #[must_use]
    pub fn u64(mut self, key: &str, value: u64) -> Self {
        self.key(key);
        let _ = write!(self.text, "{value}");
        self
    }

    /// Adds a signed integer member.
    #[must_use]
    pub fn i64(mut self, key: &str, value: i64) -> Self {
        self.key(key);
        let _ = write!(self.text, "{value}");
        self
    }

    /// Adds a number member with `decimals` digits after the point (`null` if not finite).
    #[must_use]
    pub fn f64(mut self, key: &str, value: f64, decimals: usize) -> Self {
        self.key(key);
        if value.is_finite() {
            let _ = write!(self.text, "{value:.decimals$}");
        } else {
            self.text.push_str("null");
        }
        self
    }

    /// Adds a `null` member (a value that does not exist, such as the node of a pool that has
    /// none).
    #[must_use]
    pub fn null(mut self, key: &str) -> Self {
        self.key(key);
        self.text.push_str("null");
        self
    }

    /// Adds a boolean member.
    #[must_use]
    pub fn bool(mut self, key: &str, value: bool) -> Self {
        self.key(key);
        self.text.push_str(if value { "true" } else { "false" });
        self
    }

    /// Adds every member of `other` after this object's members, in `other`'s order (for a
    /// line that is one report's object with a few fields in front).
    #[must_use]
    pub fn extend(mut self, other: JsonObject) -> Self {
        match other.text.strip_prefix('{') {
            None => {}
            Some(_) if self.text.is_empty() => self.text = other.text,
            Some(members) => {
                self.text.push(',');
                self.text.push_str(members);
            }
        }
        self
    }

    /// The finished object text.
    #[must_use]
    pub fn finish(mut self) -> String {
        if self.text.is_empty() {
            self.text.push('{');
        }
        self.text.push('}');
        self.text
    }
}

/// Appends `value` as a JSON string literal (RFC 8259 §7).
fn push_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use proptest::prelude::*;

    #[test]
    fn builds_a_flat_object_that_serde_json_reads_back() {
        let text = JsonObject::new()
            .str("bench", "dmapool")
            .str("odd", "a\"b\\c\n\u{1}\u{1f}é")
            .u64("n", 373_959)
            .i64("delta", -5)
            .f64("alloc_ns_per_op", 12.3456, 2)
            .f64("nan", f64::NAN, 2)
            .f64("inf", f64::INFINITY, 2)
            .bool("ok", true)
            .null("none")
            .finish();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["bench"], "dmapool");
        assert_eq!(value["odd"], "a\"b\\c\n\u{1}\u{1f}é");
        assert_eq!(value["n"], 373_959);
        assert_eq!(value["delta"], -5);
        assert_eq!(value["alloc_ns_per_op"], 12.35);
        assert!(value["nan"].is_null());
        assert!(value["inf"].is_null());
        assert_eq!(value["ok"], true);
        assert!(value["none"].is_null());
        assert_eq!(JsonObject::new().finish(), "{}");
    }

    #[test]
    fn members_keep_their_order_and_extend_appends() {
        let report = JsonObject::new().u64("ios", 3).str("where", "guest");
        let line = JsonObject::new()
            .str("device", "virtio-scsi")
            .extend(report.clone());
        assert_eq!(
            line.finish(),
            r#"{"device":"virtio-scsi","ios":3,"where":"guest"}"#
        );
        assert_eq!(
            JsonObject::new().extend(report.clone()).finish(),
            r#"{"ios":3,"where":"guest"}"#
        );
        assert_eq!(
            report.extend(JsonObject::new()).finish(),
            r#"{"ios":3,"where":"guest"}"#
        );
    }

    proptest! {
        #[test]
        fn any_string_round_trips(key in any::<String>(), value in any::<String>()) {
            let text = JsonObject::new().str(&key, &value).finish();
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
            let object = parsed.as_object().unwrap();
            prop_assert_eq!(object.len(), 1);
            prop_assert_eq!(object.get(&key).map(ToString::to_string), Some(serde_json::to_string(&value).unwrap()));
        }
    }
}
