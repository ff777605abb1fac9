# fail2ban action for parapet: bans go to parapetd over its control socket.
#
# Install: copy to /etc/fail2ban/action.d/parapet.py, then in a jail
#
#     [sshd]
#     enabled = true
#     action  = parapet.py[socket=/run/parapet/parapet.sock]
#
# Options (all optional):
#   socket   parapetd's control socket (default: $PARAPET_SOCKET, then
#            /run/parapet/parapet.sock)
#   set      set for IPv4 bans (default: f2b-<jail>); IPv6 bans go to
#            <set>-v6. Both are created on start (ipv4_addr / ipv6_addr,
#            flags timeout). Reference them from the ruleset, e.g.
#            -A INPUT -m set --match-set f2b-sshd src -j DROP
#   margin   seconds added to fail2ban's bantime when passing it to
#            parapetd as the element timeout (default 60), so a ban lifts
#            by itself even if fail2ban is gone; "off" = permanent in
#            parapetd until fail2ban unbans (fail2ban stays authoritative
#            either way: it unbans when bantime ends).
#   timeout  seconds to wait for a reply (default 10)
#   pipeline how many ban/unban requests may be in flight without their
#            reply (default 256). fail2ban hands bans over one at a time and
#            waits for each; with a window the action returns as soon as the
#            request is written, parapetd's group commit makes many bans
#            durable with one disk sync, and a reader thread collects the
#            replies (an error reply is logged as an error with the address).
#            A full window waits for the oldest reply. 0 = wait for every
#            reply (one disk sync per ban, ~5x slower under a ban storm).
#            start, flush and stop wait until every earlier request is
#            acknowledged.
#
# One connection is opened on start and kept; if it breaks (daemon
# restart), it is reopened and every request without a reply is sent again
# in order (set.add and set.del are idempotent). No process is spawned per
# ban. Protocol: docs/daemon.md (one JSON object per line each way).

import collections
import json
import os
import socket
import threading
import time

from fail2ban.server.action import ActionBase

DEFAULT_SOCKET = "/run/parapet/parapet.sock"


class ParapetError(Exception):
    pass


