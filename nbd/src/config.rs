//! The network words of a serving guest's command line (sensepool's kernel and the Hermit
//! application parse the same ones): `ip=ADDR[/PREFIX]`, `gw=ADDR`, `nbd_port=`,
//! `stats_port=`, `nbd_max_clients=` (NBD clients in transmission at once; the next export request is refused)
//! `nbd_idle_s=` (a client in transmission that sends nothing for this long is closed),
//! `nbd_readonly=` (serve the export read-only: `NBD_FLAG_READ_ONLY`, changes refused),
//! `nbd_tls=off|on|require` (`NBD_OPT_STARTTLS` with the host's certificates: `on` offers it,
//! `require` refuses everything else in the clear and admits only clients whose certificate the
//! host's CA signed) and
//! `nic_reset_after=N` (fault injection: reset the NIC once after N received frames, as the
//! driver does after a misbehaving device; 0, the default, never). The defaults suit QEMU user networking (the guest is 10.0.2.15/24 behind the
//! gateway 10.0.2.2) and the NBD port is the IANA one, 10809. A guest that cannot honour a word
//! (the Hermit application has no NIC reset to inject, nor TLS) refuses it by name.

use crate::session::Tls;
use scsi::param::number::count;
use scsi::param::{Key, ValueError, boolean};

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
    /// NBD clients served at once (1..=[`MAX_NBD_CLIENTS`]).
    pub nbd_max_clients: u16,
    /// Seconds a client in transmission may send nothing before it is closed.
    pub nbd_idle_s: u32,
    /// Fault injection: reset the NIC once, after this many received frames (0: never).
    pub nic_reset_after: u64,
    /// Serve the export read-only (`NBD_FLAG_READ_ONLY`; writes, trims and write-zeroes get
    /// `NBD_EPERM` and never reach the disk).
    pub nbd_readonly: bool,
    /// Whether STARTTLS is offered or required (`nbd_tls=off|on|require`).
    pub nbd_tls: Tls,
}

/// Largest `nbd_max_clients=`: each NBD socket holds 512 KiB of TCP buffers from the start and
/// a busy session up to about 1.1 MiB more (requests stream in 256 KiB pieces), so 128 clients
/// and the handshake sockets need at most about 230 MiB, inside the `nbd` profile's 512 MiB.
pub const MAX_NBD_CLIENTS: u16 = 128;

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            ip: [10, 0, 2, 15],
            prefix_len: 24,
            gateway: [10, 0, 2, 2],
            nbd_port: 10809,
            stats_port: 10810,
            nbd_max_clients: 64,
            nbd_idle_s: 600,
            nic_reset_after: 0,
            nbd_readonly: false,
            nbd_tls: Tls::Off,
        }
    }
}

impl NetConfig {
    /// The network words of the command line: the one place each is spelled.
    pub const KEYS: &'static [Key<NetConfig>] = &[
        Key {
            name: "ip",
            aliases: &[],
            set: |net, v| {
                let (addr, prefix) = match v.split_once('/') {
                    Some((addr, prefix)) => (addr, Some(prefix)),
                    None => (v, None),
                };
                let prefix_len = match prefix {
                    Some(text) => count(text, 1, 32).map_err(|_| {
                        ValueError::expected("ADDR/PREFIX with a prefix length in 1..=32")
                    })?,
                    None => net.prefix_len,
                };
                net.ip = parse_ipv4(addr)?;
                net.prefix_len = prefix_len;
                Ok(())
            },
        },
        Key {
            name: "gw",
            aliases: &[],
            set: |net, v| {
                net.gateway = parse_ipv4(v)?;
                Ok(())
            },
        },
        Key {
            name: "nbd_port",
            aliases: &[],
            set: |net, v| {
                net.nbd_port = count(v, 1, u16::MAX.into())?;
                Ok(())
            },
        },
        Key {
            name: "stats_port",
            aliases: &[],
            set: |net, v| {
                net.stats_port = count(v, 1, u16::MAX.into())?;
                Ok(())
            },
        },
        Key {
            name: "nbd_max_clients",
            aliases: &[],
            set: |net, v| {
                net.nbd_max_clients = count(v, 1, MAX_NBD_CLIENTS.into())?;
                Ok(())
            },
        },
        Key {
            name: "nbd_idle_s",
            aliases: &[],
            set: |net, v| {
                net.nbd_idle_s = count(v, 1, u32::MAX.into())?;
                Ok(())
            },
        },
        Key {
            name: "nbd_readonly",
            aliases: &[],
            set: |net, v| {
                net.nbd_readonly = boolean(v)?;
                Ok(())
            },
        },
        Key {
            name: "nbd_tls",
            aliases: &[],
            set: |net, v| {
                net.nbd_tls = match v {
                    "off" | "0" => Tls::Off,
                    "on" | "1" => Tls::On,
                    "require" => Tls::Require,
                    _ => return Err(ValueError::expected("off, on or require")),
                };
                Ok(())
            },
        },
        Key {
            name: "nic_reset_after",
            aliases: &[],
            set: |net, v| {
                net.nic_reset_after = count(v, 0, u64::MAX)?;
                Ok(())
            },
        },
    ];
}

