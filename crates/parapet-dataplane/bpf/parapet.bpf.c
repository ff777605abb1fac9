// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * parapet.bpf.c - the kernel half of parapet: parse a packet into a
 * struct parapet_key, classify it, count it, maybe log it, and turn the
 * rule's verdict into an XDP or tc return code.
 *
 * Classification: when a classifier image is live (parapet_gen != 0) the
 * image walker (walker.bpf.h, docs/image-format.md) decides; otherwise, or
 * if the walker refuses the image, the interim (proto, dport) "lite" hash
 * classifier with the parapet_actions table does.
 *
 * Built by build.rs: clang -O2 -g -target bpf -mcpu=v3.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "parapet.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- load-time constants (.rodata, set by the loader) ------------------ */

/* Non-zero: write a parapet_debug_rec per packet (tests only; the verifier
 * removes the code when this is 0 because .rodata is frozen). */
const volatile __u32 parapet_debug_mode = 0;
/* Pages per image slot; the loader sizes parapet_image to 2x this. */
const volatile __u32 parapet_slot_pages = PARAPET_IMAGE_DEFAULT_SLOT_PAGES;

/* ---- maps -------------------------------------------------------------- */

/* Rule id -> action; entry 0 is the policy.  Resized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_action);
} parapet_actions SEC(".maps");

/* Rule id -> per-CPU packet/byte counters; same size as parapet_actions. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_counter);
} parapet_counters SEC(".maps");

/* Rule id -> log rate limit; same size as parapet_actions. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct parapet_log_limit);
} parapet_log_limits SEC(".maps");

/* LOG events for user space. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} parapet_log SEC(".maps");

/* enum parapet_stat -> per-CPU count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} parapet_stats SEC(".maps");

/* Interim classifier: (proto, dport) -> rule id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct parapet_lite_key);
	__type(value, __u32);
} parapet_lite SEC(".maps");

/* Two classifier-image slots of parapet_slot_pages pages each. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * PARAPET_IMAGE_DEFAULT_SLOT_PAGES);
	__type(key, __u32);
	__type(value, struct parapet_image_page);
} parapet_image SEC(".maps");

/* [0] = generation; 0 = no image, else slot (gen & 1) is live. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} parapet_gen SEC(".maps");

/*
 * Never read by the programs.  User space stores parapet_gen in it after a
 * generation flip: updating a map-in-map makes the kernel wait for an RCU
 * grace period, so when the update returns, no program run that could have
 * seen the old generation is still walking the old slot, and the slot may
 * be overwritten.
 */
struct parapet_gen_inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct parapet_gen_inner);
} parapet_rcu_barrier SEC(".maps");

/* Test mode: the last packet's key and decision. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_debug_rec);
} parapet_debug SEC(".maps");

/* ---- helpers ----------------------------------------------------------- */

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&parapet_stats, &idx);

	if (v)
		*v += 1;
}


/* Pointer to len bytes at off, or NULL when they are not all in the packet. */
#define HDR_AT(data, data_end, off, len)                                        \
	({                                                                      \
		void *__p = (void *)0;                                          \
		__u32 __o = (off);                                              \
		if (__o <= PARAPET_MAX_OFF &&                                   \
		    (void *)(data) + __o + (len) <= (void *)(data_end))         \
			__p = (void *)(data) + __o;                             \
		__p;                                                            \
	})

static __always_inline int is_ipv6_ext(__u8 nh)
{
	switch (nh) {
	case IPPROTO_HOPOPTS:	/* 0 */
	case IPPROTO_ROUTING:	/* 43 */
	case IPPROTO_FRAGMENT:	/* 44 */
	case IPPROTO_AH:	/* 51 */
	case IPPROTO_DSTOPTS:	/* 60 */
	case 135:		/* Mobility */
	case 139:		/* HIP */
	case 140:		/* Shim6 */
		return 1;
	}
	return 0;
}

