//! The I/O layer: one endpoint per peer process, driving one `Connection` per
//! pair of peers over real sockets.
//!
//! - A TCP listener takes control connections (first byte `C`) and, for the
//!   reliable-fabric path, data streams (first byte `D` + session id).
//! - One UDP socket carries the data channels of Ethernet stacks; a thread
//!   receives, routes by session id and fires the retransmission timers.
//!   Segments fit the path MTU (never IP-fragmented); runs of them leave in one
//!   UDP GSO send and arrive as one GRO read, so a syscall moves ~40 segments.
//! - Fabric data go through the block pool: a writer thread per stream sends
//!   filled blocks and releases them on completion; a reader thread fills
//!   receive blocks and recycles each once the protocol has copied it out.
//!
//! The caller's send/receive/wait run on its own thread under one lock.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::connection::{Config, Connection, SendError, Stats};
use crate::context::{Context, Network};
use crate::control::{ControlError, Established, Handshake, Message, MAX_FRAME, NONCE_LEN};
use crate::fabric::BlockPool;
use crate::segment::{self, BLOCK_SIZE, HEADER_LEN};

/// Longest the UDP thread sleeps, so it notices `close` and due timers.
const TICK: Duration = Duration::from_millis(2);
/// Largest UDP payload, the limit of one GSO send or GRO read.
const MAX_DATAGRAM: usize = 65507;
/// Most segments per GSO send (the kernel's UDP_MAX_SEGMENTS is 64).
const GSO_SEGMENTS: usize = 64;
/// Blocks the fabric path moves per write, and at most per read.
const FABRIC_BATCH: usize = 64;
/// Super-datagrams read per lock acquisition before timers and transmission run.
const RECV_BATCH: usize = 64;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    Control(ControlError),
    UnknownPeer(u32),
    Closed,
    Timeout(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Control(e) => write!(f, "{e}"),
            Error::UnknownPeer(p) => write!(f, "unknown peer {p}"),
            Error::Closed => write!(f, "endpoint is closed"),
            Error::Timeout(what) => write!(f, "timed out waiting for {what}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<ControlError> for Error {
    fn from(e: ControlError) -> Self {
        Error::Control(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

enum Path {
    Udp(SocketAddr),
    /// Data stream not attached yet (the client opens it right after `Opened`).
    FabricPending,
    /// The stream's writer queue and its own region of blocks (one per channel opening).
    Fabric(mpsc::Sender<(usize, usize)>, Arc<BlockPool>),
}

struct Peer {
    control: TcpStream,
    est: Established,
    client: bool,
    generation: u32,
    context: Context,
    conn: Connection,
    path: Path,
    ip: std::net::IpAddr,
    /// Outgoing GSO run, reused by every flush (Ethernet stacks).
    run: Vec<u8>,
}

#[derive(Default)]
struct State {
    peers: HashMap<u32, Peer>,
    app: VecDeque<(u32, Vec<u8>)>,
    /// Replies to our own `Open` (generation -> peer's UDP port).
    opened: HashMap<(u32, u32), u16>,
    rejected: Vec<String>,
}

struct Inner {
    me: u32,
    npeers: u32,
    secret: Vec<u8>,
    udp: UdpSocket,
    /// Cleared when the kernel refuses UDP_SEGMENT; sends then go one datagram each.
    gso: AtomicBool,
    tcp_port: u16,
    state: Mutex<State>,
    changed: Condvar,
    closed: AtomicBool,
    unknown_session: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

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

/// A window of a long link is megabytes; the default 208 KiB socket buffers would
/// drop bursts before the protocol sees them. Root may exceed rmem_max (FORCE).
fn grow_buffers(udp: &UdpSocket) {
    use std::os::fd::AsRawFd;
    const BYTES: libc::c_int = 16 << 20;
    for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
        for opt in [force, plain] {
            // SAFETY: a valid socket and a c_int option of the right size.
            let rc = unsafe {
                libc::setsockopt(udp.as_raw_fd(), libc::SOL_SOCKET, opt, &BYTES as *const _ as *const libc::c_void, 4)
            };
            if rc == 0 {
                break;
            }
        }
    }
}

fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut n)).expect("/dev/urandom");
    n
}

fn write_msg(s: &mut &TcpStream, m: &Message) -> io::Result<()> {
    s.write_all(&m.encode())
}

fn read_msg(s: &mut &TcpStream) -> Result<Message> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(ControlError::Malformed.into());
    }
    let mut b = vec![0u8; len];
    s.read_exact(&mut b)?;
    Ok(Message::decode(&b)?)
}

