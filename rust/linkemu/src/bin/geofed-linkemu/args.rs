//! The command line: one direction's flags, and `--back-*` ones for the other
//! way where the link is asymmetric.

use geofed_linkemu::{Change, Credits, LinkConfig};

pub const USAGE: &str = "usage: geofed-linkemu --if-a NAME --if-b NAME --delay-us F --rate-mbps F \
--queue-bytes N [--jitter-us F] [--loss F] [--credits-bytes N] [--back-delay-us F] [--back-rate-mbps F] \
[--back-queue-bytes N] [--back-jitter-us F] [--back-loss F] [--back-credits-bytes N] [--seed N] [--stats PATH] \
[--cpu-dma-latency-us N] [--control PATH]\n\
The flags describe frames from --if-a to --if-b; --back-* ones the other way where it differs.\n\
--credits-bytes makes a way lossless and credit-based: frames wait in the queue for credits.\n\
--control PATH: a unix socket taking live changes of the running link (control.rs).";

/// One direction of the link as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Way {
    pub delay_us: f64,
    pub rate_mbps: f64,
    pub queue_bytes: u64,
    pub jitter_us: f64,
    pub loss: f64,
    /// The far end's buffer lent as credits; None: a tail-drop queue.
    pub credits_bytes: Option<u64>,
}

impl Way {
    /// This way's model; a credit comes back over `back`, the other way.
    pub fn config(&self, seed: u64, back: &Way) -> LinkConfig {
        LinkConfig {
            delay_ns: ns(self.delay_us),
            rate_bps: bps(self.rate_mbps),
            queue_limit_bytes: self.queue_bytes,
            jitter_ns: ns(self.jitter_us),
            loss: self.loss,
            seed,
            credits: self.credits_bytes.map(|bytes| Credits { bytes, return_delay_ns: ns(back.delay_us) }),
        }
    }
}

fn ns(us: f64) -> u64 {
    (us * 1e3).round() as u64
}

fn bps(mbps: f64) -> u64 {
    (mbps * 1e6).round() as u64
}

#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub if_a: String,
    pub if_b: String,
    /// Frames from `if_a` to `if_b`.
    pub a_to_b: Way,
    /// The other way: `a_to_b` unless a `--back-*` flag differs (asymmetric link).
    pub b_to_a: Way,
    pub seed: u64,
    pub stats: Option<String>,
    pub cpu_dma_latency_us: Option<u64>,
    pub control: Option<String>,
}

/// The per-direction flags of one direction, as far as given.
#[derive(Default)]
pub struct WayFlags {
    delay_us: Option<f64>,
    rate_mbps: Option<f64>,
    queue_bytes: Option<u64>,
    jitter_us: Option<f64>,
    loss: Option<f64>,
    credits_bytes: Option<u64>,
}

impl WayFlags {
    /// `name` is the flag without `--` or `--back-`; `flag` the whole one, for errors.
    pub fn set(&mut self, name: &str, flag: &str, v: &str) -> Result<(), String> {
        match name {
            "delay-us" => self.delay_us = Some(parse_f64(flag, v, 0.0, 60e6, false)?),
            "rate-mbps" => self.rate_mbps = Some(parse_f64(flag, v, 0.0, 1e7, true)?),
            "queue-bytes" => self.queue_bytes = Some(parse_positive_u64(flag, v)?),
            "credits-bytes" => self.credits_bytes = Some(parse_positive_u64(flag, v)?),
            "jitter-us" => self.jitter_us = Some(parse_f64(flag, v, 0.0, 60e6, false)?),
            "loss" => self.loss = Some(parse_f64(flag, v, 0.0, 1.0, false)?),
            _ => unreachable!(),
        }
        Ok(())
    }

    /// What the flags given change of a running way.
    pub fn change(&self) -> Change {
        Change {
            delay_ns: self.delay_us.map(ns),
            rate_bps: self.rate_mbps.map(bps),
            queue_limit_bytes: self.queue_bytes,
            jitter_ns: self.jitter_us.map(ns),
            loss: self.loss,
            credits_bytes: self.credits_bytes,
            ..Change::default()
        }
    }

    fn forward(self) -> Result<Way, String> {
        Ok(Way {
            delay_us: self.delay_us.ok_or("--delay-us: required")?,
            rate_mbps: self.rate_mbps.ok_or("--rate-mbps: required")?,
            queue_bytes: self.queue_bytes.ok_or("--queue-bytes: required")?,
            jitter_us: self.jitter_us.unwrap_or(0.0),
            loss: self.loss.unwrap_or(0.0),
            credits_bytes: self.credits_bytes,
        })
    }

