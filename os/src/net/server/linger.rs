//! How long a socket has been in its TCP state, so that no state lasts for ever: the closing
//! states (and, for a stats query, the whole connection) end in a reset after a limit, whatever
//! the peer does.

use smoltcp::socket::tcp::State;

/// A socket in a closing state for this long is reset: every byte was either delivered or will
/// never be, and the peer has had ample time to finish its half.
pub const CLOSING_LIMIT_NS: u64 = 10_000_000_000;

/// The state a socket was last seen in, and since when (TSC ns).
#[derive(Debug, Clone, Copy)]
pub struct Linger {
    state: State,
    since_ns: u64,
}

impl Linger {
    pub const fn new() -> Linger {
        Linger {
            state: State::Closed,
            since_ns: 0,
        }
    }

    /// Notes `state` at `now_ns`; returns how long the socket has been in it.
    pub fn observe(&mut self, state: State, now_ns: u64) -> u64 {
        if state != self.state {
            self.state = state;
            self.since_ns = now_ns;
        }
        now_ns.saturating_sub(self.since_ns)
    }
}

/// Whether `state` is one on the way out (our FIN sent, or the peer's received with nothing left
/// to serve), or a handshake that never completed.
pub fn is_closing(state: State) -> bool {
    matches!(
        state,
        State::SynReceived
            | State::FinWait1
            | State::FinWait2
            | State::Closing
            | State::LastAck
            | State::TimeWait
    )
}
