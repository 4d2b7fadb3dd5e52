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

/// Frames received together by one recvmmsg: per frame its buffer, its
/// sender's address and its control messages.
pub struct RecvBatch<A: SockAddr> {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<A>,
    controls: Vec<Control>,
    lens: Vec<usize>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    count: usize,
}

impl<A: SockAddr> RecvBatch<A> {
    /// Room for `frames` frames of `buf_len` bytes each.
    pub fn new(frames: usize, buf_len: usize) -> Self {
        RecvBatch {
            bufs: (0..frames).map(|_| vec![0u8; buf_len]).collect(),
            // SAFETY: SockAddr types are plain integers: all-zero is valid.
            addrs: (0..frames).map(|_| unsafe { std::mem::zeroed() }).collect(),
            controls: (0..frames).map(|_| Control::default()).collect(),
            lens: vec![0; frames],
            // SAFETY: iovec and mmsghdr are plain data; recv points them at the buffers before use.
            iovs: (0..frames).map(|_| unsafe { std::mem::zeroed() }).collect(),
            hdrs: (0..frames).map(|_| unsafe { std::mem::zeroed() }).collect(),
            count: 0,
        }
    }

    /// One recvmmsg: as many frames as are queued, up to the batch's room,
    /// without waiting for more once one is there (MSG_WAITFORONE is implied
    /// by MSG_DONTWAIT among `flags`). The number of frames received.
    pub fn recv(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<usize> {
        for i in 0..self.bufs.len() {
            self.iovs[i] =
                libc::iovec { iov_base: self.bufs[i].as_mut_ptr() as *mut libc::c_void, iov_len: self.bufs[i].len() };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = &mut self.addrs[i] as *mut A as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<A>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.controls[i].buf.as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = std::mem::size_of_val(&self.controls[i].buf) as _;
            h.msg_flags = 0;
        }
        // SAFETY: every header points at buffers of this batch, valid for the lengths it states.
        let n = unsafe {
            libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as libc::c_uint, flags, std::ptr::null_mut())
        };
        if n < 0 {
            self.count = 0;
            return Err(io::Error::last_os_error());
        }
        self.count = n as usize;
        for i in 0..self.count {
            self.lens[i] = self.hdrs[i].msg_len as usize;
            self.controls[i].len = self.hdrs[i].msg_hdr.msg_controllen as _;
        }
        Ok(self.count)
    }

    /// Puts `buf` in place of frame `i`'s buffer and gives that buffer (its
    /// whole length, the frame in front): a frame kept without copying it.
    pub fn swap(&mut self, i: usize, buf: Vec<u8>) -> Vec<u8> {
        assert!(i < self.count, "frame {i} of a batch of {}", self.count);
        std::mem::replace(&mut self.bufs[i], buf)
    }

    /// Frame `i` of the last receive: its bytes (cut to the buffer), its whole
    /// length (larger than the bytes when MSG_TRUNC cut it), its sender and control messages.
    pub fn frame(&self, i: usize) -> (&[u8], usize, &A, &Control) {
        assert!(i < self.count, "frame {i} of a batch of {}", self.count);
        let len = self.lens[i];
        (&self.bufs[i][..len.min(self.bufs[i].len())], len, &self.addrs[i], &self.controls[i])
    }
}

/// sendmmsg of `frames`, one message each, in order; restarted when a signal
/// interrupts it. Per frame, whether the kernel took it: a frame it refuses
/// is reported and skipped, and the ones after it are still sent.
pub fn send_batch(fd: RawFd, frames: &[&[u8]], mut on_error: impl FnMut(io::Error)) -> usize {
    let mut iovs: Vec<libc::iovec> =
        frames.iter().map(|f| libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() }).collect();
    // SAFETY: mmsghdr is plain data; each gets its frame's iovec below.
    let mut hdrs: Vec<libc::mmsghdr> = (0..frames.len()).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()) {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    let (mut at, mut sent) = (0, 0);
    while at < hdrs.len() {
        // SAFETY: headers from `at` on point at frames valid for reads of their lengths.
        let r = unsafe { libc::sendmmsg(fd, hdrs[at..].as_mut_ptr(), (hdrs.len() - at) as libc::c_uint, 0) };
        if r > 0 {
            at += r as usize;
            sent += r as usize;
            continue;
        }
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            // The first frame left was refused: report it, go on with the rest.
            on_error(e);
            at += 1;
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::realtime_ns;
    use crate::sockopt::setsockopt;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    /// A receiving socket, with kernel stamps if asked, and a sender connected to it.
    fn connected_pair(stamps: bool) -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if stamps {
            setsockopt(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).unwrap();
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        (rx, tx)
    }

    #[test]
    fn a_receive_reports_the_whole_length_the_sender_and_the_kernel_stamp() {
        let (rx, tx) = connected_pair(true);
        let before = realtime_ns();
        assert_eq!(send_batch(tx.as_raw_fd(), &[&[7; 300]], |e| panic!("{e}")), 1);
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
    }

    #[test]
    fn a_batch_receives_what_is_queued_in_order_with_each_frames_stamp_and_length() {
        let (rx, tx) = connected_pair(true);
        let frames: [&[u8]; 3] = [&[1; 10], &[2; 200], &[3; 30]];
        assert_eq!(send_batch(tx.as_raw_fd(), &frames, |e| panic!("{e}")), 3);
        let mut batch = RecvBatch::<libc::sockaddr_in>::new(4, 100);
        assert_eq!(batch.recv(rx.as_raw_fd(), libc::MSG_DONTWAIT | libc::MSG_TRUNC).unwrap(), 3);
        let mut stamps = vec![];
        for (i, sent) in frames.iter().enumerate() {
            let (bytes, len, from, control) = batch.frame(i);
            assert_eq!(len, sent.len(), "MSG_TRUNC: the whole length");
            assert_eq!(bytes, &sent[..sent.len().min(100)]);
            assert_eq!(u16::from_be(from.sin_port), tx.local_addr().unwrap().port());
            stamps.extend(control.messages().filter(|c| c.kind == libc::SCM_TIMESTAMPNS).map(|c| c.timespec_ns()));
        }
        assert_eq!(stamps.len(), 3);
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
        let kept = batch.swap(1, vec![0; 100]);
        assert_eq!((&kept[..100], batch.frame(1).0), (&[2; 100][..], &[0; 100][..]));
        let e = batch.recv(rx.as_raw_fd(), libc::MSG_DONTWAIT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_refused_frame_is_reported_and_the_rest_still_go() {
        let (rx, tx) = connected_pair(false);
        let too_big = vec![0u8; 70_000];
        let mut errors = vec![];
        let frames: [&[u8]; 3] = [b"a", &too_big, b"c"];
        assert_eq!(send_batch(tx.as_raw_fd(), &frames, |e| errors.push(e.raw_os_error())), 2);
        assert_eq!(errors, [Some(libc::EMSGSIZE)]);
        let mut batch = RecvBatch::<libc::sockaddr_in>::new(4, 8);
        assert_eq!(batch.recv(rx.as_raw_fd(), libc::MSG_DONTWAIT).unwrap(), 2);
        assert_eq!((batch.frame(0).0, batch.frame(1).0), (&b"a"[..], &b"c"[..]));
    }
}
