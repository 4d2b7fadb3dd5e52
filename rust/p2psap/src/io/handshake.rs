//! The authenticated opening of a control connection (both sides), over the
//! control channel's length-prefixed frames.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::{Error, Inner, Result, HANDSHAKE_TIMEOUT};
use crate::control::{ControlError, Established, Handshake, Message, MAX_FRAME, NONCE_LEN};

fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut n)).expect("/dev/urandom");
    n
}

pub(super) fn write_msg(s: &mut &TcpStream, m: &Message) -> io::Result<()> {
    s.write_all(&m.encode())
}

pub(super) fn read_msg(s: &mut &TcpStream) -> Result<Message> {
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

/// Dial `peer`'s control port at `sa` and open an authenticated session as the client.
pub(super) fn dial(inner: &Inner, peer: u32, sa: &SocketAddr) -> Result<(TcpStream, Established)> {
    let stream = TcpStream::connect_timeout(sa, HANDSHAKE_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut s = &stream;
    s.write_all(b"C")?;
    let (mut hs, hello) = Handshake::client(&inner.secret, inner.me, peer, nonce());
    write_msg(&mut s, &hello)?;
    let est = handshake(&mut s, &mut hs, |_| Ok(()))?;
    stream.set_read_timeout(None)?;
    Ok((stream, est))
}

/// Answer a control connection's opening as the server: a peer of this job other than us,
/// holding the job's secret.
pub(super) fn answer(inner: &Inner, stream: &TcpStream) -> Result<Established> {
    let mut s = stream;
    let mut hs = Handshake::server(&inner.secret, inner.me, nonce());
    let est = handshake(&mut s, &mut hs, |m| match m {
        Message::Hello { peer, .. } if *peer >= inner.npeers || *peer == inner.me => {
            Err(format!("unknown peer {peer} (job has peers 0..{})", inner.npeers - 1))
        }
        _ => Ok(()),
    })?;
    stream.set_read_timeout(None)?;
    Ok(est)
}
