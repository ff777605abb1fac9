/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * debug.h - test mode: the last packet's key and decision in parapet_debug.
 */
#ifndef PARAPET_LIB_DEBUG_H
#define PARAPET_LIB_DEBUG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"
#include "maps.h"
#include "walk_state.h"
#include "ctstate.h"

/* Non-zero: write a parapet_debug_rec per packet (tests only; the verifier
 * removes the code when this is 0 because .rodata is frozen). */
const volatile __u32 parapet_debug_mode = 0;

/* w: the walk that decided, or NULL for the interim classifier. */
static __always_inline void debug_record(const struct parapet_key *key,
					 __u32 status, __u32 rule_id,
					 __u32 verdict,
					 const struct parapet_walk *w,
					 __u32 walk_err)
{
	__u32 zero = 0;
	struct parapet_debug_rec *d;
	int k;

	if (!parapet_debug_mode)
		return;
	d = bpf_map_lookup_elem(&parapet_debug, &zero);
	if (!d)
		return;
	__builtin_memcpy(&d->key, key, sizeof(*key));
	d->status = status;
	d->rule_id = rule_id;
	d->verdict = verdict & 0xff;
	d->reject = verdict >> 8;
	d->ctstate = key_ctstate(key);
	d->seq += 1;
	d->by_image = w ? 1 : 0;
	d->n_nonterm = w ? w->n_nonterm : 0;
	d->walk_err = walk_err;
	d->sets[0] = w ? w->key[PARAPET_KW_SETS] : 0;
	d->sets[1] = w ? w->key[PARAPET_KW_SETS + 1] : 0;
#pragma unroll
	for (k = 0; k < PARAPET_MAX_NONTERM; k++)
		d->nonterm[k] = w ? w->nonterm_rule[k] : 0;
}

#endif /* PARAPET_LIB_DEBUG_H */
