"""OpenLDAP's command-line clients (ldapsearch, ldapmodify) and the LDIF they speak.

`users sync` moves tens of thousands of entries. Encoding and decoding them in
pure-Python LDAP (ldap3) cost more than the servers' own work: here a 20,000-user
slapd site read in 3.4 s with ldap3 and 0.3 s with ldapsearch, and 40,000 adds took
36 s with ldap3 (64 in flight) and 14 s with ldapmodify (slapd without fsync in both:
the rest was Python's). So the C clients speak the
protocol and TLS, and geofed only writes and splits LDIF text (the bulk of it in rust/ldif).

A home is reached at its URI (StartTLS on ldap://, TLS on ldaps://) with its certificate
checked against its CA, bound as geofed's read-only account; the admin server through its Unix socket (ldapi://, in the root-only run
directory). The bind password goes to the client through a pipe, never on its
command line.
"""

from __future__ import annotations

import base64
import fcntl
import os
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from geofed.testbed.host import HostError

PAGE = 1000
PIECE = 1 << 20  # characters of a search's output split at a time
SIZE_LIMIT_EXCEEDED = 4  # the LDAP result code, which ldapsearch exits with
TIMEOUT_S = 600.0
# A refresh answered from the session log is a few lines (0.2 s here); one that takes
# longer is a server that does not answer it so, and the home is listed instead.
REFRESH_TIMEOUT_S = 60.0


# ---------------------------------------------------------------- LDIF


def line(name: str, value) -> str:
    """One `name: value` line, base64 where LDIF requires it."""
    v = value if isinstance(value, str) else str(value)
    if v.isascii() and v.isprintable() and v[:1] not in (" ", ":", "<") and v[-1:] != " ":
        return f"{name}: {v}"
    return f"{name}:: {base64.b64encode(v.encode()).decode()}"


def values(v) -> list:
    """An attribute's values as a list: none, one or many."""
    return [] if v is None else v if isinstance(v, list) else [v]


