"""Tiny ClassBench readers shared by gen_trace.py and check.py (stdlib only)."""
import gzip


def _open(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt")
    return open(path, "rt")


def _ip(s):
    a, b, c, d = (int(x) for x in s.split("."))
    return a << 24 | b << 16 | c << 8 | d


def read_rules(path):
    """Return a list of (slo, shi, dlo, dhi, splo, sphi, dplo, dphi, pv, pm)."""
    rules = []
    with _open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            t = line.lstrip("@").replace(":", " ").split()
            # t: src/len dst/len splo sphi dplo dphi proto/mask [flags/mask]
            out = []
            for pfx in t[0:2]:
                addr, plen = pfx.split("/")
                plen = int(plen)
                mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF if plen else 0
                lo = _ip(addr) & mask
                out += [lo, lo | (~mask & 0xFFFFFFFF)]
            out += [int(x) for x in t[2:6]]
            pv, pm = (int(x, 16) for x in t[6].split("/"))
            out += [pv & pm, pm]
            rules.append(tuple(out))
    return rules


def read_trace(path):
    """Return a list of (sip, dip, sport, dport, proto, gen_index or None)."""
    pkts = []
    with _open(path) as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            gen = int(t[6]) if len(t) >= 7 else None
            pkts.append((int(t[0]), int(t[1]), int(t[2]), int(t[3]), int(t[4]), gen))
    return pkts


def matches(r, p):
    return (r[0] <= p[0] <= r[1] and r[2] <= p[1] <= r[3]
            and r[4] <= p[2] <= r[5] and r[6] <= p[3] <= r[7]
            and (p[4] & r[9]) == r[8])


def first_match(rules, p):
    for i, r in enumerate(rules):
        if matches(r, p):
            return i
    return -1
