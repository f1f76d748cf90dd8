#!/usr/bin/env python3
# patch_maxnreg.py SRC_DIR DST_DIR N: copy ocltk program-cache entries, adding `.maxnreg N`
# to every PTX .entry (after its .reqntid/.maxntid line, else after the parameter list).
import os, re, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
MAGIC = b"OCLTK-PROGRAM-1\n"
def fnv(b):
    h = 0xcbf29ce484222325
    for c in b:
        h ^= c; h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h
os.makedirs(dst, exist_ok=True)
done = 0
for f in os.listdir(src):
    if not f.endswith(".bin"): continue
    b = open(os.path.join(src, f), "rb").read()
    assert b.startswith(MAGIC)
    p = len(MAGIC); ks, = struct.unpack_from("<Q", b, p); p += 8
    key = b[p:p+ks]; p += ks
    bs, ck = struct.unpack_from("<QQ", b, p); p += 16
    binary = b[p:p+bs]
    if b".entry" in binary:
        def add(m): return m.group(0) + b".maxnreg %d\n" % n
        new, cnt = re.subn(rb"\.entry \w+\((?:[^)]*)\)\n(?:\.(?:reqntid|maxntid)[^\n]*\n)?", add, binary)
        if cnt: binary = new; done += 1
    out = MAGIC + struct.pack("<Q", len(key)) + key + struct.pack("<QQ", len(binary), fnv(binary)) + binary
    open(os.path.join(dst, f), "wb").write(out)
print(f"patched {done} entries with .maxnreg {n}")
