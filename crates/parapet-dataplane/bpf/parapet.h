/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * parapet.h - the ABI shared by the BPF program (parapet.bpf.c), the host
 * layout probe (layout_probe.c, run by build.rs) and the Rust mirror in
 * src/abi/ (abi.rs re-exports it).  Every struct here crosses the kernel/user boundary through a
 * BPF map, so its layout is part of the ABI: fields are ordered largest
 * first, padding is explicit, and a test compares the C offsets (printed by
 * the layout probe) with the Rust `offset_of!` values.
 *
 * Bump PARAPET_ABI_VERSION whenever a layout or a constant here changes.
 */
#ifndef PARAPET_H
#define PARAPET_H

#include <linux/types.h>

#define PARAPET_ABI_VERSION 14

/* ---- parsed packet key ------------------------------------------------- */

/* parapet_key.family */
#define PARAPET_FAMILY_NONE 0 /* not IP (ARP, LLDP, ...) */
#define PARAPET_FAMILY_IPV4 4
#define PARAPET_FAMILY_IPV6 6

/* parapet_key.frag bits */
#define PARAPET_FRAG_FRAGMENT 0x01 /* part of a fragmented datagram */
#define PARAPET_FRAG_LATER 0x02	   /* non-first fragment: no L4 header, ports 0 */

/* parapet_key.flags bits */
#define PARAPET_KEY_F_VLAN 0x01 /* an 802.1Q/802.1ad tag was present */
#define PARAPET_KEY_F_CT 0x02   /* ctstate is the conntrack lookup's result */
/* Bits 2..7 of flags: the conntrack entry's status bits 0..5 (IPS_EXPECTED
 * .. IPS_DST_NAT) at the netfilter hooks, else 0.  In flags and not a byte
 * of its own: one more byte grows the key past 64 bytes and the XDP
 * program's stack past 512 bytes. */
#define PARAPET_KEY_CT_STATUS_SHIFT 2


/*
 * Per-packet key data that does not live on the entry's stack (the XDP
 * call chain is at the verifier's 512 bytes): the member `ext` of the
 * per-CPU walk state (lib/walk_state.h).  The tc and netfilter entries
 * fill it in their scratch slot before parapet_decide; XDP fills only the
 * source MAC and the packet type, so its other fields stay 0 there.
 * build_key copies it into the key words (PARAPET_KW_MARK ...).
 */
struct parapet_key_ext {
	__u32 mark;    /* skb->mark (tc, netfilter) */
	__u32 ct_mark; /* the conntrack entry's mark (netfilter) */
	__u16 ct_orig_dport; /* conntrack original tuple's dst port (host order, netfilter) */
	__u8 ct_proto;	     /* conntrack entry's layer-4 protocol (netfilter) */
	/* the packet type as -m pkttype and meta pkttype see it
	 * (PARAPET_PACKET_*, lib/parse.h): skb->pkt_type at tc and netfilter,
	 * the destination MAC's at XDP (every hook) */
	__u8 pkt_type;
	/* the Ethernet source address as on the wire, and 1 when the hook
	 * has one (XDP, tc ingress; netfilter: xt_mac's checks), else 0 */
	__u8 mac_src[6];
	__u8 mac_present;
	__u8 pad2;
	/* the socket owner's uid and gid, packed as parapet_model::owner
	 * packs them (0 no socket, 1 no file, id + 2): netfilter LOCAL_OUT
	 * and POST_ROUTING only (lib/nf.h, nf_sk_owner), else 0 */
	__u32 sk_uid;
	__u32 sk_gid;
	/* the first IPv6 routing header (struct parapet_offs's rt: every
	 * hook, from the parser) */
	__u32 rt;
	/* the TCP option area as the parser found it (struct parapet_offs's
	 * tcp_opt: its length, 0..40, or PARAPET_TCP_OPT_PAST), and how many
	 * of its bytes the entry copied into the walk state's tcp_opt (only
	 * while the images test options: lib/tcp_options.h) */
	__u8 tcp_opt_area;
	__u8 tcp_opt_copied;
	/* where the route back to the source leaves (parapet_model::rev_path:
	 * 0 iif, 1 other, 2 none): looked up by the XDP and tc ingress entries
	 * while parapet_config[PARAPET_CFG_REV_PATH] is on (lib/rev_path.h),
	 * else 0 */
	__u8 rev_path;
	__u8 pad3;
	/* the datagram from its IP header as -m string sees it: its length
	 * (the L3 length, at most what the frame holds), and how many of its
	 * bytes the entry copied into the walk state's dgram (only while the
	 * images test patterns: lib/patterns.h) */
	__u32 dgram_len;
	__u32 dgram_copied;
};

