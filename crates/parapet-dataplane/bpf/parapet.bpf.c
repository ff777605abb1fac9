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
 * parapet_nf is the netfilter program (lib/nf.h): aya 0.14 has no loader for
 * that program type and its object parser refuses a "netfilter" section,
 * so it sits in a section aya parses as a tc classifier and never loads;
 * src/netfilter.rs loads it as BPF_PROG_TYPE_NETFILTER itself.
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
#include "lib/nf.h"
#include "lib/nf_reject.h"
#include "lib/tc_hooks.h"
#include "lib/tcp_options.h"
#include "lib/patterns.h"
#include "lib/rev_path.h"
#include "lib/stage_stop.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The Ethernet source address of a frame starting at `data` into the key
 * extension (-m mac, ether saddr). */
static __always_inline void ext_mac_src(struct parapet_walk *ws, void *data,
					void *data_end)
{
	__u8 *eth = data;

	if ((void *)(eth + 12) > data_end)
		return;
	__builtin_memcpy(ws->ext.mac_src, eth + 6, 6);
	ws->ext.mac_present = 1;
}

/*
 * The reverse-path outcome into the key extension of scratch slot `slot`
 * (lib/rev_path.h), for a parsed packet that arrived on key->ifindex,
 * while the switch is on; else it stays UNKNOWN.  Not inlined: the
 * lookup's parameters stay off the entries' frames.
 */
static __noinline void ext_rev_path(void *ctx, __u32 slot,
				    const struct parapet_key *key, int looped,
				    int status)
{
	struct walk_cb_ctx wc = { .idx = slot };
	struct parapet_walk *ws;

	if (!key || status != PARAPET_PARSE_OK || !rev_path_on())
		return;
	ws = walk_state(&wc);
	if (ws)
		ws->ext.rev_path = rev_path_of(ctx, key, key->ifindex, looped);
}

/* The key extension in XDP's scratch slot: zeroed for each packet, then
 * the frame's source MAC, its packet type (from the destination MAC) and
 * what the parser found (the routing header, the TCP option area). */
static __always_inline void xdp_key_ext(void *data, void *data_end,
					const struct parapet_offs *offs)
{
	struct walk_cb_ctx wc = { .idx = 0 };
	struct parapet_walk *ws = walk_state(&wc);

	if (ws) {
		__builtin_memset(&ws->ext, 0, sizeof(ws->ext));
		ws->ext.rev_path = PARAPET_REV_PATH_UNKNOWN;
		ext_mac_src(ws, data, data_end);
		ws->ext.pkt_type = eth_pkt_type(data, data_end);
		ws->ext.rt = offs->rt;
		ws->ext.tcp_opt_area = offs->tcp_opt;
	}
}

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
	PARAPET_STOP_AT(PARAPET_STOP_PARSE, XDP_PASS);
	if (ct_live() && status == PARAPET_PARSE_OK) {
		key.ctstate = ct_state_xdp(ctx, &key, &offs);
		key.flags |= PARAPET_KEY_F_CT;
	}
	xdp_key_ext(data, data_end, &offs);
	ext_rev_path(ctx, 0, &key, 0, status);
	status = xdp_tcp_options(ctx, &offs, status);
	xdp_patterns(ctx, &key, &offs, frame_len, status);
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_XDP, 0);
	PARAPET_STOP_AFTER_WALK(XDP_PASS);
	int rc = XDP_PASS;

	if ((verdict & 0xff) != PARAPET_VERDICT_ACCEPT) {
		/* REJECT answers out of the same port when it can; else it
		 * drops */
		rc = XDP_DROP;
		if ((verdict & 0xff) == PARAPET_VERDICT_REJECT &&
		    reject_reply(ctx, PARAPET_HOOK_XDP, &key, &offs,
				 verdict >> 8, frame_len))
			rc = XDP_TX;
	}
	/* counted last, after the walker's call chain has returned */
	count_hook(PARAPET_HOOK_XDP, &key, rc != XDP_PASS);
	return rc;
}

/* The key extension in tc's scratch slot (walk_state.h), shared by every tc
 * program: zeroed for each packet, then the packet's mark, its packet type
 * as the kernel set it and, for a received frame (`mac`), its source MAC
 * (the conntrack fields stay 0 at tc). At egress the frame's MAC is the host's own, which netfilter's
 * OUTPUT and POSTROUTING never see: left absent there. */
