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
/* Non-zero: the conntrack kfuncs are linked in and TCP and UDP packets
 * are looked up in the kernel's conntrack table while parapet_config's
 * PARAPET_CFG_CT word is non-zero (see "conntrack state" below); 0: the
 * lookup code is removed by the verifier and every packet has
 * parapet_ctstate (walker.bpf.h, UNTRACKED).  Set by the loader, which
 * turns it off when the kernel lacks the kfuncs. */
const volatile __u32 parapet_ct_mode = 0;

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

/* Runtime switches user space flips without reloading (PARAPET_CFG_*).
 * An array lookup with a constant key is inlined by the verifier, so
 * reading a switch costs a load. */
#define PARAPET_CFG_CT 0 /* non-zero: look packets up in conntrack */
#define PARAPET_CFG_WORDS 4
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PARAPET_CFG_WORDS);
	__type(key, __u32);
	__type(value, __u32);
} parapet_config SEC(".maps");

/* REJECT replies: one global GCRA bucket (interval 0 = never answer). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_log_limit);
} parapet_reject_limit SEC(".maps");

/* Where a REJECT reply's L3 packet is assembled before it replaces the
 * frame's contents.  Larger than the biggest reply so that every
 * checksum chunk (up to 512 bytes from any offset below the maximum)
 * stays inside it for the verifier. */
#define PARAPET_REPLY_BUF (PARAPET_REJECT_MAX_L3 + 512 + 8)
struct parapet_reply_buf {
	__u8 b[PARAPET_REPLY_BUF];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct parapet_reply_buf);
} parapet_reply SEC(".maps");

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

/* Where the parser found the headers (for REJECT and conntrack). */
struct parapet_offs {
	__u32 l3; /* IP header */
	__u32 l4; /* transport header; 0 when there is none */
};

static __always_inline int parse_ipv4(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key,
				      struct parapet_offs *offs)
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

	offs->l4 = off + hlen;
	return parse_l4(data, data_end, off + hlen, off + tot, key);
}

static __always_inline int parse_ipv6(void *data, void *data_end, __u32 off,
				      __u32 frame_len, struct parapet_key *key,
				      struct parapet_offs *offs)
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
	offs->l4 = cur;
	return parse_l4(data, data_end, cur, l3_end, key);
}

/*
 * Fill key from the frame in [data, data_end).  frame_len is the whole
 * frame's length (for tc it may exceed the linear data).  ifindex is set
 * by the caller.  Returns enum parapet_parse_status.
 */
static __noinline int parapet_parse(void *data, void *data_end,
					 __u32 frame_len,
					 struct parapet_key *key,
					 struct parapet_offs *offs)
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

	offs->l3 = off;
	if (proto == ETH_P_IP)
		return parse_ipv4(data, data_end, off, frame_len, key, offs);
	if (proto == ETH_P_IPV6)
		return parse_ipv6(data, data_end, off, frame_len, key, offs);
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

	if (verdict == PARAPET_VERDICT_REJECT)
		verdict |= (__u32)act->reject << 8;

	count_rule(rule_id, key->pkt_len);
	if (flags & PARAPET_ACTION_F_LOG)
		parapet_log_packet(rule_id, verdict & 0xff, hook, key);
	debug_record(key, status, rule_id, verdict, 0, walk_err);
	return verdict;
}

/* ---- conntrack state (kfuncs) ------------------------------------------ */

/*
 * The kernel's conntrack table is read with the nf_conntrack kfuncs.  aya
 * 0.14 cannot link kfuncs; the loader patches these calls with the
 * running kernel's BTF ids (src/kfunc.rs), hence no __ksym here.  Only
 * nf_conn.status and the TCP state are read; preserve_access_index makes
 * their offsets CO-RE relocations against the kernel's structs.
 */
struct ip_ct_tcp {
	__u8 state; /* enum tcp_conntrack */
} __attribute__((preserve_access_index));

union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));

struct nf_conn {
	unsigned long status;
	union nf_conntrack_proto proto;
} __attribute__((preserve_access_index));

/* enum tcp_conntrack: a connection that is over */
#define PARAPET_TCP_CONNTRACK_TIME_WAIT 7

