//! The TCP side of an endpoint: the accept loop (control connections and
//! fabric data streams) and each control connection's reader.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::handshake::{answer, read_msg, write_msg};
use super::{fabric, new_conn, Inner, Path, Peer, Result, HANDSHAKE_TIMEOUT};
use crate::context::{Context, Network};
use crate::control::Message;

pub(super) fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
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
                fabric::attach(inner, id, session, stream);
            }
            None => {
                inner.unknown_session.fetch_add(1, Ordering::Relaxed);
            }
        }
        return Ok(());
    }
    let est = answer(&inner, &stream)?;
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

pub(super) fn spawn_control_reader(inner: Arc<Inner>, peer: u32, stream: TcpStream) {
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