/*
 * The classifier input.  Addresses are in network byte order exactly as on
 * the wire; an IPv4 address sits in the LAST 4 bytes of the 16-byte field and
 * the first 12 bytes are zero (not ::ffff:-mapped: `family` already says
 * which it is).  Ports, vlan_id, ifindex and pkt_len are host byte order.
 * pkt_len is the L3 length (IPv4 total length / 40 + IPv6 payload length),
 * which is what iptables byte counters count; for non-IP frames it is the
 * frame length.
 */
struct parapet_key {
	__u8 src[16];
	__u8 dst[16];
	__u32 ifindex;	 /* ingress interface index */
	__u32 pkt_len;	 /* see above */
	__u16 sport;	 /* TCP/UDP/UDP-Lite/SCTP/DCCP source port, else 0 */
	__u16 dport;	 /* destination port, else 0 */
	__u16 vlan_id;	 /* VID of the outer tag when flags & VLAN, else 0 */
	__u8 family;	 /* PARAPET_FAMILY_* */
	__u8 proto;	 /* transport protocol after the IPv6 extension chain */
	__u8 icmp_type;	 /* ICMP (v4) or ICMPv6 type, else 0 */
	__u8 icmp_code;	 /* ICMP code, else 0 */
	__u8 tcp_flags;	 /* TCP flags byte (CWR..FIN), else 0 */
	__u8 frag;	 /* PARAPET_FRAG_* bits */
	__u8 flags;	 /* PARAPET_KEY_F_* bits */
	__u8 ctstate;	 /* PARAPET_CT_* from the conntrack lookup (flags & CT), else 0 */
	__u8 ttl;	 /* IPv4 TTL or IPv6 hop limit */
	__u8 dscp;	 /* DSCP: TOS / traffic class >> 2 */
	__u32 oifindex;	 /* output interface index at FORWARD/OUTPUT, else 0 */
};


/* ---- parser outcome ---------------------------------------------------- */

enum parapet_parse_status {
	PARAPET_PARSE_OK = 0,
	PARAPET_PARSE_NOT_IP = 1,    /* non-IP ethertype: passed, not classified */
	PARAPET_PARSE_TRUNCATED = 2, /* a header runs past the end of the data */
	PARAPET_PARSE_MALFORMED = 3, /* bad version, IHL, length or data offset */
	PARAPET_PARSE_EXT_LIMIT = 4, /* IPv6 extension chain or VLAN stack too long */
};

/* Bounded walks: the verifier needs them and they bound the worst case. */
#define PARAPET_MAX_VLAN_TAGS 2
#define PARAPET_MAX_EXT_HDRS 8
/*
 * Largest header offset ever dereferenced.  Bounding offsets keeps the
 * verifier's range tracking simple (pointer + bounded scalar), and no sane
 * packet has its transport header this deep; deeper headers are reported as
 * truncated (dropped).
 */
#define PARAPET_MAX_OFF 1024
/* The longest TCP option area (a data offset of 15 words, less the fixed
 * header), and the area length that says the data offset runs past the
 * datagram (struct parapet_offs's tcp_opt, parapet_key_ext's
 * tcp_opt_area). */
#define PARAPET_TCP_OPT_MAX 40
/* The bytes of a datagram the entry copies for -m string (a power of two:
 * indices are masked with it).  A search that would read past them
 * abandons the walk (lib/patterns.h): never a guess. */
#define PARAPET_DGRAM_MAX 2048
#define PARAPET_TCP_OPT_PAST 0xff

/* ---- verdicts and rule actions ----------------------------------------- */

#define PARAPET_VERDICT_ACCEPT 0
#define PARAPET_VERDICT_DROP 1
#define PARAPET_VERDICT_REJECT 2 /* answered (TCP RST / ICMP error) or dropped */

