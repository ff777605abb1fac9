/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * lite.h - the interim (proto, dport) classifier: rule id from the
 * parapet_lite hash, the verdict from parapet_actions (decide.h).  It
 * decides when no image is live or the walker refuses the live one; tests
 * and benchmarks that load rules without an image still use it
 * (Dataplane::set_lite_rule).
 */
#ifndef PARAPET_LIB_LITE_H
#define PARAPET_LIB_LITE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "maps.h"

static __always_inline __u32 lite_classify(const struct parapet_key *key)
{
	struct parapet_lite_key lk = {};
	__u32 *rule;

	lk.proto = key->proto;
	lk.dport = key->dport;
	if (lk.dport) {
		rule = bpf_map_lookup_elem(&parapet_lite, &lk);
		if (rule)
			return *rule;
	}
	lk.dport = 0;
	rule = bpf_map_lookup_elem(&parapet_lite, &lk);
	if (rule)
		return *rule;
	lk.proto = 0;
	rule = bpf_map_lookup_elem(&parapet_lite, &lk);
	if (rule)
		return *rule;
	return 0; /* policy */
}

#endif /* PARAPET_LIB_LITE_H */
