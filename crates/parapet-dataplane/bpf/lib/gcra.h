/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * gcra.h - the GCRA token bucket (struct parapet_log_limit) shared by the
 * per-rule LOG limits and the global REJECT reply limit.
 */
#ifndef PARAPET_LIB_GCRA_H
#define PARAPET_LIB_GCRA_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"

/* GCRA admission: true when this event fits the bucket's rate and burst. */
static __always_inline int gcra_admit(struct parapet_log_limit *lim)
{
	if (!lim || lim->interval_ns == 0)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	__u64 old = lim->tat_ns;
	__u64 tat = old > now ? old : now;

	if (tat - now > lim->tolerance_ns)
		return 0;
	/* Lose a race, lose the event: never more than the limit. */
	return __sync_val_compare_and_swap(&lim->tat_ns, old,
					   tat + lim->interval_ns) == old;
}

#endif /* PARAPET_LIB_GCRA_H */
