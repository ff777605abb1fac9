/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * conntrack.h - a packet's ctstate from the kernel's conntrack table,
 * through the nf_conntrack kfuncs, as xt_conntrack's --ctstate would see it.
 */
#ifndef PARAPET_LIB_CONNTRACK_H
#define PARAPET_LIB_CONNTRACK_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "counters.h"
#include "parse.h"

/* Non-zero: the conntrack kfuncs are linked in and TCP and UDP packets
 * are looked up in the kernel's conntrack table while parapet_config's
 * PARAPET_CFG_CT word is non-zero (ct_live()); 0: the lookup code is
 * removed by the verifier and every packet has parapet_ctstate (ctstate.h,
 * UNTRACKED).  Set by the loader, which turns it off when the kernel lacks
 * the kfuncs. */
const volatile __u32 parapet_ct_mode = 0;

/*
 * The kernel's conntrack table is read with the nf_conntrack kfuncs.  aya
 * 0.14 cannot link kfuncs; the loader patches these calls with the
 * running kernel's BTF ids (src/kfunc.rs), hence no __ksym here.  Only
 * nf_conn.status and the TCP state are read; preserve_access_index makes
 * their offsets CO-RE relocations against the kernel's structs.
 */
struct ip_ct_tcp {
	__u8 state; /* enum tcp_conntrack */
} __attribute__((preserve_access_index));

union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));

/* The original tuple's destination: the port (u.all: tcp/udp/sctp/dccp
 * port, ICMP type and code, …) and the layer-4 protocol. */
struct nf_conntrack_tuple {
	struct {
		union {
			__be16 all;
		} u;
		__u8 protonum;
	} dst;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));

struct nf_conn {
	struct nf_conntrack_tuple_hash tuplehash[2]; /* IP_CT_DIR_ORIGINAL, _REPLY */
	unsigned long status;
	union nf_conntrack_proto proto;
	__u32 mark;
} __attribute__((preserve_access_index));

/* enum tcp_conntrack: a connection that is over */
#define PARAPET_TCP_CONNTRACK_TIME_WAIT 7

/* struct bpf_ct_opts, net/netfilter/nf_conntrack_bpf.c, 12-byte form */
struct parapet_ct_opts {
	__s32 netns_id; /* -1: the packet's namespace */
	__s32 error;
	__u8 l4proto;
	__u8 dir; /* out: IP_CT_DIR_ORIGINAL 0 / IP_CT_DIR_REPLY 1 */
	__u8 reserved[2];
};
#define PARAPET_CT_OPTS_SZ 12

extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *ctx,
					 struct bpf_sock_tuple *tuple,
					 __u32 tuple_sz,
					 struct parapet_ct_opts *opts,
					 __u32 opts_sz);
extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *ctx,
					 struct bpf_sock_tuple *tuple,
					 __u32 tuple_sz,
					 struct parapet_ct_opts *opts,
					 __u32 opts_sz);
extern void bpf_ct_release(struct nf_conn *ct);

/* enum ip_conntrack_status bits */
#define PARAPET_IPS_EXPECTED 0x1
#define PARAPET_IPS_SEEN_REPLY 0x2

/*
 * tcp_error()'s flag check (nf_conntrack_proto_tcp.c, tcp_valid_flags):
 * with ECE, CWR and PSH masked off, only these combinations are valid;
 * anything else is INVALID before the table is consulted.
 */
static __always_inline int tcp_flags_valid(__u8 f)
{
	switch (f & (TCPF_FIN | TCPF_SYN | TCPF_RST | TCPF_ACK | TCPF_URG)) {
	case TCPF_SYN:
	case TCPF_SYN | TCPF_URG:
	case TCPF_SYN | TCPF_ACK:
	case TCPF_RST:
	case TCPF_RST | TCPF_ACK:
	case TCPF_FIN | TCPF_ACK:
	case TCPF_FIN | TCPF_ACK | TCPF_URG:
	case TCPF_ACK:
	case TCPF_ACK | TCPF_URG:
		return 1;
	}
	return 0;
}

/* What a lookup needs; filled by ct_prepare. */
struct ct_query {
	struct bpf_sock_tuple t;
	struct parapet_ct_opts opts;
	__u32 tuple_sz;
	__u8 icmp_error; /* the tuple is an ICMP error's quoted packet */
	__u8 tcp_flags;
};

