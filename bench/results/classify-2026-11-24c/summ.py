import json,statistics as st,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
sets=[]
for r in rows:
    if r['set'] not in sets: sets.append(r['set'])
print("loads:", sorted(r['load'] for r in rows)[0], "-", sorted(r['load'] for r in rows)[-1])
B=sys.argv[2] if len(sys.argv)>2 else 'after'
res={}
for s in sets:
    out=[s]
    for b in ['before', sys.argv[2] if len(sys.argv)>2 else 'after']:
        rr=[r['r'] for r in rows if r['set']==s and r['bin']==b]
        meds=[x['lookups_per_sec']/1e6 for x in rr]
        mins=[x['lookups_per_sec_min']/1e6 for x in rr]; maxs=[x['lookups_per_sec_max']/1e6 for x in rr]
        cpu=[x['cpu_lookups_per_sec']/1e6 for x in rr]
        res[(s,b)]=st.median(meds)
        out.append(f"{b}: {st.median(meds):.2f} [{min(mins):.2f}-{max(maxs):.2f}] rounds {' '.join('%.2f'%m for m in meds)} cpu {st.median(cpu):.2f} build {st.median(x['build_ms'] for x in rr):.0f}ms mem {rr[0]['memory_bytes']/2**20:.2f}MiB")
    out.append(f"ratio {res[(s,B)]/res[(s,'before')]:.2f}")
    print(" | ".join(out))
print("flatness after", res[('worst_25600',B)]/res[('worst_25',B)], "before", res[('worst_25600','before')]/res[('worst_25','before')])
