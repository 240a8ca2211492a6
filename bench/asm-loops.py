#!/usr/bin/env python3
"""Loops of one function in an aarch64 assembly file (gcc or clang -S).

    bench/asm-loops.py FILE.s FUNCTION [--mca CPU ...]

Prints every loop of FUNCTION (a backward branch to a label inside it): its
label, its number of instructions, how many are SDOT/SMMLA, and the loops it
contains.  With --mca, the body of each innermost loop goes through
llvm-mca (LLVM 19's, for the cortex-x3 and neoverse-v2 models) and the
steady-state cycles per iteration are printed beside it.  FUNCTION is a
symbol as it stands in the file (a C++ name mangled, or a prefix of it
ending in '*').  Used by bench/arm-isa.sh; docs/BENCHMARKS.md has the table.
"""
import re
import subprocess
import sys


def function_lines(path, name):
    lines = open(path).read().splitlines()
    want = (lambda s: s.startswith(name[:-1])) if name.endswith('*') else (lambda s: s == name)
    start = None
    for i, line in enumerate(lines):
        m = re.match(r'^([\w.$]+):', line)
        if m and want(m.group(1)) and start is None:
            start = i
        elif start is not None and (re.match(r'^\s*\.size\s', line) or re.match(r'^\s*\.cfi_endproc', line)):
            return lines[start:i]
    sys.exit(f'asm-loops: no function {name} in {path}')


def is_instruction(line):
    s = line.strip()
    return s and not s.startswith(('.', '//', '#', '@')) and not re.match(r'^[\w.$]+:', s)


# b, b.cond (clang) or bcond (gcc), cbz/cbnz, tbz/tbnz, with the label last
BRANCH = re.compile(r'^(b|b\.?(?:eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)|cbn?z|tbn?z)\s+(?:.*,\s*)?([\w.$]+)$')


def loops(body):
    labels = {}
    instr = []  # (index in body, text)
    for i, line in enumerate(body):
        m = re.match(r'^([\w.$]+):', line.strip())
        if m:
            labels[m.group(1)] = len(instr)
        elif is_instruction(line):
            instr.append(line.strip().split('//')[0].strip())
    found = []
    for j, text in enumerate(instr):
        m = BRANCH.match(text)
        if m and m.group(2) in labels and labels[m.group(2)] <= j:
            found.append((labels[m.group(2)], j, m.group(2)))
    return instr, found


def mca(text, cpu):
    tool = 'llvm-mca-19'
    out = subprocess.run([tool, '-mtriple=aarch64', f'-mcpu={cpu}', '-iterations=200', '-mattr=+dotprod,+i8mm,+fullfp16'],
                         input=text, capture_output=True, text=True)
    m = re.search(r'Total Cycles:\s+(\d+)', out.stdout)
    return int(m.group(1)) / 200 if m else float('nan')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, name = sys.argv[1], sys.argv[2]
    cpus = sys.argv[sys.argv.index('--mca') + 1:] if '--mca' in sys.argv else []
    instr, found = loops(function_lines(path, name))
    print(f'{name}: {len(instr)} instructions')
    for a, b, label in sorted(found):
        body = instr[a:b + 1]
        inner = [l for (x, y, l) in found if a <= x and y <= b and (x, y) != (a, b)]
        dots = sum(1 for t in body if t.startswith(('sdot', 'smmla', 'udot', 'usmmla')))
        line = f'  loop {label}: {len(body)} instructions, {dots} sdot/smmla'
        if inner:
            line += f', contains {" ".join(inner)}'
        elif cpus:
            text = '\n'.join(t for t in body if not BRANCH.match(t)) + '\n'
            line += ', cycles/iteration ' + ' '.join(f'{c} {mca(text, c):.1f}' for c in cpus)
        print(line)


if __name__ == '__main__':
    main()