/*
 * Read the two port fields of a transport header of fixed size `need` (a
 * compile-time constant after inlining, which the verifier needs for the
 * packet bounds check).
 */
static __always_inline __u8 *l4_hdr(void *data, void *data_end, __u32 l4off,
				    __u32 l3_end, const __u32 need, int *status)
{
	__u8 *p;

	*status = PARAPET_PARSE_TRUNCATED;
	if (l4off + need > l3_end)
		return 0;
	p = HDR_AT(data, data_end, l4off, need);
	if (p)
		*status = PARAPET_PARSE_OK;
	return p;
}

/*
 * Parse the transport header at l4off.  l3_end is where the IP datagram
 * ends (header-stated length): a transport header that does not fit in both
 * the datagram and the captured data is truncated.  Fixed header sizes are
 * required in full (TCP 20, UDP/UDP-Lite 8, SCTP/DCCP 12, ICMP/ICMPv6 4),
 * which also rejects "tiny first fragment" tricks that push the TCP flags
 * into the second fragment.
 */
static __always_inline int parse_l4(void *data, void *data_end, __u32 l4off,
				    __u32 l3_end, struct parapet_key *key)
{
	int status = PARAPET_PARSE_OK;
	__u8 *p;

	switch (key->proto) {
	case IPPROTO_TCP:
		p = l4_hdr(data, data_end, l4off, l3_end, 20, &status);
		if (!p)
			return status;
		/* data offset in 32-bit words: below 5 is not a TCP header */
		if ((p[12] >> 4) < 5)
			return PARAPET_PARSE_MALFORMED;
		key->tcp_flags = p[13];
		break;
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		p = l4_hdr(data, data_end, l4off, l3_end, 8, &status);
		if (!p)
			return status;
		break;
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
		p = l4_hdr(data, data_end, l4off, l3_end, 12, &status);
		if (!p)
			return status;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* ICMP in IPv6 or ICMPv6 in IPv4 is just an unknown protocol */
		if ((key->proto == IPPROTO_ICMP) !=
		    (key->family == PARAPET_FAMILY_IPV4))
			return PARAPET_PARSE_OK;
		p = l4_hdr(data, data_end, l4off, l3_end, 4, &status);
		if (!p)
			return status;
		key->icmp_type = p[0];
		key->icmp_code = p[1];
		return PARAPET_PARSE_OK;
	default:
		/* No ports to read: classify on addresses and proto. */
		return PARAPET_PARSE_OK;
	}
	key->sport = ((__u16)p[0] << 8) | p[1];
	key->dport = ((__u16)p[2] << 8) | p[3];
	return PARAPET_PARSE_OK;
}

static __always_inline int parse_ipv4(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key)
{
	struct iphdr *ip = HDR_AT(data, data_end, off, sizeof(struct iphdr));

	if (!ip)
		return PARAPET_PARSE_TRUNCATED;
	if (ip->version != 4 || ip->ihl < 5)
		return PARAPET_PARSE_MALFORMED;

	__u32 hlen = ip->ihl * 4;
	__u32 avail = frame_len - off;
	__u32 tot = bpf_ntohs(ip->tot_len);

	/* tot_len 0 is legal for GSO "BIG TCP" skbs at tc: use what we have */
	if (tot == 0)
		tot = avail;
	if (tot < hlen)
		return PARAPET_PARSE_MALFORMED;
	if (tot > avail || !HDR_AT(data, data_end, off, hlen))
		return PARAPET_PARSE_TRUNCATED;

	key->family = PARAPET_FAMILY_IPV4;
	key->proto = ip->protocol;
	key->pkt_len = tot;
	__builtin_memcpy(&key->src[12], &ip->saddr, 4);
	__builtin_memcpy(&key->dst[12], &ip->daddr, 4);

	__u16 frag = bpf_ntohs(ip->frag_off);
	if (frag & 0x1fff) {
		/* Non-first fragment: no transport header.  Ports stay 0, so
		 * only rules without port/type matches can match it (the
		 * iptables rule). */
		key->frag = PARAPET_FRAG_FRAGMENT | PARAPET_FRAG_LATER;
		return PARAPET_PARSE_OK;
	}
	if (frag & 0x2000) /* MF: first fragment, has the L4 header */
		key->frag = PARAPET_FRAG_FRAGMENT;

	return parse_l4(data, data_end, off + hlen, off + tot, key);
}

