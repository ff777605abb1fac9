/*
 * acl_bench: benchmark DPDK's ACL library (rte_acl) on ClassBench data.
 *
 * Benchmark-only tool for parapet; NOT part of the product.  Written
 * against the public rte_acl API (rte_acl.h) only.
 *
 *   acl_bench [options] RULES TRACE [-- extra EAL args]
 *
 * RULES is a ClassBench filter file, TRACE a ClassBench trace file; both
 * may be plain text or gzip (read through zlib, which is transparent for
 * plain files).  See bench/rte_acl/README.md.
 *
 * Rule layout (5-tuple; the TCP-flags column is parsed and ignored):
 *   field 0  proto   1 byte  BITMASK  input 0
 *   field 1  src ip  4 bytes MASK     input 1
 *   field 2  dst ip  4 bytes MASK     input 2
 *   field 3  sport   2 bytes RANGE    input 3
 *   field 4  dport   2 bytes RANGE    input 3 (shares the 4-byte group)
 * priority = N - i (line i, 0-based, so the first line wins),
 * userdata = i + 1 (1-based line number; 0 is rte_acl's "no match").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/resource.h>

#include <zlib.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_version.h>
#include <rte_acl.h>

/* Search key handed to rte_acl_classify: all fields in network order. */
struct pkt {
	uint8_t proto;
	uint8_t pad[3];
	uint32_t sip;
	uint32_t dip;
	uint16_t sport;
	uint16_t dport;
};

enum { F_PROTO, F_SIP, F_DIP, F_SPORT, F_DPORT, NUM_FIELDS };

RTE_ACL_RULE_DEF(cb_rule, NUM_FIELDS);

static const struct rte_acl_field_def field_defs[NUM_FIELDS] = {
	{ .type = RTE_ACL_FIELD_TYPE_BITMASK, .size = sizeof(uint8_t),
	  .field_index = F_PROTO, .input_index = 0,
	  .offset = offsetof(struct pkt, proto) },
	{ .type = RTE_ACL_FIELD_TYPE_MASK, .size = sizeof(uint32_t),
	  .field_index = F_SIP, .input_index = 1,
	  .offset = offsetof(struct pkt, sip) },
	{ .type = RTE_ACL_FIELD_TYPE_MASK, .size = sizeof(uint32_t),
	  .field_index = F_DIP, .input_index = 2,
	  .offset = offsetof(struct pkt, dip) },
	{ .type = RTE_ACL_FIELD_TYPE_RANGE, .size = sizeof(uint16_t),
	  .field_index = F_SPORT, .input_index = 3,
	  .offset = offsetof(struct pkt, sport) },
	{ .type = RTE_ACL_FIELD_TYPE_RANGE, .size = sizeof(uint16_t),
	  .field_index = F_DPORT, .input_index = 3,
	  .offset = offsetof(struct pkt, dport) },
};

struct algo {
	const char *name;
	enum rte_acl_classify_alg alg;
};

static const struct algo algos[] = {
	{ "scalar", RTE_ACL_CLASSIFY_SCALAR },
	{ "sse", RTE_ACL_CLASSIFY_SSE },
	{ "avx2", RTE_ACL_CLASSIFY_AVX2 },
	{ "avx512x16", RTE_ACL_CLASSIFY_AVX512X16 },
	{ "avx512x32", RTE_ACL_CLASSIFY_AVX512X32 },
};
#define NUM_ALGOS (sizeof(algos) / sizeof(algos[0]))

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "acl_bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: on a shared, oversubscribed machine this
 * is much less sensitive to time-slicing than wall-clock time. */
static double cpu_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- input */

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL)
		die("out of memory (%zu bytes)", n);
	return p;
}

