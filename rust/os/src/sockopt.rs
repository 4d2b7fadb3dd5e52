//! Socket options, typed.

use std::io;
use std::os::fd::RawFd;

/// setsockopt with `val` as the option's value, passed by its size.
pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is valid for reads of size_of::<T>() bytes during the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// getsockopt into `buf`; the number of bytes the kernel wrote.
pub fn getsockopt(fd: RawFd, level: libc::c_int, name: libc::c_int, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is valid for writes of `len` bytes; the kernel writes at most that.
    let r = unsafe { libc::getsockopt(fd, level, name, buf.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r == 0 {
        Ok(len as usize)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An integer option's value.
pub fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut b = [0u8; std::mem::size_of::<libc::c_int>()];
    getsockopt(fd, level, name, &mut b)?;
    Ok(libc::c_int::from_ne_bytes(b))
}

/// A send buffer of `bytes`: past net.core.wmem_max where allowed
/// (SO_SNDBUFFORCE, root), else as much as the sysctl lets SO_SNDBUF ask.
pub fn grow_send_buffer(fd: RawFd, bytes: libc::c_int) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &bytes)
        .or_else(|_| setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &bytes))
}

/// A receive buffer of `bytes`, as [`grow_send_buffer`] does for sending.
pub fn grow_recv_buffer(fd: RawFd, bytes: libc::c_int) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &bytes)
        .or_else(|_| setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn sysctl(name: &str) -> libc::c_int {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}")).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn buffers_grow_past_the_sysctl_caps_where_allowed() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_raw_fd();
        let want: libc::c_int = 24 << 20;
        grow_send_buffer(fd, want).unwrap();
        grow_recv_buffer(fd, want).unwrap();
        // The kernel doubles what it grants (bookkeeping overhead); plain SO_*BUF stops at the cap.
        let root = unsafe { libc::geteuid() } == 0;
        for (opt, cap) in [(libc::SO_SNDBUF, sysctl("wmem_max")), (libc::SO_RCVBUF, sysctl("rmem_max"))] {
            let granted = getsockopt_int(fd, libc::SOL_SOCKET, opt).unwrap();
            let expect = if root { want } else { want.min(cap) };
            assert_eq!(granted, 2 * expect, "option {opt}");
        }
    }

    #[test]
    fn options_round_trip_and_refusals_are_the_kernels() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_raw_fd();
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_TTL, &(7 as libc::c_int)).unwrap();
        assert_eq!(getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TTL).unwrap(), 7);
        let e = setsockopt(fd, libc::SOL_SOCKET, 0x7fff, &(1 as libc::c_int)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT));
    }
}
