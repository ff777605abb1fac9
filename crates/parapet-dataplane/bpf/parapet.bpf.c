// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * parapet.bpf.c - the kernel half of parapet: the XDP and tc programs.  Each
 * parses a packet into a struct parapet_key (lib/parse.h), looks up its
 * conntrack state when that is on (lib/conntrack.h), lets the classifier
 * decide (lib/decide.h: the image walker, lib/walk.h, or the interim
 * classifier, lib/lite.h) and turns the verdict into the hook's return code,
 * answering REJECTs when it can (lib/reject.h).  The maps user space opens
 * by name are in lib/maps.h.
 *
 * Built by build.rs as the one compilation unit of the object:
 * clang -O2 -g -target bpf -mcpu=v3.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "parapet.h"
#include "lib/parse.h"
#include "lib/conntrack.h"
#include "lib/decide.h"
#include "lib/reject.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("xdp")
int parapet_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct parapet_key key;
	struct parapet_offs offs = {};

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = ctx->ingress_ifindex;
	__u32 frame_len = (__u32)(data_end - data);
	int status = parapet_parse(data, data_end, frame_len, &key, &offs);
	if (ct_live() && status == PARAPET_PARSE_OK) {
		key.ctstate = ct_state(ctx, PARAPET_HOOK_XDP, data, data_end,
				       &key, &offs);
		key.flags |= PARAPET_KEY_F_CT;
	}
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_XDP);

	if ((verdict & 0xff) == PARAPET_VERDICT_ACCEPT)
		return XDP_PASS;
	/* REJECT answers out of the same port when it can; else it drops */
	if ((verdict & 0xff) == PARAPET_VERDICT_REJECT &&
	    reject_reply(ctx, PARAPET_HOOK_XDP, &key, &offs, verdict >> 8,
			 frame_len))
		return XDP_TX;
	return XDP_DROP;
}

/* Enough for L2 + VLANs + IPv6 + a few extension headers + TCP. */
#define PARAPET_TC_PULL 256

SEC("classifier")
int parapet_tc(struct __sk_buff *skb)
{
	struct parapet_key key;
	__u32 want = skb->len < PARAPET_TC_PULL ? skb->len : PARAPET_TC_PULL;

	/* Headers may sit in paged fragments at tc; make them linear. */
	if (skb->data_end - skb->data < want)
		bpf_skb_pull_data(skb, want);

	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	struct parapet_offs offs = {};

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = skb->ingress_ifindex;
	int status = parapet_parse(data, data_end, skb->len, &key, &offs);
	if (ct_live() && status == PARAPET_PARSE_OK) {
		key.ctstate = ct_state(skb, PARAPET_HOOK_TC, data, data_end,
				       &key, &offs);
		key.flags |= PARAPET_KEY_F_CT;
	}
	/* At tc the kernel has usually moved the outer tag out of the data
	 * into skb->vlan_tci; it is the outer one, so it wins. */
	if (skb->vlan_present) {
		key.flags |= PARAPET_KEY_F_VLAN;
		key.vlan_id = skb->vlan_tci & 0x0fff;
	}
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_TC);

	if ((verdict & 0xff) == PARAPET_VERDICT_ACCEPT)
		return TC_ACT_OK;
	/* REJECT: the frame becomes the answer and leaves by the port it
	 * came in on (egress of the ingress device) */
	if ((verdict & 0xff) == PARAPET_VERDICT_REJECT &&
	    reject_reply(skb, PARAPET_HOOK_TC, &key, &offs, verdict >> 8, 0))
		return bpf_redirect(key.ifindex, 0);
	return TC_ACT_SHOT;
}
