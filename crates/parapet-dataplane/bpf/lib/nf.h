/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * nf.h - what the netfilter program (BPF_PROG_TYPE_NETFILTER, a BPF link at
 * NF_INET_PRE_ROUTING / LOCAL_IN / FORWARD / LOCAL_OUT / POST_ROUTING) needs besides the shared parser
 * and walker: the kernel structures it reads, the packet copy it parses,
 * the conntrack state of the packet's own entry, and the nesting level that
 * picks its scratch state.  See docs/dataplane.md, "Netfilter hooks".
 *
 * The program has no direct packet access.  It copies the packet's first
 * bytes (the network header is at offset 0 at these hooks) with
 * bpf_dynptr_read into a per-CPU buffer behind a made-up Ethernet header
 * whose type says the family, so the one parser (parse.h) reads it like a
 * frame: HDR_AT bounds every access by PARAPET_MAX_OFF, and the buffer is
 * larger than PARAPET_MAX_OFF plus the largest header the parser reads.
 */
#ifndef PARAPET_LIB_NF_H
#define PARAPET_LIB_NF_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "parapet.h"
#include "image.h"
#include "walk_state.h"
#include "counters.h"
#include "conntrack.h" /* struct nf_conn */

/*
 * The kernel structures, reduced to the fields read.  preserve_access_index
 * makes every field access a CO-RE relocation that the loader resolves
 * against the running kernel's BTF (src/netfilter.rs), so the offsets here
 * do not matter.
 */
struct net_device {
	int ifindex;
	unsigned short type; /* ARPHRD_* */
} __attribute__((preserve_access_index));

struct nf_hook_state {
	__u8 hook;
	__u8 pf;
	struct net_device *in;
	struct net_device *out;
	struct net *net;
} __attribute__((preserve_access_index));

/* The socket owner's path (xt_owner.c, nft_meta.c): skb->sk, its state and
 * namespace, the listener of a request socket, the socket's file and that
 * file's credentials. */
struct cred {
	struct {
		__u32 val;
	} fsuid;
	struct {
		__u32 val;
	} fsgid;
} __attribute__((preserve_access_index));

struct file {
	const struct cred *f_cred;
} __attribute__((preserve_access_index));

struct socket {
	struct file *file;
} __attribute__((preserve_access_index));

struct sock_common {
	unsigned char skc_state;
	/* a request socket's listener (rsk_listener is a macro for it) */
	struct sock *skc_listener;
	struct {
		struct net *net;
	} skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	struct socket *sk_socket;
} __attribute__((preserve_access_index));


struct sk_buff {
	__u8 pkt_type : 3;
	unsigned int len;
	unsigned long _nfct;
	__u32 mark;
	struct sock *sk;
	struct net_device *dev;
	unsigned char *head;
	unsigned char *data;
	__u16 mac_header;
} __attribute__((preserve_access_index));

#define PARAPET_ARPHRD_ETHER 1

struct bpf_nf_ctx {
	const struct nf_hook_state *state;
	struct sk_buff *skb;
} __attribute__((preserve_access_index));

/* kfunc (src/kfunc.rs links it); netfilter programs may call it since 6.4 */
extern int bpf_dynptr_from_skb(struct __sk_buff *skb, __u64 flags,
			       struct bpf_dynptr *ptr__uninit);

#define NF_DROP 0
#define NF_ACCEPT 1
#define NFPROTO_IPV4 2
#define NFPROTO_IPV6 10
#define NF_INET_PRE_ROUTING 0
#define NF_INET_LOCAL_IN 1
#define NF_INET_FORWARD 2
#define NF_INET_LOCAL_OUT 3
#define NF_INET_POST_ROUTING 4

/* Bytes of the packet copied and parsed: enough for every header the
 * parser reads below PARAPET_MAX_OFF. */
#define PARAPET_NF_COPY (PARAPET_MAX_OFF + 64)

struct parapet_nf_buf {
	__u8 b[ETH_HLEN + PARAPET_NF_COPY];
};

/* One packet copy per nesting level and CPU (same levels as the walk's
 * scratch state). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARAPET_NF_NEST);
	__type(key, __u32);
	__type(value, struct parapet_nf_buf);
} parapet_nf_pkt SEC(".maps");

/* Per CPU: how many runs of the netfilter program are active on it.  A run
 * is never migrated; one that is interrupted sees its interrupter finish
 * before it continues, so a plain increment and decrement suffice. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} parapet_nf_depth SEC(".maps");

/*
 * The packet's conntrack state from its own entry (skb->_nfct: the entry
 * pointer with ctinfo in the low 3 bits), as xt_conntrack reports it:
 * no entry is INVALID, the untracked template is UNTRACKED.  Conntrack runs
 * before the filter priority, so at the filter hooks the entry is there
 * whenever the kernel tracks connections in this namespace.  A chain at
 * PREROUTING (or OUTPUT) below conntrack's priority (-200: nft's raw) runs
 * before the entry is attached and sees INVALID, as nft's ct expression
 * does there.
 */