static __always_inline void tc_key_ext(struct __sk_buff *skb,
				       const struct parapet_key *key, int mac,
				       const struct parapet_offs *offs)
{
	struct walk_cb_ctx wc = { .idx = 1 };
	struct parapet_walk *ws = walk_state(&wc);

	if (ws) {
		__builtin_memset(&ws->ext, 0, sizeof(ws->ext));
		ws->ext.rev_path = PARAPET_REV_PATH_UNKNOWN;
		ws->ext.mark = skb->mark;
		ws->ext.pkt_type = pkt_type_seen(skb->pkt_type, key);
		ws->ext.rt = offs->rt;
		ws->ext.tcp_opt_area = offs->tcp_opt;
		if (mac)
			ext_mac_src(ws, (void *)(long)skb->data,
				    (void *)(long)skb->data_end);
	}
}

/* Enough for L2 + VLANs + IPv6 + a few extension headers + TCP. */
#define PARAPET_TC_PULL 256

/*
 * A tc program's return code for the classifier's verdict: ACCEPT passes;
 * DROP, and a REJECT that cannot be answered, drop; an answered REJECT's
 * frame (now the reply) is redirected to `ifindex` with `flags`.
 */
static __always_inline int tc_verdict_rc(struct __sk_buff *skb, __u32 verdict,
					 const struct parapet_key *key,
					 const struct parapet_offs *offs,
					 __u32 ifindex, __u64 flags)
{
	if ((verdict & 0xff) == PARAPET_VERDICT_ACCEPT)
		return TC_ACT_OK;
	if ((verdict & 0xff) == PARAPET_VERDICT_REJECT &&
	    reject_reply(skb, PARAPET_HOOK_TC, key, offs, verdict >> 8, 0))
		return bpf_redirect(ifindex, flags);
	return TC_ACT_SHOT;
}

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
	PARAPET_STOP_AT(PARAPET_STOP_PARSE, TC_ACT_OK);
	if (ct_live() && status == PARAPET_PARSE_OK) {
		key.ctstate = ct_state_tc(skb, &key, &offs);
		key.flags |= PARAPET_KEY_F_CT;
	}
	/* At tc the kernel has usually moved the outer tag out of the data
	 * into skb->vlan_tci; it is the outer one, so it wins. */
	if (skb->vlan_present) {
		key.flags |= PARAPET_KEY_F_VLAN;
		key.vlan_id = skb->vlan_tci & 0x0fff;
	}
	tc_key_ext(skb, &key, 1, &offs);
	ext_rev_path(skb, 1, &key,
		     skb->pkt_type == PARAPET_PACKET_LOOPBACK_RAW, status);
	status = tc_tcp_options(skb, &offs, status);
	tc_patterns(skb, &key, &offs, status);
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_TC, 1);
	PARAPET_STOP_AFTER_WALK(TC_ACT_OK);
	/* a REJECT's answer leaves by the port the frame came in on (egress
	 * of the ingress device) */
	int rc = tc_verdict_rc(skb, verdict, &key, &offs, key.ifindex, 0);
	count_hook(PARAPET_HOOK_TC, &key, rc != TC_ACT_OK);
	return rc;
}

/* The common start of the tc programs: headers linear, the frame parsed,
 * the conntrack lookup and the outer VLAN tag in the key. */
static __always_inline int tc_parse(struct __sk_buff *skb,
				    struct parapet_key *key,
				    struct parapet_offs *offs)
{
	__u32 want = skb->len < PARAPET_TC_PULL ? skb->len : PARAPET_TC_PULL;

	/* Headers may sit in paged fragments at tc; make them linear. */
	if (skb->data_end - skb->data < want)
		bpf_skb_pull_data(skb, want);

	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	int status = parapet_parse(data, data_end, skb->len, key, offs);
	if (ct_live() && status == PARAPET_PARSE_OK) {
		key->ctstate = ct_state_tc(skb, key, offs);
		key->flags |= PARAPET_KEY_F_CT;
	}
	/* At tc the kernel has usually moved the outer tag out of the data
	 * into skb->vlan_tci; it is the outer one, so it wins. */
	if (skb->vlan_present) {
		key->flags |= PARAPET_KEY_F_VLAN;
		key->vlan_id = skb->vlan_tci & 0x0fff;
	}
	return status;
}

