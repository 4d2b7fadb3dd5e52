//! The control channel: framed messages over a reliable stream, and the
//! session-opening handshake as a state machine without I/O.
//!
//! Opening: the connecting peer (client) and the accepting one (server) each
//! contribute a random nonce and prove knowledge of the job's secret with an
//! HMAC-SHA256 over both nonces and both peer ids, the server first (so a
//! client never reveals a MAC to an impostor that could replay it), the client
//! second. The session identifier of the data channel is derived from the same
//! secret and nonces, so a segment of another job or an older session does not
//! match it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

pub const NONCE_LEN: usize = 16;
pub const MAC_LEN: usize = 32;
/// Largest control frame accepted: bounds memory a bad peer can make us allocate.
pub const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello {
        peer: u32,
        nonce: [u8; NONCE_LEN],
    },
    Challenge {
        peer: u32,
        nonce: [u8; NONCE_LEN],
        mac: [u8; MAC_LEN],
    },
    Auth {
        mac: [u8; MAC_LEN],
    },
    Welcome,
    Reject {
        reason: String,
    },
    /// Open (generation 0) or re-compose (generation > 0) the data channel for a context.
    Open {
        generation: u32,
        context: u8,
        data_port: u16,
    },
    Opened {
        generation: u32,
        data_port: u16,
    },
    /// Application control (termination votes, snapshots, stop): opaque bytes.
    App {
        body: Vec<u8>,
    },
    Close,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    Malformed,
    /// The other side does not know the job's secret.
    BadSecret,
    /// The server answered as another peer than the one we dialled.
    UnexpectedPeer {
        expected: u32,
        got: u32,
    },
    Rejected(String),
    OutOfOrder,
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Malformed => write!(f, "malformed control message"),
            ControlError::BadSecret => write!(f, "peer failed authentication (wrong job secret)"),
            ControlError::UnexpectedPeer { expected, got } => {
                write!(f, "expected peer {expected}, peer {got} answered")
            }
            ControlError::Rejected(r) => write!(f, "rejected by peer: {r}"),
            ControlError::OutOfOrder => write!(f, "control message out of order"),
        }
    }
}

impl std::error::Error for ControlError {}

impl Message {
    /// Length-prefixed frame: u32 length, type byte, body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Message::Hello { peer, nonce } => {
                b.push(1);
                b.extend_from_slice(&peer.to_be_bytes());
                b.extend_from_slice(nonce);
            }
            Message::Challenge { peer, nonce, mac } => {
                b.push(2);
                b.extend_from_slice(&peer.to_be_bytes());
                b.extend_from_slice(nonce);
                b.extend_from_slice(mac);
            }
            Message::Auth { mac } => {
                b.push(3);
                b.extend_from_slice(mac);
            }
            Message::Welcome => b.push(4),
            Message::Reject { reason } => {
                b.push(5);
                b.extend_from_slice(reason.as_bytes());
            }
            Message::Open { generation, context, data_port } => {
                b.push(6);
                b.extend_from_slice(&generation.to_be_bytes());
                b.push(*context);
                b.extend_from_slice(&data_port.to_be_bytes());
            }
            Message::Opened { generation, data_port } => {
                b.push(7);
                b.extend_from_slice(&generation.to_be_bytes());
                b.extend_from_slice(&data_port.to_be_bytes());
            }
            Message::App { body } => {
                b.push(8);
                b.extend_from_slice(body);
            }
            Message::Close => b.push(9),
        }
        let mut out = (b.len() as u32).to_be_bytes().to_vec();
        out.extend(b);
        out
    }

    /// Decode one frame's content (without its length prefix).
    pub fn decode(b: &[u8]) -> Result<Message, ControlError> {
        let (&t, body) = b.split_first().ok_or(ControlError::Malformed)?;
        let u32_at = |i: usize| body.get(i..i + 4).map(|s| u32::from_be_bytes(s.try_into().unwrap()));
        let u16_at = |i: usize| body.get(i..i + 2).map(|s| u16::from_be_bytes(s.try_into().unwrap()));
        let arr = |i: usize, n: usize| body.get(i..i + n);
        let exact = |n: usize| if body.len() == n { Ok(()) } else { Err(ControlError::Malformed) };
        let m = match t {
            1 => {
                exact(4 + NONCE_LEN)?;
                Message::Hello { peer: u32_at(0).unwrap(), nonce: arr(4, NONCE_LEN).unwrap().try_into().unwrap() }
            }
            2 => {
                exact(4 + NONCE_LEN + MAC_LEN)?;
                Message::Challenge {
                    peer: u32_at(0).unwrap(),
                    nonce: arr(4, NONCE_LEN).unwrap().try_into().unwrap(),
                    mac: arr(4 + NONCE_LEN, MAC_LEN).unwrap().try_into().unwrap(),
                }
            }
            3 => {
                exact(MAC_LEN)?;
                Message::Auth { mac: body.try_into().unwrap() }
            }
            4 => Message::Welcome,
            5 => Message::Reject { reason: String::from_utf8_lossy(body).into_owned() },
            6 => {
                exact(7)?;
                Message::Open { generation: u32_at(0).unwrap(), context: body[4], data_port: u16_at(5).unwrap() }
            }
            7 => {
                exact(6)?;
                Message::Opened { generation: u32_at(0).unwrap(), data_port: u16_at(4).unwrap() }
            }
            8 => Message::App { body: body.to_vec() },
            9 => Message::Close,
            _ => return Err(ControlError::Malformed),
        };
        Ok(m)
    }
}

