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
#
# One connection is opened on start and kept; a broken connection (daemon
# restart) is reopened once per call. No process is spawned per ban.
# Protocol: docs/daemon.md (one JSON object per line each way).

import json
import os
import socket
import threading

from fail2ban.server.action import ActionBase

DEFAULT_SOCKET = "/run/parapet/parapet.sock"


class ParapetError(Exception):
    pass


class ParapetAction(ActionBase):
    def __init__(self, jail, name, socket=None, set=None, margin="60", timeout="10", **kwargs):
        super(ParapetAction, self).__init__(jail, name)
        self.socket_path = socket or os.environ.get("PARAPET_SOCKET") or DEFAULT_SOCKET
        jail_name = getattr(jail, "name", None) or str(name)
        self.set4 = set or ("f2b-" + jail_name)
        self.set6 = self.set4 + "-v6"
        self.margin = None if str(margin).lower() in ("off", "none", "no") else int(margin)
        self.io_timeout = float(timeout)
        self._lock = threading.Lock()
        self._sock = None
        self._rfile = None
        self._next_id = 1

    # -- connection -------------------------------------------------------

    def _close(self):
        for f in (self._rfile, self._sock):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        self._sock = self._rfile = None

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.io_timeout)
        s.connect(self.socket_path)
        self._sock = s
        self._rfile = s.makefile("rb")

    def _call(self, req):
        """Sends one request, returns the reply dict; raises on error replies."""
        with self._lock:
            for attempt in (0, 1):
                try:
                    if self._sock is None:
                        self._connect()
                    rid = self._next_id
                    self._next_id += 1
                    msg = dict(req, v=1, id=rid)
                    self._sock.sendall((json.dumps(msg, separators=(",", ":")) + "\n").encode())
                    line = self._rfile.readline()
                    if not line:
                        raise OSError("parapetd closed the connection")
                    reply = json.loads(line)
                    if reply.get("id") != rid:
                        raise OSError("reply id %r does not match request %d" % (reply.get("id"), rid))
                    break
                except (OSError, ValueError) as e:
                    self._close()
                    if attempt:
                        raise ParapetError("parapetd at %s: %s" % (self.socket_path, e))
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise ParapetError("%s: %s" % (err.get("code"), err.get("msg")))
        return reply

    # -- fail2ban action API -------------------------------------------------

    def _set_for(self, ip):
        return self.set6 if ":" in ip else self.set4

    def start(self):
        for name, typ in ((self.set4, "ipv4_addr"), (self.set6, "ipv6_addr")):
            self._call({"cmd": "set.create", "set": name, "type": typ, "flags": ["timeout"], "exist": True})
        self._logSys.info("parapet: jail bans go to sets %s and %s via %s", self.set4, self.set6, self.socket_path)

    def stop(self):
        # Bans stay in parapetd: fail2ban flushes (or unbans) them itself
        # before stopping when it means to.
        with self._lock:
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
        self._call({"cmd": "set.add", "set": self._set_for(ip), "elems": [ip], "timeout": self._timeout(aInfo)})

    def reban(self, aInfo):
        # Re-adding refreshes the timeout; no unban/ban pair.
        return self.ban(aInfo)

    def unban(self, aInfo):
        ip = str(aInfo["ip"])
        self._call({"cmd": "set.del", "set": self._set_for(ip), "elems": [ip]})

    def flush(self):
        for name in (self.set4, self.set6):
            self._call({"cmd": "set.flush", "set": name})
        return True


Action = ParapetAction
