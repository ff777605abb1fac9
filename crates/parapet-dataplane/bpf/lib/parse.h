/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * parse.h - the packet parser: an Ethernet frame (up to two VLAN tags, IPv4
 * or IPv6 with its extension chain, the transport header) into a struct
 * parapet_key, plus where the headers were found (struct parapet_offs) for
 * conntrack and REJECT.  Its user-space twin is src/frame/parse.rs.
 */
#ifndef PARAPET_LIB_PARSE_H
#define PARAPET_LIB_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"

/* Pointer to len bytes at off, or NULL when they are not all in the packet. */
#define HDR_AT(data, data_end, off, len)                                        \
	({                                                                      \
		void *__p = (void *)0;                                          \
		__u32 __o = (off);                                              \
		if (__o <= PARAPET_MAX_OFF &&                                   \
		    (void *)(data) + __o + (len) <= (void *)(data_end))         \
			__p = (void *)(data) + __o;                             \
		__p;                                                            \
	})

/* 1 when the byte v is not 0, else 0, computed without a branch: the
 * empty asm hides v's range, so the compiler cannot turn (v + 255) >> 8
 * back into a comparison (which the BPF backend emits as a jump). */
static __always_inline __u32 byte_nonzero(__u32 v)
{
	asm volatile("" : "+r"(v));
	return ((v & 0xff) + 0xff) >> 8;
}

static __always_inline int is_ipv6_ext(__u8 nh)
{
	switch (nh) {
	case IPPROTO_HOPOPTS:	/* 0 */
	case IPPROTO_ROUTING:	/* 43 */
	case IPPROTO_FRAGMENT:	/* 44 */
	case IPPROTO_AH:	/* 51 */
	case IPPROTO_DSTOPTS:	/* 60 */
	case 135:		/* Mobility */
	case 139:		/* HIP */
	case 140:		/* Shim6 */
		return 1;
	}
	return 0;
}

/*
 * Read the two port fields of a transport header of fixed size `need` (a
 * compile-time constant after inlining, which the verifier needs for the
 * packet bounds check).
 */
static __always_inline __u8 *l4_hdr(void *data, void *data_end, __u32 l4off,
				    __u32 l3_end, const __u32 need, int *status)
{
	__u8 *p;

	*status = PARAPET_PARSE_TRUNCATED;
	if (l4off + need > l3_end)
		return 0;
	p = HDR_AT(data, data_end, l4off, need);
	if (p)
		*status = PARAPET_PARSE_OK;
	return p;
}

/*
 * Parse the transport header at l4off.  l3_end is where the IP datagram
 * ends (header-stated length): a transport header that does not fit in both
 * the datagram and the captured data is truncated.  Fixed header sizes are
 * required in full (TCP 20, UDP/UDP-Lite 8, SCTP/DCCP 12, ICMP/ICMPv6 4),
 * which also rejects "tiny first fragment" tricks that push the TCP flags
 * into the second fragment.
 */
