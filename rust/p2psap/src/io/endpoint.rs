//! The endpoint's API: open, connect and reconfigure sessions, send and
//! receive on them, exchange control messages, report, close.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::handshake::{self, write_msg};
use super::{control, fabric, flush, new_conn, udp, Error, Inner, Path, Peer, Result, State, HANDSHAKE_TIMEOUT, TICK};
use crate::connection::{SendError, Stats};
use crate::context::{Context, Network};
use crate::control::{ControlError, Message};

pub struct Endpoint {
    inner: Arc<Inner>,
}

/// The state of one session, for reports.
pub struct PeerStats {
    pub counters: Stats,
    /// The micro-protocols composed, in order.
    pub stack: String,
    /// Congestion window in bytes, on stacks that have one.
    pub cwnd: Option<u64>,
    pub srtt: Option<Duration>,
    pub session: u64,
}

impl Endpoint {
    /// Open peer `me` of a job of `npeers` peers, listening on `host` (ephemeral ports).
    pub fn open(me: u32, npeers: u32, secret: &[u8], host: &str) -> Result<Endpoint> {
        let listener = TcpListener::bind((host, 0))?;
        let udp = udp::bind(host)?;
        let inner = Arc::new(Inner {
            me,
            npeers,
            secret: secret.to_vec(),
            udp,
            gso: AtomicBool::new(true),
            tcp_port: listener.local_addr()?.port(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            closed: AtomicBool::new(false),
            unknown_session: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
        });
        let (a, b) = (inner.clone(), inner.clone());
        let t1 = std::thread::spawn(move || control::accept_loop(a, listener));
        let t2 = std::thread::spawn(move || udp::drive(b));
        inner.threads.lock().unwrap().extend([t1, t2]);
        Ok(Endpoint { inner })
    }

    pub fn port(&self) -> u16 {
        self.inner.tcp_port
    }

    pub fn me(&self) -> u32 {
        self.inner.me
    }

    /// Open a session with `peer` at `addr` (its control port) for `context`.
    pub fn connect(&self, peer: u32, addr: &str, context: Context) -> Result<()> {
        let inner = &self.inner;
        if peer >= inner.npeers || peer == inner.me {
            return Err(Error::UnknownPeer(peer));
        }
        let sa = addr.to_socket_addrs()?.next().ok_or_else(|| io::Error::other(format!("{addr}: no address")))?;
        let (stream, est) = handshake::dial(inner, peer, &sa)?;
        let ip = sa.ip();
        let conn = new_conn(inner, &est, 0, context, true, ip);
        inner.state.lock().unwrap().peers.insert(
            peer,
            Peer {
                control: stream.try_clone()?,
                est,
                client: true,
                generation: 0,
                context,
                conn,
                path: Path::FabricPending,
                ip,
                run: Vec::new(),
            },
        );
        control::spawn_control_reader(inner.clone(), peer, stream);
        self.open_data(peer, 0, context)
    }

    /// Client side of (re)opening the data channel: announce, wait for the reply, attach the path.
    fn open_data(&self, peer: u32, generation: u32, context: Context) -> Result<()> {
        let inner = &self.inner;
        let udp_port = inner.udp.local_addr()?.port();
        {
            let st = inner.state.lock().unwrap();
            let p = st.peers.get(&peer).ok_or(Error::UnknownPeer(peer))?;
            write_msg(&mut &p.control, &Message::Open { generation, context: context.encode(), data_port: udp_port })?;
        }
        let st = inner.state.lock().unwrap();
        let (mut st, _) = inner
            .changed
            .wait_timeout_while(st, HANDSHAKE_TIMEOUT, |s| {
                !s.opened.contains_key(&(peer, generation)) && !inner.closed.load(Ordering::SeqCst)
            })
            .unwrap();
        let their_port =
            st.opened.remove(&(peer, generation)).ok_or(Error::Timeout("the peer to open the data channel"))?;
        let p = st.peers.get_mut(&peer).unwrap();
        match context.network {
            Network::Ethernet => p.path = Path::Udp(SocketAddr::new(p.ip, their_port)),
            Network::ReliableFabric => {
                let stream = TcpStream::connect((p.ip, inner.tcp_port_of_peer(p)))?;
                stream.set_nodelay(true)?;
                let mut w = &stream;
                w.write_all(b"D")?;
                w.write_all(&p.conn.session().to_be_bytes())?;
                let session = p.conn.session();
                drop(st);
                fabric::attach(inner.clone(), peer, session, stream);
            }
        }
        Ok(())
    }

    /// Re-compose the data channel with `peer` for a new context (the connecting side drives).
    pub fn reconfigure(&self, peer: u32, context: Context) -> Result<()> {
        let generation = {
            let mut st = self.inner.state.lock().unwrap();
            let p = st.peers.get_mut(&peer).ok_or(Error::UnknownPeer(peer))?;
            if !p.client {
                return Err(Error::Control(ControlError::Rejected(format!(
                    "peer {peer} opened this session; reconfigure it from there"
                ))));
            }
            p.generation += 1;
            p.context = context;
            p.conn = new_conn(&self.inner, &p.est, p.generation, context, true, p.ip);
            p.path = Path::FabricPending;
            p.generation
        };
        self.open_data(peer, generation, context)
    }

    pub fn wait_peer(&self, peer: u32, timeout: Duration) -> Result<()> {
        let st = self.inner.state.lock().unwrap();
        let (st, _) = self
            .inner
            .changed
            .wait_timeout_while(st, timeout, |s| {
                !s.peers.get(&peer).is_some_and(|p| !matches!(p.path, Path::FabricPending))
            })
            .unwrap();
        if st.peers.get(&peer).is_some_and(|p| !matches!(p.path, Path::FabricPending)) {
            Ok(())
        } else if let Some(r) = st.rejected.last() {
            Err(Error::Control(ControlError::Rejected(r.clone())))
        } else {
            Err(Error::Timeout("the peer to connect"))
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap()
    }

    /// Synchronous stacks: blocks while the 1000 send blocks are in use.
    pub fn send(&self, peer: u32, tag: u32, data: &[u8]) -> Result<u64> {
        let mut st = self.lock();
        loop {
            if self.inner.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            let p = st.peers.get_mut(&peer).ok_or(Error::UnknownPeer(peer))?;
            match p.conn.send(tag, data) {
                Ok(msg) => {
                    flush(&self.inner, p);
                    return Ok(msg);
                }
                Err(SendError::Full) => st = self.inner.changed.wait_timeout(st, TICK).unwrap().0,
            }
        }
    }

    /// Synchronous: the next message in order, waiting up to `timeout` (None: forever).
    /// Asynchronous: the newest unseen message, or None at once.
    pub fn receive(&self, peer: u32, tag: u32, timeout: Option<Duration>) -> Result<Option<(u64, Vec<u8>)>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        loop {
            let p = st.peers.get_mut(&peer).ok_or(Error::UnknownPeer(peer))?;
            if let Some(m) = p.conn.recv(tag) {
                return Ok(Some(m));
            }
            if p.conn.stack().scheme() == crate::Scheme::Asynchronous || self.inner.closed.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let left = deadline.map_or(TICK * 50, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(None);
            }
            st = self.inner.changed.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Wait until a message newer than the last one received exists; false on timeout.
    pub fn wait(&self, peer: u32, tag: u32, timeout: Duration) -> Result<bool> {
        let st = self.lock();
        if !st.peers.contains_key(&peer) {
            return Err(Error::UnknownPeer(peer));
        }
        let (st, _) = self
            .inner
            .changed
            .wait_timeout_while(st, timeout, |s| {
                !s.peers[&peer].conn.has_message(tag) && !self.inner.closed.load(Ordering::SeqCst)
            })
            .unwrap();
        Ok(st.peers[&peer].conn.has_message(tag))
    }

    /// Wait until everything sent to `peer` has left (and, on reliable stacks, is acknowledged).
    pub fn flush(&self, peer: u32, timeout: Duration) -> Result<bool> {
        let st = self.lock();
        if !st.peers.contains_key(&peer) {
            return Err(Error::UnknownPeer(peer));
        }
        let (st, _) =
            self.inner.changed.wait_timeout_while(st, timeout, |s| s.peers[&peer].conn.outstanding() > 0).unwrap();
        Ok(st.peers[&peer].conn.outstanding() == 0)
    }

    /// Application control message (votes, snapshots, stop) over the control channel.
    pub fn control_send(&self, peer: u32, body: &[u8]) -> Result<()> {
        let st = self.lock();
        let p = st.peers.get(&peer).ok_or(Error::UnknownPeer(peer))?;
        write_msg(&mut &p.control, &Message::App { body: body.to_vec() })?;
        Ok(())
    }

    pub fn control_receive(&self, timeout: Option<Duration>) -> Option<(u32, Vec<u8>)> {
        let st = self.lock();
        let (mut st, _) = self
            .inner
            .changed
            .wait_timeout_while(st, timeout.unwrap_or(Duration::ZERO), |s| {
                s.app.is_empty() && !self.inner.closed.load(Ordering::SeqCst)
            })
            .unwrap();
        st.app.pop_front()
    }

    pub fn stats(&self, peer: u32) -> Result<PeerStats> {
        let st = self.lock();
        let p = st.peers.get(&peer).ok_or(Error::UnknownPeer(peer))?;
        Ok(PeerStats {
            counters: p.conn.stats(),
            stack: p.conn.stack().to_string(),
            cwnd: p.conn.congestion_window(),
            srtt: p.conn.rtt().srtt(),
            session: p.conn.session(),
        })
    }

    pub fn unknown_session(&self) -> u64 {
        self.inner.unknown_session.load(Ordering::Relaxed)
    }

    pub fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        {
            let mut st = inner.state.lock().unwrap();
            for p in st.peers.values() {
                let _ = write_msg(&mut &p.control, &Message::Close);
                let _ = p.control.shutdown(Shutdown::Both);
            }
            for p in st.peers.values_mut() {
                p.path = Path::FabricPending; // drops fabric writers' channels
            }
        }
        inner.changed.notify_all();
        // Wake the blocking accept.
        let _ = TcpStream::connect(("127.0.0.1", inner.tcp_port));
        let handles: Vec<_> = inner.threads.lock().unwrap().drain(..).collect();
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.close();
    }
}
