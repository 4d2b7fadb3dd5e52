//! The I/O layer: one endpoint per peer process, driving one `Connection` per
//! pair of peers over real sockets. The caller's send/receive/wait run on its
//! own thread under one lock.
//!
//! - `endpoint`: the API, [`Endpoint`].
//! - `control`: a TCP listener takes control connections (first byte `C`) and,
//!   for the reliable-fabric path, data streams (first byte `D` + session id);
//!   a reader per control connection.
//! - `handshake`: the authenticated opening of a control connection, both sides.
//! - `udp`: one UDP socket carries the data channels of Ethernet stacks; a
//!   thread receives, routes by session id and fires the retransmission timers.
//!   Segments fit the path MTU (never IP-fragmented); runs of them leave in one
//!   UDP GSO send and arrive as one GRO read, so a syscall moves ~40 segments.
//! - `fabric`: fabric data go through the block pool: a writer thread per
//!   stream sends filled blocks and releases them on completion; a reader
//!   thread fills receive blocks and recycles each once the protocol has
//!   copied it out.

mod control;
mod endpoint;
mod fabric;
mod handshake;
mod udp;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use geofed_os::udp::path_mtu;

use crate::connection::{Config, Connection};
use crate::context::{Context, Network};
use crate::control::{ControlError, Established};
use crate::fabric::BlockPool;
use crate::segment::{BLOCK_SIZE, HEADER_LEN};

pub use endpoint::{Endpoint, PeerStats};

/// Longest the UDP thread sleeps, so it notices `close` and due timers.
const TICK: Duration = Duration::from_millis(2);
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
            // 1500 where the kernel cannot say.
            path_mtu(ip).unwrap_or(1500).saturating_sub(ip_udp).clamp(HEADER_LEN + 1, BLOCK_SIZE)
        }
    };
    // One ACK per two segments (RFC 5681 4.2) and one at the end of each read batch.
    cfg.ack_every = 2;
    Connection::new(cfg)
}

/// Move whatever the connection may send now onto its path.
fn flush(inner: &Inner, p: &mut Peer) {
    let now = Instant::now();
    match &p.path {
        Path::Udp(addr) => udp::transmit(inner, addr, &mut p.conn, &mut p.run, now),
        Path::Fabric(tx, pool) => fabric::transmit(tx, pool, &mut p.conn, now),
        Path::FabricPending => {}
    }
}