static __always_inline int parse_l4(void *data, void *data_end, __u32 l4off,
				    __u32 l3_end, struct parapet_key *key,
				    __u32 *tcp_opt)
{
	int status = PARAPET_PARSE_OK;
	__u32 hl;
	__u8 *p;

	switch (key->proto) {
	case IPPROTO_TCP:
		p = l4_hdr(data, data_end, l4off, l3_end, 20, &status);
		if (!p)
			return status;
		/* data offset in 32-bit words: below 5 is not a TCP header */
		if ((p[12] >> 4) < 5)
			return PARAPET_PARSE_MALFORMED;
		key->tcp_flags = p[13];
		/* the option area's length for lib/tcp_options.h, or
		 * PARAPET_TCP_OPT_PAST when the data offset runs past the
		 * datagram (without a branch: the sign of what is left) */
		hl = (__u32)(p[12] >> 4) * 4;
		*tcp_opt = (hl - 20) |
			   ((__u32)((__s32)(l3_end - l4off - hl) >> 31) &
			    PARAPET_TCP_OPT_PAST);
		break;
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		p = l4_hdr(data, data_end, l4off, l3_end, 8, &status);
		if (!p)
			return status;
		break;
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
		p = l4_hdr(data, data_end, l4off, l3_end, 12, &status);
		if (!p)
			return status;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* ICMP in IPv6 or ICMPv6 in IPv4 is just an unknown protocol */
		if ((key->proto == IPPROTO_ICMP) !=
		    (key->family == PARAPET_FAMILY_IPV4))
			return PARAPET_PARSE_OK;
		p = l4_hdr(data, data_end, l4off, l3_end, 4, &status);
		if (!p)
			return status;
		key->icmp_type = p[0];
		key->icmp_code = p[1];
		return PARAPET_PARSE_OK;
	default:
		/* No ports to read: classify on addresses and proto. */
		return PARAPET_PARSE_OK;
	}
	key->sport = ((__u16)p[0] << 8) | p[1];
	key->dport = ((__u16)p[2] << 8) | p[3];
	return PARAPET_PARSE_OK;
}

/* Where the parser found the headers (for REJECT and conntrack). */
struct parapet_offs {
	__u32 l3; /* IP header */
	__u32 l4; /* transport header; 0 when there is none */
	/* the TCP option area: its length (0..PARAPET_TCP_OPT_MAX), or
	 * PARAPET_TCP_OPT_PAST when the data offset runs past the datagram;
	 * 0 for a packet that is not TCP (lib/tcp_options.h) */
	__u32 tcp_opt;
	/* the first IPv6 routing header, packed as Field::Routing
	 * (parapet_model::routing): 1 << 24 | type << 16 | segments left
	 * << 8 | hdrlen; 0 without one.  The entries copy it into the key
	 * extension.  (Narrowing l3/l4 to __u16 to keep 8 bytes lost the
	 * verifier the bounds of REJECT's pkt_load lengths.) */
	__u32 rt;
};

static __always_inline int parse_ipv4(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key,
				      struct parapet_offs *offs)
{
	struct iphdr *ip = HDR_AT(data, data_end, off, sizeof(struct iphdr));

	if (!ip)
		return PARAPET_PARSE_TRUNCATED;
	if (ip->version != 4 || ip->ihl < 5)
		return PARAPET_PARSE_MALFORMED;

	__u32 hlen = ip->ihl * 4;
	__u32 avail = frame_len - off;
	__u32 tot = bpf_ntohs(ip->tot_len);

	/* tot_len 0 is legal for GSO "BIG TCP" skbs at tc: use what we have */
	if (tot == 0)
		tot = avail;
	if (tot < hlen)
		return PARAPET_PARSE_MALFORMED;
	if (tot > avail || !HDR_AT(data, data_end, off, hlen))
		return PARAPET_PARSE_TRUNCATED;

	key->family = PARAPET_FAMILY_IPV4;
	key->proto = ip->protocol;
	key->pkt_len = tot;
	key->ttl = ip->ttl;
	key->dscp = ip->tos >> 2;
	__builtin_memcpy(&key->src[12], &ip->saddr, 4);
	__builtin_memcpy(&key->dst[12], &ip->daddr, 4);

	__u16 frag = bpf_ntohs(ip->frag_off);
	if (frag & 0x1fff) {
		/* Non-first fragment: no transport header.  Ports stay 0, so
		 * only rules without port/type matches can match it (the
		 * iptables rule). */
		key->frag = PARAPET_FRAG_FRAGMENT | PARAPET_FRAG_LATER;
		return PARAPET_PARSE_OK;
	}
	if (frag & 0x2000) /* MF: first fragment, has the L4 header */
		key->frag = PARAPET_FRAG_FRAGMENT;

	offs->l4 = off + hlen;
	return parse_l4(data, data_end, off + hlen, off + tot, key,
			&offs->tcp_opt);
}

