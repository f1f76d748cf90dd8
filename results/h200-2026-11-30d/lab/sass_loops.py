import re,sys,collections
ins=[]
for line in open(sys.argv[1]):
    m=re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?);',line)
    if m: ins.append((int(m.group(1),16),m.group(2).strip()))
addr={a:i for i,(a,_) in enumerate(ins)}
loops=[]
for i,(a,t) in enumerate(ins):
    m=re.search(r'BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)',t)
    if m:
        tgt=int(m.group(1),16)
        if tgt<a and tgt in addr: loops.append((addr[tgt],i))
for s,e in loops:
    c=collections.Counter()
    for a,t in ins[s:e+1]:
        op=re.sub(r'^@!?U?P\w+\s+','',t).split()[0].split('.')[0]
        c[op]+=1
    n=e-s+1
    if n<40: continue
    print(f"loop {ins[s][0]:x}-{ins[e][0]:x} n={n}:", " ".join(f"{k}:{v}" for k,v in c.most_common(18)))
