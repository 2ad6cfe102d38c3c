#!/usr/bin/env python3
"""Where a simulated gate run spends its time, by part of the harness.

Reads `perf script -F comm,ip,sym` (samples with call stacks) on stdin and puts each sample in
the first part whose pattern appears anywhere in its stack, in the order of PARTS below (so a
SQLite call made by the executor counts as SQLite, the executor's JSON parsing as the adapter).
Then prints the share of each part and the functions with the most samples of their own.
`make profile` records the samples (frame pointers on) and runs this.
"""

import collections
import re
import sys

# (part, pattern): the first part whose pattern is in a sample's stack takes the sample.
PARTS = [
    ("trace hash (binary form + SHA-256)", "toolop_sim::trace::Trace::hash"),
    ("judge (checkers and metrics)", "toolop_sim::campaign::sweep::row_of"),
    ("SQLite ledger", "sqlite"),
    ("in-memory ledger", "toolop::ledger::memory"),
    ("world's ledger wrapper (what each write meets, fault draws)", "toolop_sim::series::ledger"),
    ("executor's adapters (encode, parse, classify)", "toolop::protocol"),
    ("fake servers (codecs, task service)", "toolop_sim::fake"),
    ("fake servers (codecs, task service)", "toolop_sim::series::server"),
    ("simulated network", "toolop_sim::series::net"),
    ("executor's observations into the trace", "SimObserver"),
    ("world (faults, trace pushes)", "toolop_sim::series::World::"),
    ("world (faults, trace pushes)", "toolop_sim::series::faults"),
    ("world (faults, trace pushes)", "toolop_sim::trace::Trace::push"),
    ("executor (runner and core)", "toolop::runner"),
    ("executor (runner and core)", "toolop::core"),
    # Last: every simulated sample runs under madsim; here go those no part above took.
    ("madsim runtime (tasks, timers, clock)", "madsim::"),
]
TOP_SELF = 25


def samples(lines):
    """Each sample's stack, leaf first, as symbol names."""
    stack = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0] in " \t":
            parts = line.strip().split(" ", 1)
            stack.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1] if len(parts) > 1 else parts[0]))
        else:
            stack = []
    if stack:
        yield stack


def main():
    by_part = collections.Counter()
    by_self = collections.Counter()
    total = 0
    for stack in samples(sys.stdin):
        total += 1
        by_self[stack[0]] += 1
        part = next((name for name, pat in PARTS if any(pat in f for f in stack)), "other")
        by_part[part] += 1
    if total == 0:
        sys.exit("perf_categories: no samples on stdin (perf script -F comm,ip,sym)")
    print(f"{total} samples\n\n| part | share |\n| --- | ---: |")
    for part, n in by_part.most_common():
        print(f"| {part} | {100 * n / total:.1f}% |")
    print(f"\nTop {TOP_SELF} functions by samples of their own:\n")
    for name, n in by_self.most_common(TOP_SELF):
        print(f"{100 * n / total:6.2f}%  {name[:140]}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        # Read by `head`: the rest was not wanted.
        sys.exit(0)