/*
 * REJECT types: the 4th word of an image verdict row and
 * parapet_action.reject.  0 is iptables' default (ICMP port unreachable
 * of the packet's family).  ICMPX types pick the packet's family.  A type
 * of the other family (icmp-* on IPv6, icmp6-* on IPv4), tcp-reset on a
 * non-TCP packet and UNKNOWN send nothing: the packet is only dropped.
 */
#define PARAPET_REJECT_DEFAULT 0
#define PARAPET_REJECT_ICMP_NET_UNREACHABLE 1   /* 3/0 */
#define PARAPET_REJECT_ICMP_HOST_UNREACHABLE 2  /* 3/1 */
#define PARAPET_REJECT_ICMP_PORT_UNREACHABLE 3  /* 3/3 */
#define PARAPET_REJECT_ICMP_PROTO_UNREACHABLE 4 /* 3/2 */
#define PARAPET_REJECT_ICMP_NET_PROHIBITED 5    /* 3/9 */
#define PARAPET_REJECT_ICMP_HOST_PROHIBITED 6   /* 3/10 */
#define PARAPET_REJECT_ICMP_ADMIN_PROHIBITED 7  /* 3/13 */
#define PARAPET_REJECT_TCP_RESET 8
#define PARAPET_REJECT_ICMP6_NO_ROUTE 9         /* 1/0 */
#define PARAPET_REJECT_ICMP6_ADM_PROHIBITED 10  /* 1/1 */
#define PARAPET_REJECT_ICMP6_ADDR_UNREACHABLE 11 /* 1/3 */
#define PARAPET_REJECT_ICMP6_PORT_UNREACHABLE 12 /* 1/4 */
#define PARAPET_REJECT_ICMP6_POLICY_FAIL 13     /* 1/5 */
#define PARAPET_REJECT_ICMP6_REJECT_ROUTE 14    /* 1/6 */
#define PARAPET_REJECT_ICMPX_NO_ROUTE 15        /* 3/0 or 1/0 */
#define PARAPET_REJECT_ICMPX_ADMIN_PROHIBITED 16 /* 3/13 or 1/1 */
#define PARAPET_REJECT_ICMPX_HOST_UNREACHABLE 17 /* 3/1 or 1/3 */
#define PARAPET_REJECT_ICMPX_PORT_UNREACHABLE 18 /* 3/3 or 1/4 */
#define PARAPET_REJECT_UNKNOWN 255

/* Largest reply: IPv6 minimum MTU (RFC 4443 2.4 (c)). */
#define PARAPET_REJECT_MAX_L3 1280
/* Default global reply rate (per second) and burst; see set_reject_rate. */
#define PARAPET_REJECT_DEFAULT_RATE 1000
#define PARAPET_REJECT_DEFAULT_BURST 50

/* parapet_action.flags bits */
#define PARAPET_ACTION_F_LOG 0x01

/* One entry per rule id; entry 0 is the chain policy. */
struct parapet_action {
	__u8 verdict; /* PARAPET_VERDICT_* */
	__u8 flags;   /* PARAPET_ACTION_F_* */
	__u8 reject;  /* PARAPET_REJECT_* when verdict is REJECT */
	__u8 _pad;
};

/* Per rule id, per CPU. */
struct parapet_counter {
	__u64 packets;
	__u64 bytes; /* sum of parapet_key.pkt_len */
};

/*
 * Key of the interim classifier (hash map parapet_lite): (proto, dport) ->
 * rule id.  dport 0 means "any port" of that protocol, proto 0 with dport 0
 * means "anything".  It decides when no image is live (lib/lite.h).
 */
struct parapet_lite_key {
	__u8 proto;
	__u8 _pad;
	__u16 dport;
};

/* ---- logging ----------------------------------------------------------- */

/*
 * Per-rule log rate limit, a GCRA (virtual scheduling) token bucket.  User
 * space writes interval_ns = 1e9 / rate and tolerance_ns = interval_ns *
 * (burst - 1); the BPF side owns tat_ns and advances it with a
 * compare-and-swap, so concurrent CPUs never emit more than the limit.
 * interval_ns == 0 disables logging for that rule.
 */