/*
 * The tc placement's ingress link (lib/tc_hooks.h): PREROUTING's image,
 * where the ruleset has a prerouting chain (one below conntrack: the
 * packet has no conntrack entry yet, so ctstate is INVALID as the
 * kernel's raw chain sees it), then the INPUT/FORWARD stage by a tail
 * call.  A REJECT is answered in place, as at INPUT.
 */
SEC("classifier/parapet_tc_pre_in")
int parapet_tc_pre_in(struct __sk_buff *skb)
{
	struct parapet_key key;
	struct parapet_offs offs = {};
	__u32 want = skb->len < PARAPET_TC_PULL ? skb->len : PARAPET_TC_PULL;

	if (!tc_hook_any(PARAPET_HOOK_NF_PREROUTING))
		return tc_next_stage(skb, PARAPET_TC_STAGE_ROUTE_IN);
	if (skb->data_end - skb->data < want)
		bpf_skb_pull_data(skb, want);
	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = skb->ingress_ifindex;
	int status = parapet_parse((void *)(long)skb->data,
				   (void *)(long)skb->data_end, skb->len, &key,
				   &offs);
	/* not an IP packet the parser knows: the next stage judges it */
	if (status != PARAPET_PARSE_OK ||
	    !tc_hook_wanted(PARAPET_HOOK_NF_PREROUTING, key.family))
		return tc_next_stage(skb, PARAPET_TC_STAGE_ROUTE_IN);
	key.ctstate = PARAPET_CT_INVALID;
	key.flags |= PARAPET_KEY_F_CT;
	if (skb->vlan_present) {
		key.flags |= PARAPET_KEY_F_VLAN;
		key.vlan_id = skb->vlan_tci & 0x0fff;
	}
	tc_key_ext(skb, &key, 1, &offs);
	ext_rev_path(skb, 1, &key,
		     skb->pkt_type == PARAPET_PACKET_LOOPBACK_RAW, status);
	status = tc_tcp_options(skb, &offs, status);
	tc_patterns(skb, &key, &offs, status);
	if (stats_on())
		parapet_count_nf_hook(PARAPET_HOOK_NF_PREROUTING);
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_NF_PREROUTING, 1);
	int rc = tc_verdict_rc(skb, verdict, &key, &offs, key.ifindex, 0);
	count_hook(PARAPET_HOOK_NF_PREROUTING, &key, rc != TC_ACT_OK);
	if (rc != TC_ACT_OK)
		return rc;
	return tc_next_stage(skb, PARAPET_TC_STAGE_ROUTE_IN);
}

/*
 * The filter chains at tc, for kernels without netfilter BPF links
 * (lib/tc_hooks.h): at ingress, INPUT's image for packets routed to this
 * host, FORWARD's for packets routed through it (the second stage of the
 * ingress link, parapet_tc_pre_in's tail call).  A REJECT is answered in
 * place, as parapet_tc answers it.
 */
SEC("classifier/parapet_tc_hooks_in")
int parapet_tc_hooks_in(struct __sk_buff *skb)
{
	struct parapet_key key;
	struct parapet_offs offs = {};
	__u32 hook = PARAPET_HOOK_NF_INPUT, oif = 0;

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = skb->ingress_ifindex;
	int status = tc_parse(skb, &key, &offs);
	if (status == PARAPET_PARSE_OK) {
		int route = tc_route(skb, &key, &oif);
		if (route == PARAPET_ROUTE_KERNEL_DROPS)
			return TC_ACT_OK;
		if (route == PARAPET_ROUTE_FORWARD) {
			hook = PARAPET_HOOK_NF_FORWARD;
			key.oifindex = oif;
		}
		if (!tc_hook_wanted(hook, key.family))
			return TC_ACT_OK;
	}
	tc_key_ext(skb, &key, 1, &offs);
	ext_rev_path(skb, 1, &key,
		     skb->pkt_type == PARAPET_PACKET_LOOPBACK_RAW, status);
	status = tc_tcp_options(skb, &offs, status);
	tc_patterns(skb, &key, &offs, status);
	if (stats_on())
		parapet_count_nf_hook(hook);
	__u32 verdict = parapet_decide(&key, status, hook, 1);
	int rc = tc_verdict_rc(skb, verdict, &key, &offs, key.ifindex, 0);
	count_hook(hook, &key, rc != TC_ACT_OK);
	return rc;
}

