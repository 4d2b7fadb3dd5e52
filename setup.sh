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
# monitor export's test scrapes with a real Prometheus; screenshots of the dashboard and report with headless Chromium
command -v prometheus >/dev/null || apt_missing+=(prometheus)
command -v chromium >/dev/null || apt_missing+=(chromium)
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
# Slurm's own federation of the sites' clusters: slurmdbd before a MariaDB of geofed's own.
command -v slurmdbd >/dev/null || apt_missing+=(slurmdbd)
command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || apt_missing+=(mariadb-server)
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
# A second MPI on request (docs/launch.md, "Which MPI"): GEOFED_MPI=openmpi installs Debian's
# Open MPI beside the venv's MPICH (mpirun.openmpi, libmpi.so.40 under the multiarch
# directory: no name is shared with the venv's MPICH); GEOFED_MPI=path takes the mpicc on
# PATH (a site's `module load`). The benchmark kernels and the profiler are built with that
# MPI's mpicc under names of their own (libgeofed_bench.openmpi.so); mpi4py's wheel holds
# both ABIs and loads the libmpi geofed names in MPI4PY_LIBMPI. The profiler wraps MPI-4's
# large-count calls (MPI_Send_c ...) only where the MPI has them (MPI_VERSION), not in Open MPI 4.1.
# An Open MPI already on the machine is built for beside MPICH without being asked.
other_mpi=${GEOFED_MPI:-mpich}
case "$other_mpi" in
  mpich)
    other_mpicc=
    if [ -x /usr/bin/mpicc.openmpi ]; then other_mpi=openmpi other_mpicc=/usr/bin/mpicc.openmpi; fi ;;
  openmpi)
    if [ ! -x /usr/bin/mpicc.openmpi ]; then
      echo "setup: installing Open MPI (openmpi-bin libopenmpi-dev) with apt"
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q openmpi-bin libopenmpi-dev
    fi
    other_mpicc=/usr/bin/mpicc.openmpi ;;
  path)
    other_mpicc=$(PATH=$(echo "$PATH" | tr ':' '\n' | grep -vx "$PWD/.venv/bin" | paste -sd:) command -v mpicc) \
      || { echo "setup: GEOFED_MPI=path: no mpicc on PATH (load your MPI first)" >&2; exit 2; } ;;
  *) echo "setup: GEOFED_MPI=$GEOFED_MPI: the MPI is one of mpich, openmpi, path" >&2; exit 2 ;;
esac
if [ -n "$other_mpicc" ]; then
  for pair in bench:src/geofed/bench/kernels.c profile:src/geofed/apps/profile/pmpi.c; do
    other=".venv/lib/libgeofed_${pair%%:*}.$other_mpi.so"
    if [ ! -e "$other" ] || [ "${pair#*:}" -nt "$other" ] || [ "$other_mpicc" -nt "$other" ]; then
      echo "setup: building $other with $other_mpicc"
      "$other_mpicc" -O2 -Wall -shared -fPIC -o "$other" "${pair#*:}"
    fi
  done
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
# With a second MPI (GEOFED_MPI above) HPL is built again with its mpicc, beside MPICH's
# (geofed-xhpl.openmpi). Open MPI 4's mpi.h hides the MPI-1 calls HPL 2.0 makes unless
# asked (OMPI_OMIT_MPI1_COMPAT_DECLS=0); MPICH ignores the setting.
hpl_builds=("$PWD/.venv/bin/mpicc:.venv/bin/geofed-xhpl")
[ -z "$other_mpicc" ] || hpl_builds+=("$other_mpicc:.venv/bin/geofed-xhpl.$other_mpi")
for hpl_build in "${hpl_builds[@]}"; do
  hpl_mpicc=${hpl_build%%:*} xhpl=${hpl_build#*:}
  if [ -x "$xhpl" ] && [ ! src/geofed/apps/hpl/xhpl.c -nt "$xhpl" ]; then continue; fi
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
  src="$cache/src-$(basename "$xhpl")"
  rm -rf "$src" && mkdir "$src" && tar xzf "$tarball" -C "$src" --strip-components=1
  sed -e 's|^MPinc *=.*|MPinc =|' -e 's|^MPlib *=.*|MPlib =|' \
      -e 's|^LAinc *=.*|LAinc = -I/usr/include/x86_64-linux-gnu/openblas-pthread|' -e 's|^LAlib *=.*|LAlib = -lopenblas|' \
      -e "s|^CC  *=.*|CC = $hpl_mpicc|" -e "s|^LINKER *=.*|LINKER = $hpl_mpicc|" \
      -e 's|^CCFLAGS *=.*|CCFLAGS = $(HPL_DEFS) -O2 -fcommon -DOMPI_OMIT_MPI1_COMPAT_DECLS=0|' \
      "$src/hpl/setup/Make.Linux_PII_CBLAS" > "$src/hpl/Make.geofed"
  make -s -C "$src" arch=geofed -j2 >"$cache/build.log" 2>&1 || { tail -20 "$cache/build.log"; exit 1; }
  "$hpl_mpicc" -O2 -Wall -fcommon -DHPL_CALL_CBLAS -DOMPI_OMIT_MPI1_COMPAT_DECLS=0 -I"$src/include" \
    -I"$src/hpl/include" -I"$src/hpl/include/geofed" -I/usr/include/x86_64-linux-gnu/openblas-pthread -o "$xhpl" \
    src/geofed/apps/hpl/xhpl.c "$src/hpl/lib/geofed/libhpl.a" -lopenblas -lm
done
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
