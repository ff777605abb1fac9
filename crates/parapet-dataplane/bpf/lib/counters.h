/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * counters.h - the global statistics (enum parapet_stat) and the per-rule
 * packet/byte counters.
 */
#ifndef PARAPET_LIB_COUNTERS_H
#define PARAPET_LIB_COUNTERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "maps.h"

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&parapet_stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline void count_rule(__u32 rule_id, __u32 bytes)
{
	struct parapet_counter *c =
		bpf_map_lookup_elem(&parapet_counters, &rule_id);

	if (c) {
		/* per-CPU value: plain adds are race-free */
		c->packets += 1;
		c->bytes += bytes;
	}
}

/* The per-packet statistics switch (PARAPET_CFG_STATS_OFF): an array
 * lookup with a constant key, inlined by the verifier into a load. */
static __always_inline int stats_on(void)
{
	__u32 k = PARAPET_CFG_STATS_OFF;
	__u32 *off = bpf_map_lookup_elem(&parapet_config, &k);

	return !off || !*off;
}

/* Per hook and interface: one packet of key->pkt_len bytes, `dropped`
 * (0 or 1) when the hook did not let it pass, on the interface the hook
 * is about (the input one; the output one at OUTPUT and POSTROUTING).
 * Inlined into the entry programs after the verdict (a call per packet
 * costs a mispredicted return on retpoline machines, dataplane.md), after
 * parapet_decide has returned.  Its lookup key's slot grew parapet_nf's
 * frame from 120 to 128 bytes, which the verifier's 32-byte rounding of
 * frames leaves at 128: the walker's call chains are no deeper.  Skipped
 * while the statistics are off. */
static __always_inline void count_hook(__u32 hook,
				       const struct parapet_key *key,
				       __u32 dropped)
{
	if (!stats_on())
		return;
	__u32 ifindex = hook == PARAPET_HOOK_NF_OUTPUT ||
				hook == PARAPET_HOOK_NF_POSTROUTING ?
			key->oifindex : key->ifindex;
	__u32 col = ifindex < PARAPET_HOOK_IFACES ? ifindex : 0;
	__u32 idx = (hook - 1) * PARAPET_HOOK_IFACES + col;
	struct parapet_hook_stat *s =
		bpf_map_lookup_elem(&parapet_hook_stats, &idx);

	if (!s)
		return;
	s->packets += 1;
	s->bytes += key->pkt_len;
	s->dropped += dropped & 1;
}

#endif /* PARAPET_LIB_COUNTERS_H */