/*
 * At egress: OUTPUT's image for the packets this host sends (they carry
 * their socket); forwarded ones pass (FORWARD judged them at ingress).
 * A REJECT at OUTPUT answers the local sender as the kernel's does: the
 * frame becomes the TCP reset or ICMP error (MACs swapped, so it is
 * addressed to this interface) and goes into the interface's ingress,
 * where the stack delivers it to the sending socket (ECONNREFUSED);
 * it meets INPUT on its way in, as the kernel's answer does.
 */
SEC("classifier/parapet_tc_hooks_out")
int parapet_tc_hooks_out(struct __sk_buff *skb)
{
	struct parapet_key key;
	struct parapet_offs offs = {};

	if (!skb->sk)
		goto postrouting;
	__builtin_memset(&key, 0, sizeof(key));
	key.oifindex = skb->ifindex;
	int status = tc_parse(skb, &key, &offs);
	if (status == PARAPET_PARSE_OK &&
	    !tc_hook_wanted(PARAPET_HOOK_NF_OUTPUT, key.family))
		goto postrouting;
	tc_key_ext(skb, &key, 0, &offs);
	status = tc_tcp_options(skb, &offs, status);
	tc_patterns(skb, &key, &offs, status);
	if (stats_on())
		parapet_count_nf_hook(PARAPET_HOOK_NF_OUTPUT);
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_NF_OUTPUT, 1);
	int rc = tc_verdict_rc(skb, verdict, &key, &offs, key.oifindex,
			       BPF_F_INGRESS);
	count_hook(PARAPET_HOOK_NF_OUTPUT, &key, rc != TC_ACT_OK);
	if (rc != TC_ACT_OK)
		return rc;
postrouting:
	/* every packet that leaves meets POSTROUTING: this host's own after
	 * OUTPUT accepted them, forwarded ones (FORWARD judged them) */
	if (!tc_hook_any(PARAPET_HOOK_NF_POSTROUTING))
		return TC_ACT_OK;
	return tc_next_stage(skb, PARAPET_TC_STAGE_POST_OUT);
}

/*
 * The POSTROUTING stage at egress (parapet_tc_hooks_out's tail call):
 * POSTROUTING's image for every packet that leaves, after the kernel's
 * SNAT (a postrouting chain above priority 100 sees the same).  Nothing
 * follows it; a verdict other than ACCEPT drops (the kernel has no REJECT
 * at postrouting).
 */
SEC("classifier/parapet_tc_post_out")
int parapet_tc_post_out(struct __sk_buff *skb)
{
	struct parapet_key key;
	struct parapet_offs offs = {};

	__builtin_memset(&key, 0, sizeof(key));
	key.oifindex = skb->ifindex;
	int status = tc_parse(skb, &key, &offs);
	if (status == PARAPET_PARSE_OK &&
	    !tc_hook_wanted(PARAPET_HOOK_NF_POSTROUTING, key.family))
		return TC_ACT_OK;
	tc_key_ext(skb, &key, 0, &offs);
	status = tc_tcp_options(skb, &offs, status);
	tc_patterns(skb, &key, &offs, status);
	if (stats_on())
		parapet_count_nf_hook(PARAPET_HOOK_NF_POSTROUTING);
	__u32 verdict =
		parapet_decide(&key, status, PARAPET_HOOK_NF_POSTROUTING, 1);
	int rc = (verdict & 0xff) == PARAPET_VERDICT_ACCEPT ? TC_ACT_OK :
							       TC_ACT_SHOT;
	count_hook(PARAPET_HOOK_NF_POSTROUTING, &key, rc != TC_ACT_OK);
	return rc;
}

