/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * log.h - LOG: one parapet_log_event per admitted packet into the
 * parapet_log ring buffer, rate limited per rule.
 */
#ifndef PARAPET_LIB_LOG_H
#define PARAPET_LIB_LOG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "maps.h"
#include "counters.h"
#include "gcra.h"

static __always_inline int log_admit(__u32 rule_id)
{
	return gcra_admit(bpf_map_lookup_elem(&parapet_log_limits, &rule_id));
}

static __always_inline void parapet_log_packet(__u32 rule_id, __u32 verdict,
					       __u32 hook,
					       const struct parapet_key *key)
{
	if (!log_admit(rule_id)) {
		stat_inc(PARAPET_STAT_LOG_RATE_LIMITED);
		return;
	}
	struct parapet_log_event *ev =
		bpf_ringbuf_reserve(&parapet_log, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(PARAPET_STAT_LOG_RING_FULL);
		return;
	}
	ev->ts_ns = bpf_ktime_get_ns();
	ev->rule_id = rule_id;
	ev->verdict = verdict;
	ev->hook = hook;
	ev->_pad = 0;
	__builtin_memcpy(&ev->key, key, sizeof(*key));
	bpf_ringbuf_submit(ev, 0);
	stat_inc(PARAPET_STAT_LOG_EMITTED);
}

#endif /* PARAPET_LIB_LOG_H */