/* struct bpf_ct_opts, net/netfilter/nf_conntrack_bpf.c, 12-byte form */
struct parapet_ct_opts {
	__s32 netns_id; /* -1: the packet's namespace */
	__s32 error;
	__u8 l4proto;
	__u8 dir; /* out: IP_CT_DIR_ORIGINAL 0 / IP_CT_DIR_REPLY 1 */
	__u8 reserved[2];
};
#define PARAPET_CT_OPTS_SZ 12

extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *ctx,
					 struct bpf_sock_tuple *tuple,
					 __u32 tuple_sz,
					 struct parapet_ct_opts *opts,
					 __u32 opts_sz);
extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *ctx,
					 struct bpf_sock_tuple *tuple,
					 __u32 tuple_sz,
					 struct parapet_ct_opts *opts,
					 __u32 opts_sz);
extern void bpf_ct_release(struct nf_conn *ct);

/* enum ip_conntrack_status bits */
#define PARAPET_IPS_EXPECTED 0x1
#define PARAPET_IPS_SEEN_REPLY 0x2

#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_PSH 0x08
#define TCPF_ACK 0x10
#define TCPF_URG 0x20

/*
 * tcp_error()'s flag check (nf_conntrack_proto_tcp.c, tcp_valid_flags):
 * with ECE, CWR and PSH masked off, only these combinations are valid;
 * anything else is INVALID before the table is consulted.
 */
static __always_inline int tcp_flags_valid(__u8 f)
{
	switch (f & (TCPF_FIN | TCPF_SYN | TCPF_RST | TCPF_ACK | TCPF_URG)) {
	case TCPF_SYN:
	case TCPF_SYN | TCPF_URG:
	case TCPF_SYN | TCPF_ACK:
	case TCPF_RST:
	case TCPF_RST | TCPF_ACK:
	case TCPF_FIN | TCPF_ACK:
	case TCPF_FIN | TCPF_ACK | TCPF_URG:
	case TCPF_ACK:
	case TCPF_ACK | TCPF_URG:
		return 1;
	}
	return 0;
}

/* What a lookup needs; filled by ct_prepare. */
struct ct_query {
	struct bpf_sock_tuple t;
	struct parapet_ct_opts opts;
	__u32 tuple_sz;
	__u8 icmp_error; /* the tuple is an ICMP error's quoted packet */
	__u8 tcp_flags;
};

/*
 * Fill q for a lookup and return -1, or return the state directly when no
 * lookup can say more: later fragments, protocols the kfuncs do not
 * handle (they take TCP and UDP only) and ICMP errors quoting anything
 * else are NEW; TCP flag combinations conntrack refuses are INVALID.
 */
static __always_inline int ct_prepare(void *data, void *data_end,
				      const struct parapet_key *key,
				      const struct parapet_offs *offs,
				      struct ct_query *q)
{
	int v6 = key->family == PARAPET_FAMILY_IPV6;
	__u8 proto = key->proto;
	__u32 l4 = offs->l4;