fn mac(secret: &[u8], label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(label);
    for p in parts {
        m.update(&(p.len() as u32).to_be_bytes());
        m.update(p);
    }
    m
}

/// The data channel's session identifier for one generation of a pair's session.
pub fn session_id(secret: &[u8], client_nonce: &[u8], server_nonce: &[u8], generation: u32) -> u64 {
    let tag = mac(secret, b"p2psap session", &[client_nonce, server_nonce, &generation.to_be_bytes()])
        .finalize()
        .into_bytes();
    // Zero marks "no session" nowhere, but keep it out anyway.
    u64::from_be_bytes(tag[..8].try_into().unwrap()) | 1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    ClientSentHello,
    ClientSentAuth,
    ServerWaitHello,
    ServerSentChallenge,
    Done,
}

/// The opening handshake of one control connection.
#[derive(Debug, Clone)]
pub struct Handshake {
    secret: Vec<u8>,
    me: u32,
    nonce: [u8; NONCE_LEN],
    expected_peer: Option<u32>,
    peer: Option<(u32, [u8; NONCE_LEN])>,
    state: State,
}

/// What both ends know once the handshake succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Established {
    pub peer: u32,
    pub client_nonce: [u8; NONCE_LEN],
    pub server_nonce: [u8; NONCE_LEN],
}

impl Handshake {
    /// The connecting side; returns the first message to send.
    pub fn client(secret: &[u8], me: u32, expected_peer: u32, nonce: [u8; NONCE_LEN]) -> (Self, Message) {
        let h = Handshake {
            secret: secret.to_vec(),
            me,
            nonce,
            expected_peer: Some(expected_peer),
            peer: None,
            state: State::ClientSentHello,
        };
        (h, Message::Hello { peer: me, nonce })
    }

    pub fn server(secret: &[u8], me: u32, nonce: [u8; NONCE_LEN]) -> Self {
        Handshake { secret: secret.to_vec(), me, nonce, expected_peer: None, peer: None, state: State::ServerWaitHello }
    }

    fn transcript(&self, label: &[u8], client: (u32, &[u8]), server: (u32, &[u8])) -> HmacSha256 {
        mac(&self.secret, label, &[&client.0.to_be_bytes(), client.1, &server.0.to_be_bytes(), server.1])
    }

    /// Feed one message from the other side; returns the reply to send, if any.
    pub fn handle(&mut self, msg: &Message) -> Result<Option<Message>, ControlError> {
        match (self.state, msg) {
            (State::ServerWaitHello, Message::Hello { peer, nonce }) => {
                self.peer = Some((*peer, *nonce));
                let m =
                    self.transcript(b"p2psap server", (*peer, nonce), (self.me, &self.nonce)).finalize().into_bytes();
                self.state = State::ServerSentChallenge;
                Ok(Some(Message::Challenge { peer: self.me, nonce: self.nonce, mac: m.into() }))
            }
            (State::ClientSentHello, Message::Challenge { peer, nonce, mac }) => {
                let expected = self.expected_peer.unwrap();
                if *peer != expected {
                    return Err(ControlError::UnexpectedPeer { expected, got: *peer });
                }
                self.transcript(b"p2psap server", (self.me, &self.nonce), (*peer, nonce))
                    .verify_slice(mac)
                    .map_err(|_| ControlError::BadSecret)?;
                self.peer = Some((*peer, *nonce));
                let m =
                    self.transcript(b"p2psap client", (self.me, &self.nonce), (*peer, nonce)).finalize().into_bytes();
                self.state = State::ClientSentAuth;
                Ok(Some(Message::Auth { mac: m.into() }))
            }
            (State::ServerSentChallenge, Message::Auth { mac }) => {
                let (peer, nonce) = self.peer.unwrap();
                self.transcript(b"p2psap client", (peer, &nonce), (self.me, &self.nonce))
                    .verify_slice(mac)
                    .map_err(|_| ControlError::BadSecret)?;
                self.state = State::Done;
                Ok(Some(Message::Welcome))
            }
            (State::ClientSentAuth, Message::Welcome) => {
                self.state = State::Done;
                Ok(None)
            }
            (_, Message::Reject { reason }) => Err(ControlError::Rejected(reason.clone())),
            _ => Err(ControlError::OutOfOrder),
        }
    }