class ParapetAction(ActionBase):
    def __init__(self, jail, name, socket=None, set=None, margin="60", timeout="10",
                 pipeline="256", **kwargs):
        super(ParapetAction, self).__init__(jail, name)
        self.socket_path = socket or os.environ.get("PARAPET_SOCKET") or DEFAULT_SOCKET
        jail_name = getattr(jail, "name", None) or str(name)
        self.set4 = set or ("f2b-" + jail_name)
        self.set6 = self.set4 + "-v6"
        self.margin = None if str(margin).lower() in ("off", "none", "no") else int(margin)
        self.io_timeout = float(timeout)
        self.window = min(4096, max(0, int(pipeline)))
        # One condition guards the connection, the id counter and the
        # requests in flight (id -> encoded line), oldest first.
        self._cv = threading.Condition()
        self._sock = None
        self._conn = 0  # bumped on every (re)connect: a stale reader exits
        self._next_id = 1
        self._inflight = collections.OrderedDict()
        self._replies = {}  # id -> reply, for requests someone waits on
        self._waited = {}  # ids whose caller waits (`set` is an option here)

    # -- connection -------------------------------------------------------

    def _close(self):
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._conn += 1
        self._cv.notify_all()

    def _connect(self):
        """(Re)connects and sends again every request still without a reply."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.io_timeout)
        s.connect(self.socket_path)
        self._sock = s
        self._conn += 1
        # The reader blocks without a timeout on its own descriptor: an idle
        # connection is fine; _close's shutdown wakes it.
        r = s.dup()
        r.settimeout(None)
        t = threading.Thread(target=self._read_replies, args=(r, self._conn), daemon=True)
        t.start()
        pending = b"".join(self._inflight.values())
        if pending:
            s.sendall(pending)

    def _read_replies(self, sock, conn):
        with sock, sock.makefile("rb") as rfile:
            self._read_loop(rfile, conn)

    def _read_loop(self, rfile, conn):
        while True:
            try:
                line = rfile.readline()
            except (OSError, ValueError):
                line = b""
            with self._cv:
                if conn != self._conn:
                    return
                if not line:
                    # The writer reconnects and resends on its next call.
                    self._close()
                    return
                try:
                    reply = json.loads(line)
                    rid = reply.get("id")
                    expected = next(iter(self._inflight), None)
                    if rid != expected:
                        raise ValueError("reply id %r, expected %r" % (rid, expected))
                except ValueError as e:
                    self._logSys.error("parapet: %s: bad reply: %s", self.socket_path, e)
                    self._close()
                    return
                line_sent = self._inflight.pop(rid)
                if rid in self._waited:
                    self._waited.pop(rid, None)
                    self._replies[rid] = reply
                elif not reply.get("ok"):
                    err = reply.get("error") or {}
                    self._logSys.error("parapet: request %s failed: %s: %s",
                                       line_sent.decode(errors="replace").strip(),
                                       err.get("code"), err.get("msg"))
                self._cv.notify_all()

    def _send(self, req, wait):
        """Writes one request; with `wait`, returns its reply (raising on an
        error reply). Without, returns once the window has room."""
        deadline = time.monotonic() + self.io_timeout
        with self._cv:
            rid = self._next_id
            self._next_id += 1
            line = (json.dumps(dict(req, v=1, id=rid), separators=(",", ":")) + "\n").encode()
            if wait:
                self._waited[rid] = True
            self._inflight[rid] = line
            sent_on = None  # the connection `line` was written on
            reconnects = 0
            while True:
                try:
                    if self._sock is None:
                        if reconnects == 2:
                            raise OSError("connection lost twice")
                        reconnects += 1
                        self._connect()  # writes every request in flight
                        sent_on = self._conn
                    elif sent_on is None:
                        self._sock.sendall(line)
                        sent_on = self._conn
                    if wait and rid in self._replies:
                        reply = self._replies.pop(rid)
                        break
                    if not wait and len(self._inflight) <= self.window:
                        return None
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise OSError("no reply within %ss" % self.io_timeout)
                    self._cv.wait(left)
                except OSError as e:
                    if self._sock is not None:
                        self._close()
                    # Give up on this request only; earlier ones stay queued
                    # and go out again with the next connection.
                    self._inflight.pop(rid, None)
                    self._waited.pop(rid, None)
                    raise ParapetError("parapetd at %s: %s" % (self.socket_path, e))
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise ParapetError("%s: %s" % (err.get("code"), err.get("msg")))
        return reply

    def _call(self, req):
        """Sends one request after every earlier one and returns its reply."""
        return self._send(req, wait=True)

    # -- fail2ban action API -------------------------------------------------

    def _set_for(self, ip):
        return self.set6 if ":" in ip else self.set4

    def start(self):
        for name, typ in ((self.set4, "ipv4_addr"), (self.set6, "ipv6_addr")):
            self._call({"cmd": "set.create", "set": name, "type": typ, "flags": ["timeout"], "exist": True})
        self._logSys.info("parapet: jail bans go to sets %s and %s via %s", self.set4, self.set6, self.socket_path)

    def stop(self):
        # Bans stay in parapetd: fail2ban flushes (or unbans) them itself
        # before stopping when it means to. A ping drains the window first.
        try:
            self._call({"cmd": "ping"})
        finally:
            with self._cv:
                self._close()

    def _timeout(self, aInfo):
        if self.margin is None:
            return 0
        try:
            bt = int(aInfo["bantime"])
        except (KeyError, TypeError, ValueError):
            return 0
        return 0 if bt < 0 else bt + self.margin

    def ban(self, aInfo):
        ip = str(aInfo["ip"])
        req = {"cmd": "set.add", "set": self._set_for(ip), "elems": [ip], "timeout": self._timeout(aInfo)}
        self._send(req, wait=self.window == 0)

    def reban(self, aInfo):
        # Re-adding refreshes the timeout; no unban/ban pair.
        return self.ban(aInfo)

    def unban(self, aInfo):
        ip = str(aInfo["ip"])
        self._send({"cmd": "set.del", "set": self._set_for(ip), "elems": [ip]}, wait=self.window == 0)

    def flush(self):
        for name in (self.set4, self.set6):
            self._call({"cmd": "set.flush", "set": name})
        return True


Action = ParapetAction