static __always_inline __u32 nf_ctstate(unsigned long nfct)
{
	if (nfct == 0)
		return PARAPET_CT_INVALID;
	switch (nfct & 7) {
	case 0: /* IP_CT_ESTABLISHED */
	case 3: /* IP_CT_ESTABLISHED_REPLY */
		return PARAPET_CT_ESTABLISHED;
	case 1: /* IP_CT_RELATED */
	case 4: /* IP_CT_RELATED_REPLY */
		return PARAPET_CT_RELATED;
	case 2: /* IP_CT_NEW */
		return PARAPET_CT_NEW;
	case 7: /* IP_CT_UNTRACKED */
		return PARAPET_CT_UNTRACKED;
	}
	return PARAPET_CT_INVALID;
}

/*
 * The status bits the key carries (IPS_EXPECTED .. IPS_DST_NAT, bits 0..5)
 * of the packet's own conntrack entry, as `ct status` and xt_conntrack's
 * --ctstatus / --ctstate SNAT,DNAT read them; 0 without an entry and for
 * the untracked template.  _nfct is a plain number to the verifier, so the
 * entry is read with bpf_probe_read_kernel (struct nf_conn: conntrack.h,
 * its offset relocated against the kernel's BTF).  A failed read is 0.
 */
static __always_inline __u8 nf_ctstatus(unsigned long nfct)
{
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~7UL);
	unsigned long status = 0;

	if (nfct == 0 || (nfct & 7) == 7)
		return 0;
	if (bpf_core_read(&status, sizeof(status), &ct->status))
		return 0;
	return status & 0x3f;
}

/*
 * The original tuple's destination port and the layer-4 protocol of the
 * packet's own conntrack entry, as xt_conntrack's --ctorigdstport
 * (ntohs(tuple.dst.u.all)) and --ctproto (nf_ct_protonum) read them, into
 * the walk state's key extension; left 0 without an entry (a rule reading
 * them also requires a tracked state) and where a read fails.
 */
static __always_inline void nf_ct_original(unsigned long nfct,
					   struct parapet_key_ext *ext)
{
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~7UL);
	__be16 port = 0;
	__u8 proto = 0;

	if (nfct == 0 || (nfct & 7) == 7)
		return;
	if (bpf_core_read(&port, sizeof(port), &ct->tuplehash[0].tuple.dst.u.all) ||
	    bpf_core_read(&proto, sizeof(proto), &ct->tuplehash[0].tuple.dst.protonum))
		return;
	ext->ct_orig_dport = bpf_ntohs(port);
	ext->ct_proto = proto;
}

/* The conntrack entry's mark (nf_conn.mark, CONFIG_NF_CONNTRACK_MARK), read
 * as nf_ctstatus reads the status; 0 without an entry or on a failed read. */
static __always_inline __u32 nf_ctmark(unsigned long nfct)
{
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~7UL);
	__u32 mark = 0;

	if (nfct == 0 || (nfct & 7) == 7)
		return 0;
	if (bpf_core_read(&mark, sizeof(mark), &ct->mark))
		return 0;
	return mark;
}

/*
 * The packet's Ethernet source address, as xt_mac reads it: only from an
 * ARPHRD_ETHER device and a MAC header that lies between the buffer's head
 * and its data (so never for a packet this host sends: at OUTPUT and
 * POSTROUTING the header is not set or not yet written); else the key
 * extension says absent and no MAC rule matches.  Read straight into the
 * walk state: no stack.
 */
static __always_inline void nf_mac_src(struct sk_buff *skb,
				       struct parapet_key_ext *ext)
{
	struct net_device *dev = skb->dev;
	unsigned char *head = skb->head;
	__u64 mac = skb->mac_header;

	if (!dev || dev->type != PARAPET_ARPHRD_ETHER)
		return;
	/* mac_header is ~0 when unset: past data, refused here */
	if (head + mac + ETH_HLEN > skb->data)
		return;
	if (bpf_probe_read_kernel(ext->mac_src, 6, head + mac + 6))
		return;
	ext->mac_present = 1;
}

/* include/net/tcp_states.h */
#define PARAPET_TCP_TIME_WAIT 6
#define PARAPET_TCP_NEW_SYN_RECV 12
/* parapet_model::owner: 0 no socket, 1 a socket without a file, id + 2 */
#define PARAPET_OWNER_NO_FILE 1u
#define PARAPET_OWNER_MAX_ID 0xfffffffdu

static __always_inline __u32 owner_key_value(__u32 id)
{
	return id > PARAPET_OWNER_MAX_ID ? PARAPET_OWNER_MAX_ID + 2 : id + 2;
}

