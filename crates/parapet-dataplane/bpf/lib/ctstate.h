/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ctstate.h - the ctstate the classifier image sees for a packet (image key
 * word 22): conntrack.h's lookup result when it ran, else a load-time
 * default.
 */
#ifndef PARAPET_LIB_CTSTATE_H
#define PARAPET_LIB_CTSTATE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "image.h"

/* ctstate reported to the image: XDP and tc ingress run before conntrack,
 * so the loader may override this default (UNTRACKED). */
const volatile __u32 parapet_ctstate = PARAPET_CT_UNTRACKED;

/* The ctstate the image sees: the conntrack lookup's when it ran for this
 * packet (a per-packet flag, so a switch flipped mid-packet cannot mix
 * states), else the default. */
static __always_inline __u32 key_ctstate(const struct parapet_key *key)
{
	return (key->flags & PARAPET_KEY_F_CT) ? key->ctstate : parapet_ctstate;
}

#endif /* PARAPET_LIB_CTSTATE_H */
