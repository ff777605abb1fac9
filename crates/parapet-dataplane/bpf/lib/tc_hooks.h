/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tc_hooks.h - the hook placement at tc, for kernels without netfilter BPF
 * links (docs/hooks.md, "Without netfilter BPF links"): the programs
 * parapet_tc_hooks_in / _out (parapet.bpf.c), linked at tc ingress and
 * egress of every interface, pick the hook image the kernel's path would
 * meet.  At ingress a FIB lookup with the packet's addresses tells a
 * packet for this host (INPUT) from one to be routed through it (FORWARD,
 * with the output interface for -o); at egress a packet with a socket is
 * this host's own (OUTPUT), and one without passes (FORWARD judged it).
 *
 * PREROUTING and POSTROUTING chains (only where tc sees what the kernel's
 * chain sees: below conntrack at prerouting, after SNAT at postrouting)
 * are stages of their own, one tail call apart: parapet_tc_pre_in, linked
 * at ingress, walks PREROUTING and tail-calls the INPUT/FORWARD stage
 * (parapet_tc_hooks_in); parapet_tc_hooks_out, linked at egress, walks
 * OUTPUT and tail-calls the POSTROUTING stage (parapet_tc_post_out).  Each
 * stage is a program with its own verifier budget and stack.
 */
#ifndef PARAPET_LIB_TC_HOOKS_H
#define PARAPET_LIB_TC_HOOKS_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "parapet.h"
#include "maps.h"

#define PARAPET_AF_INET 2
#define PARAPET_AF_INET6 10

/*
 * The second stage of each tc placement link, by slot: filled by parapetd
 * before any link is made and pinned with the maps.  The tail call stands
 * in the entry function (a subprogram may not tail-call under our 512-byte
 * call chain); a slot found empty fails closed (TC_ACT_SHOT).
 */
#define PARAPET_TC_STAGE_ROUTE_IN 0 /* parapet_tc_hooks_in: INPUT/FORWARD */
#define PARAPET_TC_STAGE_POST_OUT 1 /* parapet_tc_post_out: POSTROUTING */
#define PARAPET_TC_STAGES 2

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, PARAPET_TC_STAGES);
	__type(key, __u32);
	__type(value, __u32);
} parapet_tc_stages SEC(".maps");

/* What the FIB lookup made of an arriving packet. */
#define PARAPET_ROUTE_LOCAL 0	  /* for this host: INPUT */
#define PARAPET_ROUTE_FORWARD 1	  /* routed through: FORWARD */
#define PARAPET_ROUTE_KERNEL_DROPS 2 /* no route (blackhole, unreachable,
				      * prohibit): dropped by the kernel
				      * before any filter chain */

/*
 * Whether the ruleset has a chain at `hook` for the packet's family
 * (PARAPET_CFG_TC_HOOKS, written by parapetd with the links): where it
 * has none, the netfilter placement has no link and the packet passes.
 */
static __always_inline int tc_hook_wanted(__u32 hook, __u8 family)
{
	__u32 k = PARAPET_CFG_TC_HOOKS;
	__u32 *bits = bpf_map_lookup_elem(&parapet_config, &k);
	__u32 bit = 2 * (hook - PARAPET_HOOK_NF_PREROUTING) +
		    (family == PARAPET_FAMILY_IPV6 ? 1 : 0);

	return bits && ((*bits >> (bit & 15)) & 1);
}

/* Whether the ruleset has a chain at `hook` for either family: a stage
 * whose hook has none is not entered (no tail call, no parse). */
static __always_inline int tc_hook_any(__u32 hook)
{
	__u32 k = PARAPET_CFG_TC_HOOKS;
	__u32 *bits = bpf_map_lookup_elem(&parapet_config, &k);
	__u32 bit = 2 * (hook - PARAPET_HOOK_NF_PREROUTING);

	return bits && ((*bits >> (bit & 15)) & 3);
}

/*
 * Runs the stage in `slot` in place of the caller (the caller's stage
 * accepted the packet).  Inline on purpose: the tail call must sit in the
 * entry function.  Returns only when the slot is empty: fail closed.
 */
static __always_inline int tc_next_stage(struct __sk_buff *skb, __u32 slot)
{
	bpf_tail_call(skb, &parapet_tc_stages, slot);
	return TC_ACT_SHOT;
}

/*
 * Routes `key`'s packet as ip_route_input would, with the kernel's FIB
 * rules (no BPF_FIB_LOOKUP_DIRECT) but without the packet's mark.  On
 * FORWARD, *oif is the output interface.  A global-like noinline
 * function: its 64-byte lookup argument lives in its own frame, never on
 * the entry's beside the key (the call chain's stack is at its limit).
 */
static __noinline int tc_route(struct __sk_buff *skb,
			       const struct parapet_key *key, __u32 *oif)
{
	struct bpf_fib_lookup p;
	long rc;

	if (!key || !oif)
		return PARAPET_ROUTE_LOCAL;
	__builtin_memset(&p, 0, sizeof(p));
	p.l4_protocol = key->proto;
	p.sport = bpf_htons(key->sport);
	p.dport = bpf_htons(key->dport);
	p.ifindex = skb->ingress_ifindex;
	if (key->family == PARAPET_FAMILY_IPV4) {
		p.family = PARAPET_AF_INET;
		p.tos = key->dscp << 2;
		p.tot_len = key->pkt_len;
		__builtin_memcpy(&p.ipv4_src, &key->src[12], 4);
		__builtin_memcpy(&p.ipv4_dst, &key->dst[12], 4);
	} else {
		p.family = PARAPET_AF_INET6;
		p.tot_len = key->pkt_len;
		__builtin_memcpy(p.ipv6_src, key->src, 16);
		__builtin_memcpy(p.ipv6_dst, key->dst, 16);
	}
	rc = bpf_fib_lookup(skb, &p, sizeof(p), 0);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
	case BPF_FIB_LKUP_RET_UNSUPP_LWT:
	case BPF_FIB_LKUP_RET_NO_SRC_ADDR:
		*oif = p.ifindex;
		return PARAPET_ROUTE_FORWARD;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return PARAPET_ROUTE_KERNEL_DROPS;
	}
	/* NOT_FWDED (local, broadcast, multicast), FWD_DISABLED (forwarding
	 * off on the input interface: only local packets survive routing) and
	 * errors: judged by INPUT, the stricter reading for a packet the
	 * kernel delivers */
	return PARAPET_ROUTE_LOCAL;
}

#endif /* PARAPET_LIB_TC_HOOKS_H */
