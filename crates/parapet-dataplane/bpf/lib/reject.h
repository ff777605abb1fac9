/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * reject.h - REJECT: turn the frame into the answer (a TCP reset or an
 * ICMP / ICMPv6 error) in place, within the global reply rate.
 */
#ifndef PARAPET_LIB_REJECT_H
#define PARAPET_LIB_REJECT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "maps.h"
#include "counters.h"
#include "gcra.h"
#include "parse.h"

#define PARAPET_IP_TTL 64 /* net.ipv4.ip_default_ttl / IPv6 hop limit default */

/* Where a REJECT reply's L3 packet is assembled before it replaces the
 * frame's contents.  Larger than the biggest reply so that every
 * checksum chunk (up to 512 bytes from any offset below the maximum)
 * stays inside it for the verifier. */
#define PARAPET_REPLY_BUF (PARAPET_REJECT_MAX_L3 + 512 + 8)
struct parapet_reply_buf {
	__u8 b[PARAPET_REPLY_BUF];
	/* the frame's L2 header, the quoted TCP header and the checksum's
	 * pseudo-header: here, not on the stack, whose bytes the hook
	 * entries need for the walker's call chain (docs/dataplane.md,
	 * "Stack") */
	__u8 l2[24];
	__u8 mac[8];
	__u8 th[20];
	__u8 ph[40];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_reply_buf);
} parapet_reply SEC(".maps");

/* The reply a REJECT type asks for: ICMP (type, code), a TCP reset, or
 * nothing (type of the other family, tcp-reset on non-TCP, unknown). */
struct reject_plan {
	__u8 rst;
	__u8 icmp_type;
	__u8 icmp_code;
	__u8 ok;
};

static __always_inline struct reject_plan reject_plan(__u32 rtype, int v6,
						      __u8 proto)
{
	struct reject_plan p = { .ok = 1 };
	__u8 v4c = 0xff, v6c = 0xff;

	switch (rtype) {
	case PARAPET_REJECT_DEFAULT:
	case PARAPET_REJECT_ICMPX_PORT_UNREACHABLE: v4c = 3; v6c = 4; break;
	case PARAPET_REJECT_ICMP_NET_UNREACHABLE: v4c = 0; break;
	case PARAPET_REJECT_ICMP_HOST_UNREACHABLE: v4c = 1; break;
	case PARAPET_REJECT_ICMP_PORT_UNREACHABLE: v4c = 3; break;
	case PARAPET_REJECT_ICMP_PROTO_UNREACHABLE: v4c = 2; break;
	case PARAPET_REJECT_ICMP_NET_PROHIBITED: v4c = 9; break;
	case PARAPET_REJECT_ICMP_HOST_PROHIBITED: v4c = 10; break;
	case PARAPET_REJECT_ICMP_ADMIN_PROHIBITED: v4c = 13; break;
	case PARAPET_REJECT_ICMP6_NO_ROUTE: v6c = 0; break;
	case PARAPET_REJECT_ICMP6_ADM_PROHIBITED: v6c = 1; break;
	case PARAPET_REJECT_ICMP6_ADDR_UNREACHABLE: v6c = 3; break;
	case PARAPET_REJECT_ICMP6_PORT_UNREACHABLE: v6c = 4; break;
	case PARAPET_REJECT_ICMP6_POLICY_FAIL: v6c = 5; break;
	case PARAPET_REJECT_ICMP6_REJECT_ROUTE: v6c = 6; break;
	case PARAPET_REJECT_ICMPX_NO_ROUTE: v4c = 0; v6c = 0; break;
	case PARAPET_REJECT_ICMPX_ADMIN_PROHIBITED: v4c = 13; v6c = 1; break;
	case PARAPET_REJECT_ICMPX_HOST_UNREACHABLE: v4c = 1; v6c = 3; break;
	case PARAPET_REJECT_TCP_RESET:
		p.rst = 1;
		p.ok = proto == IPPROTO_TCP;
		return p;
	default:
		p.ok = 0;
		return p;
	}
	p.icmp_type = v6 ? 1 : 3;
	p.icmp_code = v6 ? v6c : v4c;
	p.ok = p.icmp_code != 0xff;
	return p;
}

/*
 * Packets that never get an answer (RFC 1122 3.2.2, RFC 4443 2.4 (e),
 * icmp_send / icmp6_send / nf_send_reset): ICMP errors, TCP resets,
 * non-first fragments, link-layer broadcast or multicast, and IP
 * broadcast, multicast or unspecified addresses.
 */
