//! `key=value` parameter words: the one number syntax ([`number`]) and the key table every
//! parameter struct is parsed through.
//!
//! Each parameter struct (`workloads::io::WorkloadParams`, [`crate::target::ScsiDebugParams`],
//! the kernel's command line) owns one table of [`Key`]s: a name, its aliases and a setter.
//! The parser, the "known keys" list of an error message and the docs check are all read off
//! that table, so a key is spelled exactly once in code.

pub mod number;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub use number::NumberError;

/// Why a value was rejected. The table lookup adds the key and the value it came with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A number or duration that does not parse or is out of range.
    #[error(transparent)]
    Number(#[from] NumberError),
    /// Something else was expected; the text says what.
    #[error("expected {0}")]
    Expected(String),
    /// A well-formed value this implementation refuses; the text says why (and what to use).
    #[error("{0}")]
    Refused(String),
}

impl ValueError {
    /// `expected …`.
    pub fn expected(what: impl ToString) -> Self {
        ValueError::Expected(what.to_string())
    }
}

/// Applies one value to a `T`.
pub type Setter<T> = fn(&mut T, &str) -> Result<(), ValueError>;

/// One key of a parameter table.
pub struct Key<T: 'static> {
    /// The name errors and duplicate checks use.
    pub name: &'static str,
    /// Other spellings users already know (fio's `qd` for `iodepth`).
    pub aliases: &'static [&'static str],
    /// Parses the value into its field.
    pub set: Setter<T>,
}

impl<T> Key<T> {
    /// Whether `spelling` is this key's name or one of its aliases.
    pub fn is_spelled(&self, spelling: &str) -> bool {
        self.name == spelling || self.aliases.contains(&spelling)
    }

    /// The name and the aliases.
    pub fn spellings(&self) -> impl Iterator<Item = &'static str> + use<T> {
        core::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

/// The key of `table` spelled `spelling`, if any.
pub fn find<'t, T>(table: &'t [Key<T>], spelling: &str) -> Option<&'t Key<T>> {
    table.iter().find(|key| key.is_spelled(spelling))
}

/// Every spelling in `table`, comma-separated (for "unknown key" messages).
pub fn spellings<T>(table: &[Key<T>]) -> String {
    let names: Vec<&str> = table.iter().flat_map(Key::spellings).collect();
    names.join(", ")
}

/// One of a fixed set of spellings.
pub fn choice<T: Copy>(value: &str, choices: &[(&str, T)]) -> Result<T, ValueError> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, choice)| choice)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            ValueError::Expected(alloc::format!("one of {}", names.join("|")))
        })
}

/// Linux's boolean module-parameter spellings: `1`, `y`, `Y`, `true` and `0`, `n`, `N`, `false`.
pub fn boolean(value: &str) -> Result<bool, ValueError> {
    match value {
        "1" | "y" | "Y" | "true" => Ok(true),
        "0" | "n" | "N" | "false" => Ok(false),
        _ => Err(ValueError::expected("0 or 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Job {
        depth: u16,
    }

    const KEYS: &[Key<Job>] = &[Key {
        name: "iodepth",
        aliases: &["qd"],
        set: |job, value| {
            job.depth = number::count(value, 1, 4096)?;
            Ok(())
        },
    }];

    #[test]
    fn a_table_finds_names_and_aliases() {
        let mut job = Job::default();
        let key = find(KEYS, "qd").unwrap();
        assert_eq!(key.name, "iodepth");
        (key.set)(&mut job, "0x20").unwrap();
        assert_eq!(job.depth, 32);
        assert!(find(KEYS, "depth").is_none());
        assert_eq!(spellings(KEYS), "iodepth, qd");
        assert_eq!(
            (key.set)(&mut job, "0").unwrap_err().to_string(),
            "out of range 1..=4096"
        );
    }

    #[test]
    fn choices_and_booleans_say_what_was_expected() {
        assert_eq!(choice("b", &[("a", 1), ("b", 2)]), Ok(2));
        assert_eq!(
            choice("c", &[("a", 1), ("b", 2)]).unwrap_err().to_string(),
            "expected one of a|b"
        );
        assert_eq!(boolean("Y"), Ok(true));
        assert!(boolean("yes").is_err());
    }
}
