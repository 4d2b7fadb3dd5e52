//! A GSO super-frame and the wire frames it stands for.
//!
//! veth hands the emulator TCP and UDP super-frames of up to 64 KiB (a
//! `virtio_net_hdr` says how to cut them: `gso_size` bytes of payload per
//! frame). On a real fibre each of those frames is serialised and lost on
//! its own, so the link model sees the frame sizes, and when some of them
//! are lost the survivors go out cut as the sender's NIC would have cut
//! them: headers copied, lengths, TCP sequence numbers, IPv4 ids and
//! checksums fixed per frame. Pure byte work, no I/O.

/// sizeof(struct virtio_net_hdr); in front of every frame once PACKET_VNET_HDR is set.
pub const VNET_HDR_LEN: usize = 10;

const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;
const ETH_LEN: usize = 14;
const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// Where the headers of a super-frame end and how its payload is cut.
/// Offsets count from the Ethernet header (after the vnet header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    ipv6: bool,
    tcp: bool,
    l4: usize,
    payload: usize,
    gso_size: usize,
    len: usize,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of `data` as big-endian 16-bit words, added to `sum`.
fn sum16(mut sum: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = words.remainder() {
        sum += (*last as u64) << 8;
    }
    sum
}

/// The Internet checksum (RFC 1071) of a running sum.
fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Layout {
    /// The layout of `frame` (vnet header first) if it is a TCP or UDP GSO
    /// super-frame this module can cut; None for a plain frame or anything
    /// else (VLAN tags, IPv6 extension headers, UFO), which then travels whole.
    pub fn parse(frame: &[u8]) -> Option<Layout> {
        let vnet = frame.get(..VNET_HDR_LEN)?;
        let gso_type = vnet[1] & !GSO_ECN;
        let gso_size = u16::from_le_bytes([vnet[4], vnet[5]]) as usize;
        let eth = &frame[VNET_HDR_LEN..];
        if gso_size == 0 || eth.len() < ETH_LEN + 40 {
            return None;
        }
        let (ipv6, proto, l4) = match be16(eth, 12) {
            ETH_P_IPV4 => (false, eth[ETH_LEN + 9], ETH_LEN + (eth[ETH_LEN] as usize & 0xf) * 4),
            ETH_P_IPV6 => (true, eth[ETH_LEN + 6], ETH_LEN + 40),
            _ => return None,
        };
        let tcp = match (gso_type, proto) {
            (GSO_TCPV4, IPPROTO_TCP) if !ipv6 => true,
            (GSO_TCPV6, IPPROTO_TCP) if ipv6 => true,
            (GSO_UDP_L4, IPPROTO_UDP) => false,
            _ => return None,
        };
        let l4_len = if tcp { (*eth.get(l4 + 12)? as usize >> 4) * 4 } else { 8 };
        let payload = l4 + l4_len;
        (payload < eth.len()).then_some(Layout { ipv6, tcp, l4, payload, gso_size, len: eth.len() })
    }

    /// Bytes of each wire frame (Ethernet header to the end of its payload).
    pub fn wire_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        (self.payload..self.len)
            .step_by(self.gso_size)
            .map(|start| self.payload + (self.len - start).min(self.gso_size))
    }

    /// Wire frame `index` of `frame`, with a vnet header that asks for nothing
    /// (no GSO, checksums already complete).
    pub fn segment(&self, frame: &[u8], index: usize) -> Vec<u8> {
        let eth = &frame[VNET_HDR_LEN..];
        let start = self.payload + index * self.gso_size;
        let end = (start + self.gso_size).min(self.len);
        let last = end == self.len;
        let mut out = Vec::with_capacity(VNET_HDR_LEN + self.payload + end - start);
        out.extend_from_slice(&[0; VNET_HDR_LEN]);
        out.extend_from_slice(&eth[..self.payload]);
        out.extend_from_slice(&eth[start..end]);
        let f = &mut out[VNET_HDR_LEN..];
        let l4_len = f.len() - self.l4;
        let ip = ETH_LEN;
        let pseudo = if self.ipv6 {
            put16(f, ip + 4, l4_len as u16);
            let s = sum16(0, &f[ip + 8..ip + 40]);
            s + l4_len as u64 + f[ip + 6] as u64
        } else {
            put16(f, ip + 2, (f.len() - ip) as u16);
            // Each frame of a burst takes the next IPv4 id, as the kernel's segmentation does.
            let id = be16(f, ip + 4).wrapping_add(index as u16);
            put16(f, ip + 4, id);
            put16(f, ip + 10, 0);
            let c = fold(sum16(0, &f[ip..self.l4]));
            put16(f, ip + 10, c);
            sum16(0, &f[ip + 12..ip + 20]) + l4_len as u64 + f[ip + 9] as u64
        };
        let check_at = if self.tcp {
            let seq = u32::from_be_bytes(f[self.l4 + 4..self.l4 + 8].try_into().unwrap());
            let seq = seq.wrapping_add((index * self.gso_size) as u32);
            f[self.l4 + 4..self.l4 + 8].copy_from_slice(&seq.to_be_bytes());
            // CWR marks the first frame of the burst, FIN and PSH the last.
            if index > 0 {
                f[self.l4 + 13] &= !TCP_CWR;
            }
            if !last {
                f[self.l4 + 13] &= !(TCP_FIN | TCP_PSH);
            }
            self.l4 + 16
        } else {
            put16(f, self.l4 + 4, l4_len as u16);
            self.l4 + 6
        };
        put16(f, check_at, 0);
        let c = fold(sum16(pseudo, &f[self.l4..]));
        // UDP reserves 0 for "no checksum"; its complement means the same sum.
        put16(f, check_at, if c == 0 && !self.tcp { 0xffff } else { c });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A super-frame as veth hands it over: vnet header, Ethernet, IP, L4
    /// header (checksum field holding junk, as with a partial checksum), payload.
    fn super_frame(ipv6: bool, tcp: bool, gso_size: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; VNET_HDR_LEN];
        f[0] = 1; // NEEDS_CSUM
        f[1] = match (ipv6, tcp) {
            (false, true) => GSO_TCPV4,
            (true, true) => GSO_TCPV6,
            _ => GSO_UDP_L4,
        };
        f[4..6].copy_from_slice(&gso_size.to_le_bytes());
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&(if ipv6 { ETH_P_IPV6 } else { ETH_P_IPV4 }).to_be_bytes());
        let proto = if tcp { IPPROTO_TCP } else { IPPROTO_UDP };
        let l4_len = if tcp { 32 } else { 8 };
        let total_l4 = l4_len + payload.len();
        if ipv6 {
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(total_l4 as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend((0..32).map(|i| i as u8 + 1));
        } else {
            f.extend_from_slice(&[0x45, 0]);
            f.extend_from_slice(&((20 + total_l4) as u16).to_be_bytes());
            f.extend_from_slice(&[0xff, 0xfe, 0x40, 0, 64, proto, 0xab, 0xcd, 10, 0, 1, 2, 10, 0, 2, 3]);
        }
        if tcp {
            f.extend_from_slice(&[0x9c, 0x40, 0x30, 0x39]); // ports
            f.extend_from_slice(&0xffff_ff00u32.to_be_bytes()); // seq: wraps inside the burst
            f.extend_from_slice(&7u32.to_be_bytes()); // ack
            f.extend_from_slice(&[0x80, TCP_CWR | TCP_PSH | TCP_FIN | 0x10, 0x01, 0x00, 0x12, 0x34, 0, 0]);
            f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]); // NOP NOP timestamps
        } else {
            f.extend_from_slice(&[0x9c, 0x40, 0x30, 0x39]);
            f.extend_from_slice(&(total_l4 as u16).to_be_bytes());
            f.extend_from_slice(&[0x12, 0x34]);
        }
        f.extend_from_slice(payload);
        f
    }

    /// Checks one wire frame as a receiver would and returns its L4 payload.
    fn check(seg: &[u8], ipv6: bool, tcp: bool) -> (Vec<u8>, Option<(u32, u8)>, u16) {
        assert_eq!(&seg[..VNET_HDR_LEN], &[0; VNET_HDR_LEN], "plain frame, nothing left for the NIC");
        let f = &seg[VNET_HDR_LEN..];
        let (l4, pseudo, id) = if ipv6 {
            assert_eq!(be16(f, ETH_LEN + 4) as usize, f.len() - ETH_LEN - 40);
            let l4 = ETH_LEN + 40;
            (l4, sum16(0, &f[ETH_LEN + 8..l4]) + (f.len() - l4) as u64 + f[ETH_LEN + 6] as u64, 0)
        } else {
            assert_eq!(be16(f, ETH_LEN + 2) as usize, f.len() - ETH_LEN);
            assert_eq!(fold(sum16(0, &f[ETH_LEN..ETH_LEN + 20])), 0, "IPv4 header checksum");
            let l4 = ETH_LEN + 20;
            (l4, sum16(0, &f[ETH_LEN + 12..l4]) + (f.len() - l4) as u64 + f[ETH_LEN + 9] as u64, be16(f, ETH_LEN + 4))
        };
        assert_eq!(fold(sum16(pseudo, &f[l4..])), 0, "L4 checksum");
        if tcp {
            let seq = u32::from_be_bytes(f[l4 + 4..l4 + 8].try_into().unwrap());
            (f[l4 + 32..].to_vec(), Some((seq, f[l4 + 13])), id)
        } else {
            assert_eq!(be16(f, l4 + 4) as usize, f.len() - l4);
            (f[l4 + 8..].to_vec(), None, id)
        }
    }

    #[test]
    fn cuts_every_kind_into_valid_wire_frames() {
        let payload: Vec<u8> = (0..2600u32).map(|i| (i * 7 % 251) as u8).collect();
        for (ipv6, tcp) in [(false, true), (true, true), (false, false), (true, false)] {
            let frame = super_frame(ipv6, tcp, 1000, &payload);
            let l = Layout::parse(&frame).expect("a GSO super-frame");
            let headers = frame.len() - VNET_HDR_LEN - payload.len();
            let sizes: Vec<usize> = l.wire_sizes().collect();
            assert_eq!(sizes, vec![headers + 1000, headers + 1000, headers + 600]);
            let mut joined = Vec::new();
            for (i, &size) in sizes.iter().enumerate() {
                let seg = l.segment(&frame, i);
                assert_eq!(seg.len(), VNET_HDR_LEN + size);
                let (data, tcp_state, id) = check(&seg, ipv6, tcp);
                if let Some((seq, flags)) = tcp_state {
                    assert_eq!(seq, 0xffff_ff00u32.wrapping_add(1000 * i as u32));
                    assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR on the first frame only");
                    assert_eq!(flags & (TCP_FIN | TCP_PSH) == TCP_FIN | TCP_PSH, i == 2, "FIN, PSH on the last");
                    assert!(flags & 0x10 != 0, "ACK on every frame");
                }
                if !ipv6 {
                    assert_eq!(id, 0xfffeu16.wrapping_add(i as u16), "IPv4 ids count on (and wrap)");
                }
                joined.extend(data);
            }
            assert_eq!(joined, payload, "ipv6={ipv6} tcp={tcp}");
        }
    }

    #[test]
    fn plain_and_unknown_frames_are_left_whole() {
        let mut frame = super_frame(false, true, 1000, &[5; 1500]);
        assert!(Layout::parse(&frame).is_some());
        frame[4..6].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(Layout::parse(&frame), None, "gso_size 0: a plain frame");
        let mut ufo = super_frame(false, false, 1000, &[5; 1500]);
        ufo[1] = 3; // UFO: IP fragments, not ours to cut
        assert_eq!(Layout::parse(&ufo), None);
        let mut vlan = super_frame(false, true, 1000, &[5; 1500]);
        vlan[VNET_HDR_LEN + 12..VNET_HDR_LEN + 14].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(Layout::parse(&vlan), None);
        let short = super_frame(false, true, 1000, &[]);
        assert_eq!(Layout::parse(&short), None, "no payload");
        assert_eq!(Layout::parse(&[1, 1, 0, 0, 1, 0]), None, "shorter than a vnet header");
    }

    #[test]
    fn a_single_frame_burst_is_its_own_frame() {
        let frame = super_frame(false, false, 1400, &[9; 300]);
        let l = Layout::parse(&frame).unwrap();
        assert_eq!(l.wire_sizes().collect::<Vec<_>>(), vec![frame.len() - VNET_HDR_LEN]);
        let (data, _, _) = check(&l.segment(&frame, 0), false, false);
        assert_eq!(data, vec![9; 300]);
    }
}