static __always_inline int parse_ipv6(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key)
{
	struct ipv6hdr *ip6 = HDR_AT(data, data_end, off, sizeof(struct ipv6hdr));

	if (!ip6)
		return PARAPET_PARSE_TRUNCATED;
	if (ip6->version != 6)
		return PARAPET_PARSE_MALFORMED;

	__u32 avail = frame_len - off;
	__u32 tot = bpf_ntohs(ip6->payload_len) + sizeof(struct ipv6hdr);

	/* payload_len 0: jumbogram or BIG TCP; use what we have */
	if (ip6->payload_len == 0)
		tot = avail;
	if (tot > avail)
		return PARAPET_PARSE_TRUNCATED;

	key->family = PARAPET_FAMILY_IPV6;
	key->pkt_len = tot;
	__builtin_memcpy(key->src, &ip6->saddr, 16);
	__builtin_memcpy(key->dst, &ip6->daddr, 16);

	__u8 nh = ip6->nexthdr;
	__u32 cur = off + sizeof(struct ipv6hdr);
	__u32 l3_end = off + tot;
	int i;

	/* Bounded walk of the extension chain to the transport header. */
	for (i = 0; i < PARAPET_MAX_EXT_HDRS; i++) {
		if (!is_ipv6_ext(nh))
			break;
		__u8 *h = HDR_AT(data, data_end, cur, 8);
		if (!h || cur + 8 > l3_end)
			return PARAPET_PARSE_TRUNCATED;
		__u32 len;
		if (nh == IPPROTO_FRAGMENT) {
			__u16 fo = ((__u16)h[2] << 8) | h[3];
			len = 8;
			if (fo & 0xfff8) {
				/* non-first fragment: the upper header is in
				 * fragment one; h[0] names its protocol */
				key->frag = PARAPET_FRAG_FRAGMENT |
					    PARAPET_FRAG_LATER;
				key->proto = h[0];
				return PARAPET_PARSE_OK;
			}
			/* offset 0 with M=0 is an "atomic fragment"
			 * (RFC 6946): a whole packet, not flagged */
			if (fo & 1)
				key->frag = PARAPET_FRAG_FRAGMENT;
		} else if (nh == IPPROTO_AH) {
			len = ((__u32)h[1] + 2) * 4;
		} else {
			len = ((__u32)h[1] + 1) * 8;
		}
		nh = h[0];
		cur += len;
		if (cur > PARAPET_MAX_OFF)
			return PARAPET_PARSE_TRUNCATED;
	}
	if (is_ipv6_ext(nh))
		return PARAPET_PARSE_EXT_LIMIT;

	key->proto = nh;
	return parse_l4(data, data_end, cur, l3_end, key);
}

/*
 * Fill key from the frame in [data, data_end).  frame_len is the whole
 * frame's length (for tc it may exceed the linear data).  ifindex is set
 * by the caller.  Returns enum parapet_parse_status.
 */
static __noinline int parapet_parse(void *data, void *data_end,
					 __u32 frame_len,
					 struct parapet_key *key)
{
	struct ethhdr *eth = HDR_AT(data, data_end, 0, sizeof(struct ethhdr));
	__u32 off = sizeof(struct ethhdr);
	__u16 proto;
	int i;

	key->pkt_len = frame_len;
	if (!eth)
		return PARAPET_PARSE_TRUNCATED;
	proto = bpf_ntohs(eth->h_proto);

