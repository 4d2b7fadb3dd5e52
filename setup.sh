#!/usr/bin/env bash
# Install everything geofed needs on a fresh Debian machine (run as root):
# system packages, a virtual environment at .venv, and the native (Rust) programs.
# Safe to run again: every step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")"

apt_missing=()
command -v ip >/dev/null || apt_missing+=(iproute2)
command -v tc >/dev/null || apt_missing+=(iproute2)
command -v cc >/dev/null || apt_missing+=(gcc)
command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] || apt_missing+=(cargo)
# The system's interpreter by default, not one under /root (mode 700): every user of
# the machine must be able to run the installed geofed (the ssh and Slurm paths do).
PY=${PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null || apt_missing+=(python3)
if command -v "$PY" >/dev/null && ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then apt_missing+=(python3-venv); fi
# SimGrid, the simulation peer of `geofed bench model` (Debian's module, for the system python3)
/usr/bin/python3 -c 'import simgrid' 2>/dev/null || apt_missing+=(python3-simgrid)
# OpenBLAS, the BLAS that HPL is built with (`geofed bench hpl`)
[ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || apt_missing+=(libopenblas-dev)
# iperf3, the network's ceiling beside `geofed bench transfer` (never run as a service)
command -v iperf3 >/dev/null || apt_missing+=(iperf3)
# GridFTP and xrootd, the bulk tools centres use, beside it (servers started by the benchmark)
command -v globus-gridftp-server >/dev/null || apt_missing+=(globus-gridftp-server-progs)
command -v globus-url-copy >/dev/null || apt_missing+=(globus-gass-copy-progs)
command -v xrootd >/dev/null || apt_missing+=(xrootd-server)
command -v xrdcp >/dev/null || apt_missing+=(xrootd-client)
# fio, a peer of `geofed bench io` on the same files (IOzone, the other, is fetched below)
command -v fio >/dev/null || apt_missing+=(fio)
# The directory servers of `geofed ops directory` (OpenLDAP, Samba's AD DC, the LDAP tools);
# geofed runs them as its own foreground children, never as the system's services.
directory_missing=()
[ -x /usr/sbin/slapd ] || directory_missing+=(slapd)
command -v ldapsearch >/dev/null || directory_missing+=(ldap-utils)
[ -x /usr/sbin/samba ] && command -v samba-tool >/dev/null || directory_missing+=(samba samba-ad-dc)
[ -d /usr/share/samba/setup/ad-schema ] || directory_missing+=(samba-ad-provision)
command -v ldbadd >/dev/null || directory_missing+=(ldb-tools)
command -v openssl >/dev/null || directory_missing+=(openssl)
# The nodes' NSS client for the merged directory (nslcd per node, in its own mount namespace)
[ -x /usr/sbin/nslcd ] || directory_missing+=(nslcd)
[ -e /usr/lib/x86_64-linux-gnu/libnss_ldap.so.2 ] || directory_missing+=(libnss-ldapd)
apt_missing+=("${directory_missing[@]}")
# Slurm and MUNGE for `geofed ops slurm` (daemons run by geofed per testbed, never as services),
# Lua for its site-confinement rule, and OpenSSH's server for hostfile jobs over real ssh.
for tool in slurmctld slurmd sinfo munged; do
  command -v $tool >/dev/null || { apt_missing+=(slurmctld slurmd slurm-client munge); break; }
done
[ -e /usr/lib/x86_64-linux-gnu/liblua5.1.so.0 ] || apt_missing+=(liblua5.1-0)
[ -x /usr/sbin/sshd ] || apt_missing+=(openssh-server)
# The storage site's file systems reached from the other sites over the emulated link (FUSE).
command -v sshfs >/dev/null || apt_missing+=(sshfs)
command -v socat >/dev/null || apt_missing+=(socat)
if [ ${#apt_missing[@]} -gt 0 ]; then
  echo "setup: installing ${apt_missing[*]} with apt"
  apt-get update -q
  # No package may start a system service (slapd, samba): a policy-rc.d says no for
  # the install's duration, unless the machine already has one.
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${apt_missing[@]}" \
    || { [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d; exit 1; }
  [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
fi
# Where systemd runs, the packages' services stay disabled (they would hold the LDAP ports).
if [ ${#directory_missing[@]} -gt 0 ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl disable --now slapd samba-ad-dc smbd nmbd winbind >/dev/null 2>&1 || true
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: geofed needs Python 3.11 or newer ($PY is older)" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

echo "setup: building the native programs (rust/)"
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q --manifest-path rust/Cargo.toml
install -m 755 rust/target/release/geofed-linkemu rust/target/release/geofed-probe .venv/bin/
# Python extensions (PyO3): every crate of the workspace with a pyproject.toml.
for py in rust/*/pyproject.toml; do
  [ -e "$py" ] || continue
  .venv/bin/python -m pip install -q 'maturin>=1.5,<2'
  echo "setup: building the Python extension $(dirname "$py")"
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop -q --release -m "$(dirname "$py")/Cargo.toml"
done
# The MPI benchmark kernels (timed loops in C, loaded by geofed.bench.kernels with
# ctypes), built with the venv's mpicc so they use the same libmpi as mpi4py.
# Rebuilt only when the source is newer than the library.
lib=.venv/lib/libgeofed_bench.so
if [ ! -e "$lib" ] || [ src/geofed/bench/kernels.c -nt "$lib" ]; then
  echo "setup: building the MPI benchmark kernels ($lib)"
  .venv/bin/mpicc -O2 -Wall -shared -fPIC -o "$lib" src/geofed/bench/kernels.c
fi
# geofed's MPI profiler (src/geofed/apps/profile/pmpi.c, `geofed profile`): PMPI wrappers
# preloaded into a user's program, built with the venv's mpicc against the same libmpi.
proflib=.venv/lib/libgeofed_profile.so
if [ ! -e "$proflib" ] || [ src/geofed/apps/profile/pmpi.c -nt "$proflib" ]; then
  echo "setup: building the MPI profiler ($proflib)"
  .venv/bin/mpicc -O2 -Wall -shared -fPIC -o "$proflib" src/geofed/apps/profile/pmpi.c
fi
# The seed fix preloaded into SST processes (src/geofed/apps/grayscott/sstseed.c).
seedlib=.venv/lib/libgeofed_sstseed.so
if [ ! -e "$seedlib" ] || [ src/geofed/apps/grayscott/sstseed.c -nt "$seedlib" ]; then
  echo "setup: building the SST seed fix ($seedlib)"
  cc -O2 -Wall -shared -fPIC -o "$seedlib" src/geofed/apps/grayscott/sstseed.c -ldl
fi
# The storage benchmark's timed loops (src/geofed/bench/storage.c, `geofed bench io`):
# plain C, no MPI. Rebuilt only when the source is newer than the library.
iolib=.venv/lib/libgeofed_io.so
if [ ! -e "$iolib" ] || [ src/geofed/bench/storage.c -nt "$iolib" ]; then
  echo "setup: building the storage benchmark loops ($iolib)"
  cc -O2 -Wall -shared -fPIC -o "$iolib" src/geofed/bench/storage.c
fi
# private_apt CACHE LINE: a private apt configuration in CACHE whose one source is LINE,
# so that a package the machine's sources need not name can be fetched, checked against
# Debian's signed Release file, while the system's sources are left alone. Sets the
# array apt_private to pass to apt-get.
private_apt() {
  mkdir -p "$1/apt/lists/partial" "$1/apt/archives/partial"
  echo "$2" > "$1/sources.list"
  apt_private=(-q -o "Dir::Etc::SourceList=$1/sources.list" -o Dir::Etc::SourceParts=/dev/null
               -o "Dir::State::Lists=$1/apt/lists" -o "Dir::Cache=$1/apt")
}
# HPL 2.0 for `geofed bench hpl`: Debian has no HPL package and its hpcc binary links
# Open MPI, so the HPL inside HPCC 1.5.0's source (Debian's source package, fetched
# with private_apt) is built
# with the venv's mpicc and OpenBLAS; geofed's own driver (src/geofed/apps/hpl/xhpl.c)
# runs it. Rebuilt only when missing or older than the driver.
xhpl=.venv/bin/geofed-xhpl
if [ ! -x "$xhpl" ] || [ src/geofed/apps/hpl/xhpl.c -nt "$xhpl" ]; then
  echo "setup: building HPL ($xhpl)"
  cache="$PWD/.cache/hpl"
  private_apt "$cache" \
    "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main"
  if ! ls "$cache"/hpcc_*.orig.tar.gz >/dev/null 2>&1; then
    apt-get "${apt_private[@]}" update >/dev/null
    # Only the upstream tarball is needed; the Debian patch tarball may be missing on the mirror.
    (cd "$cache" && apt-get "${apt_private[@]}" source --download-only hpcc >/dev/null 2>&1) || true
  fi
  tarball=$(ls "$cache"/hpcc_*.orig.tar.gz)
  # The tarball's checksum from the .dsc, which apt verified against the signed Release file.
  sum=$(awk '/^Checksums-Sha256:/ {f = 1; next} f && /orig\.tar\.gz/ {print $1; exit}' "$cache"/hpcc_*.dsc)
  echo "$sum  $tarball" | sha256sum -c --quiet -
  rm -rf "$cache/src" && mkdir "$cache/src" && tar xzf "$tarball" -C "$cache/src" --strip-components=1
  venv_bin="$PWD/.venv/bin"
  sed -e 's|^MPinc *=.*|MPinc =|' -e 's|^MPlib *=.*|MPlib =|' \
      -e 's|^LAinc *=.*|LAinc = -I/usr/include/x86_64-linux-gnu/openblas-pthread|' -e 's|^LAlib *=.*|LAlib = -lopenblas|' \
      -e "s|^CC  *=.*|CC = $venv_bin/mpicc|" -e "s|^LINKER *=.*|LINKER = $venv_bin/mpicc|" \
      -e 's|^CCFLAGS *=.*|CCFLAGS = $(HPL_DEFS) -O2 -fcommon|' \
      "$cache/src/hpl/setup/Make.Linux_PII_CBLAS" > "$cache/src/hpl/Make.geofed"
  make -s -C "$cache/src" arch=geofed -j2 >"$cache/build.log" 2>&1 || { tail -20 "$cache/build.log"; exit 1; }
  .venv/bin/mpicc -O2 -Wall -fcommon -DHPL_CALL_CBLAS -I"$cache/src/include" -I"$cache/src/hpl/include" \
    -I"$cache/src/hpl/include/geofed" -I/usr/include/x86_64-linux-gnu/openblas-pthread -o "$xhpl" \
    src/geofed/apps/hpl/xhpl.c "$cache/src/hpl/lib/geofed/libhpl.a" -lopenblas -lm
fi
# IOzone for `geofed bench io`: Debian ships it (iozone3) only in non-free, which the
# machine's sources need not name: private_apt downloads the package and its binary is
# unpacked into the venv. Skipped when present.
iozone=.venv/bin/iozone
if [ ! -x "$iozone" ] && ! command -v iozone >/dev/null; then
  echo "setup: fetching IOzone ($iozone) from Debian non-free"
  cache="$PWD/.cache/iozone"
  private_apt "$cache" \
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free"
  apt-get "${apt_private[@]}" update >/dev/null
  (cd "$cache" && apt-get "${apt_private[@]}" download iozone3 >/dev/null)
  rm -rf "$cache/root" && dpkg -x "$(ls "$cache"/iozone3_*.deb | tail -1)" "$cache/root"
  install -m 755 "$cache/root/usr/bin/iozone" "$iozone"
fi
echo "setup: done; try: .venv/bin/geofed demo"
