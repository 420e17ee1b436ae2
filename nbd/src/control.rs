//! The stats port's commands that change the guest's state (`shutdown`, and any added later):
//! each needs the control secret the host handed the guest out of band (the fw_cfg file
//! [`SECRET_FILE`], which xtask writes from `target/nbd/control-secret`, a file only its owner
//! can read). Reading the statistics needs nothing.
//!
//! A command line is `WORD SECRET`; a missing or wrong secret is refused (and counted), never
//! acted on. A guest given no secret refuses every command, so nothing reaches it that the host
//! did not authorise. The secret is compared in time that does not depend on where it differs.
//! Pure and host-tested; the stats socket (`server::stats_slot`) feeds it lines.

use alloc::vec::Vec;

/// The fw_cfg file that holds the secret.
pub const SECRET_FILE: &str = "opt/sensepool/control-secret";
/// The longest secret accepted from the host (xtask writes 64 hex digits).
pub const MAX_SECRET_BYTES: usize = 256;

/// A command that changes state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Finish the sessions, flush the disk, exit.
    Shutdown,
}

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The guest was given no secret: nothing may change it.
    NoSecretHere,
    /// The line carried no secret.
    Missing,
    /// The line carried another secret.
    Wrong,
}

/// What became of a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The command is to be carried out.
    Accepted(Command),
    /// The command was refused, and why.
    Refused(Command, Refusal),
}

impl Judgement {
    /// The line the client is sent.
    pub fn reply(&self) -> &'static str {
        match self {
            Judgement::Accepted(Command::Shutdown) => {
                "shutdown: accepted; the guest finishes its sessions, flushes its disk and exits\n"
            }
            Judgement::Refused(_, Refusal::Missing) => {
                "shutdown: refused: no secret (send `shutdown SECRET`, SECRET from target/nbd/control-secret on the host that started this guest)\n"
            }
            Judgement::Refused(_, Refusal::Wrong) => "shutdown: refused: wrong secret\n",
            Judgement::Refused(_, Refusal::NoSecretHere) => {
                "shutdown: refused: this guest was given no control secret (fw_cfg opt/sensepool/control-secret), so nothing may change it\n"
            }
        }
    }
}

/// The secret and the counts of what was asked.
#[derive(Debug, Default)]
pub struct Control {
    secret: Option<Vec<u8>>,
    /// Commands carried out.
    pub accepted: u64,
    /// Commands refused (missing or wrong secret, or none here).
    pub refused: u64,
}

impl Control {
    /// Commands checked against `secret` (the file's contents; surrounding whitespace is not
    /// part of it, and an empty one counts as none).
    pub fn new(secret: Option<&[u8]>) -> Control {
        let secret = secret
            .map(<[u8]>::trim_ascii)
            .filter(|secret| !secret.is_empty())
            .map(<[u8]>::to_vec);
        Control {
            secret,
            accepted: 0,
            refused: 0,
        }
    }

    /// Whether a secret was given.
    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// Judges one line from a stats client; `None` when it is no command (a query, a blank
    /// line, anything else).
    pub fn judge(&mut self, line: &[u8]) -> Option<Judgement> {
        let mut words = line
            .trim_ascii()
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let command = match words.next()? {
            b"shutdown" => Command::Shutdown,
            _ => return None,
        };
        let given = words.next();
        let judgement = match (&self.secret, given) {
            (None, _) => Judgement::Refused(command, Refusal::NoSecretHere),
            (Some(_), None) => Judgement::Refused(command, Refusal::Missing),
            (Some(secret), Some(given)) if words.next().is_none() && same(secret, given) => {
                Judgement::Accepted(command)
            }
            (Some(_), Some(_)) => Judgement::Refused(command, Refusal::Wrong),
        };
        match judgement {
            Judgement::Accepted(_) => self.accepted += 1,
            Judgement::Refused(..) => self.refused += 1,
        }
        Some(judgement)
    }
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    let longest = a.len().max(b.len());
    let mut differ = u8::from(a.len() != b.len());
    for i in 0..longest {
        differ |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    differ == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_needs_the_secret_and_refusals_are_counted() {
        let mut control = Control::new(Some(b"c0ffee\n"));
        assert!(control.has_secret());
        let refused = |why| Some(Judgement::Refused(Command::Shutdown, why));
        assert_eq!(control.judge(b"shutdown\n"), refused(Refusal::Missing));
        assert_eq!(control.judge(b"shutdown c0ffe"), refused(Refusal::Wrong));
        assert_eq!(control.judge(b"shutdown c0ffee0"), refused(Refusal::Wrong));
        assert_eq!(control.judge(b"shutdown c0ffee x"), refused(Refusal::Wrong));
        assert_eq!(control.judge(b""), None);
        assert_eq!(control.judge(b"stats please"), None);
        assert_eq!(
            control.judge(b"  shutdown   c0ffee \r\n"),
            Some(Judgement::Accepted(Command::Shutdown))
        );
        assert_eq!((control.accepted, control.refused), (1, 4));
    }

    #[test]
    fn a_guest_without_a_secret_refuses_every_command() {
        for secret in [None, Some(&b""[..]), Some(&b" \n"[..])] {
            let mut control = Control::new(secret);
            assert!(!control.has_secret());
            assert_eq!(
                control.judge(b"shutdown anything"),
                Some(Judgement::Refused(Command::Shutdown, Refusal::NoSecretHere))
            );
        }
    }

    #[test]
    fn every_judgement_has_a_one_line_reply_naming_the_command() {
        let all = [
            Judgement::Accepted(Command::Shutdown),
            Judgement::Refused(Command::Shutdown, Refusal::Missing),
            Judgement::Refused(Command::Shutdown, Refusal::Wrong),
            Judgement::Refused(Command::Shutdown, Refusal::NoSecretHere),
        ];
        for judgement in all {
            let reply = judgement.reply();
            assert!(reply.starts_with("shutdown: "), "{reply}");
            assert_eq!(reply.matches('\n').count(), 1, "{reply}");
            assert!(reply.ends_with('\n'));
        }
    }
}