	for (i = 0; i < PARAPET_MAX_VLAN_TAGS; i++) {
		if (proto != ETH_P_8021Q && proto != ETH_P_8021AD)
			break;
		__u8 *tag = HDR_AT(data, data_end, off, 4);
		if (!tag)
			return PARAPET_PARSE_TRUNCATED;
		if (i == 0) {
			key->flags |= PARAPET_KEY_F_VLAN;
			key->vlan_id = (((__u16)tag[0] << 8) | tag[1]) & 0x0fff;
		}
		proto = ((__u16)tag[2] << 8) | tag[3];
		off += 4;
	}
	/* a third tag: refuse rather than pass it unfiltered */
	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD)
		return PARAPET_PARSE_EXT_LIMIT;

	if (proto == ETH_P_IP)
		return parse_ipv4(data, data_end, off, frame_len, key);
	if (proto == ETH_P_IPV6)
		return parse_ipv6(data, data_end, off, frame_len, key);
	return PARAPET_PARSE_NOT_IP;
}

/* ---- classification ---------------------------------------------------- */

/*
 * Image access: 32-bit word `word` of image slot `slot`, or -1 when the word
 * lies outside the slot.  Every image read of the walker goes through here,
 * so an image can never make the program read outside its slot.
 */
static __always_inline int image_word(__u32 slot, __u32 word, __u32 *out)
{
	if ((word / PARAPET_IMAGE_PAGE_WORDS) >= parapet_slot_pages)
		return -1;
	__u32 page = slot * parapet_slot_pages + word / PARAPET_IMAGE_PAGE_WORDS;
	struct parapet_image_page *pg = bpf_map_lookup_elem(&parapet_image, &page);
	if (!pg)
		return -1;
	*out = pg->w[word & (PARAPET_IMAGE_PAGE_WORDS - 1)];
	return 0;
}

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

/* ---- logging ----------------------------------------------------------- */