	if ((key->frag & PARAPET_FRAG_LATER) || l4 == 0)
		return PARAPET_CT_NEW;
	if (proto == IPPROTO_TCP && !tcp_flags_valid(key->tcp_flags))
		return PARAPET_CT_INVALID;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		q->tcp_flags = key->tcp_flags;
		q->opts.l4proto = proto;
		if (v6) {
			__builtin_memcpy(q->t.ipv6.saddr, key->src, 16);
			__builtin_memcpy(q->t.ipv6.daddr, key->dst, 16);
			q->t.ipv6.sport = bpf_htons(key->sport);
			q->t.ipv6.dport = bpf_htons(key->dport);
			q->tuple_sz = sizeof(q->t.ipv6);
		} else {
			__builtin_memcpy(&q->t.ipv4.saddr, &key->src[12], 4);
			__builtin_memcpy(&q->t.ipv4.daddr, &key->dst[12], 4);
			q->t.ipv4.sport = bpf_htons(key->sport);
			q->t.ipv4.dport = bpf_htons(key->dport);
			q->tuple_sz = sizeof(q->t.ipv4);
		}
		return -1;
	}
	/* ICMP errors: the state is the quoted packet's connection's */
	if (!v6 && proto == IPPROTO_ICMP) {
		__u8 ty = key->icmp_type;
		if (ty != 3 && ty != 4 && ty != 5 && ty != 11 && ty != 12)
			return PARAPET_CT_NEW;
		struct iphdr *in = HDR_AT(data, data_end, l4 + 8, sizeof(*in));
		if (!in || in->ihl < 5)
			return PARAPET_CT_INVALID;
		__u32 inl4 = l4 + 8 + in->ihl * 4;
		__u8 *ports = HDR_AT(data, data_end, inl4, 4);
		if (!ports)
			return PARAPET_CT_INVALID;
		if (in->protocol != IPPROTO_TCP && in->protocol != IPPROTO_UDP)
			return PARAPET_CT_NEW;
		q->opts.l4proto = in->protocol;
		q->t.ipv4.saddr = in->saddr;
		q->t.ipv4.daddr = in->daddr;
		__builtin_memcpy(&q->t.ipv4.sport, ports, 2);
		__builtin_memcpy(&q->t.ipv4.dport, ports + 2, 2);
		q->tuple_sz = sizeof(q->t.ipv4);
		q->icmp_error = 1;
		return -1;
	}
	if (v6 && proto == IPPROTO_ICMPV6) {
		if (key->icmp_type >= 128)
			return PARAPET_CT_NEW;
		struct ipv6hdr *in = HDR_AT(data, data_end, l4 + 8, sizeof(*in));
		if (!in)
			return PARAPET_CT_INVALID;
		__u8 *ports = HDR_AT(data, data_end, l4 + 8 + sizeof(*in), 4);
		if (!ports)
			return PARAPET_CT_INVALID;
		/* quoted extension headers are not walked */
		if (in->nexthdr != IPPROTO_TCP && in->nexthdr != IPPROTO_UDP)
			return PARAPET_CT_NEW;
		q->opts.l4proto = in->nexthdr;
		__builtin_memcpy(q->t.ipv6.saddr, &in->saddr, 16);
		__builtin_memcpy(q->t.ipv6.daddr, &in->daddr, 16);
		__builtin_memcpy(&q->t.ipv6.sport, ports, 2);
		__builtin_memcpy(&q->t.ipv6.dport, ports + 2, 2);
		q->tuple_sz = sizeof(q->t.ipv6);
		q->icmp_error = 1;
		return -1;
	}
	return PARAPET_CT_NEW;
}

/*
 * The lookup's result as xt_conntrack's --ctstate, following
 * resolve_normal_ct(): an entry seen in the reply direction, or one that
 * has seen a reply, is ESTABLISHED; an expected connection (IPS_EXPECTED)
 * is RELATED; otherwise NEW.  An ICMP error quoting a known connection is
 * RELATED, one quoting none is INVALID (nf_conntrack_inet_error).  With no
 * entry, UDP is NEW and TCP is what tcp_new() makes of the flags with
 * nf_conntrack_tcp_loose = 1: a SYN or a bare ACK is NEW, the rest
 * (SYN+ACK, FIN, RST, none) INVALID.
 */
static __always_inline __u8 ct_result(struct nf_conn *ct, struct ct_query *q)
{
	if (!ct) {
		if (q->icmp_error)
			return PARAPET_CT_INVALID;
		if (q->opts.l4proto == IPPROTO_TCP) {
			__u8 f = q->tcp_flags & (TCPF_SYN | TCPF_ACK | TCPF_RST | TCPF_FIN);
			return f == TCPF_SYN || f == TCPF_ACK ? PARAPET_CT_NEW :
								 PARAPET_CT_INVALID;
		}
		return PARAPET_CT_NEW;
	}
	stat_inc(PARAPET_STAT_CT_FOUND);
	unsigned long status = ct->status;
	__u8 dir = q->opts.dir;
	__u8 tcp_state = q->opts.l4proto == IPPROTO_TCP ? ct->proto.tcp.state : 0;

	bpf_ct_release(ct);
	if (q->icmp_error)
		return PARAPET_CT_RELATED;
	/* A SYN reusing the tuple of a connection that is over (TIME_WAIT,
	 * CLOSE) re-opens it: tcp_packet() kills the old entry and the SYN
	 * starts a new one, NEW. */
	if (dir == 0 && tcp_state >= PARAPET_TCP_CONNTRACK_TIME_WAIT &&
	    (q->tcp_flags & (TCPF_SYN | TCPF_ACK | TCPF_RST | TCPF_FIN)) == TCPF_SYN)
		return PARAPET_CT_NEW;
	if (dir == 1 || (status & PARAPET_IPS_SEEN_REPLY))
		return PARAPET_CT_ESTABLISHED;
	if (status & PARAPET_IPS_EXPECTED)
		return PARAPET_CT_RELATED;
	return PARAPET_CT_NEW;
}