SEC("classifier/parapet_nf")
int parapet_nf(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *state = ctx->state;
	struct sk_buff *skb = ctx->skb;
	struct parapet_offs offs = {};
	struct parapet_key key;
	struct bpf_dynptr ptr;
	__u32 zero = 0, level, copy, verdict = PARAPET_VERDICT_DROP;
	__u32 *depth = bpf_map_lookup_elem(&parapet_nf_depth, &zero);
	struct parapet_nf_buf *buf;
	int status;

	__u32 hooknum = state->hook;
	/* a hook this program is never linked at (only the five exist):
	 * drop (fail closed) */
	if (!depth || hooknum > NF_INET_POST_ROUTING)
		return NF_DROP;
	level = *depth;
	/* deeper nesting than process + softirq cannot happen; never run
	 * without a scratch state of our own: drop (fail closed) */
	if (level >= PARAPET_NF_NEST)
		return NF_DROP;
	buf = bpf_map_lookup_elem(&parapet_nf_pkt, &level);
	if (!buf)
		return NF_DROP;
	*depth = level + 1;

	__builtin_memset(&key, 0, sizeof(key));
	__u32 hook = nf_parapet_hook(hooknum);
	__u8 pf = state->pf;
	struct net_device *in = state->in, *out = state->out;
	if (in)
		key.ifindex = in->ifindex;
	if (out)
		key.oifindex = out->ifindex;
	__u32 len = skb->len;

	/* a made-up Ethernet header that names the family for the parser */
	__builtin_memset(buf->b, 0, ETH_HLEN);
	__u16 proto = pf == NFPROTO_IPV6 ? ETH_P_IPV6 : ETH_P_IP;
	buf->b[12] = proto >> 8;
	buf->b[13] = proto & 0xff;
	copy = len < PARAPET_NF_COPY ? len : PARAPET_NF_COPY;
	if ((pf != NFPROTO_IPV4 && pf != NFPROTO_IPV6) ||
	    bpf_dynptr_from_skb((struct __sk_buff *)skb, 0, &ptr) ||
	    bpf_dynptr_read(&buf->b[ETH_HLEN], copy, &ptr, 0, 0)) {
		/* a family this program was not linked for, or an
		 * unreadable packet: the parser's "truncated" (dropped) */
		status = PARAPET_PARSE_TRUNCATED;
		key.pkt_len = len;
	} else {
		status = parapet_parse(buf->b, &buf->b[ETH_HLEN + copy],
				       ETH_HLEN + len, &key, &offs);
	}
	/* the key extension lives in this level's walk state, zeroed for
	 * every packet (walk_state.h): marks, the conntrack original tuple */
	struct walk_cb_ctx wc = { .idx = PARAPET_SCRATCH_NF + level };
	struct parapet_walk *ws = walk_state(&wc);
	if (ws) {
		__builtin_memset(&ws->ext, 0, sizeof(ws->ext));
		/* no bpf_fib_lookup for this program type: an image that
		 * reads the outcome is abandoned here (apply refuses it) */
		ws->ext.rev_path = PARAPET_REV_PATH_UNKNOWN;
		nf_owner_at(state, skb, &ws->ext);
	}
	if (status == PARAPET_PARSE_OK) {
		key.ctstate = nf_ctstate(skb->_nfct);
		key.flags |= PARAPET_KEY_F_CT |
			     (nf_ctstatus(skb->_nfct) << PARAPET_KEY_CT_STATUS_SHIFT);
		if (ws) {
			nf_ct_original(skb->_nfct, &ws->ext);
			bpf_core_read(&ws->ext.mark, sizeof(ws->ext.mark), &skb->mark);
			ws->ext.ct_mark = nf_ctmark(skb->_nfct);
			nf_mac_src(skb, &ws->ext);
			ws->ext.pkt_type = pkt_type_seen(
				BPF_CORE_READ_BITFIELD_PROBED(skb, pkt_type), &key);
			ws->ext.rt = offs.rt;
			ws->ext.tcp_opt_area = offs.tcp_opt;
		}
		status = nf_tcp_options(ws, buf->b, &offs, status);
		nf_patterns(PARAPET_SCRATCH_NF + level, &ptr, &key, len, status);
	}
	if (stats_on())
		parapet_count_nf_hook(hook);
	verdict = parapet_decide(&key, status, hook, PARAPET_SCRATCH_NF + level);
	*depth = level;
	count_hook(hook, &key, (verdict & 0xff) != PARAPET_VERDICT_ACCEPT);

	if ((verdict & 0xff) == PARAPET_VERDICT_ACCEPT)
		return NF_ACCEPT;
	/* netfilter programs can only accept or drop: a REJECT drops, and
	 * parapetd answers (lib/nf_reject.h) */
	if ((verdict & 0xff) == PARAPET_VERDICT_REJECT && status == PARAPET_PARSE_OK)
		nf_reject_queue(&key, hook, verdict >> 8, buf, copy);
	return NF_DROP;
}
