//! `cargo xtask bench nbd --tls`: what TLS costs the guest's NBD server, in one boot. The `nbd`
//! profile serves with `nbd_tls=on` (STARTTLS offered, plain clients served too), so the plain
//! and the TLS client ([`Client::open`], [`Client::open_tls`] with xtask's client certificate)
//! meet the same guest, disk and load. Each round runs both sides, in rotated order: the
//! handshake (connect to GO's acknowledgement, TLS's certificate exchange included; the median
//! of [`HANDSHAKES`] connections) and random 4 KiB reads at iodepth 1 for a fixed time. The
//! table gives each side's median over the rounds with its range, and the headline the median
//! of the per-round ratios TLS / plain. Writes `target/bench/nbd-tls.json`.
//!
//! Informational: the path is mostly QEMU's slirp and the emulated NIC under TCG, as in
//! `bench nbd`; TLS adds the guest's software crypto (no SSE, no AES-NI) and the host client's.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use workloads::Rng;

use benchkit::{Column, ResultSet};
use harness::boot::Echo;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;
use harness::{profile, workspace};

/// Connections timed per side and round.
const HANDSHAKES: usize = 5;
/// The two sides, in the order of round 0.
const SIDES: [&str; 2] = ["plain", "tls"];

/// One side's figures in one round.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    handshake_ms: f64,
    reads_per_s: f64,
    read_mean_us: f64,
}

/// One side over every round: medians and ranges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsRecord {
    /// `plain` or `tls`.
    pub case: String,
    pub rounds: u64,
    /// Connect to GO's acknowledgement (median of the rounds' medians), ms.
    pub handshake_ms: f64,
    pub handshake_ms_min: f64,
    pub handshake_ms_max: f64,
    /// Random 4 KiB reads at iodepth 1 per second.
    pub reads_per_s: f64,
    pub reads_per_s_min: f64,
    pub reads_per_s_max: f64,
    /// Mean time of one such read (send to the last byte of its data), µs.
    pub read_mean_us: f64,
}

const COLUMNS: [Column<'static>; 7] = [
    Column::new("case", "case"),
    Column::new("handshake ms", "handshake_ms"),
    Column::new("min", "handshake_ms_min"),
    Column::new("max", "handshake_ms_max"),
    Column::new("4k reads/s", "reads_per_s"),
    Column::new("min", "reads_per_s_min"),
    Column::new("mean read us", "read_mean_us"),
];

fn open(nbd: &NbdGuest, side: &str) -> std::io::Result<Client> {
    match side {
        "tls" => {
            let dir = harness::tls::credentials_dir().map_err(std::io::Error::other)?;
            Client::open_tls(nbd.nbd_addr(), &dir)
        }
        _ => Client::open(nbd.nbd_addr()),
    }
}

/// One side's round: the handshakes, then reads for `duration`.
fn round(nbd: &NbdGuest, side: &str, duration: Duration, seed: u64) -> std::io::Result<Round> {
    let mut handshakes_ms = Vec::new();
    for _ in 0..HANDSHAKES {
        let start = Instant::now();
        let client = open(nbd, side)?;
        handshakes_ms.push(start.elapsed().as_secs_f64() * 1e3);
        client.disconnect()?;
    }
    let mut client = open(nbd, side)?;
    let blocks = client.size / 4096;
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut reads = 0u64;
    while start.elapsed() < duration {
        let offset = rng.below(blocks) * 4096;
        client.request(nbd::cmd::READ, reads, offset, 4096, &[])?;
        let (error, _) = client.reply()?;
        if error != 0 {
            return Err(std::io::Error::other(format!(
                "read answered errno {error}"
            )));
        }
        client.bytes(4096)?;
        reads += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    client.disconnect()?;
    Ok(Round {
        handshake_ms: stats::median(&mut handshakes_ms).unwrap_or(0.0),
        reads_per_s: reads as f64 / seconds,
        read_mean_us: seconds * 1e6 / reads.max(1) as f64,
    })
}

/// Boots the guest with TLS offered, runs the rounds, prints and writes the results.
pub fn run(accel: harness::accel::AccelRequest, quick: bool) -> Result<()> {
    let profile = profile::load("nbd")?;
    let guest = Guest::prepare(accel, None)?;
    let nbd = NbdGuest::new(&profile)?;
    let (rounds, duration) = if quick {
        (2, Duration::from_secs(2))
    } else {
        (6, Duration::from_secs(5))
    };
    let overrides = Overrides {
        timeout: Some(Duration::from_secs(1800)),
        kernel_args: Some("workload=nbd nbd_tls=on".into()),
        ..Overrides::default()
    };
    let (measured, outcome) = std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let measured = nbd
            .wait_ready(|| boot.is_finished())
            .map_err(|e| e.to_string())
            .and_then(|_| rounds_of(&nbd, rounds, duration));
        let _ = nbd.shutdown();
        (measured, boot.join())
    });
    let per_side = measured.map_err(|reason| Error::Guest { verdict: reason })?;
    if !matches!(outcome, Ok(Ok(ref o)) if o.verdict == harness::boot::Verdict::Pass) {
        return Err(Error::Guest {
            verdict: "the nbd guest did not stop cleanly".into(),
        });
    }
    report(&guest, per_side)
}