struct parapet_log_limit {
	__u64 interval_ns;
	__u64 tolerance_ns;
	__u64 tat_ns; /* theoretical arrival time */
};

#define PARAPET_HOOK_XDP 1
#define PARAPET_HOOK_TC 2
/* netfilter hooks (lib/nf.h): where iptables' filter chains run and nft
 * filter chains before and after routing (docs/hooks.md).  In the
 * kernel's hook order: PARAPET_HOOK_NF_PREROUTING + the hook number, so
 * the netfilter program derives its hook, image and counters by
 * arithmetic — the verifier walks the classifier once for all five
 * hooks, not once per hook (its 1M-instruction budget). */
#define PARAPET_HOOK_NF_PREROUTING 3
#define PARAPET_HOOK_NF_INPUT 4
#define PARAPET_HOOK_NF_FORWARD 5
#define PARAPET_HOOK_NF_OUTPUT 6
#define PARAPET_HOOK_NF_POSTROUTING 7

/*
 * Classifier images: one per place a chain is enforced, each with two A/B
 * slots; one generation (parapet_gen) switches all of them at once.
 * Image 0 serves XDP and tc (the chain placed on an interface), 1..5 the
 * chains at the netfilter hooks, in hook order (image = PARAPET_HOOK_NF_*
 * - 2).
 */
#define PARAPET_IMAGES 6
#define PARAPET_IMAGE_IFACE 0
#define PARAPET_IMAGE_NF_PREROUTING 1
#define PARAPET_IMAGE_NF_INPUT 2
#define PARAPET_IMAGE_NF_FORWARD 3
#define PARAPET_IMAGE_NF_OUTPUT 4
#define PARAPET_IMAGE_NF_POSTROUTING 5

/* One ring-buffer record per logged packet. */
struct parapet_log_event {
	__u64 ts_ns; /* bpf_ktime_get_ns(), CLOCK_MONOTONIC */
	__u32 rule_id;
	__u8 verdict; /* PARAPET_VERDICT_* */
	__u8 hook;    /* PARAPET_HOOK_* */
	__u16 _pad;
	struct parapet_key key;
};

/* ---- statistics (per-CPU array parapet_stats, indexed by these) -------- */

enum parapet_stat {
	PARAPET_STAT_PACKETS = 0,	  /* every packet seen */
	PARAPET_STAT_NOT_IP = 1,	  /* passed unclassified */
	PARAPET_STAT_TRUNCATED = 2,	  /* dropped */
	PARAPET_STAT_MALFORMED = 3,	  /* dropped */
	PARAPET_STAT_EXT_LIMIT = 4,	  /* dropped */
	PARAPET_STAT_LOG_EMITTED = 5,	  /* ring buffer records written */
	PARAPET_STAT_LOG_RATE_LIMITED = 6, /* suppressed by the token bucket */
	PARAPET_STAT_LOG_RING_FULL = 7,	  /* ring buffer had no room */
	PARAPET_STAT_NO_ACTION = 8,	  /* rule id without action: dropped */
	PARAPET_STAT_IMAGE = 9,		  /* classified by the image walker */
	PARAPET_STAT_IMAGE_ERROR = 10,	  /* walker refused the live image */
	PARAPET_STAT_NONTERM_TRUNC = 11,  /* non-terminal matches beyond the cap */
	PARAPET_STAT_REJECT_SENT = 12,	  /* REJECT answered (RST / ICMP error) */
	PARAPET_STAT_REJECT_LIMITED = 13, /* REJECT over the reply rate: dropped */
	PARAPET_STAT_REJECT_NO_REPLY = 14, /* REJECT of a packet that gets no answer */
	PARAPET_STAT_REJECT_FAILED = 15,  /* building the answer failed: dropped */
	PARAPET_STAT_CT_LOOKUP = 16,	  /* conntrack lookups made */
	PARAPET_STAT_CT_FOUND = 17,	  /* ... that found an entry */
	PARAPET_STAT_NF_INPUT = 18,	  /* packets at the netfilter INPUT hook */
	PARAPET_STAT_NF_FORWARD = 19,	  /* ... FORWARD */
	PARAPET_STAT_NF_OUTPUT = 20,	  /* ... OUTPUT */
	PARAPET_STAT_NF_REJECT_QUEUED = 21, /* netfilter REJECT handed to parapetd */
	PARAPET_STAT_NF_REJECT_RING_FULL = 22, /* ... no room in the ring: no answer */
	PARAPET_STAT_NF_PREROUTING = 23,  /* packets at the netfilter PREROUTING hook */
	PARAPET_STAT_NF_POSTROUTING = 24, /* ... POSTROUTING */
	PARAPET_STAT_MAX = 25,
};