/*
 * Fill q for a lookup and return -1, or return the state directly when no
 * lookup can say more: later fragments, protocols the kfuncs do not
 * handle (they take TCP and UDP only) and ICMP errors quoting anything
 * else are NEW; TCP flag combinations conntrack refuses are INVALID.
 */
static __always_inline int ct_prepare(void *data, void *data_end,
				      const struct parapet_key *key,
				      const struct parapet_offs *offs,
				      struct ct_query *q)
{
	int v6 = key->family == PARAPET_FAMILY_IPV6;
	__u8 proto = key->proto;
	__u32 l4 = offs->l4;

	if ((key->frag & PARAPET_FRAG_LATER) || l4 == 0)
		return PARAPET_CT_NEW;
	if (proto == IPPROTO_TCP && !tcp_flags_valid(key->tcp_flags))
		return PARAPET_CT_INVALID;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		q->tcp_flags = key->tcp_flags;
		q->opts.l4proto = proto;
		if (v6) {
			__builtin_memcpy(q->t.ipv6.saddr, key->src, 16);
			__builtin_memcpy(q->t.ipv6.daddr, key->dst, 16);
			q->t.ipv6.sport = bpf_htons(key->sport);
			q->t.ipv6.dport = bpf_htons(key->dport);
			q->tuple_sz = sizeof(q->t.ipv6);
		} else {
			__builtin_memcpy(&q->t.ipv4.saddr, &key->src[12], 4);
			__builtin_memcpy(&q->t.ipv4.daddr, &key->dst[12], 4);
			q->t.ipv4.sport = bpf_htons(key->sport);
			q->t.ipv4.dport = bpf_htons(key->dport);
			q->tuple_sz = sizeof(q->t.ipv4);
		}
		return -1;
	}
	/* ICMP errors: the state is the quoted packet's connection's */
	if (!v6 && proto == IPPROTO_ICMP) {
		__u8 ty = key->icmp_type;
		if (ty != 3 && ty != 4 && ty != 5 && ty != 11 && ty != 12)
			return PARAPET_CT_NEW;
		struct iphdr *in = HDR_AT(data, data_end, l4 + 8, sizeof(*in));
		if (!in || in->ihl < 5)
			return PARAPET_CT_INVALID;
		__u32 inl4 = l4 + 8 + in->ihl * 4;
		__u8 *ports = HDR_AT(data, data_end, inl4, 4);
		if (!ports)
			return PARAPET_CT_INVALID;
		if (in->protocol != IPPROTO_TCP && in->protocol != IPPROTO_UDP)
			return PARAPET_CT_NEW;
		q->opts.l4proto = in->protocol;
		q->t.ipv4.saddr = in->saddr;
		q->t.ipv4.daddr = in->daddr;
		__builtin_memcpy(&q->t.ipv4.sport, ports, 2);
		__builtin_memcpy(&q->t.ipv4.dport, ports + 2, 2);
		q->tuple_sz = sizeof(q->t.ipv4);
		q->icmp_error = 1;
		return -1;
	}
	if (v6 && proto == IPPROTO_ICMPV6) {
		if (key->icmp_type >= 128)
			return PARAPET_CT_NEW;
		struct ipv6hdr *in = HDR_AT(data, data_end, l4 + 8, sizeof(*in));
		if (!in)
			return PARAPET_CT_INVALID;
		__u8 *ports = HDR_AT(data, data_end, l4 + 8 + sizeof(*in), 4);
		if (!ports)
			return PARAPET_CT_INVALID;
		/* quoted extension headers are not walked */
		if (in->nexthdr != IPPROTO_TCP && in->nexthdr != IPPROTO_UDP)
			return PARAPET_CT_NEW;
		q->opts.l4proto = in->nexthdr;
		__builtin_memcpy(q->t.ipv6.saddr, &in->saddr, 16);
		__builtin_memcpy(q->t.ipv6.daddr, &in->daddr, 16);
		__builtin_memcpy(&q->t.ipv6.sport, ports, 2);
		__builtin_memcpy(&q->t.ipv6.dport, ports + 2, 2);
		q->tuple_sz = sizeof(q->t.ipv6);
		q->icmp_error = 1;
		return -1;
	}
	return PARAPET_CT_NEW;
}

/*
 * The lookup's result as xt_conntrack's --ctstate, following
 * resolve_normal_ct(): an entry seen in the reply direction, or one that
 * has seen a reply, is ESTABLISHED; an expected connection (IPS_EXPECTED)
 * is RELATED; otherwise NEW.  An ICMP error quoting a known connection is
 * RELATED, one quoting none is INVALID (nf_conntrack_inet_error).  With no
 * entry, UDP is NEW and TCP is what tcp_new() makes of the flags with
 * nf_conntrack_tcp_loose = 1: a SYN or a bare ACK is NEW, the rest
 * (SYN+ACK, FIN, RST, none) INVALID.
 */