/* True when this packet is to be looked up: the kfuncs are linked in
 * (load time) and user space has the switch on (run time). */
static __always_inline int ct_live(void)
{
	__u32 k = PARAPET_CFG_CT;
	__u32 *on;

	if (!parapet_ct_mode)
		return 0;
	on = bpf_map_lookup_elem(&parapet_config, &k);
	return on && *on;
}

/* The packet's ctstate; `hook` is a constant at every call site. */
static __always_inline __u8 ct_state(void *ctx, __u32 hook, void *data,
				     void *data_end,
				     const struct parapet_key *key,
				     const struct parapet_offs *offs)
{
	struct ct_query q;
	struct nf_conn *ct;

	__builtin_memset(&q, 0, sizeof(q));
	int st = ct_prepare(data, data_end, key, offs, &q);
	if (st >= 0)
		return st;
	q.opts.netns_id = -1;
	stat_inc(PARAPET_STAT_CT_LOOKUP);
	if (hook == PARAPET_HOOK_TC)
		ct = bpf_skb_ct_lookup(ctx, &q.t, q.tuple_sz, &q.opts,
				       PARAPET_CT_OPTS_SZ);
	else
		ct = bpf_xdp_ct_lookup(ctx, &q.t, q.tuple_sz, &q.opts,
				       PARAPET_CT_OPTS_SZ);
	return ct_result(ct, &q);
}

/* ---- REJECT replies ---------------------------------------------------- */

#define PARAPET_IP_TTL 64 /* net.ipv4.ip_default_ttl / IPv6 hop limit default */

/* The reply a REJECT type asks for: ICMP (type, code), a TCP reset, or
 * nothing (type of the other family, tcp-reset on non-TCP, unknown). */
struct reject_plan {
	__u8 rst;
	__u8 icmp_type;
	__u8 icmp_code;
	__u8 ok;
};

static __always_inline struct reject_plan reject_plan(__u32 rtype, int v6,
						      __u8 proto)
{
	struct reject_plan p = { .ok = 1 };
	__u8 v4c = 0xff, v6c = 0xff;

	switch (rtype) {
	case PARAPET_REJECT_DEFAULT:
	case PARAPET_REJECT_ICMPX_PORT_UNREACHABLE: v4c = 3; v6c = 4; break;
	case PARAPET_REJECT_ICMP_NET_UNREACHABLE: v4c = 0; break;
	case PARAPET_REJECT_ICMP_HOST_UNREACHABLE: v4c = 1; break;
	case PARAPET_REJECT_ICMP_PORT_UNREACHABLE: v4c = 3; break;
	case PARAPET_REJECT_ICMP_PROTO_UNREACHABLE: v4c = 2; break;
	case PARAPET_REJECT_ICMP_NET_PROHIBITED: v4c = 9; break;
	case PARAPET_REJECT_ICMP_HOST_PROHIBITED: v4c = 10; break;
	case PARAPET_REJECT_ICMP_ADMIN_PROHIBITED: v4c = 13; break;
	case PARAPET_REJECT_ICMP6_NO_ROUTE: v6c = 0; break;
	case PARAPET_REJECT_ICMP6_ADM_PROHIBITED: v6c = 1; break;
	case PARAPET_REJECT_ICMP6_ADDR_UNREACHABLE: v6c = 3; break;
	case PARAPET_REJECT_ICMP6_PORT_UNREACHABLE: v6c = 4; break;
	case PARAPET_REJECT_ICMP6_POLICY_FAIL: v6c = 5; break;
	case PARAPET_REJECT_ICMP6_REJECT_ROUTE: v6c = 6; break;
	case PARAPET_REJECT_ICMPX_NO_ROUTE: v4c = 0; v6c = 0; break;
	case PARAPET_REJECT_ICMPX_ADMIN_PROHIBITED: v4c = 13; v6c = 1; break;
	case PARAPET_REJECT_ICMPX_HOST_UNREACHABLE: v4c = 1; v6c = 3; break;
	case PARAPET_REJECT_TCP_RESET:
		p.rst = 1;
		p.ok = proto == IPPROTO_TCP;
		return p;
	default:
		p.ok = 0;
		return p;
	}
	p.icmp_type = v6 ? 1 : 3;
	p.icmp_code = v6 ? v6c : v4c;
	p.ok = p.icmp_code != 0xff;
	return p;
}