static __always_inline int parse_ipv6(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key,
				      struct parapet_offs *offs)
{
	struct ipv6hdr *ip6 = HDR_AT(data, data_end, off, sizeof(struct ipv6hdr));

	if (!ip6)
		return PARAPET_PARSE_TRUNCATED;
	if (ip6->version != 6)
		return PARAPET_PARSE_MALFORMED;

	__u32 avail = frame_len - off;
	__u32 tot = bpf_ntohs(ip6->payload_len) + sizeof(struct ipv6hdr);

	/* payload_len 0: jumbogram or BIG TCP; use what we have */
	if (ip6->payload_len == 0)
		tot = avail;
	if (tot > avail)
		return PARAPET_PARSE_TRUNCATED;

	key->family = PARAPET_FAMILY_IPV6;
	key->pkt_len = tot;
	key->ttl = ip6->hop_limit;
	/* traffic class: the low nibble of byte 0, the high one of byte 1 */
	key->dscp = ((((__u8 *)ip6)[0] & 0xf) << 2) | (((__u8 *)ip6)[1] >> 6);
	__builtin_memcpy(key->src, &ip6->saddr, 16);
	__builtin_memcpy(key->dst, &ip6->daddr, 16);

	__u8 nh = ip6->nexthdr;
	__u32 cur = off + sizeof(struct ipv6hdr);
	__u32 l3_end = off + tot;
	__u32 rt = 0;
	int i;

	/* Bounded walk of the extension chain to the transport header. */
	for (i = 0; i < PARAPET_MAX_EXT_HDRS; i++) {
		if (!is_ipv6_ext(nh))
			break;
		__u8 *h = HDR_AT(data, data_end, cur, 8);
		if (!h || cur + 8 > l3_end)
			return PARAPET_PARSE_TRUNCATED;
		__u32 len;
		if (nh == IPPROTO_FRAGMENT) {
			__u16 fo = ((__u16)h[2] << 8) | h[3];
			len = 8;
			if (fo & 0xfff8) {
				/* non-first fragment: the upper header is in
				 * fragment one; h[0] names its protocol */
				key->frag = PARAPET_FRAG_FRAGMENT |
					    PARAPET_FRAG_LATER;
				key->proto = h[0];
				offs->rt = rt;
				return PARAPET_PARSE_OK;
			}
			/* offset 0 with M=0 is an "atomic fragment"
			 * (RFC 6946): a whole packet, not flagged */
			if (fo & 1)
				key->frag = PARAPET_FRAG_FRAGMENT;
		} else if (nh == IPPROTO_AH) {
			len = ((__u32)h[1] + 2) * 4;
		} else {
			len = ((__u32)h[1] + 1) * 8;
			/* an options or routing header longer than the
			 * datagram is truncated (ip6t_rt hot-drops such a
			 * routing header; the kernel's input drops both) */
			if (cur + len > l3_end)
				return PARAPET_PARSE_TRUNCATED;
			/* the first routing header, as ipv6_find_hdr
			 * finds it for -m rt and nft's rt, recorded
			 * without a branch: a branch would split the
			 * verifier's states for the rest of the program
			 * (docs/hooks.md, "Verifier budget"); rt >> 24 is 1
			 * once one is recorded */
			rt |= (1u << 24 | (__u32)h[2] << 16 |
			       (__u32)h[3] << 8 | h[1]) &
			      ((byte_nonzero(nh ^ IPPROTO_ROUTING) |
				(rt >> 24)) - 1);
		}
		nh = h[0];
		cur += len;
		if (cur > PARAPET_MAX_OFF)
			return PARAPET_PARSE_TRUNCATED;
	}
	if (is_ipv6_ext(nh))
		return PARAPET_PARSE_EXT_LIMIT;

	key->proto = nh;
	offs->l4 = cur;
	offs->rt = rt;
	return parse_l4(data, data_end, cur, l3_end, key, &offs->tcp_opt);
}