static __always_inline int reject_eligible(const struct parapet_key *key,
					   const __u8 *dmac)
{
	if (dmac[0] & 1)
		return 0;
	if (key->frag & PARAPET_FRAG_LATER)
		return 0;
	if (key->proto == IPPROTO_TCP && (key->tcp_flags & TCPF_RST))
		return 0;
	if (key->family == PARAPET_FAMILY_IPV4) {
		__u8 s0 = key->src[12], d0 = key->dst[12];
		__u32 d, sa;
		__builtin_memcpy(&d, &key->dst[12], 4);
		__builtin_memcpy(&sa, &key->src[12], 4);
		if (d == 0xffffffff || (d0 & 0xf0) == 0xe0 || d == 0)
			return 0;
		if (sa == 0 || sa == 0xffffffff || (s0 & 0xf0) == 0xe0)
			return 0;
		if (key->proto == IPPROTO_ICMP) {
			__u8 t = key->icmp_type;
			if (t == 3 || t == 4 || t == 5 || t == 11 || t == 12 || t > 18)
				return 0;
		}
	} else {
		__u64 s0, s1;
		if (key->dst[0] == 0xff || key->src[0] == 0xff)
			return 0;
		__builtin_memcpy(&s0, key->src, 8);
		__builtin_memcpy(&s1, &key->src[8], 8);
		if (s0 == 0 && s1 == 0)
			return 0;
		if (key->proto == IPPROTO_ICMPV6 &&
		    (key->icmp_type < 128 || key->icmp_type == 137))
			return 0;
	}
	return 1;
}

/* Internet checksum of buf[off, off + len): len a multiple of 4, at most
 * 1536; chained through seed. */
static __always_inline __s64 csum_buf(__u8 *buf, __u32 off, __u32 len, __s64 seed)
{
	int i;

#pragma unroll
	for (i = 0; i < 3; i++) {
		__u32 n = len > 512 ? 512 : len;
		if (n == 0)
			break;
		if (off > PARAPET_REJECT_MAX_L3 || seed < 0)
			return -1;
		seed = bpf_csum_diff(0, 0, (__be32 *)(buf + off), n, (__u32)seed);
		off += n;
		len -= n;
	}
	return seed;
}

static __always_inline __u16 csum_fold(__s64 s)
{
	__u32 x = (__u32)s;

	x = (x & 0xffff) + (x >> 16);
	x = (x & 0xffff) + (x >> 16);
	return (__u16)~x;
}

/* Checksum of a transport message at buf[off, off + len) with its
 * pseudo-header (RFC 793 / RFC 8200 8.1), stored at buf[off + at]. */
static __always_inline int l4_csum(struct parapet_reply_buf *rb, int v6,
				   const struct parapet_key *key, __u8 proto,
				   __u32 off, __u32 len, __u32 at)
{
	__u8 *buf = rb->b, *ph = rb->ph;
	__s64 s;

	__builtin_memset(ph, 0, sizeof(rb->ph));
	/* the reply goes from the packet's destination to its source */
	if (v6) {
		__builtin_memcpy(ph, key->dst, 16);
		__builtin_memcpy(ph + 16, key->src, 16);
		ph[34] = len >> 8;
		ph[35] = len;
		ph[39] = proto;
		s = bpf_csum_diff(0, 0, (__be32 *)ph, 40, 0);
	} else {
		__builtin_memcpy(ph, &key->dst[12], 4);
		__builtin_memcpy(ph + 4, &key->src[12], 4);
		ph[9] = proto;
		ph[10] = len >> 8;
		ph[11] = len;
		s = bpf_csum_diff(0, 0, (__be32 *)ph, 12, 0);
	}
	s = csum_buf(buf, off, (len + 3) & ~3u, s);
	if (s < 0 || off + at > PARAPET_REJECT_MAX_L3)
		return -1;
	__u16 c = csum_fold(s);
	__builtin_memcpy(buf + off + at, &c, 2);
	return 0;
}