static int ip4(const unsigned b[4], uint32_t *out)
{
	for (int i = 0; i < 4; i++)
		if (b[i] > 255)
			return -1;
	*out = (uint32_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
	return 0;
}

/* Parse a ClassBench filter file into rte_acl rules (host byte order). */
static struct cb_rule *read_rules(const char *path, uint32_t *nrules)
{
	gzFile f = gzopen(path, "rb");
	if (f == NULL)
		die("cannot open %s", path);
	char line[1024];
	struct cb_rule *r = NULL;
	size_t n = 0, cap = 0, lineno = 0;

	while (gzgets(f, line, sizeof(line)) != NULL) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0' || *s == '\n' || *s == '\r')
			continue;
		unsigned sa[4], da[4], slen, dlen, splo, sphi, dplo, dphi;
		unsigned pv, pm;
		int k = sscanf(s, "@%u.%u.%u.%u/%u %u.%u.%u.%u/%u %u : %u %u : %u %x/%x",
			       &sa[0], &sa[1], &sa[2], &sa[3], &slen,
			       &da[0], &da[1], &da[2], &da[3], &dlen,
			       &splo, &sphi, &dplo, &dphi, &pv, &pm);
		uint32_t sip, dip;
		if (k != 16 || ip4(sa, &sip) || ip4(da, &dip) || slen > 32 ||
		    dlen > 32 || splo > sphi || sphi > 65535 || dplo > dphi ||
		    dphi > 65535 || pv > 255 || pm > 255)
			die("%s:%zu: cannot parse filter line", path, lineno);
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			r = xrealloc(r, cap * sizeof(*r));
		}
		struct cb_rule *x = &r[n];
		memset(x, 0, sizeof(*x));
		x->data.category_mask = 1;
		x->data.userdata = (uint32_t)(n + 1);
		/* priority filled in once the count is known */
		x->field[F_PROTO].value.u8 = (uint8_t)(pv & pm);
		x->field[F_PROTO].mask_range.u8 = (uint8_t)pm;
		x->field[F_SIP].value.u32 = slen ? sip & (UINT32_MAX << (32 - slen)) : 0;
		x->field[F_SIP].mask_range.u32 = slen;
		x->field[F_DIP].value.u32 = dlen ? dip & (UINT32_MAX << (32 - dlen)) : 0;
		x->field[F_DIP].mask_range.u32 = dlen;
		x->field[F_SPORT].value.u16 = (uint16_t)splo;
		x->field[F_SPORT].mask_range.u16 = (uint16_t)sphi;
		x->field[F_DPORT].value.u16 = (uint16_t)dplo;
		x->field[F_DPORT].mask_range.u16 = (uint16_t)dphi;
		n++;
	}
	gzclose(f);
	if (n == 0)
		die("%s: no filters", path);
	if (n > RTE_ACL_MAX_PRIORITY)
		die("%s: too many filters", path);
	for (size_t i = 0; i < n; i++)
		r[i].data.priority = (int32_t)(n - i);
	*nrules = (uint32_t)n;
	return r;
}

/* Parse a ClassBench trace file into search keys (network byte order). */
static struct pkt *read_trace(const char *path, uint32_t *npkts)
{
	gzFile f = gzopen(path, "rb");
	if (f == NULL)
		die("cannot open %s", path);
	char line[1024];
	struct pkt *p = NULL;
	size_t n = 0, cap = 0, lineno = 0;

	while (gzgets(f, line, sizeof(line)) != NULL) {
		lineno++;
		unsigned long sip, dip, sp, dp, pr;
		int k = sscanf(line, "%lu %lu %lu %lu %lu", &sip, &dip, &sp, &dp, &pr);
		if (k <= 0)
			continue; /* blank line */
		if (k != 5 || sip > UINT32_MAX || dip > UINT32_MAX ||
		    sp > 65535 || dp > 65535 || pr > 255)
			die("%s:%zu: cannot parse trace line", path, lineno);
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			p = xrealloc(p, cap * sizeof(*p));
		}
		memset(&p[n], 0, sizeof(p[n]));
		p[n].proto = (uint8_t)pr;
		p[n].sip = htonl((uint32_t)sip);
		p[n].dip = htonl((uint32_t)dip);
		p[n].sport = htons((uint16_t)sp);
		p[n].dport = htons((uint16_t)dp);
		n++;
	}
	gzclose(f);
	if (n == 0)
		die("%s: no trace lines", path);
	*npkts = (uint32_t)n;
	return p;
}

/* ------------------------------------------------------------ helpers */

static size_t heap_alloc_bytes(void)
{
	struct rte_malloc_socket_stats st;
	size_t total = 0;
	for (unsigned s = 0; s < rte_socket_count(); s++) {
		int id = rte_socket_id_by_idx(s);
		if (id >= 0 && rte_malloc_get_socket_stats(id, &st) == 0)
			total += st.heap_allocsz_bytes;
	}
	return total;
}