/* ---- per hook and interface (per-CPU array parapet_hook_stats) -------- */

/* One row per hook (PARAPET_HOOK_XDP .. PARAPET_HOOK_NF_POSTROUTING, row =
 * hook - 1), one column per interface index below PARAPET_HOOK_IFACES;
 * column 0 sums every interface with a larger index (no real interface
 * has index 0).  An array, not a hash: the lookup is a bounds check and
 * an add, no hashing on the packet path. */
#define PARAPET_HOOK_ROWS 7
#define PARAPET_HOOK_IFACES 256

/* What one hook saw on one interface (per CPU). */
struct parapet_hook_stat {
	__u64 packets;
	__u64 bytes;	/* the packets' key.pkt_len, as the rule counters */
	__u64 dropped;	/* not accepted: DROP, REJECT, fail-closed */
};

/* ---- REJECT at the netfilter hooks (ring buffer parapet_nf_reject) ----- */

/* Bytes of the rejected packet handed over, from its network header:
 * IPv6 + a few extension headers + TCP, or an IPv4 header + 8 bytes for
 * the ICMP quote (RFC 792). */
#define PARAPET_NF_REJECT_BYTES 128

/* One rejected packet; parapetd builds and sends the answer
 * (src/reject_queue.rs, docs/dataplane.md "REJECT at the netfilter
 * hooks"). */
struct parapet_nf_reject {
	__u32 rtype;	/* PARAPET_REJECT_* */
	__u8 hook;	/* PARAPET_HOOK_NF_* */
	__u8 family;	/* PARAPET_FAMILY_* */
	__u16 len;	/* valid bytes of pkt */
	__u32 ifindex;	/* input interface (0 at OUTPUT) */
	__u32 oifindex; /* output interface (0 at INPUT) */
	__u64 ts_ns;	/* bpf_ktime_get_ns() at the drop */
	__u8 pkt[PARAPET_NF_REJECT_BYTES];
};

/* ---- debug record (test mode only) ------------------------------------- */

/* Non-terminal matches (LOG, counters, jumps) recorded per packet by the
 * image walker; more are counted in PARAPET_STAT_NONTERM_TRUNC. */
#define PARAPET_MAX_NONTERM 16

/* Written to parapet_debug[0] for every packet when parapet_debug_mode != 0. */
struct parapet_debug_rec {
	struct parapet_key key;
	__u32 status;	 /* enum parapet_parse_status */
	__u32 rule_id;	 /* rule that decided, 0 = policy */
	__u32 verdict;	 /* PARAPET_VERDICT_* */
	__u32 seq;	 /* incremented per packet, to detect stale reads */
	__u32 by_image;	 /* 1: the image walker decided; 0: interim classifier */
	__u32 n_nonterm; /* entries of nonterm[] in use */
	__u32 nonterm[PARAPET_MAX_NONTERM]; /* rule ids, in evaluation order */
	__u32 walk_err;	 /* why the image walker gave up (0: it did not) */
	__u32 sets[2];	 /* the image key's set bits (words 24, 25) */
	__u32 reject;	 /* PARAPET_REJECT_* of a REJECT verdict */
	__u32 ctstate;	 /* the image key's ctstate (word 22) */
};

/* ---- sets (docs/dataplane.md, "Sets") ----------------------------------- */

#define PARAPET_MAX_SET_REFS 64	  /* bits of the image key's set mask */
#define PARAPET_MAX_SETS 1024	  /* set ids 0 .. 1023 */
#define PARAPET_SET_MAX_DIMS 4	  /* dimensions of a concatenated key */
#define PARAPET_SET_KEY_BYTES 36  /* concatenated key bytes (v6.proto.port.v6 = 35) */
#define PARAPET_SET_KEY_WORDS 9
#define PARAPET_SET_MAX_SHAPES 32 /* prefix-length combinations of a tuple set */

