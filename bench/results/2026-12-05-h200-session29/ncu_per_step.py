# Per-kernel GPU time per step from two `ncu --print-summary per-kernel` logs (usage: ncu_per_step.py A B STEPS): B minus A over STEPS.
import re,sys
def parse(f):
    d={}; name=None
    txt=open(f).read().split('==PROF== Disconnected')[-1]
    for line in txt.splitlines():
        m=re.match(r"\s{2}(\S.*?) \(\d+, \d+, \d+\)x.*Invocations (\d+)",line)
        if m: name=re.sub(r"\(.*","",m.group(1))[:110]; inv=int(m.group(2)); continue
        m=re.match(r'\s+gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)',line)
        if m and name:
            unit=m.group(1); avg=float(m.group(4).replace(',',''))
            if unit=='ms': avg*=1000
            if unit=='ns': avg/=1000
            d[name]=d.get(name,(0,0)); d[name]=(d[name][0]+inv, d[name][1]+inv*avg); name=None
    return d
a=parse(sys.argv[1]); b=parse(sys.argv[2]); steps=float(sys.argv[3])
rows=[]
for k in set(a)|set(b):
    ia,ta=a.get(k,(0,0)); ib,tb=b.get(k,(0,0))
    rows.append((tb-ta,ib-ia,k))
rows.sort(reverse=True)
tot=sum(r[0] for r in rows)
print(f"total per step {tot/steps:.1f} us")
for t,i,k in rows:
    if abs(t)/steps>2: print(f"{t/steps:9.1f} us/step {i/steps:7.1f} calls/step  {k}")
