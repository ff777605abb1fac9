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

#endif /* PARAPET_LIB_COUNTERS_H */