/*
 * Packets that never get an answer (RFC 1122 3.2.2, RFC 4443 2.4 (e),
 * icmp_send / icmp6_send / nf_send_reset): ICMP errors, TCP resets,
 * non-first fragments, link-layer broadcast or multicast, and IP
 * broadcast, multicast or unspecified addresses.
 */
static __always_inline int reject_eligible(const struct parapet_key *key,
					   const __u8 *dmac)
{
	if (dmac[0] & 1)
		return 0;
	if (key->frag & PARAPET_FRAG_LATER)
		return 0;
	if (key->proto == IPPROTO_TCP && (key->tcp_flags & TCPF_RST))
		return 0;
	if (key->family == PARAPET_FAMILY_IPV4) {
		__u8 s0 = key->src[12], d0 = key->dst[12];
		__u32 d, sa;
		__builtin_memcpy(&d, &key->dst[12], 4);
		__builtin_memcpy(&sa, &key->src[12], 4);
		if (d == 0xffffffff || (d0 & 0xf0) == 0xe0 || d == 0)
			return 0;
		if (sa == 0 || sa == 0xffffffff || (s0 & 0xf0) == 0xe0)
			return 0;
		if (key->proto == IPPROTO_ICMP) {
			__u8 t = key->icmp_type;
			if (t == 3 || t == 4 || t == 5 || t == 11 || t == 12 || t > 18)
				return 0;
		}
	} else {
		__u64 s0, s1;
		if (key->dst[0] == 0xff || key->src[0] == 0xff)
			return 0;
		__builtin_memcpy(&s0, key->src, 8);
		__builtin_memcpy(&s1, &key->src[8], 8);
		if (s0 == 0 && s1 == 0)
			return 0;
		if (key->proto == IPPROTO_ICMPV6 &&
		    (key->icmp_type < 128 || key->icmp_type == 137))
			return 0;
	}
	return 1;
}

/* Internet checksum of buf[off, off + len): len a multiple of 4, at most
 * 1536; chained through seed. */
static __always_inline __s64 csum_buf(__u8 *buf, __u32 off, __u32 len, __s64 seed)
{
	int i;

#pragma unroll
	for (i = 0; i < 3; i++) {
		__u32 n = len > 512 ? 512 : len;
		if (n == 0)
			break;
		if (off > PARAPET_REJECT_MAX_L3 || seed < 0)
			return -1;
		seed = bpf_csum_diff(0, 0, (__be32 *)(buf + off), n, (__u32)seed);
		off += n;
		len -= n;
	}
	return seed;
}

static __always_inline __u16 csum_fold(__s64 s)
{
	__u32 x = (__u32)s;

	x = (x & 0xffff) + (x >> 16);
	x = (x & 0xffff) + (x >> 16);
	return (__u16)~x;
}

/* Checksum of a transport message at buf[off, off + len) with its
 * pseudo-header (RFC 793 / RFC 8200 8.1), stored at buf[off + at]. */
static __always_inline int l4_csum(__u8 *buf, int v6, const struct parapet_key *key,
				   __u8 proto, __u32 off, __u32 len, __u32 at)
{
	__u8 ph[40];
	__s64 s;

	__builtin_memset(ph, 0, sizeof(ph));
	/* the reply goes from the packet's destination to its source */
	if (v6) {
		__builtin_memcpy(ph, key->dst, 16);
		__builtin_memcpy(ph + 16, key->src, 16);
		ph[34] = len >> 8;
		ph[35] = len;
		ph[39] = proto;
		s = bpf_csum_diff(0, 0, (__be32 *)ph, 40, 0);
	} else {
		__builtin_memcpy(ph, &key->dst[12], 4);
		__builtin_memcpy(ph + 4, &key->src[12], 4);
		ph[9] = proto;
		ph[10] = len >> 8;
		ph[11] = len;
		s = bpf_csum_diff(0, 0, (__be32 *)ph, 12, 0);
	}
	s = csum_buf(buf, off, (len + 3) & ~3u, s);
	if (s < 0 || off + at > PARAPET_REJECT_MAX_L3)
		return -1;
	__u16 c = csum_fold(s);
	__builtin_memcpy(buf + off + at, &c, 2);
	return 0;
}

