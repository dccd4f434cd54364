#!/usr/bin/env python3
"""Decode the relocation oracle's dump lines into the section's bytes.

Usage: decode-block.py DMESG OUT.bin

DMESG holds the lines a case module printed at load (timestamps stripped):
    klpsym-reloc-size N
    klpsym-reloc OFFSET HEXBYTES      (OFFSET: hex; up to 32 bytes a line)
OUT.bin gets the N bytes. Exit 1 (with the reason) when the lines are missing, overlap,
leave a gap or do not add up to N.
"""
import re
import sys


def main():
    dmesg, out = sys.argv[1], sys.argv[2]
    size = None
    chunks = {}
    with open(dmesg, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"klpsym-reloc-size (\d+)$", line.rstrip("\n"))
            if m:
                size = int(m.group(1))
                continue
            m = re.search(r"klpsym-reloc ([0-9a-f]+) ([0-9a-f]+)$", line.rstrip("\n"))
            if m:
                chunks[int(m.group(1), 16)] = bytes.fromhex(m.group(2))
    if size is None:
        sys.exit(f"{dmesg}: no klpsym-reloc-size line")
    block = bytearray()
    for off in sorted(chunks):
        if off != len(block):
            sys.exit(f"{dmesg}: dump line at offset {off:#x}, expected {len(block):#x}")
        block += chunks[off]
    if len(block) != size:
        sys.exit(f"{dmesg}: {len(block)} bytes dumped, the module said {size}")
    with open(out, "wb") as f:
        f.write(block)


if __name__ == "__main__":
    main()
