# Per (L, kind) and binary: the attention's fwd, bwd ms (median of the 5 repeats of each
# invocation), its best repeat's fraction of the bf16 peak, per round.
import json, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line); r = d['r']
    rows[(r['seq_len'], r['kind'], d['which'])].append((d['round'], r['attn_fwd_ms'], r['attn_bwd_ms'], r['attn_best_ms'], r['peak_gflops'], r['attn_fraction_of_peak'], r['attn_fraction_of_peak_best']))
for key in sorted(rows):
    v = sorted(rows[key])
    print('%6d %-4s %-4s' % key, ' | '.join('r%d fwd %.1f bwd %.1f best %.1f ms peak %.0f frac %.1f%% best %.1f%%' % (rd, f, b, bb, p, 100*fr, 100*fb) for rd, f, b, bb, p, fr, fb in v))
    print('%17s min fwd %.1f  min bwd %.1f  min best %.1f ms' % ('', min(x[1] for x in v), min(x[2] for x in v), min(x[3] for x in v)))