/// Answer the peer's handshake frames until the session is established. A frame
/// `admit` refuses, or one that fails the handshake, is answered with a Reject.
fn handshake(
    s: &mut &TcpStream,
    hs: &mut Handshake,
    admit: impl Fn(&Message) -> std::result::Result<(), String>,
) -> Result<Established> {
    loop {
        let m = read_msg(s)?;
        if let Err(reason) = admit(&m) {
            let _ = write_msg(s, &Message::Reject { reason: reason.clone() });
            return Err(Error::Control(ControlError::Rejected(reason)));
        }
        match hs.handle(&m) {
            Ok(reply) => {
                if let Some(reply) = reply {
                    write_msg(s, &reply)?;
                }
                if let Some(est) = hs.established() {
                    return Ok(est);
                }
            }
            Err(e) => {
                let _ = write_msg(s, &Message::Reject { reason: e.to_string() });
                return Err(e.into());
            }
        }
    }
}

impl Endpoint {
    /// Open peer `me` of a job of `npeers` peers, listening on `host` (ephemeral ports).
    pub fn open(me: u32, npeers: u32, secret: &[u8], host: &str) -> Result<Endpoint> {
        let listener = TcpListener::bind((host, 0))?;
        let udp = UdpSocket::bind((host, 0))?;
        udp.set_read_timeout(Some(TICK))?;
        grow_buffers(&udp);
        enable_gro(&udp);
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
        let t1 = std::thread::spawn(move || accept_loop(a, listener));
        let t2 = std::thread::spawn(move || udp_loop(b));
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
        let stream = TcpStream::connect_timeout(&sa, HANDSHAKE_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let mut s = &stream;
        s.write_all(b"C")?;
        let (mut hs, hello) = Handshake::client(&inner.secret, inner.me, peer, nonce());
        write_msg(&mut s, &hello)?;
        let est = handshake(&mut s, &mut hs, |_| Ok(()))?;
        stream.set_read_timeout(None)?;
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
        spawn_control_reader(inner.clone(), peer, stream);
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
                attach_fabric(inner.clone(), peer, session, stream);
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

impl Inner {
    /// Every peer's listener serves control and data on one port; the client dialled it.
    fn tcp_port_of_peer(&self, p: &Peer) -> u16 {
        p.control.peer_addr().map(|a| a.port()).unwrap_or(0)
    }
}

fn new_conn(
    inner: &Inner,
    est: &Established,
    generation: u32,
    context: Context,
    client: bool,
    ip: IpAddr,
) -> Connection {
    let mut cfg = Config::new(context.compose(), est.session(&inner.secret, generation));
    // Ports of TransportDriver: the client is 1, the server 2, in every session.
    (cfg.local_port, cfg.remote_port) = if client { (1, 2) } else { (2, 1) };
    cfg.max_segment = match context.network {
        // The fabric stream carries whole blocks.
        Network::ReliableFabric => BLOCK_SIZE,
        // A datagram larger than the path MTU leaves as IP fragments: a lost frame
        // then costs the whole segment, and the link forwards each fragment alone.
        Network::Ethernet => {
            let ip_udp = if ip.is_ipv4() { 20 + 8 } else { 40 + 8 };
            path_mtu(ip).saturating_sub(ip_udp).clamp(HEADER_LEN + 1, BLOCK_SIZE)
        }
    };
    // One ACK per two segments (RFC 5681 4.2) and one at the end of each read batch.
    cfg.ack_every = 2;
    Connection::new(cfg)
}

/// The MTU of the route to `ip` (the kernel's, from a connected UDP socket); 1500 if unknown.
fn path_mtu(ip: IpAddr) -> usize {
    use std::os::fd::AsRawFd;
    let probe = match ip {
        IpAddr::V4(_) => UdpSocket::bind(("0.0.0.0", 0)),
        IpAddr::V6(_) => UdpSocket::bind(("::", 0)),
    };
    let Ok(sock) = probe.and_then(|s| s.connect((ip, 9)).map(|_| s)) else { return 1500 };
    let (level, name) =
        if ip.is_ipv4() { (libc::IPPROTO_IP, libc::IP_MTU) } else { (libc::IPPROTO_IPV6, libc::IPV6_MTU) };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid socket and a c_int out-parameter of the stated size.
    let rc =
        unsafe { libc::getsockopt(sock.as_raw_fd(), level, name, &mut mtu as *mut _ as *mut libc::c_void, &mut len) };
    if rc == 0 && mtu > 0 {
        mtu as usize
    } else {
        1500
    }
}

/// UDP_GRO: the kernel hands over runs of equal-size datagrams of one flow as one
/// buffer with the segment size in a control message. Without it, one datagram per read.
fn enable_gro(udp: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option of the right size.
    unsafe {
        libc::setsockopt(udp.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, &on as *const _ as *const libc::c_void, 4)
    };
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage; the casts fill it as the family says.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Send one run of datagrams, `size` bytes each but the last (which may be
/// shorter), laid out back to back in `run`: one sendmsg with UDP_SEGMENT, which
/// the kernel cuts into datagrams as late as possible (veth and the link emulator
/// pass the run as one GSO frame).
fn send_run(inner: &Inner, addr: &SocketAddr, run: &[u8], size: usize) {
    use std::os::fd::AsRawFd;
    let (sa, sa_len) = sockaddr(addr);
    let send = |bytes: &[u8], segment: Option<u16>| {
        let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
        // Room for one cmsghdr carrying a u16 (CMSG_SPACE(2) on every Linux ABI).
        let mut control = [0u64; 4];
        // SAFETY: msghdr is plain data; every pointer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &sa as *const _ as *mut libc::c_void;
        msg.msg_namelen = sa_len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(size) = segment {
            // SAFETY: CMSG_SPACE(2) bytes fit `control`; CMSG_FIRSTHDR is then non-null.
            unsafe {
                msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                msg.msg_controllen = libc::CMSG_SPACE(2) as _;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, size);
            }
        }
        // SAFETY: a valid socket and a msghdr built above.
        unsafe { libc::sendmsg(inner.udp.as_raw_fd(), &msg, 0) }
    };
    if run.len() > size {
        if send(run, Some(size as u16)) >= 0 {
            return;
        }
        let e = io::Error::last_os_error().raw_os_error();
        if !matches!(e, Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)) {
            return; // loss to the protocol above, as on a wire
        }
        // No segmentation offload on this path: resend this run one by one.
        inner.gso.store(false, Ordering::Relaxed);
    }
    // A failed send is loss to the protocol above, as on a wire.
    for d in run.chunks(size) {
        send(d, None);
    }
}

/// One read: the bytes and the size of the datagrams they hold (GRO), or None on
/// timeout / nothing pending (`wait` false: do not block).
fn recv_datagrams(udp: &UdpSocket, buf: &mut [u8], wait: bool) -> Option<(usize, usize)> {
    use std::os::fd::AsRawFd;
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; its pointers outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
    // SAFETY: a valid socket and the msghdr above.
    let n = unsafe { libc::recvmsg(udp.as_raw_fd(), &mut msg, flags) };
    if n <= 0 {
        return None;
    }
    let n = n as usize;
    let mut size = n;
    // SAFETY: walking the control buffer the kernel filled, as CMSG_* define.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                size = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int) as usize;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Some((n, size.max(1)))
}

/// Move whatever the connection may send now onto its path.
fn flush(inner: &Inner, p: &mut Peer) {
    let now = Instant::now();
    match &p.path {
        Path::Udp(addr) => {
            // The run is built in the peer's reusable buffer: datagrams of one size
            // (only the last may be shorter), at most GSO_SEGMENTS and MAX_DATAGRAM.
            let run = &mut p.run;
            run.clear();
            let (mut size, mut count, mut open) = (0, 0, false);
            loop {
                let start = run.len();
                let Some(len) = p.conn.transmit_into(now, run) else { break };
                let joins = open && len <= size && run.len() <= MAX_DATAGRAM && count < GSO_SEGMENTS;
                if count > 0 && !joins {
                    send_run(inner, addr, &run[..start], size);
                    run.drain(..start);
                    count = 0;
                }
                if count == 0 {
                    size = len;
                    open = inner.gso.load(Ordering::Relaxed);
                } else if len < size {
                    open = false;
                }
                count += 1;
            }
            if count > 0 {
                send_run(inner, addr, run, size);
            }
        }
        Path::Fabric(tx, pool) => {
            while pool.free_send_blocks() > 0 {
                let Some(d) = p.conn.poll_transmit(now) else { break };
                let i = pool.fill_send_block(&d).unwrap();
                if tx.send((i, d.len())).is_err() {
                    pool.release_send_block(i);
                }
            }
        }
        Path::FabricPending => {}
    }
}

fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    for stream in listener.incoming() {
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let inner2 = inner.clone();
        // Handshakes run on their own thread so a silent client cannot block the others.
        let h = std::thread::spawn(move || {
            if let Err(e) = serve(inner2.clone(), stream) {
                let mut st = inner2.state.lock().unwrap();
                st.rejected.push(e.to_string());
                drop(st);
                inner2.changed.notify_all();
            }
        });
        inner.threads.lock().unwrap().push(h);
    }
}

fn serve(inner: Arc<Inner>, stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut s = &stream;
    let mut kind = [0u8; 1];
    if s.read_exact(&mut kind).is_err() {
        return Ok(()); // the wake-up connection of `close`, or a port scan
    }
    if kind[0] == b'D' {
        let mut sid = [0u8; 8];
        s.read_exact(&mut sid)?;
        let session = u64::from_be_bytes(sid);
        let peer =
            inner.state.lock().unwrap().peers.iter().find(|(_, p)| p.conn.session() == session).map(|(&id, _)| id);
        match peer {
            Some(id) => {
                stream.set_read_timeout(None)?;
                attach_fabric(inner, id, session, stream);
            }
            None => {
                inner.unknown_session.fetch_add(1, Ordering::Relaxed);
            }
        }
        return Ok(());
    }
    let mut hs = Handshake::server(&inner.secret, inner.me, nonce());
    let est = handshake(&mut s, &mut hs, |m| match m {
        Message::Hello { peer, .. } if *peer >= inner.npeers || *peer == inner.me => {
            Err(format!("unknown peer {peer} (job has peers 0..{})", inner.npeers - 1))
        }
        _ => Ok(()),
    })?;
    stream.set_read_timeout(None)?;
    let ip = stream.peer_addr()?.ip();
    // The data channel exists once the client's Open names the context.
    let placeholder = Context {
        scheme: crate::Scheme::Asynchronous,
        location: crate::Location::IntraSite,
        network: Network::Ethernet,
    };
    let conn = new_conn(&inner, &est, u32::MAX, placeholder, false, ip);
    inner.state.lock().unwrap().peers.insert(
        est.peer,
        Peer {
            control: stream.try_clone()?,
            est,
            client: false,
            generation: 0,
            context: placeholder,
            conn,
            path: Path::FabricPending,
            ip,
            run: Vec::new(),
        },
    );
    control_reader(inner, est.peer, stream);
    Ok(())
}

fn spawn_control_reader(inner: Arc<Inner>, peer: u32, stream: TcpStream) {
    let i2 = inner.clone();
    let h = std::thread::spawn(move || control_reader(i2, peer, stream));
    inner.threads.lock().unwrap().push(h);
}

fn control_reader(inner: Arc<Inner>, peer: u32, stream: TcpStream) {
    let mut s = &stream;
    while let Ok(m) = read_msg(&mut s) {
        let mut st = inner.state.lock().unwrap();
        match m {
            Message::Open { generation, context, data_port } => {
                let Some(ctx) = Context::decode(context) else { break };
                let udp_port = inner.udp.local_addr().map(|a| a.port()).unwrap_or(0);
                if let Some(p) = st.peers.get_mut(&peer) {
                    p.generation = generation;
                    p.context = ctx;
                    p.conn = new_conn(&inner, &p.est, generation, ctx, false, p.ip);
                    p.path = match ctx.network {
                        Network::Ethernet => Path::Udp(SocketAddr::new(p.ip, data_port)),
                        Network::ReliableFabric => Path::FabricPending,
                    };
                    let _ = write_msg(&mut &p.control, &Message::Opened { generation, data_port: udp_port });
                }
            }
            Message::Opened { generation, data_port } => {
                st.opened.insert((peer, generation), data_port);
            }
            Message::App { body } => st.app.push_back((peer, body)),
            Message::Close => break,
            _ => break,
        }
        drop(st);
        inner.changed.notify_all();
    }
    inner.changed.notify_all();
}

fn attach_fabric(inner: Arc<Inner>, peer: u32, session: u64, stream: TcpStream) {
    let (tx, rx) = mpsc::channel::<(usize, usize)>();
    let pool = Arc::new(BlockPool::new());
    let (pw, pr) = (pool.clone(), pool.clone());
    let writer = stream.try_clone().expect("clone fabric stream");
    {
        let mut st = inner.state.lock().unwrap();
        if let Some(p) = st.peers.get_mut(&peer) {
            if p.conn.session() == session {
                p.path = Path::Fabric(tx, pool);
                flush(&inner, p);
            }
        }
    }
    inner.changed.notify_all();
    let (iw, ir) = (inner.clone(), inner.clone());
    let hw = std::thread::spawn(move || {
        let mut w = &writer;
        let mut out = Vec::with_capacity(FABRIC_BATCH * BLOCK_SIZE);
        while let Ok(first) = rx.recv() {
            // Every block already queued leaves in one write: a syscall and a
            // state-lock round per batch, not per 8 KB block.
            let mut batch = vec![first];
            batch.extend(rx.try_iter().take(FABRIC_BATCH - 1));
            out.clear();
            for &(i, len) in &batch {
                // The region's lock covers copies only, never a blocking write.
                pw.with_send_block(i, len, |b| out.extend_from_slice(b));
            }
            let ok = w.write_all(&out).is_ok();
            // Completion: the blocks return to the free list; more may now leave.
            for &(i, _) in &batch {
                pw.release_send_block(i);
            }
            if !ok {
                break;
            }
            let mut st = iw.state.lock().unwrap();
            if let Some(p) = st.peers.get_mut(&peer) {
                flush(&iw, p);
            }
        }
        let _ = writer.shutdown(Shutdown::Both);
    });
    let hr = std::thread::spawn(move || {
        let mut r = &stream;
        let mut next = 0usize;
        // Reads take whatever the stream holds (up to FABRIC_BATCH blocks); the
        // complete segments in it are handed over under one lock acquisition.
        let mut wire = vec![0u8; FABRIC_BATCH * BLOCK_SIZE];
        let mut have = 0;
        let mut filled = Vec::with_capacity(FABRIC_BATCH);
        loop {
            match r.read(&mut wire[have..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => have += n,
            }
            let mut at = 0;
            while let Some(len) = segment::payload_len(&wire[at..have]).map(|l| HEADER_LEN + l) {
                if len > BLOCK_SIZE {
                    return; // not our framing: drop the stream
                }
                if at + len > have {
                    break;
                }
                // The region's lock covers copies only, never a blocking read.
                pr.with_recv_block(next, |b| b[..len].copy_from_slice(&wire[at..at + len]));
                filled.push((next, len));
                next = (next + 1) % crate::fabric::BLOCKS;
                at += len;
            }
            wire.copy_within(at..have, 0);
            have -= at;
            if filled.is_empty() {
                continue;
            }
            let mut st = ir.state.lock().unwrap();
            if let Some(p) = st.peers.get_mut(&peer) {
                let now = Instant::now();
                for &(i, len) in &filled {
                    pr.with_recv_block(i, |b| p.conn.handle_segment(now, &b[..len]));
                }
                flush(&ir, p);
            }
            drop(st);
            filled.clear(); // the blocks are reposted
            ir.changed.notify_all();
        }
    });
    inner.threads.lock().unwrap().extend([hw, hr]);
}

fn udp_loop(inner: Arc<Inner>) {
    let mut buf = vec![0u8; 65536];
    while !inner.closed.load(Ordering::SeqCst) {
        // Block (up to TICK) without the lock, then take whatever else is queued.
        let mut got = recv_datagrams(&inner.udp, &mut buf, true);
        let mut st = inner.state.lock().unwrap();
        let mut reads = 0;
        while let Some((n, size)) = got {
            let now = Instant::now();
            for d in buf[..n].chunks(size) {
                let session = (d.len() >= 12).then(|| u64::from_be_bytes(d[4..12].try_into().unwrap()));
                match session.and_then(|s| st.peers.values_mut().find(|p| p.conn.session() == s)) {
                    Some(p) => p.conn.handle_segment(now, d),
                    None => {
                        inner.unknown_session.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            reads += 1;
            got = if reads < RECV_BATCH { recv_datagrams(&inner.udp, &mut buf, false) } else { None };
        }
        // One ACK and one transmission round per batch, not per segment.
        let now = Instant::now();
        for p in st.peers.values_mut() {
            p.conn.flush_ack();
            if p.conn.poll_timeout().is_some_and(|t| t <= now) {
                p.conn.handle_timeout(now);
            }
            flush(&inner, p);
        }
        drop(st);
        inner.changed.notify_all();
    }
}
