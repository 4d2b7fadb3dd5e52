"""`geofed ops directory|users ...` and `geofed bench directory`: the user directory's commands.

    geofed ops directory up|down|status FEDERATION     the sites' servers and the admin server (root)
    geofed ops users sync [-f FED] [--dry-run]         merge the homes into the admin directory, passwd, group
    geofed ops users check USER [-f FED] < password    authenticate at home
    geofed ops users show USER [-f FED]                the read-through view beside the merged copy
    geofed bench directory                             20,000 users and 2,000 groups per site: sync, re-sync
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from geofed import federation, records
from geofed.cli import _down
from geofed.errors import UserError
from geofed.ops import directory, users
from geofed.progress import progress
from geofed.validate import positive_float, positive_int

def ops_group(commands):
    """The subcommands of `geofed ops` (made by the first capability that needs them)."""
    if "ops" in commands.choices:
        return next(a for a in commands.choices["ops"]._actions if a.dest == "ops_action")
    return commands.add_parser("ops", help="operations: user directories").add_subparsers(dest="ops_action",
                                                                                           required=True)


def cmd_up(args) -> int:
    fed = federation.load(args.federation)
    state = directory.up(fed, progress)
    for k, s in directory.status(fed)["servers"].items():
        print(f"{k:<6} {s['kind']:<5} {s['uri']} {s['ldaps']} {s['base']}" + (f" (in {s['netns']})" if s["netns"] else ""))
    print(f"directory of {fed.name} is up ({state['mode']}); CA {state['ca']}")
    return 0


def cmd_down(args) -> int:
    return _down("directory", directory.down, args.federation)


def cmd_status(args) -> int:
    fed = federation.load(args.federation)
    st = directory.status(fed)
    print(f"directory of {fed.name}: {'up' if st['up'] else 'down'}" + (f" ({st['mode']})" if st["up"] else ""))
    for k, s in st["servers"].items():
        print(f"  {k:<6} {s['kind']:<5} pid {s['pid']} {'running' if s['alive'] else 'DEAD'} {s['uri']} {s['base']}")
    return 0 if st["up"] and all(s["alive"] for s in st["servers"].values()) else 1


def cmd_sync(args) -> int:
    fed = federation.load(args.federation)
    data = users.sync(fed, dry_run=args.dry_run, out=None if args.dry_run else Path(args.out), progress=progress)
    for c in data["changes"]:
        print(users.describe(c))
    for c in data["collisions"]:
        print(f"! refused {c['entry']} {c['name']} ({c['kind']}): {c['detail']}; {', '.join(c['sources'])}")
    n = len(data["changes"])
    print(f"{'would make' if args.dry_run else 'made'} {n} change{'s' * (n != 1)}; {data['merged_users']} users and "
          f"{data['merged_groups']} groups merged; {len(data['collisions'])} refused; {data['seconds']['total']:.2f} s")
    if not args.dry_run:
        rec = records.make("directory.sync", data, **records.federation_meta(fed))
        print(f"passwd, group and record: {records.save(rec, args.out).parent}")
    for e in data["errors"]:
        print(f"geofed: failed: {e}", file=sys.stderr)
    return 1 if data["collisions"] or data["errors"] else 0


def cmd_check(args) -> int:
    fed = federation.load(args.federation)
    if args.password_file:
        try:
            password = Path(args.password_file).read_text().rstrip("\n")
        except OSError as e:
            raise UserError(f"--password-file {args.password_file}: {e.strerror}") from None
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password of {args.user} at home: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    r = users.check(fed, args.user, password)
    if r["ok"]:
        print(f"{args.user}: authenticated by site {r['site']}'s directory as {r['dn']} (uid {r['uid']})")
        return 0
    print(f"{args.user}: rejected" + (f" by site {r['site']}'s directory" if "site" in r else "") + f": {r['reason']}")
    return 1


def cmd_show(args) -> int:
    fed = federation.load(args.federation)
    r = users.show(fed, args.user)
    if not r["view"] and not r["merged"]:
        print(f"{args.user}: in no home directory and not merged")
        return 1
    columns = [("read-through " + e["dn"], e) for e in r["view"]] + [("merged " + e["dn"], e) for e in r["merged"]]
    for title, _ in columns:
        print(f"# {title}")
    width = max(len(k) for k in users.SHOWN)
    for k in users.SHOWN:
        print(f"{k:<{width}}  " + "  ".join(f"{users.value_text(e.get(k)) or '-'!s:<28}" for _, e in columns))
    return 0


def _fraction(text: str) -> float:
    v = positive_float(text)
    if v >= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction below 1, got {text!r}")
    return v


def cmd_bench(args) -> int:
    from geofed.ops import dirbench
    rec = dirbench.run(args.users, args.groups, args.changed, progress)
    print(dirbench.format_table(rec))
    print(f"record: {records.save(rec, args.out)}")
    return 0 if rec["data"]["ok"] else 1


def register(commands, bench) -> None:
    ops = ops_group(commands)
    sub = ops.add_parser("directory", help="the sites' directory servers and the federation's (root)") \
        .add_subparsers(dest="what", required=True)
    for name, func, text in [("up", cmd_up, "start slapd / Samba AD per site and the admin slapd, load the fixture"),
                             ("down", cmd_down, "stop every directory server and remove its files, also after a crash"),
                             ("status", cmd_status, "which servers run, where")]:
        p = sub.add_parser(name, help=text)
        p.add_argument("federation", help="federation file or shipped name (e.g. ma-hd)")
        p.set_defaults(func=func)

    sub = ops.add_parser("users", help="the federation's user database from the sites' directories") \
        .add_subparsers(dest="what", required=True)
    p = sub.add_parser("sync", help="merge the activated users of every site into the admin directory and passwd/group")
    p.add_argument("--federation", "-f", default="ma-hd", help="federation file or shipped name (default ma-hd)")
    p.add_argument("--dry-run", action="store_true", help="print the changes, make none")
    p.add_argument("--out", default="geofed-out/directory", help="directory for passwd, group and the record")
    p.set_defaults(func=cmd_sync)
    p = sub.add_parser("check", help="authenticate a merged user against the home directory (password on stdin)")
    p.add_argument("user")
    p.add_argument("--federation", "-f", default="ma-hd", help="federation file or shipped name (default ma-hd)")
    p.add_argument("--password-file", help="read the password from this file instead of stdin")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("show", help="a user in the read-through view of the homes beside the merged copy")
    p.add_argument("user")
    p.add_argument("--federation", "-f", default="ma-hd", help="federation file or shipped name (default ma-hd)")
    p.set_defaults(func=cmd_show)

    p = bench.add_parser("directory", help="users sync at scale: N users and groups per site, sync and a re-sync (root)")
    p.add_argument("--users", type=positive_int, default=20000, help="users per site (default 20000)")
    p.add_argument("--groups", type=positive_int, default=2000, help="groups per site (default 2000)")
    p.add_argument("--changed", type=_fraction, default=0.01, help="fraction of users changed before the re-sync (default 0.01)")
    p.add_argument("--out", default="geofed-out/bench", help="directory for the JSON record")
    p.set_defaults(func=cmd_bench)
