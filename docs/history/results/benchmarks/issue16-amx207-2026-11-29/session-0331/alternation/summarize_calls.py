# Why: summarizes the per-call lines (PREFIX VARIANT TSC-cycles) a throwaway build printed
# while alternating two variants per call: ms per call (TSC 2,100 MHz), min / q1 / median.
# Usage: python3 summarize_calls.py FILE BWD LABEL
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith(sys.argv[2]): continue
    _,k,c=l.split(); d[k].append(int(c)/2.1e6)
for k in sorted(d, key=int):
    v=sorted(d[k]); print(sys.argv[3], sys.argv[2], k, "n",len(v),"min %.2f q1 %.2f med %.2f ms"%(v[0],v[len(v)//4],v[len(v)//2]))