/* The reply's IP header at buf[0]: 20 bytes (IPv4) or 40 (IPv6). */
static __always_inline void reply_ip(__u8 *buf, int v6,
				     const struct parapet_key *key, __u8 proto,
				     __u32 l3len, __u8 tos, __u16 frag)
{
	if (v6) {
		__builtin_memset(buf, 0, 40);
		buf[0] = 0x60;
		buf[4] = (l3len - 40) >> 8;
		buf[5] = l3len - 40;
		buf[6] = proto;
		buf[7] = PARAPET_IP_TTL;
		__builtin_memcpy(buf + 8, key->dst, 16);
		__builtin_memcpy(buf + 24, key->src, 16);
		return;
	}
	__builtin_memset(buf, 0, 20);
	buf[0] = 0x45;
	buf[1] = tos;
	buf[2] = l3len >> 8;
	buf[3] = l3len;
	buf[6] = frag >> 8;
	buf[7] = frag;
	buf[8] = PARAPET_IP_TTL;
	buf[9] = proto;
	__builtin_memcpy(buf + 12, &key->dst[12], 4);
	__builtin_memcpy(buf + 16, &key->src[12], 4);
	__u16 c = csum_fold(bpf_csum_diff(0, 0, (__be32 *)buf, 20, 0));
	__builtin_memcpy(buf + 10, &c, 2);
}

/* Frame access for both hooks; `hook` is a constant at every call site. */
static __always_inline long pkt_load(void *ctx, __u32 hook, __u32 off,
				     void *to, __u32 len)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_load_bytes(ctx, off, to, len);
	return bpf_xdp_load_bytes(ctx, off, to, len);
}

static __always_inline long pkt_store(void *ctx, __u32 hook, __u32 off,
				      void *from, __u32 len)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_store_bytes(ctx, off, from, len, 0);
	return bpf_xdp_store_bytes(ctx, off, from, len);
}

/*
 * Make the frame len bytes long; its contents are rewritten afterwards.
 * cur: the XDP frame's length now (the verifier refuses the 32-bit
 * pointer arithmetic that computing it here compiles to).  XDP grows at
 * the head: every XDP buffer has XDP_PACKET_HEADROOM there, while room at
 * the tail depends on the driver (veth's copies of skbs have none).
 */
static __always_inline long pkt_resize(void *ctx, __u32 hook, __u32 len,
				       __u32 cur)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_change_tail(ctx, len, 0);
	int d = (int)len - (int)cur;
	if (d > 0)
		return bpf_xdp_adjust_head(ctx, -d);
	return bpf_xdp_adjust_tail(ctx, d);
}

/*
 * Turn the frame into the REJECT answer, in place: the Ethernet header
 * (and any VLAN tags) stay with the MACs swapped, the L3 packet becomes
 * a TCP reset (nf_reject_ip_tcphdr_put) or an ICMP / ICMPv6 error quoting
 * the packet (IPv4: its header + 8 bytes, RFC 792; IPv6: as much as fits
 * in 1280 bytes, RFC 4443).  Returns 1 when the frame is the answer and
 * should go back out, 0 to drop.
 */
