/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rev_path.h - the reverse-path outcome (key word 56, parapet_model::
 * rev_path) as nft's `fib saddr [. iif] oif` reads it: the host's route
 * back to the packet's source, looked up with bpf_fib_lookup from the
 * XDP and tc ingress entries (docs/dataplane.md, "Reverse path").
 *
 * The kernel's rules (net/ipv4/netfilter/nft_fib_ipv4.c, net/ipv6/
 * netfilter/nft_fib_ipv6.c), mapped onto the helper's answers:
 *   - skipped lookups store the input interface (IIF): a packet from
 *     loopback (the lo device, skb->pkt_type PACKET_LOOPBACK); IPv4 from
 *     0.0.0.0 to 255.255.255.255 or 224.0.0.0/24; IPv6 ICMPv6 from :: to a
 *     link-local destination (DAD, router solicitations);
 *   - an IPv6 link-local source is looked up on the input interface only
 *     (RT6_LOOKUP_F_IFACE): IIF, the input interface's fe80::/64;
 *   - a route found (SUCCESS, or NO_NEIGH: the helper found the route but
 *     not the neighbour): IIF when its device is the input interface,
 *     else OTHER;
 *   - BLACKHOLE, UNREACHABLE, PROHIBIT (nft: the lookup fails) and
 *     NOT_FWDED (a local, broadcast or anycast route: nft stores nothing
 *     for a local one) are NONE;
 *   - anything else (FWD_DISABLED: forwarding off at lo, an error) is not
 *     an outcome: 0xff,
 *     and the walker abandons an image that reads it (walk.h) rather
 *     than guess.
 * The flow is nft's: the source as the destination, the packet's
 * destination as the source (0 / :: when it is multicast, broadcast,
 * zeronet or link-local, which nft does not use as a source either), from
 * loopback (nft's flowi_iif), the DSCP for IPv4, no mark; the route's
 * device is then compared with the input interface.
 *
 * Looked up only while parapet_config[PARAPET_CFG_REV_PATH] is on (installs
 * set it when a ruleset has the check): other packets cost one load.
 */
#ifndef PARAPET_LIB_REV_PATH_H
#define PARAPET_LIB_REV_PATH_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "maps.h"

#define PARAPET_REV_PATH_IIF 0
#define PARAPET_REV_PATH_OTHER 1
#define PARAPET_REV_PATH_NONE 2
/* the lookup gave no outcome: the walk is abandoned (walk.h) */
#define PARAPET_REV_PATH_UNKNOWN 0xff

#define PARAPET_REV_AF_INET 2
#define PARAPET_REV_AF_INET6 10
#define PARAPET_LOOPBACK_IFINDEX 1
#define PARAPET_PACKET_LOOPBACK_RAW 5

/* The reverse-path switch (PARAPET_CFG_REV_PATH), one inlined array load. */
static __always_inline int rev_path_on(void)
{
	__u32 k = PARAPET_CFG_REV_PATH;
	__u32 *v = bpf_map_lookup_elem(&parapet_config, &k);

	return v && *v;
}

/* IPv6 address classes ipv6_addr_type reports as link-local: fe80::/10
 * and multicast of link scope (ffX2::). */
static __always_inline int v6_link_local(const __u8 *a)
{
	return (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||
	       (a[0] == 0xff && (a[1] & 0x0f) == 0x02);
}

/* What bpf_ipv6_fib_lookup refuses as an address (rt6_need_strict):
 * multicast, link-local, loopback. */
static __always_inline int v6_strict(const __u8 *a)
{
	__u32 lo_zero = 0;
	int i;

	if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80))
		return 1;
#pragma unroll
	for (i = 0; i < 15; i++)
		lo_zero |= a[i];
	return lo_zero == 0 && a[15] == 1;
}

static __always_inline int v6_any(const __u8 *a)
{
	__u32 z = 0;
	int i;

#pragma unroll
	for (i = 0; i < 16; i++)
		z |= a[i];
	return z == 0;
}

/*
 * The outcome for the parsed `key` that arrived on `ifindex`; `ctx` is the
 * program's context (XDP or tc: bpf_fib_lookup takes either), `looped` 1
 * for a looped-back copy (skb->pkt_type PACKET_LOOPBACK at tc).
 */
static __always_inline __u8 rev_path_of(void *ctx,
					const struct parapet_key *key,
					__u32 ifindex, int looped)
{
	struct bpf_fib_lookup p;
	long rc;

	if (ifindex == PARAPET_LOOPBACK_IFINDEX || looped)
		return PARAPET_REV_PATH_IIF;
	__builtin_memset(&p, 0, sizeof(p));
	p.l4_protocol = key->proto;
	/* nft's flow comes from loopback (flowi_iif = LOOPBACK_IFINDEX); the
	 * helper also wants forwarding on at that device (conf/lo/forwarding,
	 * which parapetd turns on: src/rev_path.rs), else FWD_DISABLED */
	p.ifindex = PARAPET_LOOPBACK_IFINDEX;
	if (key->family == PARAPET_FAMILY_IPV4) {
		__u32 s, d;

		__builtin_memcpy(&s, &key->src[12], 4);
		__builtin_memcpy(&d, &key->dst[12], 4);
		s = bpf_ntohl(s);
		d = bpf_ntohl(d);
		if ((s >> 24) == 0 &&
		    (d == 0xffffffffu || (d >> 8) == 0xe00000))
			return PARAPET_REV_PATH_IIF;
		p.family = PARAPET_REV_AF_INET;
		p.tos = key->dscp << 2;
		p.ipv4_dst = bpf_htonl(s);
		/* nft's get_saddr: no multicast, broadcast or zeronet source */
		if ((d >> 28) != 0xe && d != 0xffffffffu && (d >> 24) != 0)
			p.ipv4_src = bpf_htonl(d);
	} else if (key->family == PARAPET_FAMILY_IPV6) {
		if (key->proto == 58 && v6_any(key->src) &&
		    v6_link_local(key->dst))
			return PARAPET_REV_PATH_IIF;
		if (v6_link_local(key->src))
			return PARAPET_REV_PATH_IIF;
		p.family = PARAPET_REV_AF_INET6;
		__builtin_memcpy(p.ipv6_dst, key->src, 16);
		if (!v6_strict(key->dst))
			__builtin_memcpy(p.ipv6_src, key->dst, 16);
	} else {
		return PARAPET_REV_PATH_IIF;
	}
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), BPF_FIB_LOOKUP_SKIP_NEIGH);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return p.ifindex == ifindex ? PARAPET_REV_PATH_IIF :
					      PARAPET_REV_PATH_OTHER;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return PARAPET_REV_PATH_NONE;
	}
	return PARAPET_REV_PATH_UNKNOWN;
}

#endif /* PARAPET_LIB_REV_PATH_H */