/* Pull "<key> N" out of captured rte_acl debug log text; -1 if absent. */
static long long log_value(const char *text, const char *key)
{
	const char *p = text ? strstr(text, key) : NULL;
	if (p == NULL)
		return -1;
	return strtoll(p + strlen(key), NULL, 10);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void classify_all(const struct rte_acl_ctx *ctx, const uint8_t **keys,
			 uint32_t *res, uint32_t n, uint32_t batch,
			 enum rte_acl_classify_alg alg)
{
	for (uint32_t i = 0; i < n; i += batch) {
		uint32_t m = n - i < batch ? n - i : batch;
		rte_acl_classify_alg(ctx, keys + i, res + i, m, 1, alg);
	}
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: acl_bench [options] RULES TRACE [-- extra EAL args]\n"
"  RULES, TRACE   ClassBench filter / trace file (plain or .gz)\n"
"  --algo LIST    comma list of scalar,sse,avx2,avx512x16,avx512x32 or 'all'\n"
"                 (default all; unsupported ones are skipped with a note)\n"
"  --runs R       timed runs per algorithm (default 7)\n"
"  --min-run-ms M each run repeats the trace until it lasts >= M ms (default 200)\n"
"  --batch B      packets per rte_acl_classify call (default 64)\n"
"  --mem MB       EAL memory (-m) in MB, no hugepages (default 2048)\n"
"  --max-size B   rte_acl_config.max_size in bytes (default 0 = no limit)\n"
"  --pin          keep the main thread pinned to one CPU by EAL (default:\n"
"                 restore the original CPU affinity after EAL init)\n"
"  --dump         no timing: print one line per trace packet with the\n"
"                 matched filter's 0-based line index (-1 = no match),\n"
"                 using the first algorithm of --algo (default scalar)\n");
}