/* GCRA admission: true when this event fits the rule's rate and burst. */
static __always_inline int log_admit(__u32 rule_id)
{
	struct parapet_log_limit *lim =
		bpf_map_lookup_elem(&parapet_log_limits, &rule_id);

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

/* ---- the classifier image walker ---------------------------------------- */

#include "walker.bpf.h"

/* ---- the decision ------------------------------------------------------ */

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

/* Count (and log, for LOG entries) one non-terminal match of the image. */
static long nonterm_cb(__u32 i, void *ctx)
{
	struct parapet_walk *w = walk_state(ctx);
	__u32 rule;

	if (!w || i >= PARAPET_MAX_NONTERM)
		return 1;
	rule = w->nonterm_rule[i & (PARAPET_MAX_NONTERM - 1)];
	count_rule(rule, w->pkey.pkt_len);
	if (w->nonterm_kind[i & (PARAPET_MAX_NONTERM - 1)] == PARAPET_IMG_KIND_LOG)
		parapet_log_packet(rule, w->verdict, w->hook, &w->pkey);
	return 0;
}

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
	d->verdict = verdict;
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

/* Apply an image decision: count the deciding rule and every non-terminal
 * match, log the LOG entries, return the verdict. */
static __noinline __u32 image_finish(__u32 idx, __u32 rule_id,
					  const struct parapet_key *key,
					  int status, __u32 hook)
{
	struct walk_cb_ctx c = { .idx = idx };
	struct parapet_walk *w = walk_state(&c);

	if (!w)
		return PARAPET_VERDICT_DROP;
	stat_inc(PARAPET_STAT_IMAGE);
	count_rule(rule_id, key->pkt_len);
	if (w->nonterm_dropped)
		stat_inc(PARAPET_STAT_NONTERM_TRUNC);
	w->hook = hook;
	__builtin_memcpy(&w->pkey, key, sizeof(*key));
	bpf_loop(w->n_nonterm, nonterm_cb, &c, 0);
	w = walk_state(&c);
	if (!w)
		return PARAPET_VERDICT_DROP;
	debug_record(key, status, rule_id, w->verdict, w, 0);
	return w->verdict;
}

/*
 * Parse outcome -> verdict.  Non-IP frames pass untouched (ARP and
 * neighbour discovery must work and rules only speak IP).  Truncated or
 * malformed IP, and chains too long to walk, are dropped: the kernel would
 * drop most of them anyway, and the rest are evasion attempts.
 */
static __noinline __u32 parapet_decide(const struct parapet_key *key,
					    int status, __u32 hook)
{
	__u32 walk_err = 0;

	stat_inc(PARAPET_STAT_PACKETS);
	if (status == PARAPET_PARSE_NOT_IP) {
		stat_inc(PARAPET_STAT_NOT_IP);
		debug_record(key, status, 0, PARAPET_VERDICT_ACCEPT, 0, walk_err);
		return PARAPET_VERDICT_ACCEPT;
	}
	if (status != PARAPET_PARSE_OK) {
		stat_inc(status == PARAPET_PARSE_TRUNCATED ?
				 PARAPET_STAT_TRUNCATED :
			 status == PARAPET_PARSE_MALFORMED ?
				 PARAPET_STAT_MALFORMED :
				 PARAPET_STAT_EXT_LIMIT);
		debug_record(key, status, 0, PARAPET_VERDICT_DROP, 0, walk_err);
		return PARAPET_VERDICT_DROP;
	}

	/* The live image decides when there is one and it is usable. */
	__u32 zero = 0, idx = hook == PARAPET_HOOK_TC ? 1 : 0;
	__u32 *gen = bpf_map_lookup_elem(&parapet_gen, &zero);
	if (gen && *gen) {
		long r = image_walk(idx, *gen & 1, key);
		if (r >= 0)
			return image_finish(idx, (__u32)r, key, status, hook);
		stat_inc(PARAPET_STAT_IMAGE_ERROR);
		struct walk_cb_ctx c = { .idx = idx };
		struct parapet_walk *w = walk_state(&c);
		walk_err = w ? w->err : 0xffff;
	}

	__u32 rule_id = lite_classify(key);
	struct parapet_action *act =
		bpf_map_lookup_elem(&parapet_actions, &rule_id);
	if (!act) {
		/* rule id beyond the table: fail closed */
		stat_inc(PARAPET_STAT_NO_ACTION);
		debug_record(key, status, rule_id, PARAPET_VERDICT_DROP, 0, walk_err);
		return PARAPET_VERDICT_DROP;
	}
	__u32 verdict = act->verdict;
	__u8 flags = act->flags;

	count_rule(rule_id, key->pkt_len);
	if (flags & PARAPET_ACTION_F_LOG)
		parapet_log_packet(rule_id, verdict, hook, key);
	debug_record(key, status, rule_id, verdict, 0, walk_err);
	return verdict;
}

/* ---- entry points ------------------------------------------------------ */

SEC("xdp")
int parapet_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct parapet_key key;

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = ctx->ingress_ifindex;
	int status = parapet_parse(data, data_end, (__u32)(data_end - data), &key);
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_XDP);

	/* REJECT cannot answer from XDP: it drops, like DROP. */
	return verdict == PARAPET_VERDICT_ACCEPT ? XDP_PASS : XDP_DROP;
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

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = skb->ingress_ifindex;
	int status = parapet_parse(data, data_end, skb->len, &key);
	/* At tc the kernel has usually moved the outer tag out of the data
	 * into skb->vlan_tci; it is the outer one, so it wins. */
	if (skb->vlan_present) {
		key.flags |= PARAPET_KEY_F_VLAN;
		key.vlan_id = skb->vlan_tci & 0x0fff;
	}
	__u32 verdict = parapet_decide(&key, status, PARAPET_HOOK_TC);

	return verdict == PARAPET_VERDICT_ACCEPT ? TC_ACT_OK : TC_ACT_SHOT;
}