impl NetConfig {
    /// The address and gateway words among `words` (`ip=`, `gw=`) over the defaults; every
    /// other word, and a value these keys refuse, is left to whoever parses the whole line (the
    /// Hermit loader uses this to hand Hermit its address before the application starts).
    pub fn addresses_from<'w>(words: impl IntoIterator<Item = &'w str>) -> NetConfig {
        let mut net = NetConfig::default();
        for (key, value) in words.into_iter().filter_map(|word| word.split_once('=')) {
            if matches!(key, "ip" | "gw")
                && let Some(entry) = scsi::param::find(NetConfig::KEYS, key)
            {
                let _ = (entry.set)(&mut net, value);
            }
        }
        net
    }

    /// The netmask of [`Self::prefix_len`], as a dotted quad's bytes.
    pub fn netmask(&self) -> [u8; 4] {
        let bits = u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len.min(32)))
            .unwrap_or(0);
        bits.to_be_bytes()
    }
}

/// Dotted-quad IPv4.
fn parse_ipv4(text: &str) -> Result<[u8; 4], ValueError> {
    let mut addr = [0u8; 4];
    let mut parts = text.split('.');
    for byte in &mut addr {
        *byte = parts
            .next()
            .and_then(|part| part.parse::<u8>().ok())
            .ok_or_else(|| ValueError::expected("an IPv4 address a.b.c.d"))?;
    }
    if parts.next().is_some() {
        return Err(ValueError::expected("an IPv4 address a.b.c.d"));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(config: &mut NetConfig, key: &str, value: &str) -> Result<(), ValueError> {
        let entry = scsi::param::find(NetConfig::KEYS, key).expect("a network key");
        (entry.set)(config, value)
    }

    #[test]
    fn addresses_come_from_their_words_only_and_bad_ones_keep_the_defaults() {
        let net =
            NetConfig::addresses_from(["workload=nbd", "ip=192.168.7.9/16", "gw=192.168.0.1"]);
        assert_eq!((net.ip, net.prefix_len), ([192, 168, 7, 9], 16));
        assert_eq!(net.gateway, [192, 168, 0, 1]);
        assert_eq!(net.netmask(), [255, 255, 0, 0]);
        let defaults = NetConfig::addresses_from(["ip=10.0.2", "gw=x", "nbd_port=1"]);
        assert_eq!(defaults, NetConfig::default());
        assert_eq!(defaults.netmask(), [255, 255, 255, 0]);
        let host = NetConfig::addresses_from(["ip=10.1.2.3/32"]);
        assert_eq!(host.netmask(), [255; 4]);
        let wide = NetConfig::addresses_from(["ip=10.1.2.3/1"]);
        assert_eq!(wide.netmask(), [128, 0, 0, 0]);
    }

    #[test]
    fn words_parse_and_bad_values_are_named() {
        let mut config = NetConfig::default();
        set(&mut config, "ip", "192.168.7.9/16").unwrap();
        set(&mut config, "gw", "192.168.0.1").unwrap();
        set(&mut config, "nbd_port", "10999").unwrap();
        set(&mut config, "nbd_max_clients", "2").unwrap();
        set(&mut config, "nbd_idle_s", "30").unwrap();
        set(&mut config, "nic_reset_after", "300").unwrap();
        set(&mut config, "nbd_readonly", "1").unwrap();
        assert!(config.nbd_readonly);
        assert_eq!(config.nbd_tls, Tls::Off);
        set(&mut config, "nbd_tls", "require").unwrap();
        assert_eq!(config.nbd_tls, Tls::Require);
        set(&mut config, "nbd_tls", "on").unwrap();
        assert_eq!(config.nbd_tls, Tls::On);
        assert_eq!((config.nbd_max_clients, config.nbd_idle_s), (2, 30));
        assert_eq!(config.nic_reset_after, 300);
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
            ("nbd_max_clients", "0"),
            ("nbd_max_clients", "129"),
            ("nbd_idle_s", "0"),
            ("nbd_idle_s", "ten"),
            ("nic_reset_after", "-1"),
            ("nic_reset_after", "many"),
            ("nbd_readonly", "2"),
            ("nbd_tls", "yes"),
            ("nbd_tls", "required"),
        ] {
            assert!(
                set(&mut NetConfig::default(), key, value).is_err(),
                "{key}={value}"
            );
        }
    }
}