def entries_text(entries: list[tuple]) -> str:
    """LDIF of whole entries (dn, {attribute: value or values}[, object classes]), as
    slapadd loads them; the classes, where given apart (a sync's adds), first.

    Made in compiled code (rust/ldif) where no value needs base64 (the first sync's
    200,000 entries: 6.5 s of `line`'s tests one value at a time in Python, then 1.4 s of
    format strings tested whole); else line by line here."""
    import geofed_ldif  # here: every geofed command imports this module, few make LDIF
    text = geofed_ldif.plain_text(entries)
    if text is not None:
        return text
    blocks = []
    for dn, attrs, *classes in entries:
        lines = [line("dn", dn)] + [line("objectClass", c) for given in classes for c in given]
        for k, vs in attrs.items():
            lines += [line(k, v) for v in values(vs)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def parse(text: str, names: dict[str, str] | None = None) -> list[tuple[str, dict[str, list[str]]]]:
    """(dn, {attribute: values}) of ldapsearch's unwrapped LDIF (base64 values decoded,
    comments skipped). Attribute names come back as the server spells them; `names`
    (lower case -> wanted spelling) puts them back as they were asked for.

    Split in compiled code (rust/ldif): in Python, line by line, 100,000 users took about
    1 s a home under the GIL, most of the first sync's reading at 100,000 users per site."""
    import geofed_ldif  # here: every geofed command imports this module, few read LDIF
    return geofed_ldif.parse(text, names or {})


# ---------------------------------------------------------------- the clients


def _run(tool: str, server: dict, ca: str, args: list[str], stdin: str = "",
         consume: Callable[[str], None] | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run an OpenLDAP client bound as the server's administrator; the password through a
    pipe. With `consume`, its output goes there a piece at a time as it comes, not into
    the result."""
    env = dict(os.environ, LDAPCONF="/dev/null")  # the host's ldap.conf (a BASE, a SIZELIMIT) is not the sync's
    if server.get("ldapi"):
        target = [f"ldapi://{quote(server['ldapi'], safe='')}/"]
    else:  # a home: StartTLS on an ldap:// URI, TLS from the start on an ldaps:// one
        target = [server["uri"]] if server["uri"].startswith("ldaps:") else [server["uri"], "-ZZ"]
        env.update(LDAPTLS_CACERT=ca, LDAPTLS_REQCERT="demand")
    read, write = os.pipe()
    with os.fdopen(write, "w") as w:
        w.write(server["password"])  # far below the pipe's buffer
    argv = [tool, "-H", *target, "-x", "-D", server["bind_dn"], "-y", f"/dev/fd/{read}", "-o", "nettimeout=10", *args]
    try:
        if consume is not None:
            return _streamed(argv, env, read, consume, timeout or TIMEOUT_S)
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, pass_fds=(read,),
                              timeout=timeout or TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HostError(f"{tool} at {_where(server)}: no answer within {timeout or TIMEOUT_S:.0f} s") from None
    finally:
        os.close(read)


def _streamed(argv: list[str], env: dict, fd: int, consume: Callable[[str], None],
              timeout: float) -> subprocess.CompletedProcess:
    """Run a client, its output handed to `consume` a piece at a time as it comes, killed
    after `timeout` seconds."""
    timed_out = []

    def stop() -> None:
        timed_out.append(True)
        proc.kill()
    with tempfile.TemporaryFile("w+") as err:  # a file: a pipe left unread could fill and stall the client
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=env, pass_fds=(fd,))
        # A piece's room in the pipe: with Linux's default 64 KiB the client (and the server
        # behind it) stalled whenever this process was splitting the piece before.
        try:
            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIECE)
        except OSError:
            pass  # a pipe-max-size below it: the default room, as before
        timer = threading.Timer(timeout, stop)
        timer.start()
        try:
            while piece := proc.stdout.read(PIECE):
                consume(piece)
            status = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout)
        err.seek(0)
        return subprocess.CompletedProcess(argv, status, "", err.read())


def search(server: dict, ca: str, base: str, flt: str, attrs: list[str], scope: str = "sub",
           records: Callable[[str], list] | None = None) -> list:
    """Every entry under `base` (`scope` "base": `base` itself) matching `flt`, with
    `attrs` (["1.1"]: none, the DNs alone): (dn, {attribute: values}) as `parse` makes
    them, or as `records` makes them of whole entries' LDIF (a home's users: dicts made
    in compiled code, without the lists of values in between).

    In one search, not paged: Samba pages by looking each entry up again (18,000 users
    took 6.5 s paged, 1.2 s in one search here). Paged only where the server refuses
    so many at once (sizeLimitExceeded: Active Directory's MaxPageSize is 1000).
    The LDIF is split as it comes, entry by entry, while the server still sends: at
    100,000 users per site the splitting (about 1 s a site here) was most of a full
    read, done after both servers had sent everything."""
    args = ["-LLL", "-o", "ldif-wrap=no", "-s", scope, "-b", base, flt, *attrs]
    if records is None:
        names = {a.lower(): a for a in attrs}

        def records(text: str) -> list:
            return parse(text, names)

    def read(extra: list[str]) -> tuple[subprocess.CompletedProcess, list]:
        found, rest = [], [""]

        def consume(piece: str) -> None:
            text = rest[0] + piece
            cut = text.rfind("\n\n")  # the last whole entry ends there
            if cut < 0:
                rest[0] = text
                return
            found.extend(records(text[:cut + 2]))
            rest[0] = text[cut + 2:]
        res = _run("ldapsearch", server, ca, [*extra, *args], consume=consume)
        return res, found + records(rest[0])
    res, found = read([])
    if res.returncode == SIZE_LIMIT_EXCEEDED:
        res, found = read(["-E", f"pr={PAGE}/noprompt"])
    if res.returncode != 0:
        raise HostError(f"cannot read the directory at {_where(server)}: {_last(res.stderr)}")
    return found


def left_since(server: dict, ca: str, base: str, flt: str, csns: list[str]) -> set[str] | None:
    """The entryUUIDs (lower case) of the entries under `base` that left `flt` (deleted,
    or changed so that they no longer match) since the server's state `csns` (its
    contextCSN then): an LDAP Content Synchronization refresh (RFC 4533) from a cookie of
    those CSNs, which syncprov answers from its session log. None where the server cannot
    name them so: no syncprov (the control is critical, so it refuses), no session log, or
    one that does not reach back that far (it would send what is present instead)."""
    cookie = f"rid=000,csn={';'.join(csns)}"
    try:
        res = _run("ldapsearch", server, ca, ["-o", "ldif-wrap=no", "-E", f"!sync=ro/{cookie}", "-s", "sub", "-b",
                                              base, flt, "1.1"], timeout=REFRESH_TIMEOUT_S)
    except HostError:  # a server that takes the control and never ends the refresh (Samba's AD DC did)
        return None
    if res.returncode != 0 or "refreshPresent" in res.stdout:
        return None
    left: set[str] = set()
    deletes = None  # within an ID set: whether it names entries that left (else: present ones)
    done = False
    for row in res.stdout.split("\n"):
        if row.startswith("# SyncInfo Received: ID Set"):
            deletes = False
        elif row == "# following UUIDs no longer match the search" and deletes is not None:
            deletes = True
        elif row.startswith("#\t") and deletes is not None:
            if not deletes:
                return None
            left.add(row[2:].strip().lower())
        elif row.startswith("# SyncState control") and row.endswith(" present"):
            return None  # the present phase: everything there, not what left
        elif row == "# SyncDone control refreshDeletes=1":
            done = True
        if not row.startswith("#"):
            deletes = None
    return left if done else None


def modify(server: dict, ca: str, records: list[str], streams: int) -> list[str]:
    """Apply LDIF change records in `streams` ldapmodify processes at once (records to
    different entries, so their order does not matter; slapd works on both while one
    waits for the other's answer); one line per refused record."""
    parts = [records[i::streams] for i in range(min(streams, len(records)))]
    if not parts:
        return []
    with tempfile.TemporaryDirectory(prefix="geofed-ldapmodify-") as tmp, ThreadPoolExecutor(len(parts)) as pool:
        done = pool.map(lambda i: _modify_part(server, ca, parts[i], Path(tmp) / f"refused.{i}"), range(len(parts)))
        return [e for errors in done for e in errors]


def _modify_part(server: dict, ca: str, records: list[str], refused: Path) -> list[str]:
    # -c: go on after a refused record; -S: write each with the server's reason to a file.
    res = _run("ldapmodify", server, ca, ["-c", "-S", str(refused)], stdin="\n\n".join(records) + "\n")
    errors = _refusals(refused.read_text() if refused.exists() else "")
    if res.returncode != 0 and not errors:
        errors.append(f"ldapmodify at {_where(server)}: {_last(res.stderr)}")
    return errors


def _refusals(text: str) -> list[str]:
    """`<changetype> <dn>: <reason>` of each record in ldapmodify's -S file, where the
    reason is the comment before it (`# Error: Already exists (68), additional info: ...`)."""
    out = []
    for block in text.split("\n\n"):
        for dn, attrs in parse(block):
            reason = " ".join(r.removeprefix("# Error: ") for r in block.split("\n") if r.startswith("#"))
            out.append(f"{attrs.get('changetype', ['?'])[0]} {dn}: {reason}")
    return out


def _where(server: dict) -> str:
    return server.get("ldapi") or server["uri"]


def _last(stderr: str) -> str:
    return " ".join(stderr.strip().splitlines()[-2:]) or "no message"
