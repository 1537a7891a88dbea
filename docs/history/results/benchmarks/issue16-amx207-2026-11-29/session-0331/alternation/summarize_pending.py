# Why: summarizes the PROF lines the throwaway rdtsc build of the packed bf16 attention
# printed (one line per call, the variant in its name): per variant, the calls' total
# cycles (min, first quartile, median) and each part's first-quartile cycles, in millions.
import re,sys,collections
rows = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        if not line.startswith('PROF'): continue
        kind = line.split()[1]
        body = line[len('PROF ')+len(kind)+1:].strip()
        d = {m.group(1).strip(): int(m.group(2)) for m in re.finditer(r'([a-zA-Z+ ]+?)=(\d+)', body)}
        rows[kind].append(d)
for kind in sorted(rows):
    rs = [r for r in rows[kind] if sum(r.values())>0]
    keys = [k for k in rs[0] if any(r[k] for r in rs) and k!='bwd tile setup']
    tot = sorted(sum(r[k] for k in keys) for r in rs)
    q1 = tot[len(tot)//4]
    print('%-5s n=%d tot min %.1f q1 %.1f med %.1f | ' % (kind, len(rs), tot[0]/1e6, q1/1e6, tot[len(tot)//2]/1e6) + ' '.join('%s=%.1f' % (k.replace('bwd ','').replace('fwd ',''), sorted(r[k] for r in rs)[len(rs)//4]/1e6) for k in keys))
