//! One-line JSON objects for the machine-readable `RESULT {json}` and `BOOT {json}` lines.
//!
//! The kernel prints flat objects of strings and numbers only, so a 60-line writer beats pulling
//! serde_json into the guest. Strings are escaped per RFC 8259 §7; non-finite floats become
//! `null` because JSON has no NaN.

use alloc::string::String;
use core::fmt::Write;

/// Builds `{"key":value,...}` in insertion order.
#[derive(Debug, Default)]
pub struct JsonObject {
    text: String,
}

impl JsonObject {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&mut self, key: &str) {
        self.text.push(if self.text.is_empty() { '{' } else { ',' });
        push_string(&mut self.text, key);
        self.text.push(':');
    }

    /// Adds a string member.
    pub fn str(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        push_string(&mut self.text, value);
        self
    }

    /// Adds an integer member.
    pub fn u64(mut self, key: &str, value: u64) -> Self {
        self.key(key);
        let _ = write!(self.text, "{value}");
        self
    }

    /// Adds a number member with `decimals` digits after the point.
    pub fn f64(mut self, key: &str, value: f64, decimals: usize) -> Self {
        self.key(key);
        if value.is_finite() {
            let _ = write!(self.text, "{value:.decimals$}");
        } else {
            self.text.push_str("null");
        }
        self
    }

    /// The finished object text.
    pub fn finish(mut self) -> String {
        if self.text.is_empty() {
            self.text.push('{');
        }
        self.text.push('}');
        self.text
    }
}

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

    #[test]
    fn builds_a_flat_object_that_serde_json_reads_back() {
        let text = JsonObject::new()
            .str("bench", "dmapool")
            .str("odd", "a\"b\\c\n\u{1}")
            .u64("n", 373_959)
            .f64("alloc_ns_per_op", 12.3456, 2)
            .f64("nan", f64::NAN, 2)
            .finish();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["bench"], "dmapool");
        assert_eq!(value["odd"], "a\"b\\c\n\u{1}");
        assert_eq!(value["n"], 373_959);
        assert_eq!(value["alloc_ns_per_op"], 12.35);
        assert!(value["nan"].is_null());
        assert_eq!(JsonObject::new().finish(), "{}");
    }
}