/* The reply's IP header at buf[0]: 20 bytes (IPv4) or 40 (IPv6). */
static __always_inline void reply_ip(__u8 *buf, int v6,
				     const struct parapet_key *key, __u8 proto,
				     __u32 l3len, __u8 tos, __u16 frag)
{
	if (v6) {
		__builtin_memset(buf, 0, 40);
		buf[0] = 0x60;
		buf[4] = (l3len - 40) >> 8;
		buf[5] = l3len - 40;
		buf[6] = proto;
		buf[7] = PARAPET_IP_TTL;
		__builtin_memcpy(buf + 8, key->dst, 16);
		__builtin_memcpy(buf + 24, key->src, 16);
		return;
	}
	__builtin_memset(buf, 0, 20);
	buf[0] = 0x45;
	buf[1] = tos;
	buf[2] = l3len >> 8;
	buf[3] = l3len;
	buf[6] = frag >> 8;
	buf[7] = frag;
	buf[8] = PARAPET_IP_TTL;
	buf[9] = proto;
	__builtin_memcpy(buf + 12, &key->dst[12], 4);
	__builtin_memcpy(buf + 16, &key->src[12], 4);
	__u16 c = csum_fold(bpf_csum_diff(0, 0, (__be32 *)buf, 20, 0));
	__builtin_memcpy(buf + 10, &c, 2);
}

/* Frame access for both hooks; `hook` is a constant at every call site. */
static __always_inline long pkt_load(void *ctx, __u32 hook, __u32 off,
				     void *to, __u32 len)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_load_bytes(ctx, off, to, len);
	return bpf_xdp_load_bytes(ctx, off, to, len);
}

static __always_inline long pkt_store(void *ctx, __u32 hook, __u32 off,
				      void *from, __u32 len)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_store_bytes(ctx, off, from, len, 0);
	return bpf_xdp_store_bytes(ctx, off, from, len);
}

/*
 * Make the frame len bytes long; its contents are rewritten afterwards.
 * cur: the XDP frame's length now (the verifier refuses the 32-bit
 * pointer arithmetic that computing it here compiles to).  XDP grows at
 * the head: every XDP buffer has XDP_PACKET_HEADROOM there, while room at
 * the tail depends on the driver (veth's copies of skbs have none).
 */
static __always_inline long pkt_resize(void *ctx, __u32 hook, __u32 len,
				       __u32 cur)
{
	if (hook == PARAPET_HOOK_TC)
		return bpf_skb_change_tail(ctx, len, 0);
	int d = (int)len - (int)cur;
	if (d > 0)
		return bpf_xdp_adjust_head(ctx, -d);
	return bpf_xdp_adjust_tail(ctx, d);
}

/*
 * Turn the frame into the REJECT answer, in place: the Ethernet header
 * (and any VLAN tags) stay with the MACs swapped, the L3 packet becomes
 * a TCP reset (nf_reject_ip_tcphdr_put) or an ICMP / ICMPv6 error quoting
 * the packet (IPv4: its header + 8 bytes, RFC 792; IPv6: as much as fits
 * in 1280 bytes, RFC 4443).  Returns 1 when the frame is the answer and
 * should go back out, 0 to drop.
 */
