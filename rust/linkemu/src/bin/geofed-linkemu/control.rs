//! The control socket (`--control PATH`): live changes of the running link, and
//! its counters. One request line and one reply line (JSON) per connection:
//!
//! - `stats`: both ways' counters now;
//! - `set NAME=VALUE ...`: the command line's per-way flags without their `--`
//!   (`delay-us=5500`, `back-loss=0.001`, `rate-mbps=500`), and `down=true|false`
//!   (`back-down`), a cut fibre.
//!
//! Each way's own thread applies its part, after reading what reached its
//! socket before (so that meets the old link), and the reply comes only once
//! both have: with the instant the request was read and each way applied it
//! (CLOCK_MONOTONIC, shared by every namespace of the host) and its counters then. A request that would make an
//! invalid link changes nothing and gets `{"error": "..."}`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::RawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use geofed_linkemu::{Change, LinkConfig};
use geofed_os::clock::mono_ns;

use crate::args::{WayFlags, WAY_FLAGS};
use crate::loops::make_thread_realtime;
use crate::PROG;

/// A way's thread applies a change within one wake-up; this is only a bound
/// for a thread that is stuck, so the client is never left waiting forever.
const APPLY_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Below the ways' threads (they keep their frames' times), above everything
/// else, so a busy host does not delay a change by a time slice.
const PRIORITY: libc::c_int = 40;

/// When a way applied a change and its counters then (JSON), or why it could not.
pub type Applied = Result<(u64, String), String>;

/// Where the control thread leaves a change for one way's thread, and wakes it.
pub struct Inbox {
    event: RawFd,
    pending: Mutex<Option<Change>>,
    replies: Sender<Applied>,
}

impl Inbox {
    pub fn new() -> (Arc<Inbox>, Receiver<Applied>) {
        // SAFETY: plain syscall; the fd lives as long as the process.
        let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if event < 0 {
            eprintln!("{PROG}: eventfd: {}", io::Error::last_os_error());
            std::process::exit(1);
        }
        let (tx, rx) = channel();
        (Arc::new(Inbox { event, pending: Mutex::new(None), replies: tx }), rx)
    }

    /// Readable while a change waits.
    pub fn fd(&self) -> RawFd {
        self.event
    }

    fn post(&self, change: Change) {
        *self.pending.lock().unwrap() = Some(change);
        let one = 1u64;
        // SAFETY: writes 8 bytes from a u64 to the eventfd.
        unsafe { libc::write(self.event, &one as *const u64 as *const libc::c_void, 8) };
    }

    /// The change waiting, if any (the way's thread).
    pub fn take(&self) -> Option<Change> {
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a u64; non-blocking.
        unsafe { libc::read(self.event, &mut n as *mut u64 as *mut libc::c_void, 8) };
        self.pending.lock().unwrap().take()
    }

    pub fn reply(&self, applied: Applied) {
        let _ = self.replies.send(applied);
    }
}

/// One way as the control thread sees it: its thread's inbox and replies, and its settings now.
pub struct WayControl {
    pub name: &'static str,
    pub inbox: Arc<Inbox>,
    pub replies: Receiver<Applied>,
    pub config: LinkConfig,
}

/// Binds `path` (replacing a stale socket of an earlier run) and serves it on a thread of its own.
pub fn spawn(path: &str, mut ways: [WayControl; 2]) -> Result<(), String> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(|e| format!("--control {path}: {e}"))?;
    thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            make_thread_realtime(PRIORITY);
            for conn in listener.incoming().flatten() {
                if let Err(e) = serve(conn, &mut ways) {
                    eprintln!("{PROG}: warning: control: {e}");
                }
            }
        })
        .map_err(|e| format!("control thread: {e}"))?;
    Ok(())
}

fn serve(conn: UnixStream, ways: &mut [WayControl; 2]) -> io::Result<()> {
    conn.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let received_ns = mono_ns();
    let reply = answer(line.trim(), ways)
        .map(|parts| format!("{{\"received_ns\": {received_ns}, {parts}}}"))
        .unwrap_or_else(|e| format!("{{\"error\": \"{}\"}}", e.replace('"', "'")));
    (&conn).write_all(format!("{reply}\n").as_bytes())
}