static __always_inline __u8 ct_result(struct nf_conn *ct, struct ct_query *q)
{
	if (!ct) {
		if (q->icmp_error)
			return PARAPET_CT_INVALID;
		if (q->opts.l4proto == IPPROTO_TCP) {
			__u8 f = q->tcp_flags & (TCPF_SYN | TCPF_ACK | TCPF_RST | TCPF_FIN);
			return f == TCPF_SYN || f == TCPF_ACK ? PARAPET_CT_NEW :
								 PARAPET_CT_INVALID;
		}
		return PARAPET_CT_NEW;
	}
	stat_inc(PARAPET_STAT_CT_FOUND);
	unsigned long status = ct->status;
	__u8 dir = q->opts.dir;
	__u8 tcp_state = q->opts.l4proto == IPPROTO_TCP ? ct->proto.tcp.state : 0;

	bpf_ct_release(ct);
	if (q->icmp_error)
		return PARAPET_CT_RELATED;
	/* A SYN reusing the tuple of a connection that is over (TIME_WAIT,
	 * CLOSE) re-opens it: tcp_packet() kills the old entry and the SYN
	 * starts a new one, NEW. */
	if (dir == 0 && tcp_state >= PARAPET_TCP_CONNTRACK_TIME_WAIT &&
	    (q->tcp_flags & (TCPF_SYN | TCPF_ACK | TCPF_RST | TCPF_FIN)) == TCPF_SYN)
		return PARAPET_CT_NEW;
	if (dir == 1 || (status & PARAPET_IPS_SEEN_REPLY))
		return PARAPET_CT_ESTABLISHED;
	if (status & PARAPET_IPS_EXPECTED)
		return PARAPET_CT_RELATED;
	return PARAPET_CT_NEW;
}

/* True when this packet is to be looked up: the kfuncs are linked in
 * (load time) and user space has the switch on (run time). */
static __always_inline int ct_live(void)
{
	__u32 k = PARAPET_CFG_CT;
	__u32 *on;

	if (!parapet_ct_mode)
		return 0;
	on = bpf_map_lookup_elem(&parapet_config, &k);
	return on && *on;
}

/* The packet's ctstate; `hook` is a constant at every call site. */
static __always_inline __u8 ct_state(void *ctx, __u32 hook, void *data,
				     void *data_end,
				     const struct parapet_key *key,
				     const struct parapet_offs *offs)
{
	struct ct_query q;
	struct nf_conn *ct;

	__builtin_memset(&q, 0, sizeof(q));
	int st = ct_prepare(data, data_end, key, offs, &q);
	if (st >= 0)
		return st;
	q.opts.netns_id = -1;
	stat_inc(PARAPET_STAT_CT_LOOKUP);
	if (hook == PARAPET_HOOK_TC)
		ct = bpf_skb_ct_lookup(ctx, &q.t, q.tuple_sz, &q.opts,
				       PARAPET_CT_OPTS_SZ);
	else
		ct = bpf_xdp_ct_lookup(ctx, &q.t, q.tuple_sz, &q.opts,
				       PARAPET_CT_OPTS_SZ);
	return ct_result(ct, &q);
}

/*
 * ct_state as a subprogram of its own, one per program type (the kfunc
 * differs): the lookup's query (struct ct_query, 56 bytes) lives on this
 * frame, which returns before parapet_decide is called, instead of on the
 * entry's, which is on the walker's deepest call chain (docs/dataplane.md,
 * "Stack").  Static: verified in its caller's context, as when inlined.
 */
static __noinline __u8 ct_state_xdp(struct xdp_md *ctx,
				    const struct parapet_key *key,
				    const struct parapet_offs *offs)
{
	return ct_state(ctx, PARAPET_HOOK_XDP, (void *)(long)ctx->data,
			(void *)(long)ctx->data_end, key, offs);
}

static __noinline __u8 ct_state_tc(struct __sk_buff *skb,
				   const struct parapet_key *key,
				   const struct parapet_offs *offs)
{
	return ct_state(skb, PARAPET_HOOK_TC, (void *)(long)skb->data,
			(void *)(long)skb->data_end, key, offs);
}

#endif /* PARAPET_LIB_CONNTRACK_H */