static __always_inline int reject_reply(void *ctx, __u32 hook,
					const struct parapet_key *key,
					const struct parapet_offs *offs,
					__u32 rtype, __u32 frame_len)
{
	__u32 zero = 0;
	__u8 l2[24], mac[6];
	int v6 = key->family == PARAPET_FAMILY_IPV6;
	struct reject_plan p = reject_plan(rtype, v6, key->proto);
	__u32 l3 = offs->l3, l4 = offs->l4, rlen;

	/* Ethernet and up to two VLAN tags: 14 <= l3 <= 22 */
	if (l3 < 14 || l3 > sizeof(l2) ||
	    pkt_load(ctx, hook, 0, l2, l3) < 0 || !p.ok ||
	    !reject_eligible(key, l2)) {
		stat_inc(PARAPET_STAT_REJECT_NO_REPLY);
		return 0;
	}
	if (hook == PARAPET_HOOK_TC && ((struct __sk_buff *)ctx)->gso_size) {
		/* a GRO super-packet: trimming it would keep its GSO state */
		stat_inc(PARAPET_STAT_REJECT_NO_REPLY);
		return 0;
	}
	if (!gcra_admit(bpf_map_lookup_elem(&parapet_reject_limit, &zero))) {
		stat_inc(PARAPET_STAT_REJECT_LIMITED);
		return 0;
	}
	struct parapet_reply_buf *rb = bpf_map_lookup_elem(&parapet_reply, &zero);
	if (!rb || l3 > PARAPET_MAX_OFF || l4 > PARAPET_MAX_OFF)
		goto fail;
	__u8 *buf = rb->b;
	__u32 hl = v6 ? 40 : 20;

	if (p.rst) {
		__u8 th[20];
		if (l4 <= l3 || pkt_load(ctx, hook, l4, th, 20) < 0)
			goto fail;
		/* segment length: the datagram past the IP headers */
		__u32 seglen = key->pkt_len - (l4 - l3);
		__u32 doff = (th[12] >> 4) * 4;
		__u8 *t = buf + hl;
		rlen = hl + 20;
		__builtin_memset(t, 0, 20);
		t[0] = th[2];
		t[1] = th[3];
		t[2] = th[0];
		t[3] = th[1];
		t[12] = 5 << 4;
		if (th[13] & TCPF_ACK) {
			__builtin_memcpy(t + 4, th + 8, 4);
			t[13] = TCPF_RST;
		} else {
			__u32 seq = ((__u32)th[4] << 24) | ((__u32)th[5] << 16) |
				    ((__u32)th[6] << 8) | th[7];
			seq += seglen - doff + !!(th[13] & TCPF_SYN) +
			       !!(th[13] & TCPF_FIN);
			t[8] = seq >> 24;
			t[9] = seq >> 16;
			t[10] = seq >> 8;
			t[11] = seq;
			t[13] = TCPF_RST | TCPF_ACK;
		}
		reply_ip(buf, v6, key, IPPROTO_TCP, rlen, 0, 0x4000 /* DF */);
		if (l4_csum(buf, v6, key, IPPROTO_TCP, hl, 20, 16) < 0)
			goto fail;
	} else {
		__u32 q;
		__u32 il = hl + 8; /* IP + ICMP header */
		if (v6) {
			q = key->pkt_len;
			if (q > PARAPET_REJECT_MAX_L3 - 48)
				q = PARAPET_REJECT_MAX_L3 - 48;
		} else {
			/* header + 64 bits of data, RFC 792 */
			q = l4 > l3 ? l4 - l3 + 8 : 28;
			if (q > key->pkt_len)
				q = key->pkt_len;
			if (q > 68)
				q = 68;
		}
		if (q < 1 || q > PARAPET_REJECT_MAX_L3 - 48)
			goto fail;
		if (pkt_load(ctx, hook, l3, buf + il, q) < 0)
			goto fail;
		rlen = il + q;
		/* zero the bytes after the reply up to a 4-byte boundary */
		if (rlen > PARAPET_REJECT_MAX_L3)
			goto fail;
		buf[rlen] = 0;
		buf[rlen + 1] = 0;
		buf[rlen + 2] = 0;
		__u8 *ic = buf + hl;
		ic[0] = p.icmp_type;
		ic[1] = p.icmp_code;
		__builtin_memset(ic + 2, 0, 6);
		/* IPv4: TOS as icmp_send sets it for errors */
		reply_ip(buf, v6, key, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP, rlen,
			 0xc0, 0);
		if (v6) {
			if (l4_csum(buf, 1, key, IPPROTO_ICMPV6, 40, rlen - 40, 2) < 0)
				goto fail;
		} else {
			__s64 s = csum_buf(buf, 20, (rlen - 20 + 3) & ~3u, 0);
			if (s < 0)
				goto fail;
			__u16 c = csum_fold(s);
			__builtin_memcpy(buf + 22, &c, 2);
		}
	}
	if (rlen > PARAPET_REJECT_MAX_L3)
		goto fail;
	if (pkt_resize(ctx, hook, l3 + rlen, frame_len) < 0)
		goto fail;
	__builtin_memcpy(mac, l2, 6);
	__builtin_memcpy(l2, l2 + 6, 6);
	__builtin_memcpy(l2 + 6, mac, 6);
	if (l3 < 14 || l3 > sizeof(l2) ||
	    pkt_store(ctx, hook, 0, l2, l3) < 0 ||
	    pkt_store(ctx, hook, l3, buf, rlen) < 0)
		goto fail;
	stat_inc(PARAPET_STAT_REJECT_SENT);
	return 1;
fail:
	stat_inc(PARAPET_STAT_REJECT_FAILED);
	return 0;
}

/* ---- entry points ------------------------------------------------------ */

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