    pub fn established(&self) -> Option<Established> {
        if self.state != State::Done {
            return None;
        }
        let (peer, peer_nonce) = self.peer.unwrap();
        let (client_nonce, server_nonce) =
            if self.expected_peer.is_some() { (self.nonce, peer_nonce) } else { (peer_nonce, self.nonce) };
        Some(Established { peer, client_nonce, server_nonce })
    }
}

impl Established {
    pub fn session(&self, secret: &[u8], generation: u32) -> u64 {
        session_id(secret, &self.client_nonce, &self.server_nonce, generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(client_secret: &[u8], server_secret: &[u8]) -> Result<(Established, Established), ControlError> {
        let (mut c, hello) = Handshake::client(client_secret, 1, 2, [7; NONCE_LEN]);
        let mut s = Handshake::server(server_secret, 2, [9; NONCE_LEN]);
        let wire = |m: &Message| Message::decode(&m.encode()[4..]).unwrap();
        let challenge = s.handle(&wire(&hello))?.unwrap();
        let auth = c.handle(&wire(&challenge))?.unwrap();
        let welcome = s.handle(&wire(&auth))?.unwrap();
        assert_eq!(c.handle(&wire(&welcome))?, None);
        Ok((c.established().unwrap(), s.established().unwrap()))
    }

    #[test]
    fn same_secret_agrees_on_session() {
        let (c, s) = run(b"job secret", b"job secret").unwrap();
        assert_eq!((c.peer, s.peer), (2, 1));
        assert_eq!(c.session(b"job secret", 0), s.session(b"job secret", 0));
        assert_ne!(c.session(b"job secret", 0), c.session(b"job secret", 1));
    }

    #[test]
    fn wrong_secret_is_rejected_on_both_sides() {
        // The client detects an impostor server before revealing its own MAC.
        assert_eq!(run(b"right", b"wrong").unwrap_err(), ControlError::BadSecret);
        // A client that fakes the Auth without the secret is refused by the server.
        let mut s = Handshake::server(b"right", 2, [9; NONCE_LEN]);
        s.handle(&Message::Hello { peer: 1, nonce: [1; NONCE_LEN] }).unwrap();
        assert_eq!(s.handle(&Message::Auth { mac: [0; MAC_LEN] }), Err(ControlError::BadSecret));
        assert!(s.established().is_none());
    }

    #[test]
    fn unexpected_peer_and_out_of_order_are_errors() {
        let (mut c, _) = Handshake::client(b"k", 1, 3, [7; NONCE_LEN]);
        let mut s = Handshake::server(b"k", 2, [9; NONCE_LEN]);
        let ch = s.handle(&Message::Hello { peer: 1, nonce: [7; NONCE_LEN] }).unwrap().unwrap();
        assert_eq!(c.handle(&ch), Err(ControlError::UnexpectedPeer { expected: 3, got: 2 }));
        let mut s2 = Handshake::server(b"k", 2, [9; NONCE_LEN]);
        assert_eq!(s2.handle(&Message::Welcome), Err(ControlError::OutOfOrder));
    }

    #[test]
    fn frames_round_trip() {
        for m in [
            Message::Open { generation: 3, context: 5, data_port: 4000 },
            Message::Opened { generation: 3, data_port: 4001 },
            Message::App { body: vec![1, 2, 3] },
            Message::Reject { reason: "no".into() },
            Message::Close,
        ] {
            let e = m.encode();
            assert_eq!(u32::from_be_bytes(e[..4].try_into().unwrap()) as usize, e.len() - 4);
            assert_eq!(Message::decode(&e[4..]).unwrap(), m);
        }
        assert_eq!(Message::decode(&[1, 2]), Err(ControlError::Malformed));
    }
}