/*
 * The socket owner of a packet this host sends (-m owner, meta skuid and
 * skgid), as xt_owner and nft_meta find it: skb_to_full_sk() (a request
 * socket answers for its listener), a full socket of the hook's network
 * namespace (a time-wait socket is not one: nft_meta's sk_fullsock), its
 * struct socket (none: "no socket", 0), that socket's file (none, the
 * kernel's own sockets that send resets and ICMP errors: 1) and the file's
 * fsuid/fsgid.  The ids are the kernel's (the initial user namespace's, as
 * xt_owner compares them for a namespace created without a user
 * namespace).  Every read is bpf_probe_read_kernel (BPF_CORE_READ): plain
 * numbers to the verifier, no pointer walking to track, and a socket freed
 * under us reads as a failed read (absent), never a fault.  Only at
 * LOCAL_OUT and POST_ROUTING, and only when the live image constrains the
 * owner (PARAPET_CFG_OWNER): elsewhere the key's owner words stay 0.
 */
/* The owner switch (PARAPET_CFG_OWNER), one inlined array load. */
static __always_inline int owner_on(void)
{
	__u32 k = PARAPET_CFG_OWNER;
	__u32 *v = bpf_map_lookup_elem(&parapet_config, &k);

	return v && *v;
}

static __always_inline void nf_sk_owner(const struct nf_hook_state *state,
					struct sk_buff *skb,
					struct parapet_key_ext *ext)
{
	struct sock *sk = BPF_CORE_READ(skb, sk);
	struct socket *sock;
	struct file *file;
	unsigned char st;

	if (!sk)
		return;
	st = BPF_CORE_READ(sk, __sk_common.skc_state);
	if (st == PARAPET_TCP_NEW_SYN_RECV) {
		sk = BPF_CORE_READ(sk, __sk_common.skc_listener);
		if (!sk)
			return;
		st = BPF_CORE_READ(sk, __sk_common.skc_state);
	}
	if (st == PARAPET_TCP_TIME_WAIT || st == PARAPET_TCP_NEW_SYN_RECV)
		return;
	if (BPF_CORE_READ(sk, __sk_common.skc_net.net) !=
	    BPF_CORE_READ(state, net))
		return;
	sock = BPF_CORE_READ(sk, sk_socket);
	if (!sock)
		return;
	file = BPF_CORE_READ(sock, file);
	if (!file) {
		ext->sk_uid = PARAPET_OWNER_NO_FILE;
		ext->sk_gid = PARAPET_OWNER_NO_FILE;
		return;
	}
	ext->sk_uid = owner_key_value(BPF_CORE_READ(file, f_cred, fsuid.val));
	ext->sk_gid = owner_key_value(BPF_CORE_READ(file, f_cred, fsgid.val));
}

/*
 * nf_sk_owner where it applies (LOCAL_OUT, POST_ROUTING, the switch on), as
 * a function of its own that reads the hook number itself: inlined, or
 * given the caller's hook number, its tests refine the caller's registers
 * (the hook the walk is told) and the rest of the netfilter program is
 * verified once more with the hook known (+85k..130k verified
 * instructions); this way the caller's state is the same whichever way
 * it went.
 */
static __noinline int nf_owner_at(const struct nf_hook_state *state,
				  struct sk_buff *skb,
				  struct parapet_key_ext *ext)
{
	__u8 hooknum = BPF_CORE_READ(state, hook);

	if ((hooknum == NF_INET_LOCAL_OUT || hooknum == NF_INET_POST_ROUTING) &&
	    owner_on())
		nf_sk_owner(state, skb, ext);
	return 0;
}

/* The PARAPET_HOOK_NF_* of a netfilter hook number (at most
 * NF_INET_POST_ROUTING: the caller checks).  Arithmetic: see parapet.h. */
static __always_inline __u32 nf_parapet_hook(__u32 hooknum)
{
	return PARAPET_HOOK_NF_PREROUTING + hooknum;
}

/* Counts a packet at a netfilter hook in its PARAPET_STAT_NF_*.  A global
 * function: the verifier checks it once on its own, so the switch does
 * not split the caller's verification by hook. */
__noinline long parapet_count_nf_hook(__u32 hook)
{
	__u32 idx;

	switch (hook) {
	case PARAPET_HOOK_NF_PREROUTING: idx = PARAPET_STAT_NF_PREROUTING; break;
	case PARAPET_HOOK_NF_INPUT: idx = PARAPET_STAT_NF_INPUT; break;
	case PARAPET_HOOK_NF_FORWARD: idx = PARAPET_STAT_NF_FORWARD; break;
	case PARAPET_HOOK_NF_OUTPUT: idx = PARAPET_STAT_NF_OUTPUT; break;
	case PARAPET_HOOK_NF_POSTROUTING: idx = PARAPET_STAT_NF_POSTROUTING; break;
	default: return 0;
	}
	stat_inc(idx);
	return 0;
}

#endif /* PARAPET_LIB_NF_H */
