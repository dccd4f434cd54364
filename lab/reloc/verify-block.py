#!/usr/bin/env python3
"""Recompute the relocations of a loaded relocation-oracle case and compare with the kernel.

Usage: verify-block.py CASEDIR

CASEDIR is a loaded case of RELOC_DIR (module.ko, sections, kallsyms, block.bin). For every
entry of .rela.klpsym_reloc in module.ko this computes the field the psABI defines (S + A,
minus P for PC-relative types, the instruction immediates re-encoded the way the kernel's
module loader does) from S = the symbol's address (kallsyms for kernel symbols, the module's
/sys/module/<case>/sections address plus st_value for module-local ones) and
P = address of .klpsym_reloc + r_offset, and compares it with block.bin. Prints one line per
relocation, "OFFSET TYPE SYMBOL+ADDEND S=... got=... want=... ok|MISMATCH", then
"verified N, mismatched M"; exit 1 when M > 0. An independent check of the lab itself, written
without klpsym.
"""
import struct
import sys

R_X86_64 = {1: "R_X86_64_64", 2: "R_X86_64_PC32", 4: "R_X86_64_PLT32", 10: "R_X86_64_32",
            11: "R_X86_64_32S", 24: "R_X86_64_PC64"}
R_AARCH64 = {
    257: "ABS64", 258: "ABS32", 259: "ABS16", 260: "PREL64", 261: "PREL32", 262: "PREL16",
    263: "MOVW_UABS_G0", 264: "MOVW_UABS_G0_NC", 265: "MOVW_UABS_G1", 266: "MOVW_UABS_G1_NC",
    267: "MOVW_UABS_G2", 268: "MOVW_UABS_G2_NC", 269: "MOVW_UABS_G3", 270: "MOVW_SABS_G0",
    271: "MOVW_SABS_G1", 272: "MOVW_SABS_G2", 273: "LD_PREL_LO19", 274: "ADR_PREL_LO21",
    275: "ADR_PREL_PG_HI21", 276: "ADR_PREL_PG_HI21_NC", 277: "ADD_ABS_LO12_NC",
    278: "LDST8_ABS_LO12_NC", 279: "TSTBR14", 280: "CONDBR19", 282: "JUMP26", 283: "CALL26",
    284: "LDST16_ABS_LO12_NC", 285: "LDST32_ABS_LO12_NC", 286: "LDST64_ABS_LO12_NC",
    287: "MOVW_PREL_G0", 288: "MOVW_PREL_G0_NC", 289: "MOVW_PREL_G1", 290: "MOVW_PREL_G1_NC",
    291: "MOVW_PREL_G2", 292: "MOVW_PREL_G2_NC", 293: "MOVW_PREL_G3", 299: "LDST128_ABS_LO12_NC",
}
M64 = (1 << 64) - 1


def read_elf(path):
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "ELF64 LE only"
    machine = struct.unpack_from("<H", data, 18)[0]
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        secs.append(dict(name=name, type=typ, off=off, size=size, link=link, info=info))
    strtab = secs[shstrndx]

    def cstr(sec, idx):
        start = sec["off"] + idx
        return data[start:data.index(b"\0", start)].decode()

    for s in secs:
        s["name"] = cstr(strtab, s["name"])
    return data, machine, secs, cstr