/*
 * Fill key from the frame in [data, data_end).  frame_len is the whole
 * frame's length (for tc it may exceed the linear data).  ifindex is set
 * by the caller.  Returns enum parapet_parse_status.
 */
static __noinline int parapet_parse(void *data, void *data_end,
					 __u32 frame_len,
					 struct parapet_key *key,
					 struct parapet_offs *offs)
{
	struct ethhdr *eth = HDR_AT(data, data_end, 0, sizeof(struct ethhdr));
	__u32 off = sizeof(struct ethhdr);
	__u16 proto;
	int i;

	key->pkt_len = frame_len;
	if (!eth)
		return PARAPET_PARSE_TRUNCATED;
	proto = bpf_ntohs(eth->h_proto);

	for (i = 0; i < PARAPET_MAX_VLAN_TAGS; i++) {
		if (proto != ETH_P_8021Q && proto != ETH_P_8021AD)
			break;
		__u8 *tag = HDR_AT(data, data_end, off, 4);
		if (!tag)
			return PARAPET_PARSE_TRUNCATED;
		if (i == 0) {
			key->flags |= PARAPET_KEY_F_VLAN;
			key->vlan_id = (((__u16)tag[0] << 8) | tag[1]) & 0x0fff;
		}
		proto = ((__u16)tag[2] << 8) | tag[3];
		off += 4;
	}
	/* a third tag: refuse rather than pass it unfiltered */
	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD)
		return PARAPET_PARSE_EXT_LIMIT;

	offs->l3 = off;
	if (proto == ETH_P_IP)
		return parse_ipv4(data, data_end, off, frame_len, key, offs);
	if (proto == ETH_P_IPV6)
		return parse_ipv6(data, data_end, off, frame_len, key, offs);
	return PARAPET_PARSE_NOT_IP;
}

/* ---- link-layer packet type (skb->pkt_type, PACKET_*) ------------------ */

#define PARAPET_PACKET_HOST 0
#define PARAPET_PACKET_BROADCAST 1
#define PARAPET_PACKET_MULTICAST 2
#define PARAPET_PACKET_LOOPBACK 5

/*
 * The packet type a match sees for the kernel's skb->pkt_type `raw`: as
 * xt_pkttype and nft's meta pkttype read it, a looped-back copy
 * (PACKET_LOOPBACK: a local multicast or broadcast) is MULTICAST for IPv6
 * and for an IPv4 multicast destination, else BROADCAST.
 */
static __always_inline __u8 pkt_type_seen(__u32 raw,
					  const struct parapet_key *key)
{
	if (raw != PARAPET_PACKET_LOOPBACK)
		return raw & 7;
	if (key->family == PARAPET_FAMILY_IPV6 || (key->dst[12] >> 4) == 0xe)
		return PARAPET_PACKET_MULTICAST;
	return PARAPET_PACKET_BROADCAST;
}

/*
 * The packet type of a frame at XDP, where no skb says it: from the
 * destination MAC alone, as eth_type_trans sets it -- the group bit
 * MULTICAST, all ones BROADCAST, else HOST.  A frame to another host's MAC
 * (PACKET_OTHERHOST) is not told apart: that needs the interface's own
 * MAC (docs/hooks.md, "Address and packet types").
 */
static __always_inline __u8 eth_pkt_type(void *data, void *data_end)
{
	__u8 *mac = data;

	if (data + ETH_HLEN > data_end || !(mac[0] & 1))
		return PARAPET_PACKET_HOST;
	if ((mac[0] & mac[1] & mac[2] & mac[3] & mac[4] & mac[5]) == 0xff)
		return PARAPET_PACKET_BROADCAST;
	return PARAPET_PACKET_MULTICAST;
}

/* TCP flag bits of parapet_key.tcp_flags (the TCP header's byte 13). */
#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_PSH 0x08
#define TCPF_ACK 0x10
#define TCPF_URG 0x20

#endif /* PARAPET_LIB_PARSE_H */
