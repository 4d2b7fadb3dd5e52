"""Alerts of `geofed monitor serve`: once when a path leaves ok, once when it is ok again.

An event is a row of the store opened when a path's state leaves ok and cleared when it
returns; whether its alert and its clear went out is kept beside it, so a restarted
service neither repeats an alert nor forgets one it could not send (it tries again at
the next judgement). Channels: a command (the event as JSON on its stdin, and in
GEOFED_ALERT_* variables), local mail through a sendmail-compatible command, and a
webhook (an HTTP POST of the JSON).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from email.message import EmailMessage

from geofed.ops.monitor_store import Store

DELIVERY_TIMEOUT_S = 10


@dataclass(frozen=True)
class Channels:
    command: str | None = None
    mail_to: str | None = None
    sendmail: str = "/usr/sbin/sendmail"
    webhook: str | None = None


def message(event: dict) -> str:
    verb = "ok again" if event["what"] == "clear" else event["state"]
    return f"geofed monitor {event['federation']}: {event['path']} {verb}" + \
        (f": {event['reason']}" if event["what"] == "alert" else "")


def deliver(ch: Channels, event: dict) -> list[str]:
    """Send the event on every channel; the failures, one line each."""
    body = json.dumps(event)
    failed = []
    if ch.command:
        env = dict(os.environ, **{f"GEOFED_ALERT_{k.upper()}": str(v) for k, v in event.items()})
        try:
            res = subprocess.run(ch.command, shell=True, input=body, text=True, env=env, capture_output=True,
                                 timeout=DELIVERY_TIMEOUT_S)
            if res.returncode != 0:
                failed.append(f"command exited {res.returncode}: {res.stderr.strip()[-200:]}")
        except subprocess.TimeoutExpired:
            failed.append(f"command took longer than {DELIVERY_TIMEOUT_S} s")
    if ch.mail_to:
        mail = EmailMessage()
        mail["To"], mail["From"] = ch.mail_to, f"geofed-monitor@{socket.getfqdn()}"
        mail["Subject"] = message(event)
        mail.set_content(json.dumps(event, indent=1))
        try:
            res = subprocess.run([*ch.sendmail.split(), "-t"], input=mail.as_bytes(), capture_output=True,
                                 timeout=DELIVERY_TIMEOUT_S)
            if res.returncode != 0:
                failed.append(f"{ch.sendmail} exited {res.returncode}: {res.stderr.decode(errors='replace')[-200:]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            failed.append(f"{ch.sendmail}: {e}")
    if ch.webhook:
        req = urllib.request.Request(ch.webhook, data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=DELIVERY_TIMEOUT_S):
                pass
        except OSError as e:
            failed.append(f"webhook {ch.webhook}: {e}")
    return failed


def reconcile(store: Store, ch: Channels, federation: str, path: str, state: str, reason: str,
              log=print) -> None:
    """Open or clear the path's event for its new state, then send what is owed."""
    now = time.time()
    open_event = store.rows("SELECT id FROM events WHERE path=? AND cleared IS NULL", (path,))
    if state != "ok" and not open_event:
        store.write("INSERT INTO events (path, state, reason, opened) VALUES (?,?,?,?)", (path, state, reason, now))
    elif state != "ok":
        store.write("UPDATE events SET state=?, reason=? WHERE id=?", (state, reason, open_event[0][0]))
    elif open_event:
        store.write("UPDATE events SET cleared=? WHERE id=?", (now, open_event[0][0]))
    owed = store.rows("SELECT id, state, reason, opened, cleared, alerted FROM events "
                      "WHERE path=? AND (alerted=0 OR (cleared IS NOT NULL AND clear_alerted=0)) ORDER BY id", (path,))
    for eid, st, why, opened, cleared, alerted in owed:
        for what, column in (("alert", "alerted"), ("clear", "clear_alerted")):
            if (what == "alert" and alerted) or (what == "clear" and cleared is None):
                continue
            event = {"what": what, "federation": federation, "path": path, "state": st, "reason": why,
                     "opened": opened, "cleared": cleared, "event": eid}
            failed = deliver(ch, event)
            if failed:
                log(f"alert of event {eid} ({what}) not delivered, will retry: {'; '.join(failed)}")
                return
            store.write(f"UPDATE events SET {column}=1 WHERE id=?", (eid,))
            log(f"{what} sent: {message(event)}")
