//! Data-channel segments on the wire.
//!
//! One fixed header carries the fields of every micro-protocol (TransportDriver's
//! ports, SequencedSegment's number, PositiveAck's and DCCPAck's acknowledgement,
//! Resize's fragment index, the API's per-tag message number); a micro-protocol
//! absent from the stack leaves its fields at zero. A fixed header keeps parsing
//! branch-free and lets the fabric path size its blocks once.

pub const MAGIC: u16 = 0x5032; // "P2"
pub const HEADER_LEN: usize = 54;
/// The seed's block size: every segment, header included, fits one block.
pub const BLOCK_SIZE: usize = 8128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data = 1,
    Ack = 2,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    pub session: u64,
    pub src_port: u16,
    pub dst_port: u16,
    /// SequencedSegment / DCCP sequence number of this segment (0 = unsequenced).
    pub seq: u64,
    /// PositiveAck: next sequence expected. DCCPAck: highest sequence received.
    pub ack: u64,
    /// DCCPAck: bit i set = sequence `ack - 1 - i` was received too.
    pub ack_vector: u32,
    pub tag: u32,
    /// Message number, increasing per (source, tag), from 1.
    pub msg: u64,
    pub frag: u16,
    pub nfrags: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub kind: Kind,
    pub header: Header,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Short,
    BadMagic,
    BadKind,
    BadLength,
}

impl Segment {
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.encoded_len());
        encode_into(self.kind, &self.header, &self.payload, &mut b);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Segment, DecodeError> {
        let (kind, header, payload) = parse(b)?;
        Ok(Segment { kind, header, payload: payload.to_vec() })
    }
}

/// Append a segment's wire form to `out`: the sender builds its segments and GSO
/// runs in place, with one copy of the payload and no intermediate buffer.
pub fn encode_into(kind: Kind, h: &Header, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.push(kind as u8);
    out.push(0);
    out.extend_from_slice(&h.session.to_be_bytes());
    out.extend_from_slice(&h.src_port.to_be_bytes());
    out.extend_from_slice(&h.dst_port.to_be_bytes());
    out.extend_from_slice(&h.seq.to_be_bytes());
    out.extend_from_slice(&h.ack.to_be_bytes());
    out.extend_from_slice(&h.ack_vector.to_be_bytes());
    out.extend_from_slice(&h.tag.to_be_bytes());
    out.extend_from_slice(&h.msg.to_be_bytes());
    out.extend_from_slice(&h.frag.to_be_bytes());
    out.extend_from_slice(&h.nfrags.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    debug_assert_eq!(out.len() - start, HEADER_LEN);
    out.extend_from_slice(payload);
}

/// Number an encoded segment: sequence numbers are given at (re)transmission
/// time, after the segment was built.
pub fn set_seq(encoded: &mut [u8], seq: u64) {
    encoded[16..24].copy_from_slice(&seq.to_be_bytes());
}

/// The segment in `b`, its payload borrowed: the receiver copies a payload once,
/// into the message it belongs to.
pub fn parse(b: &[u8]) -> Result<(Kind, Header, &[u8]), DecodeError> {
    if b.len() < HEADER_LEN {
        return Err(DecodeError::Short);
    }
    let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap());
    if u16_at(0) != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let kind = match b[2] {
        1 => Kind::Data,
        2 => Kind::Ack,
        _ => return Err(DecodeError::BadKind),
    };
    let header = Header {
        session: u64_at(4),
        src_port: u16_at(12),
        dst_port: u16_at(14),
        seq: u64_at(16),
        ack: u64_at(24),
        ack_vector: u32_at(32),
        tag: u32_at(36),
        msg: u64_at(40),
        frag: u16_at(48),
        nfrags: u16_at(50),
    };
    if payload_len(b) != Some(b.len() - HEADER_LEN) || (kind == Kind::Data && header.nfrags == 0) {
        return Err(DecodeError::BadLength);
    }
    Ok((kind, header, &b[HEADER_LEN..]))
}

/// The payload length a header announces; the fabric path frames its byte stream with it.
pub fn payload_len(header: &[u8]) -> Option<usize> {
    (header.len() >= HEADER_LEN).then(|| u16::from_be_bytes([header[HEADER_LEN - 2], header[HEADER_LEN - 1]]) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let s = Segment {
            kind: Kind::Data,
            header: Header {
                session: 7,
                src_port: 1,
                dst_port: 2,
                seq: 9,
                ack: 3,
                ack_vector: 5,
                tag: 4,
                msg: 11,
                frag: 1,
                nfrags: 2,
            },
            payload: vec![1, 2, 3],
        };
        let b = s.encode();
        assert_eq!(Segment::decode(&b).unwrap(), s);
        assert_eq!(Segment::decode(&b[..10]), Err(DecodeError::Short));
        assert_eq!(Segment::decode(&b[..b.len() - 1]), Err(DecodeError::BadLength));
        let mut bad = b.clone();
        bad[0] = 0;
        assert_eq!(Segment::decode(&bad), Err(DecodeError::BadMagic));
    }
}
