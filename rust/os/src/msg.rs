//! Sending and receiving on raw descriptors, and the control messages a
//! receive carries beside the bytes (kernel receive stamps, GRO sizes).

use std::io;
use std::os::fd::RawFd;

/// A C socket address the kernel may fill on receive: plain integers, any bytes valid.
///
/// # Safety
/// Implement only for `repr(C)` structs of integers (the `libc::sockaddr_*` family).
pub unsafe trait SockAddr {}
unsafe impl SockAddr for libc::sockaddr_ll {}
unsafe impl SockAddr for libc::sockaddr_in {}
unsafe impl SockAddr for libc::sockaddr_in6 {}
unsafe impl SockAddr for libc::sockaddr_storage {}

/// Room for the control messages of one receive; u64s keep it aligned for cmsghdr.
#[derive(Default)]
pub struct Control {
    buf: [u64; 16],
    /// Bytes the last receive filled.
    len: usize,
}

/// One control message: its level and type, and its data.
pub struct Cmsg<'a> {
    pub level: libc::c_int,
    pub kind: libc::c_int,
    pub data: &'a [u8],
}

impl Cmsg<'_> {
    /// The data as an int (UDP_GRO's segment size, ...).
    pub fn int(&self) -> Option<libc::c_int> {
        Some(libc::c_int::from_ne_bytes(self.data.get(..4)?.try_into().unwrap()))
    }

    /// The data as a timespec, in nanoseconds (SCM_TIMESTAMPNS).
    pub fn timespec_ns(&self) -> Option<u64> {
        let b = self.data.get(..std::mem::size_of::<libc::timespec>())?;
        // SAFETY: `b` holds a whole timespec, a struct of integers; read_unaligned copes with any alignment.
        Some(crate::clock::timespec_ns(&unsafe { std::ptr::read_unaligned(b.as_ptr() as *const libc::timespec) }))
    }
}

impl Control {
    /// The control messages of the last receive.
    pub fn messages(&self) -> impl Iterator<Item = Cmsg<'_>> {
        // SAFETY: msghdr is plain data; only its control fields are read by CMSG_*.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = self.buf.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = self.len as _;
        let end = self.buf.as_ptr() as usize + self.len;
        // SAFETY: `msg` describes `self.len` filled bytes of `self.buf`.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        std::iter::from_fn(move || {
            if c.is_null() {
                return None;
            }
            // SAFETY: CMSG_FIRSTHDR/NXTHDR return null or a header inside the filled bytes; its
            // data is cut to those bytes, whatever length a truncated message claims.
            unsafe {
                let data = libc::CMSG_DATA(c);
                let claimed = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                let len = claimed.min(end.saturating_sub(data as usize));
                let m =
                    Cmsg { level: (*c).cmsg_level, kind: (*c).cmsg_type, data: std::slice::from_raw_parts(data, len) };
                c = libc::CMSG_NXTHDR(&msg, c);
                Some(m)
            }
        })
    }
}

/// One recvmsg into `buf`: the sender's address into `from` if given, the
/// control messages into `control`. The length returned is the frame's whole
/// length with MSG_TRUNC among `flags`, so it may exceed `buf`.
pub fn recv_msg<A: SockAddr>(
    fd: RawFd,
    buf: &mut [u8],
    from: Option<&mut A>,
    control: &mut Control,
    flags: libc::c_int,
) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(a) = from {
        msg.msg_name = a as *mut A as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<A>() as libc::socklen_t;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control.buf) as _;
    // SAFETY: a msghdr whose buffers are valid for the lengths it states.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        control.len = 0;
        return Err(io::Error::last_os_error());
    }
    control.len = msg.msg_controllen as usize;
    Ok(n as usize)
}

/// send(2) of `bytes` as one frame, restarted when a signal interrupts it.
pub fn send(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `bytes` is valid for reads of its length.
        let r = unsafe { libc::send(fd, bytes.as_ptr() as *const libc::c_void, bytes.len(), 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::realtime_ns;
    use crate::sockopt::setsockopt;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_receive_reports_the_whole_length_the_sender_and_the_kernel_stamp() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        setsockopt(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let before = realtime_ns();
        assert_eq!(send(tx.as_raw_fd(), &[7; 300]).unwrap(), 300);
        let mut buf = [0u8; 100];
        let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut control = Control::default();
        let n = recv_msg(rx.as_raw_fd(), &mut buf, Some(&mut from), &mut control, libc::MSG_TRUNC).unwrap();
        let after = realtime_ns();
        assert_eq!(n, 300, "MSG_TRUNC: the datagram's length, not the buffer's");
        assert_eq!(buf, [7; 100]);
        assert_eq!(u16::from_be(from.sin_port), tx.local_addr().unwrap().port());
        let stamps: Vec<u64> = control
            .messages()
            .filter(|c| c.level == libc::SOL_SOCKET && c.kind == libc::SCM_TIMESTAMPNS)
            .map(|c| c.timespec_ns().unwrap())
            .collect();
        assert_eq!(stamps.len(), 1);
        assert!((before..=after).contains(&stamps[0]), "{before} <= {} <= {after}", stamps[0]);
    }

    #[test]
    fn no_stamp_asked_no_control_message_and_errors_are_the_kernels() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        let mut control = Control::default();
        let mut buf = [0u8; 8];
        let n = recv_msg::<libc::sockaddr_in>(rx.as_raw_fd(), &mut buf, None, &mut control, 0).unwrap();
        assert_eq!((n, buf[0]), (1, b'x'));
        assert_eq!(control.messages().count(), 0);
        let e = recv_msg::<libc::sockaddr_in>(rx.as_raw_fd(), &mut buf, None, &mut control, libc::MSG_DONTWAIT);
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let unconnected = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(send(unconnected.as_raw_fd(), b"x").unwrap_err().raw_os_error(), Some(libc::EDESTADDRREQ));
    }
}
