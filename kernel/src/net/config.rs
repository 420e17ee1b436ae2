//! The network words of the kernel command line: `ip=ADDR[/PREFIX]`, `gw=ADDR`, `nbd_port=`,
//! `stats_port=`. The defaults suit QEMU user networking (the guest is 10.0.2.15/24 behind the
//! gateway 10.0.2.2) and the NBD port is the IANA one, 10809.

use alloc::format;
use alloc::string::String;

/// Where the guest sits on the network and which ports it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetConfig {
    /// The guest's IPv4 address.
    pub ip: [u8; 4],
    /// Its prefix length.
    pub prefix_len: u8,
    /// The default gateway.
    pub gateway: [u8; 4],
    /// The NBD server's TCP port.
    pub nbd_port: u16,
    /// The stats endpoint's TCP port.
    pub stats_port: u16,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            ip: [10, 0, 2, 15],
            prefix_len: 24,
            gateway: [10, 0, 2, 2],
            nbd_port: 10809,
            stats_port: 10810,
        }
    }
}

impl NetConfig {
    /// Whether `key` is one of the network words.
    pub fn is_key(key: &str) -> bool {
        matches!(key, "ip" | "gw" | "nbd_port" | "stats_port")
    }

    /// Applies one word; the error says what was expected.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "ip" => {
                let (addr, prefix) = match value.split_once('/') {
                    Some((addr, prefix)) => (addr, Some(prefix)),
                    None => (value, None),
                };
                let prefix_len = match prefix {
                    Some(text) => text
                        .parse::<u8>()
                        .ok()
                        .filter(|&len| (1..=32).contains(&len))
                        .ok_or_else(|| {
                            format!("ADDR/PREFIX with a prefix length in 1..=32, not '{value}'")
                        })?,
                    None => self.prefix_len,
                };
                self.ip = parse_ipv4(addr)?;
                self.prefix_len = prefix_len;
            }
            "gw" => self.gateway = parse_ipv4(value)?,
            "nbd_port" => self.nbd_port = parse_port(value)?,
            "stats_port" => self.stats_port = parse_port(value)?,
            _ => return Err(format!("not a network key: {key}")),
        }
        Ok(())
    }
}

/// Dotted-quad IPv4.
fn parse_ipv4(text: &str) -> Result<[u8; 4], String> {
    let mut addr = [0u8; 4];
    let mut parts = text.split('.');
    for byte in &mut addr {
        *byte = parts
            .next()
            .and_then(|part| part.parse::<u8>().ok())
            .ok_or_else(|| format!("an IPv4 address a.b.c.d, not '{text}'"))?;
    }
    if parts.next().is_some() {
        return Err(format!("an IPv4 address a.b.c.d, not '{text}'"));
    }
    Ok(addr)
}

fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| format!("a TCP port in 1..=65535, not '{text}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_and_bad_values_are_named() {
        let mut config = NetConfig::default();
        config.set("ip", "192.168.7.9/16").unwrap();
        config.set("gw", "192.168.0.1").unwrap();
        config.set("nbd_port", "10999").unwrap();
        assert_eq!(config.ip, [192, 168, 7, 9]);
        assert_eq!(config.prefix_len, 16);
        assert_eq!(config.gateway, [192, 168, 0, 1]);
        assert_eq!(config.nbd_port, 10999);
        for (key, value) in [
            ("ip", "10.0.2"),
            ("ip", "10.0.2.15.1"),
            ("ip", "10.0.2.256"),
            ("ip", "10.0.2.15/33"),
            ("gw", "x"),
            ("stats_port", "0"),
            ("nbd_port", "65536"),
        ] {
            let err = NetConfig::default().set(key, value).unwrap_err();
            assert!(err.contains(value), "{err}");
        }
    }
}