    fn back(self, forward: &Way) -> Way {
        Way {
            delay_us: self.delay_us.unwrap_or(forward.delay_us),
            rate_mbps: self.rate_mbps.unwrap_or(forward.rate_mbps),
            queue_bytes: self.queue_bytes.unwrap_or(forward.queue_bytes),
            jitter_us: self.jitter_us.unwrap_or(forward.jitter_us),
            loss: self.loss.unwrap_or(forward.loss),
            credits_bytes: self.credits_bytes.or(forward.credits_bytes),
        }
    }
}

pub const WAY_FLAGS: [&str; 6] = ["delay-us", "rate-mbps", "queue-bytes", "jitter-us", "loss", "credits-bytes"];

fn parse_f64(flag: &str, v: &str, min: f64, max: f64, min_exclusive: bool) -> Result<f64, String> {
    let x: f64 = v.parse().map_err(|_| format!("{flag}: expected a number, got '{v}'"))?;
    let low_ok = if min_exclusive { x > min } else { x >= min };
    if !x.is_finite() || !low_ok || x > max {
        let lo = if min_exclusive { ">" } else { ">=" };
        return Err(format!("{flag}: must be {lo} {min} and <= {max}, got '{v}'"));
    }
    Ok(x)
}

fn parse_u64(flag: &str, v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| format!("{flag}: expected a non-negative integer, got '{v}'"))
}

fn parse_positive_u64(flag: &str, v: &str) -> Result<u64, String> {
    match parse_u64(flag, v)? {
        0 => Err(format!("{flag}: must be > 0")),
        n => Ok(n),
    }
}