fn answer(request: &str, ways: &mut [WayControl; 2]) -> Result<String, String> {
    let changes = parse(request, [&ways[0].config, &ways[1].config])?;
    let configs = [0, 1].map(|i| changes[i].applied_to(&ways[i].config).map_err(|e| format!("{}: {e}", ways[i].name)));
    let [Ok(ab), Ok(ba)] = configs else {
        return Err(configs.into_iter().find_map(Result::err).unwrap());
    };
    for (w, c) in ways.iter().zip(changes) {
        // A reply that came after its request timed out must not answer this one.
        while w.replies.try_recv().is_ok() {}
        w.inbox.post(c);
    }
    let mut parts = vec![];
    for w in ways.iter() {
        let (applied_ns, counters) = w
            .replies
            .recv_timeout(APPLY_TIMEOUT)
            .map_err(|_| format!("{}: its thread did not answer within {APPLY_TIMEOUT:?}", w.name))?
            .map_err(|e| format!("{}: {e}", w.name))?;
        parts.push(format!("\"{}\": {{\"applied_ns\": {applied_ns}, \"counters\": {counters}}}", w.name));
    }
    ways[0].config = ab;
    ways[1].config = ba;
    Ok(parts.join(", "))
}

/// A request's change of each way (`stats` changes nothing). A new delay of one
/// way is also the delay the other way's credits come back over.
fn parse(request: &str, configs: [&LinkConfig; 2]) -> Result<[Change; 2], String> {
    let mut words = request.split_whitespace();
    match words.next() {
        Some("stats") if words.next().is_none() => return Ok([Change::default(), Change::default()]),
        Some("set") => {}
        _ => return Err(format!("unknown request '{request}': expected 'stats' or 'set NAME=VALUE ...'")),
    }
    let (mut flags, mut down) = ([WayFlags::default(), WayFlags::default()], [None, None]);
    let mut any = false;
    for word in words {
        let (name, value) = word.split_once('=').ok_or_else(|| format!("{word}: expected NAME=VALUE"))?;
        let (way, base) = match name.strip_prefix("back-") {
            Some(base) => (1, base),
            None => (0, name),
        };
        if base == "down" {
            down[way] = Some(match value {
                "true" => true,
                "false" => false,
                _ => return Err(format!("{name}: expected true or false, got '{value}'")),
            });
        } else if WAY_FLAGS.contains(&base) {
            flags[way].set(base, name, value)?;
        } else {
            return Err(format!(
                "{name}: unknown setting (known: {}, down, each also as back-NAME)",
                WAY_FLAGS.join(", ")
            ));
        }
        any = true;
    }
    if !any {
        return Err("set: nothing to change".into());
    }
    let mut changes = [0, 1].map(|i| Change { down: down[i], ..flags[i].change() });
    for (i, back) in [(0, 1), (1, 0)] {
        if configs[back].credits.is_some() {
            changes[back].credit_return_delay_ns = changes[i].delay_ns;
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use geofed_linkemu::Credits;

    fn cfg(credits: bool) -> LinkConfig {
        LinkConfig {
            delay_ns: 4_500_000,
            rate_bps: 1_000_000_000,
            queue_limit_bytes: 1 << 20,
            jitter_ns: 0,
            loss: 0.0,
            seed: 1,
            credits: credits.then_some(Credits { bytes: 100_000, return_delay_ns: 4_500_000 }),
        }
    }

    #[test]
    fn a_request_changes_each_way_as_named() {
        let (q, c) = (cfg(false), cfg(true));
        let [ab, ba] = parse("set delay-us=5500 back-rate-mbps=500 loss=0.001 back-down=true", [&q, &q]).unwrap();
        assert_eq!((ab.delay_ns, ab.loss, ab.rate_bps, ab.down), (Some(5_500_000), Some(0.001), None, None));
        assert_eq!((ba.delay_ns, ba.rate_bps, ba.down), (None, Some(500_000_000), Some(true)));
        assert_eq!(ba.credit_return_delay_ns, None, "a queue link has no credits to return");
        // On a credit link the other way's credits come back over the new delay.
        let [ab, ba] = parse("set back-delay-us=700", [&c, &c]).unwrap();
        assert_eq!((ab.credit_return_delay_ns, ba.credit_return_delay_ns), (Some(700_000), None));
        assert_eq!(parse("stats", [&q, &q]).unwrap(), [Change::default(), Change::default()]);
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let q = cfg(false);
        for (request, starts) in [
            ("set", "set: nothing"),
            ("set bogus=1", "bogus: unknown setting"),
            ("set back-rate-mbps=0", "back-rate-mbps"),
            ("set loss=2", "loss"),
            ("set down=maybe", "down"),
            ("set delay-us", "delay-us: expected NAME=VALUE"),
            ("reset", "unknown request"),
            ("stats now", "unknown request"),
        ] {
            let e = parse(request, [&q, &q]).unwrap_err();
            assert!(e.starts_with(starts), "{request:?} -> {e:?}");
        }
    }
}
