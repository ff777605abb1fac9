/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nf_reject.h - REJECT at the netfilter hooks.  A netfilter program may
 * only return NF_ACCEPT or NF_DROP, and it cannot transmit: it drops the
 * packet and hands its first bytes to parapetd through the ring buffer
 * parapet_nf_reject; parapetd builds the TCP reset or ICMP error and sends
 * it with a raw socket (src/reject_queue.rs).  The global reply rate
 * (parapet_reject_limit, the one XDP and tc use) is applied here, so an
 * overload never reaches the ring.  See docs/dataplane.md, "REJECT at the
 * netfilter hooks".
 */
#ifndef PARAPET_LIB_NF_REJECT_H
#define PARAPET_LIB_NF_REJECT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "parapet.h"
#include "maps.h"
#include "counters.h"
#include "gcra.h"
#include "nf.h"

/* Queue the packet in buf (behind its made-up Ethernet header, copy bytes
 * of it valid) for an answer; the caller drops it either way. */
static __always_inline void nf_reject_queue(const struct parapet_key *key,
					    __u32 hook, __u32 rtype,
					    const struct parapet_nf_buf *buf,
					    __u32 copy)
{
	__u32 zero = 0;
	struct parapet_nf_reject *rec;

	if (!gcra_admit(bpf_map_lookup_elem(&parapet_reject_limit, &zero))) {
		stat_inc(PARAPET_STAT_REJECT_LIMITED);
		return;
	}
	rec = bpf_ringbuf_reserve(&parapet_nf_reject, sizeof(*rec), 0);
	if (!rec) {
		stat_inc(PARAPET_STAT_NF_REJECT_RING_FULL);
		return;
	}
	rec->rtype = rtype;
	rec->hook = hook;
	rec->family = key->family;
	rec->len = copy < PARAPET_NF_REJECT_BYTES ? copy : PARAPET_NF_REJECT_BYTES;
	rec->ifindex = key->ifindex;
	rec->oifindex = key->oifindex;
	rec->ts_ns = bpf_ktime_get_ns();
	/* a constant-size copy: buf is larger than ETH_HLEN + this; bytes
	 * past len are stale and never read */
	__builtin_memcpy(rec->pkt, &buf->b[ETH_HLEN], PARAPET_NF_REJECT_BYTES);
	bpf_ringbuf_submit(rec, 0);
	stat_inc(PARAPET_STAT_NF_REJECT_QUEUED);
}

#endif /* PARAPET_LIB_NF_REJECT_H */