/// Accepts `--flag value` and `--flag=value`. Errors name the flag so the
/// caller's log line says what to fix.
pub fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut if_a = None;
    let mut if_b = None;
    let mut forward = WayFlags::default();
    let mut back = WayFlags::default();
    let mut seed = 1u64;
    let mut stats = None;
    let mut cpu_dma_latency_us = None;
    let mut control = None;

    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if flag == "--help" || flag == "-h" {
            return Err("help".into());
        }
        let way = flag
            .strip_prefix("--back-")
            .filter(|n| WAY_FLAGS.contains(n))
            .map(|n| (&mut back, n))
            .or_else(|| flag.strip_prefix("--").filter(|n| WAY_FLAGS.contains(n)).map(|n| (&mut forward, n)));
        let known = ["--if-a", "--if-b", "--seed", "--stats", "--cpu-dma-latency-us", "--control"];
        if way.is_none() && !known.contains(&flag) {
            return Err(format!("{flag}: unknown argument"));
        }
        let v = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| format!("{flag}: missing value"))?,
        };
        if let Some((w, name)) = way {
            w.set(name, flag, &v)?;
            continue;
        }
        match flag {
            "--if-a" | "--if-b" => {
                // IFNAMSIZ is 16 including the NUL.
                if v.is_empty() || v.len() > 15 || v.contains('/') || v.contains('\0') {
                    return Err(format!("{flag}: invalid interface name '{v}'"));
                }
                if flag == "--if-a" {
                    if_a = Some(v)
                } else {
                    if_b = Some(v)
                }
            }
            "--seed" => seed = parse_u64(flag, &v)?,
            "--cpu-dma-latency-us" => {
                let us = parse_u64(flag, &v)?;
                if us > i32::MAX as u64 {
                    return Err(format!("{flag}: too large"));
                }
                cpu_dma_latency_us = Some(us)
            }
            "--stats" | "--control" => {
                if v.is_empty() {
                    return Err(format!("{flag}: empty path"));
                }
                *(if flag == "--stats" { &mut stats } else { &mut control }) = Some(v)
            }
            _ => unreachable!(),
        }
    }
    let if_a = if_a.ok_or("--if-a: required")?;
    let if_b = if_b.ok_or("--if-b: required")?;
    let a_to_b = forward.forward()?;
    let b_to_a = back.back(&a_to_b);
    if if_a == if_b {
        return Err("--if-b: must differ from --if-a".into());
    }
    for (way, back, prefix) in [(&a_to_b, &b_to_a, "--"), (&b_to_a, &a_to_b, "--back-")] {
        let c = way.config(0, back);
        if c.rate_bps == 0 {
            return Err(format!("{prefix}rate-mbps: below 1 bit/s"));
        }
        if c.credits.is_some() && c.loss > 0.0 {
            return Err(format!("{prefix}loss: a credit link is lossless; give 0 with --{prefix}credits-bytes"));
        }
    }
    Ok(Args { if_a, if_b, a_to_b, b_to_a, seed, stats, cpu_dma_latency_us, control })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const BASE: &str = "--if-a a --if-b b --delay-us 4500 --rate-mbps 4000 --queue-bytes 2250000";

    #[test]
    fn parses_minimal_and_full() {
        let p = parse_args(&a(BASE)).unwrap();
        assert_eq!(p.if_a, "a");
        assert_eq!(p.a_to_b.delay_us, 4500.0);
        assert_eq!(p.b_to_a, p.a_to_b, "symmetric unless told otherwise");
        let c = p.a_to_b.config(p.seed, &p.b_to_a);
        assert_eq!(c.delay_ns, 4_500_000);
        assert_eq!(c.rate_bps, 4_000_000_000);
        assert_eq!(c.credits, None);
        let p = parse_args(&a(&format!(
            "{BASE} --jitter-us 12.5 --loss=0.01 --seed 9 --stats /tmp/x.json --cpu-dma-latency-us 0"
        )))
        .unwrap();
        assert_eq!(p.a_to_b.config(p.seed, &p.b_to_a).jitter_ns, 12_500);
        assert_eq!(p.b_to_a.loss, 0.01);
        assert_eq!(p.seed, 9);
        assert_eq!(p.stats.as_deref(), Some("/tmp/x.json"));
        assert_eq!(p.cpu_dma_latency_us, Some(0));
        assert_eq!(parse_args(&a(BASE)).unwrap().cpu_dma_latency_us, None);
    }

    #[test]
    fn back_flags_make_the_link_asymmetric() {
        let p = parse_args(&a(&format!(
            "{BASE} --jitter-us 10 --back-delay-us 5000 --back-rate-mbps=1000 --back-loss 0.02"
        )))
        .unwrap();
        assert_eq!((p.a_to_b.delay_us, p.a_to_b.rate_mbps, p.a_to_b.loss), (4500.0, 4000.0, 0.0));
        assert_eq!((p.b_to_a.delay_us, p.b_to_a.rate_mbps, p.b_to_a.loss), (5000.0, 1000.0, 0.02));
        // What the back flags leave out is the forward direction's.
        assert_eq!((p.b_to_a.queue_bytes, p.b_to_a.jitter_us), (2_250_000, 10.0));
    }

    #[test]
    fn credits_come_back_over_the_other_way() {
        let p = parse_args(&a(&format!("{BASE} --credits-bytes 1000000 --back-delay-us 5000"))).unwrap();
        let ab = p.a_to_b.config(p.seed, &p.b_to_a).credits.unwrap();
        assert_eq!((ab.bytes, ab.return_delay_ns), (1_000_000, 5_000_000));
        let ba = p.b_to_a.config(p.seed, &p.a_to_b).credits.unwrap();
        assert_eq!((ba.bytes, ba.return_delay_ns), (1_000_000, 4_500_000), "the back way inherits the window");
    }

    #[test]
    fn errors_name_the_flag() {
        let cases = [
            ("--if-a a --if-b b --delay-us 1 --rate-mbps 1", "--queue-bytes"),
            (&format!("{BASE} --rate-mbps 0"), "--rate-mbps"),
            (&format!("{BASE} --rate-mbps nan"), "--rate-mbps"),
            (&format!("{BASE} --delay-us -1"), "--delay-us"),
            (&format!("{BASE} --loss 2"), "--loss"),
            (&format!("{BASE} --queue-bytes 0"), "--queue-bytes"),
            (&format!("{BASE} --queue-bytes 1.5"), "--queue-bytes"),
            (&format!("{BASE} --seed"), "--seed"),
            (&format!("{BASE} --bogus 1"), "--bogus"),
            ("--if-a a --if-b a --delay-us 1 --rate-mbps 1 --queue-bytes 1", "--if-b"),
            (&format!("{BASE} --back-loss 1.5"), "--back-loss"),
            (&format!("{BASE} --back-rate-mbps 0.0000001"), "--back-rate-mbps"),
            (&format!("{BASE} --back-seed 1"), "--back-seed"),
            (&format!("{BASE} --credits-bytes 0"), "--credits-bytes"),
            (&format!("{BASE} --credits-bytes 9000 --loss 0.01"), "--loss"),
            (&format!("{BASE} --back-credits-bytes 9000 --back-loss 0.01"), "--back-loss"),
        ];
        for (argv, flag) in cases {
            let e = parse_args(&a(argv)).unwrap_err();
            assert!(e.starts_with(flag), "{argv:?} -> {e:?}");
            assert!(!e.contains('\n'));
        }
    }
}