static __always_inline int reject_reply(void *ctx, __u32 hook,
					const struct parapet_key *key,
					const struct parapet_offs *offs,
					__u32 rtype, __u32 frame_len)
{
	__u32 zero = 0;
	struct parapet_reply_buf *rb = bpf_map_lookup_elem(&parapet_reply, &zero);
	int v6 = key->family == PARAPET_FAMILY_IPV6;
	struct reject_plan p = reject_plan(rtype, v6, key->proto);
	__u32 l3 = offs->l3, l4 = offs->l4, rlen;

	if (!rb) {
		stat_inc(PARAPET_STAT_REJECT_FAILED);
		return 0;
	}
	__u8 *l2 = rb->l2;
	/* Ethernet and up to two VLAN tags: 14 <= l3 <= 22 */
	if (l3 < 14 || l3 > sizeof(rb->l2) ||
	    pkt_load(ctx, hook, 0, l2, l3) < 0 || !p.ok ||
	    !reject_eligible(key, l2)) {
		stat_inc(PARAPET_STAT_REJECT_NO_REPLY);
		return 0;
	}
	if (hook == PARAPET_HOOK_TC && ((struct __sk_buff *)ctx)->gso_size) {
		/* a GRO super-packet: trimming it would keep its GSO state */
		stat_inc(PARAPET_STAT_REJECT_NO_REPLY);
		return 0;
	}
	if (!gcra_admit(bpf_map_lookup_elem(&parapet_reject_limit, &zero))) {
		stat_inc(PARAPET_STAT_REJECT_LIMITED);
		return 0;
	}
	if (l3 > PARAPET_MAX_OFF || l4 > PARAPET_MAX_OFF)
		goto fail;
	__u8 *buf = rb->b;
	__u32 hl = v6 ? 40 : 20;

	if (p.rst) {
		__u8 *th = rb->th;
		if (l4 <= l3 || pkt_load(ctx, hook, l4, th, 20) < 0)
			goto fail;
		/* segment length: the datagram past the IP headers */
		__u32 seglen = key->pkt_len - (l4 - l3);
		__u32 doff = (th[12] >> 4) * 4;
		__u8 *t = buf + hl;
		rlen = hl + 20;
		__builtin_memset(t, 0, 20);
		t[0] = th[2];
		t[1] = th[3];
		t[2] = th[0];
		t[3] = th[1];
		t[12] = 5 << 4;
		if (th[13] & TCPF_ACK) {
			__builtin_memcpy(t + 4, th + 8, 4);
			t[13] = TCPF_RST;
		} else {
			__u32 seq = ((__u32)th[4] << 24) | ((__u32)th[5] << 16) |
				    ((__u32)th[6] << 8) | th[7];
			seq += seglen - doff + !!(th[13] & TCPF_SYN) +
			       !!(th[13] & TCPF_FIN);
			t[8] = seq >> 24;
			t[9] = seq >> 16;
			t[10] = seq >> 8;
			t[11] = seq;
			t[13] = TCPF_RST | TCPF_ACK;
		}
		reply_ip(buf, v6, key, IPPROTO_TCP, rlen, 0, 0x4000 /* DF */);
		if (l4_csum(rb, v6, key, IPPROTO_TCP, hl, 20, 16) < 0)
			goto fail;
	} else {
		__u32 q;
		__u32 il = hl + 8; /* IP + ICMP header */
		if (v6) {
			q = key->pkt_len;
			if (q > PARAPET_REJECT_MAX_L3 - 48)
				q = PARAPET_REJECT_MAX_L3 - 48;
		} else {
			/* header + 64 bits of data, RFC 792 */
			q = l4 > l3 ? l4 - l3 + 8 : 28;
			if (q > key->pkt_len)
				q = key->pkt_len;
			if (q > 68)
				q = 68;
		}
		if (q < 1 || q > PARAPET_REJECT_MAX_L3 - 48)
			goto fail;
		if (pkt_load(ctx, hook, l3, buf + il, q) < 0)
			goto fail;
		rlen = il + q;
		/* zero the bytes after the reply up to a 4-byte boundary */
		if (rlen > PARAPET_REJECT_MAX_L3)
			goto fail;
		buf[rlen] = 0;
		buf[rlen + 1] = 0;
		buf[rlen + 2] = 0;
		__u8 *ic = buf + hl;
		ic[0] = p.icmp_type;
		ic[1] = p.icmp_code;
		__builtin_memset(ic + 2, 0, 6);
		/* IPv4: TOS as icmp_send sets it for errors */
		reply_ip(buf, v6, key, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP, rlen,
			 0xc0, 0);
		if (v6) {
			if (l4_csum(rb, 1, key, IPPROTO_ICMPV6, 40, rlen - 40, 2) < 0)
				goto fail;
		} else {
			__s64 s = csum_buf(buf, 20, (rlen - 20 + 3) & ~3u, 0);
			if (s < 0)
				goto fail;
			__u16 c = csum_fold(s);
			__builtin_memcpy(buf + 22, &c, 2);
		}
	}
	if (rlen > PARAPET_REJECT_MAX_L3)
		goto fail;
	if (pkt_resize(ctx, hook, l3 + rlen, frame_len) < 0)
		goto fail;
	__builtin_memcpy(rb->mac, l2, 6);
	__builtin_memcpy(l2, l2 + 6, 6);
	__builtin_memcpy(l2 + 6, rb->mac, 6);
	if (l3 < 14 || l3 > sizeof(rb->l2) ||
	    pkt_store(ctx, hook, 0, l2, l3) < 0 ||
	    pkt_store(ctx, hook, l3, buf, rlen) < 0)
		goto fail;
	stat_inc(PARAPET_STAT_REJECT_SENT);
	return 1;
fail:
	stat_inc(PARAPET_STAT_REJECT_FAILED);
	return 0;
}

#endif /* PARAPET_LIB_REJECT_H */