def main():
    d = sys.argv[1].rstrip("/")
    data, machine, secs, cstr = read_elf(f"{d}/module.ko")
    arm64 = machine == 183
    names = R_AARCH64 if arm64 else R_X86_64
    sec_addr = {}
    for line in open(f"{d}/sections"):
        n, a = line.split()
        sec_addr[n] = int(a, 16)
    ksyms = {}
    for line in open(f"{d}/kallsyms"):
        parts = line.split()
        if len(parts) == 3 and parts[2] not in ksyms:
            ksyms[parts[2]] = int(parts[0], 16)
    block = open(f"{d}/block.bin", "rb").read()
    target = next(i for i, s in enumerate(secs) if s["name"] == ".klpsym_reloc")
    tsec = secs[target]
    orig = data[tsec["off"]:tsec["off"] + tsec["size"]]
    rela = next(s for s in secs if s["type"] == 4 and s["info"] == target)
    symtab = secs[rela["link"]]
    symstr = secs[symtab["link"]]
    base = sec_addr[".klpsym_reloc"]
    ok = bad = 0
    for i in range(rela["size"] // 24):
        r_off, r_info, r_add = struct.unpack_from("<QQq", data, rela["off"] + i * 24)
        rtype, rsym = r_info & 0xFFFFFFFF, r_info >> 32
        st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from(
            "<IBBHQQ", data, symtab["off"] + rsym * 24)
        name = cstr(symstr, st_name)
        if st_shndx == 0:
            s_addr = ksyms[name]
        else:
            secname = secs[st_shndx]["name"]
            name = name or secname
            s_addr = sec_addr[secname] + st_value
        p = base + r_off
        x = (s_addr + r_add) & M64
        tname = names.get(rtype, str(rtype))
        if arm64:
            size, want = aarch64_field(tname, x, p, orig, r_off)
        else:
            size = 8 if tname in ("R_X86_64_64", "R_X86_64_PC64") else 4
            v = x if tname in ("R_X86_64_64", "R_X86_64_32", "R_X86_64_32S") else (x - p) & M64
            want = v & ((1 << (8 * size)) - 1)
        got = int.from_bytes(block[r_off:r_off + size], "little")
        verdict = "ok" if got == want else "MISMATCH"
        ok += got == want
        bad += got != want
        print(f"{r_off:04x} {tname} {name}{r_add:+#x} S={s_addr:#x} got={got:#0{2 + 2 * size}x} "
              f"want={want:#0{2 + 2 * size}x} {verdict}")
    print(f"verified {ok}, mismatched {bad}")
    sys.exit(1 if bad else 0)


def aarch64_field(t, x, p, orig, off):
    """(field size, expected field) for type t: data types as values, instructions re-encoded."""
    rel = (x - p) & M64
    sval = rel - (1 << 64) if rel >> 63 else rel
    if t == "ABS64":
        return 8, x
    if t == "PREL64":
        return 8, rel
    if t == "PREL32":
        return 4, rel & 0xFFFFFFFF
    if t == "PREL16":
        return 2, rel & 0xFFFF
    insn = int.from_bytes(orig[off:off + 4], "little")

    def imm(val, shift, bits, lsb):
        mask = ((1 << bits) - 1) << lsb
        return (insn & ~mask) | (((val >> shift) & ((1 << bits) - 1)) << lsb)

    if t in ("CALL26", "JUMP26"):
        return 4, imm(sval, 2, 26, 0)
    if t in ("LD_PREL_LO19", "CONDBR19"):
        return 4, imm(sval, 2, 19, 5)
    if t == "TSTBR14":
        return 4, imm(sval, 2, 14, 5)
    if t in ("ADR_PREL_LO21", "ADR_PREL_PG_HI21", "ADR_PREL_PG_HI21_NC"):
        v = sval if t == "ADR_PREL_LO21" else (x >> 12) - (p >> 12)
        v &= (1 << 21) - 1
        w = insn & ~((3 << 29) | (0x7FFFF << 5))
        return 4, w | ((v & 3) << 29) | ((v >> 2) << 5)
    if t == "ADD_ABS_LO12_NC" or t.startswith("LDST"):
        shift = {"ADD": 0, "LDST8": 0, "LDST16": 1, "LDST32": 2, "LDST64": 3, "LDST128": 4}[t.split("_")[0]]
        return 4, imm(x & 0xFFF, shift, 12, 10)
    if t.startswith("MOVW_"):
        g = int(t.split("_G")[1][0])
        signed = t.startswith("MOVW_SABS") or (t.startswith("MOVW_PREL") and not t.endswith("_NC"))
        v = (sval if t.startswith("MOVW_PREL") else (x - (1 << 64) if x >> 63 else x)) >> (16 * g)
        w = insn
        if signed:
            w &= ~(3 << 29)
            if v >= 0:
                w |= 2 << 29
            else:
                v = ~v
        return 4, (w & ~(0xFFFF << 5)) | ((v & 0xFFFF) << 5)
    raise SystemExit(f"type {t} not handled")


if __name__ == "__main__":
    main()