/// `rounds` rounds of both sides in rotated order; each side's rounds, in [`SIDES`]' order.
fn rounds_of(
    nbd: &NbdGuest,
    rounds: usize,
    duration: Duration,
) -> std::result::Result<[Vec<Round>; 2], String> {
    let mut per_side: [Vec<Round>; 2] = Default::default();
    for r in 0..rounds {
        for side in stats::order::rotated(SIDES.len(), r) {
            let measured = round(nbd, SIDES[side], duration, 0x0074_6c73 + r as u64)
                .map_err(|e| format!("{} round {r}: {e}", SIDES[side]))?;
            per_side[side].push(measured);
        }
    }
    Ok(per_side)
}

fn report(guest: &Guest, per_side: [Vec<Round>; 2]) -> Result<()> {
    let mut set = ResultSet::new(
        "nbd-tls",
        "nbd-tls",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let spread = |rounds: &[Round], figure: fn(&Round) -> f64| {
        let mut values: Vec<f64> = rounds.iter().map(figure).collect();
        stats::Spread::of(&mut values)
    };
    let two = |x: f64| (x * 100.0).round() / 100.0;
    for (side, rounds) in SIDES.iter().zip(&per_side) {
        let (Some(handshake), Some(reads), Some(mean)) = (
            spread(rounds, |r| r.handshake_ms),
            spread(rounds, |r| r.reads_per_s),
            spread(rounds, |r| r.read_mean_us),
        ) else {
            continue;
        };
        set.extend([TlsRecord {
            case: (*side).into(),
            rounds: rounds.len() as u64,
            handshake_ms: two(handshake.median),
            handshake_ms_min: two(handshake.min),
            handshake_ms_max: two(handshake.max),
            reads_per_s: two(reads.median),
            reads_per_s_min: two(reads.min),
            reads_per_s_max: two(reads.max),
            read_mean_us: two(mean.median),
        }]);
    }
    benchkit::print_table(&set.results, &COLUMNS);
    let [plain, tls] = &per_side;
    let ratio = |figure: fn(&Round) -> f64| {
        let mut ratios: Vec<f64> =
            stats::ratios(tls.iter().zip(plain).map(|(t, p)| (figure(t), figure(p)))).collect();
        stats::Spread::of(&mut ratios)
    };
    if let (Some(handshake), Some(read)) = (ratio(|r| r.handshake_ms), ratio(|r| r.read_mean_us)) {
        set.headline(format!(
            "TLS / plain, per-round ratios over {} rounds: handshake {:.2} (range {:.2}-{:.2}), mean 4 KiB read time {:.3} (range {:.3}-{:.3})",
            handshake.count, handshake.median, handshake.min, handshake.max, read.median, read.min, read.max
        ));
    }
    let json = set.write_json(&workspace::output_dir("bench")?)?;
    println!("wrote {}", json.display());
    Ok(())
}