/* How a set stores its elements. */
enum parapet_set_kind {
	PARAPET_SET_NONE = 0,  /* undefined reference: never a member */
	PARAPET_SET_LPM = 1,   /* one dimension: parapet_set_lpm (single addresses:
				* parapet_set_exact4/6 first) */
	PARAPET_SET_TUPLE = 2, /* anything else: parapet_set_tuple, one probe per shape */
};

/* Which packet part a key dimension takes. */
enum parapet_set_part {
	PARAPET_PART_SADDR = 0,
	PARAPET_PART_DADDR = 1,
	PARAPET_PART_SPORT = 2,
	PARAPET_PART_DPORT = 3,
	PARAPET_PART_PROTO = 4,
	PARAPET_PART_IIF = 5,
	PARAPET_PART_OIF = 6,
};

/* parapet_set_refs: (slot * 64 + reference) -> how to build the key. */
struct parapet_set_ref {
	__u16 set_id;
	__u8 kind;	  /* enum parapet_set_kind */
	__u8 family;	  /* 0: any; 4 or 6: packets of the other family are not members */
	__u8 n_dims;
	__u8 part[PARAPET_SET_MAX_DIMS];  /* enum parapet_set_part */
	__u8 width[PARAPET_SET_MAX_DIMS]; /* bytes: 1 proto, 2 port, 4 IPv4, 16 IPv6 / ifname */
	__u8 _pad[3];
};

/* parapet_set_descs: set id -> the shapes of a tuple set.  Shape s keeps
 * the key bits where mask[s] is set. */
struct parapet_set_desc {
	__u32 n_shapes;
	__u32 _pad;
	__u32 mask[PARAPET_SET_MAX_SHAPES][PARAPET_SET_KEY_WORDS];
};

/* parapet_set_lpm key: prefixlen counts the 16 bits of set_id. */
struct parapet_set_lpm_key {
	__u32 prefixlen;
	__u8 set_id[2];	  /* big-endian */
	__u8 addr[16];	  /* big-endian; IPv4 in the first 4 bytes */
	__u8 _pad[2];
};

/* parapet_set_tuple key: the concatenated key masked by shape `shape`. */
struct parapet_set_tuple_key {
	__u16 set_id;
	__u8 shape;
	__u8 _pad;
	__u32 data[PARAPET_SET_KEY_WORDS]; /* dims back to back, big-endian bytes */
};

/* parapet_set_exact4 / parapet_set_exact6 key: one address (a /32 or a
 * /128 element entry) of an address set; the value is its expiry (__u64,
 * CLOCK_MONOTONIC ns, 0 = permanent). */
struct parapet_set_exact4_key {
	__u16 set_id;
	__u16 _pad;
	__u8 addr[4];	  /* big-endian */
};

struct parapet_set_exact6_key {
	__u16 set_id;
	__u16 _pad;
	__u8 addr[16];	  /* big-endian */
};

/* Value of the LPM trie and the tuple hash. */
struct parapet_set_val {
	__u64 expires_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns); 0 = permanent */
	__u32 prefixlen;  /* LPM: the entry's own prefixlen */
	__u32 _pad;
};

/* ---- interface names for the image key --------------------------------- */

/* parapet_ifnames: ifindex -> NUL-padded name (the image key's iif). */
struct parapet_ifname {
	char name[16];
};

/* ---- classifier image slots -------------------------------------------- */

/*
 * Two image slots live in one array map of 4 KiB pages: slot s is pages
 * [s * slot_pages, (s + 1) * slot_pages).  parapet_gen[0] holds the
 * generation g: 0 = no image (interim classifier), otherwise slot g & 1 is
 * active.  A swap writes slot (g + 1) & 1 and then stores g + 1: one u32.
 */
#define PARAPET_IMAGE_PAGE_BYTES 4096
#define PARAPET_IMAGE_PAGE_WORDS (PARAPET_IMAGE_PAGE_BYTES / 4)
#define PARAPET_IMAGE_DEFAULT_SLOT_PAGES 256 /* 1 MiB per slot */

struct parapet_image_page {
	__u32 w[PARAPET_IMAGE_PAGE_WORDS];
};

#endif /* PARAPET_H */
