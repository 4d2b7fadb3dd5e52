//! UDP with segmentation offload both ways: a run of equal datagrams leaves
//! in one sendmsg (GSO, UDP_SEGMENT) and arrives as one read (GRO, UDP_GRO),
//! so a syscall moves tens of datagrams.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use crate::msg::{recv_msg, Control};
use crate::sockopt::{getsockopt_int, setsockopt};

/// UDP_GRO: the kernel hands over runs of equal-size datagrams of one flow as
/// one buffer with the segment size in a control message. Without it, one
/// datagram per read.
pub fn enable_gro(udp: &UdpSocket) -> io::Result<()> {
    setsockopt(udp.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, &(1 as libc::c_int))
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

/// One sendmsg of `bytes` to `to`. With `segment`, the bytes are a run of
/// datagrams of that size (the last may be shorter) that the kernel cuts as
/// late as possible (veth and the link emulator pass the run as one GSO
/// frame); without, one datagram.
pub fn send_to(udp: &UdpSocket, to: &SocketAddr, bytes: &[u8], segment: Option<u16>) -> io::Result<usize> {
    let (sa, sa_len) = sockaddr(to);
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
    // SAFETY: a valid socket and the msghdr built above.
    let n = unsafe { libc::sendmsg(udp.as_raw_fd(), &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One read: the bytes received and the size of the datagrams they hold (the
/// sender's segment size under GRO, else the one datagram's length; never 0).
/// `wait` false: WouldBlock at once when nothing is pending.
pub fn recv_segments(udp: &UdpSocket, buf: &mut [u8], wait: bool) -> io::Result<(usize, usize)> {
    let mut control = Control::default();
    let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
    let n = recv_msg::<libc::sockaddr_storage>(udp.as_raw_fd(), buf, None, &mut control, flags)?;
    let gro = control.messages().find(|c| c.level == libc::SOL_UDP && c.kind == libc::UDP_GRO).and_then(|c| c.int());
    Ok((n, gro.map_or(n, |s| s as usize).max(1)))
}

/// The MTU of the route to `ip` (the kernel's, from a connected UDP socket); None if unknown.
pub fn path_mtu(ip: IpAddr) -> Option<usize> {
    let probe = match ip {
        IpAddr::V4(_) => UdpSocket::bind(("0.0.0.0", 0)),
        IpAddr::V6(_) => UdpSocket::bind(("::", 0)),
    };
    let sock = probe.and_then(|s| s.connect((ip, 9)).map(|_| s)).ok()?;
    let (level, name) =
        if ip.is_ipv4() { (libc::IPPROTO_IP, libc::IP_MTU) } else { (libc::IPPROTO_IPV6, libc::IPV6_MTU) };
    let mtu = getsockopt_int(sock.as_raw_fd(), level, name).ok()?;
    (mtu > 0).then_some(mtu as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pair(host: &str) -> (UdpSocket, UdpSocket, SocketAddr) {
        let rx = UdpSocket::bind((host, 0)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let to = rx.local_addr().unwrap();
        (UdpSocket::bind((host, 0)).unwrap(), rx, to)
    }

    fn run(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_gso_run_arrives_as_one_gro_read() {
        for host in ["127.0.0.1", "::1"] {
            let (tx, rx, to) = pair(host);
            enable_gro(&rx).unwrap();
            let bytes = run(3 * 1000 + 400);
            assert_eq!(send_to(&tx, &to, &bytes, Some(1000)).unwrap(), bytes.len());
            let mut buf = vec![0u8; 65536];
            assert_eq!(recv_segments(&rx, &mut buf, true).unwrap(), (bytes.len(), 1000), "{host}");
            assert_eq!(buf[..bytes.len()], bytes[..]);
        }
    }

    #[test]
    fn without_gro_a_run_arrives_one_datagram_per_read() {
        let (tx, rx, to) = pair("127.0.0.1");
        let bytes = run(2 * 1000 + 400);
        send_to(&tx, &to, &bytes, Some(1000)).unwrap();
        let mut buf = vec![0u8; 65536];
        let mut got = Vec::new();
        for size in [1000, 1000, 400] {
            let (n, s) = recv_segments(&rx, &mut buf, true).unwrap();
            assert_eq!((n, s), (size, size));
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, bytes);
        let e = recv_segments(&rx, &mut buf, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "nothing pending: no wait");
        // A plain send is one datagram, whatever its size.
        send_to(&tx, &to, &bytes, None).unwrap();
        assert_eq!(recv_segments(&rx, &mut buf, true).unwrap(), (bytes.len(), bytes.len()));
    }

    #[test]
    fn a_run_longer_than_the_kernel_takes_is_refused() {
        let (tx, _rx, to) = pair("127.0.0.1");
        // More than UDP_MAX_SEGMENTS (64, 128 since Linux 6.9) segments in one send.
        let e = send_to(&tx, &to, &run(200 * 100), Some(100)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn path_mtu_is_the_routes() {
        let lo: usize = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap().trim().parse().unwrap();
        // IPv4 caps a route's MTU at the largest IP packet.
        assert_eq!(path_mtu("127.0.0.1".parse().unwrap()), Some(lo.min(65535)));
        assert_eq!(path_mtu("::1".parse().unwrap()), Some(lo));
    }
}