int main(int argc, char **argv)
{
	int runs = 7, dump = 0, pin = 0;
	unsigned batch = 64;
	double min_run_ms = 200;
	unsigned long mem_mb = 2048;
	size_t max_size = 0;
	const char *algo_list = NULL;

	/* Split our args from the EAL extras at "--". */
	int nargs = argc, extra = argc;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nargs = i;
			extra = i + 1;
			break;
		}

	static const struct option lopts[] = {
		{ "algo", required_argument, NULL, 'a' },
		{ "runs", required_argument, NULL, 'r' },
		{ "min-run-ms", required_argument, NULL, 't' },
		{ "batch", required_argument, NULL, 'b' },
		{ "mem", required_argument, NULL, 'm' },
		{ "max-size", required_argument, NULL, 's' },
		{ "dump", no_argument, NULL, 'd' },
		{ "pin", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(nargs, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'a': algo_list = optarg; break;
		case 'r': runs = atoi(optarg); break;
		case 't': min_run_ms = atof(optarg); break;
		case 'b': batch = (unsigned)atoi(optarg); break;
		case 'm': mem_mb = strtoul(optarg, NULL, 10); break;
		case 's': max_size = strtoull(optarg, NULL, 10); break;
		case 'd': dump = 1; break;
		case 'p': pin = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (nargs - optind != 2) {
		usage(stderr);
		return 2;
	}
	if (runs < 1 || batch < 1 || mem_mb < 16)
		die("bad --runs/--batch/--mem");
	const char *rules_path = argv[optind], *trace_path = argv[optind + 1];

	/* Which algorithms were asked for. */
	int want[NUM_ALGOS] = { 0 };
	if (algo_list == NULL || strcmp(algo_list, "all") == 0) {
		for (size_t i = 0; i < NUM_ALGOS; i++)
			want[i] = dump ? (i == 0) : 1;
	} else {
		char *dup = strdup(algo_list), *save = NULL;
		int order = 1;
		for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			size_t i;
			for (i = 0; i < NUM_ALGOS; i++)
				if (strcmp(t, algos[i].name) == 0)
					break;
			if (i == NUM_ALGOS)
				die("unknown algorithm '%s'", t);
			if (!want[i])
				want[i] = order++;
		}
		free(dup);
	}

	/* EAL: no hugepages, no PCI, no shared files, one lcore on a CPU we
	 * are allowed to run on, AVX-512 allowed for the x16/x32 paths. */
	cpu_set_t cs;
	int cpu = 0, have_cs = 0;
	if (sched_getaffinity(0, sizeof(cs), &cs) == 0 && (have_cs = 1))
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &cs)) {
				cpu = i;
				break;
			}
	char mem_arg[32], lcore_arg[32];
	snprintf(mem_arg, sizeof(mem_arg), "%lu", mem_mb);
	snprintf(lcore_arg, sizeof(lcore_arg), "%d", cpu);
	char *eal_argv[64];
	int eal_argc = 0;
	eal_argv[eal_argc++] = argv[0];
	const char *defaults[] = {
		"--no-huge", "--no-pci", "--no-shconf", "--no-telemetry",
		"-m", mem_arg, "-l", lcore_arg,
		"--force-max-simd-bitwidth=512", "--log-level=lib.eal:warning",
	};
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		eal_argv[eal_argc++] = (char *)defaults[i];
	for (int i = extra; i < argc && eal_argc < 63; i++)
		eal_argv[eal_argc++] = argv[i];
	eal_argv[eal_argc] = NULL;
	if (rte_eal_init(eal_argc, eal_argv) < 0)
		die("rte_eal_init failed: %s", rte_strerror(rte_errno));
	/* EAL pinned us to one CPU; on a shared box let the kernel place us. */
	if (!pin && have_cs)
		sched_setaffinity(0, sizeof(cs), &cs);

	uint32_t nrules, npkts;
	struct cb_rule *rules = read_rules(rules_path, &nrules);
	struct pkt *pkts = read_trace(trace_path, &npkts);

	const uint8_t **keys = malloc(npkts * sizeof(*keys));
	uint32_t *res = malloc(npkts * sizeof(*res));
	uint32_t *ref = malloc(npkts * sizeof(*ref));
	if (!keys || !res || !ref)
		die("out of memory");
	for (uint32_t i = 0; i < npkts; i++)
		keys[i] = (const uint8_t *)&pkts[i];

	struct rte_acl_param prm = {
		.name = "parapet_bench",
		.socket_id = SOCKET_ID_ANY,
		.rule_size = RTE_ACL_RULE_SZ(NUM_FIELDS),
		.max_rule_num = nrules,
	};
	struct rte_acl_ctx *ctx = rte_acl_create(&prm);
	if (ctx == NULL)
		die("rte_acl_create failed: %s", rte_strerror(rte_errno));
	int ret = rte_acl_add_rules(ctx, (const struct rte_acl_rule *)rules, nrules);
	if (ret != 0)
		die("rte_acl_add_rules failed: %s", strerror(-ret));

	struct rte_acl_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.num_categories = 1;
	cfg.num_fields = NUM_FIELDS;
	memcpy(cfg.defs, field_defs, sizeof(field_defs));
	cfg.max_size = max_size;

	/* Capture rte_acl's own DEBUG accounting of the build. */
	char *logbuf = NULL;
	size_t loglen = 0;
	FILE *logf = open_memstream(&logbuf, &loglen);
	FILE *old_log = rte_log_get_stream();
	int old_level = rte_log_get_level(RTE_LOGTYPE_ACL);
	if (logf) {
		rte_openlog_stream(logf);
		rte_log_set_level(RTE_LOGTYPE_ACL, RTE_LOG_DEBUG);
	}
	size_t heap_before = heap_alloc_bytes();
	double t0 = now_sec(), c0 = cpu_sec();
	ret = rte_acl_build(ctx, &cfg);
	double build_ms = (now_sec() - t0) * 1e3;
	double build_cpu_ms = (cpu_sec() - c0) * 1e3;
	size_t heap_after = heap_alloc_bytes();
	if (logf) {
		rte_log_set_level(RTE_LOGTYPE_ACL, old_level);
		rte_openlog_stream(old_log);
		fclose(logf);
	}
	if (ret != 0) {
		if (logbuf)
			fputs(logbuf, stderr);
		die("rte_acl_build failed: %s", strerror(-ret));
	}
	long long rt_total = log_value(logbuf, "total: ");
	long long bld_mem = log_value(logbuf, "memory consumed: ");
	int tries = 0; /* rte_acl splits big rule sets into several tries */
	for (const char *q = logbuf; q && (q = strstr(q, "ACL: trie ")); q++)
		tries++;
	if (getenv("ACL_BENCH_LOG") && logbuf)
		fputs(logbuf, stderr);
	free(logbuf);
	size_t memory_bytes = heap_after - heap_before;
	struct rusage ru;
	long peak_rss_kb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;

	/* Reference results from the scalar path. */
	classify_all(ctx, keys, ref, npkts, batch, RTE_ACL_CLASSIFY_SCALAR);

	if (dump) {
		size_t a = 0;
		for (size_t i = 0; i < NUM_ALGOS; i++)
			if (want[i] == 1)
				a = i;
		if (rte_acl_set_ctx_classify(ctx, algos[a].alg) != 0)
			die("algorithm %s not supported here", algos[a].name);
		classify_all(ctx, keys, res, npkts, batch, algos[a].alg);
		for (uint32_t i = 0; i < npkts; i++)
			printf("%ld\n", (long)res[i] - 1);
		fprintf(stderr, "acl_bench: dumped %u results (algo %s, %u rules)\n",
			npkts, algos[a].name, nrules);
		rte_acl_free(ctx);
		rte_eal_cleanup();
		return 0;
	}

	uint32_t matched = 0;
	for (uint32_t i = 0; i < npkts; i++)
		matched += ref[i] != 0;

	double *lps = malloc(runs * sizeof(double));
	double *cps = malloc(runs * sizeof(double));
	for (size_t a = 0; a < NUM_ALGOS; a++) {
		if (!want[a])
			continue;
		/* rte_acl_set_ctx_classify checks CPU flags, the build and the
		 * EAL max SIMD bitwidth; rte_acl_classify_alg does not. */
		if (rte_acl_set_ctx_classify(ctx, algos[a].alg) != 0) {
			fprintf(stderr, "acl_bench: algorithm %s not supported here, skipped\n",
				algos[a].name);
			continue;
		}
		/* warm-up pass, also the correctness cross-check vs scalar */
		classify_all(ctx, keys, res, npkts, batch, algos[a].alg);
		uint32_t mismatches = 0;
		for (uint32_t i = 0; i < npkts; i++)
			mismatches += res[i] != ref[i];
		/* calibrate passes per run */
		double t = now_sec();
		classify_all(ctx, keys, res, npkts, batch, algos[a].alg);
		double one = now_sec() - t;
		unsigned passes = 1;
		if (one > 0 && one * 1e3 < min_run_ms)
			passes = (unsigned)(min_run_ms / (one * 1e3)) + 1;
		for (int r = 0; r < runs; r++) {
			double c = cpu_sec();
			t = now_sec();
			for (unsigned p = 0; p < passes; p++)
				classify_all(ctx, keys, res, npkts, batch, algos[a].alg);
			double el = now_sec() - t;
			double cel = cpu_sec() - c;
			lps[r] = (double)npkts * passes / el;
			cps[r] = (double)npkts * passes / cel;
		}
		qsort(lps, runs, sizeof(double), cmp_double);
		qsort(cps, runs, sizeof(double), cmp_double);
		double med = runs % 2 ? lps[runs / 2]
				      : (lps[runs / 2 - 1] + lps[runs / 2]) / 2;
		double cmed = runs % 2 ? cps[runs / 2]
				       : (cps[runs / 2 - 1] + cps[runs / 2]) / 2;
		printf("{\"tool\":\"rte_acl\",\"algo\":\"%s\",\"rules\":%u,"
		       "\"build_ms\":%.1f,\"memory_bytes\":%zu,"
		       "\"lookups_per_sec_median\":%.0f,\"min\":%.0f,\"max\":%.0f,"
		       "\"runs\":%d,\"cpu_lookups_per_sec_median\":%.0f,"
		       "\"cpu_min\":%.0f,\"cpu_max\":%.0f,\"build_cpu_ms\":%.1f,"
		       "\"packets\":%u,\"passes_per_run\":%u,\"batch\":%u,"
		       "\"matched\":%u,\"mismatches_vs_scalar\":%u,"
		       "\"acl_runtime_total_bytes\":%lld,\"acl_build_pool_bytes\":%lld,"
		       "\"tries\":%d,\"peak_rss_kb_after_build\":%ld,"
		       "\"dpdk\":", algos[a].name, nrules, build_ms, memory_bytes,
		       med, lps[0], lps[runs - 1], runs, cmed, cps[0],
		       cps[runs - 1], build_cpu_ms, npkts, passes, batch,
		       matched, mismatches, rt_total, bld_mem, tries, peak_rss_kb);
		json_str(rte_version());
		printf(",\"rules_file\":");
		json_str(rules_path);
		printf(",\"trace_file\":");
		json_str(trace_path);
		printf("}\n");
		fflush(stdout);
	}
	free(lps);
	free(cps);
	rte_acl_free(ctx);
	free(rules);
	free(pkts);
	free(keys);
	free(res);
	free(ref);
	rte_eal_cleanup();
	return 0;
}
