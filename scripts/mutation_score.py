#!/usr/bin/env python3
"""The mutation score per file from one or more cargo-mutants output folders.

Usage: scripts/mutation_score.py DIR [DIR ...]   (each DIR holds mutants.out/, or is one)

Prints, per examined file and in total: mutants, caught, missed, unviable, timeout, the score
(caught / viable, where viable = caught + missed + timeout), how many of the caught ones only the
simulated gate caught (the unit and adapter tests passed, tests/sim_gate.rs failed), and the
median cost of one mutant by outcome. A mutant judged in several folders counts once, with its
last outcome (folders are read in the order given), so a re-run after a fix replaces the first.
"""

import json
import os
import statistics
import sys
from collections import OrderedDict

OUTCOMES = {
    "CaughtMutant": "caught",
    "MissedMutant": "missed",
    "Unviable": "unviable",
    "Timeout": "timeout",
}
GATE_TEST = "the_simulated_gate_passes_on_this_source_tree"


def outcome_dir(path):
    inner = os.path.join(path, "mutants.out")
    return inner if os.path.isdir(inner) else path


def caught_by_gate_only(folder, outcome):
    """True when the failing test run got as far as the gate and the gate is what failed."""
    log = os.path.join(folder, outcome.get("log_path", ""))
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return f"test {GATE_TEST} ... FAILED" in text


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    judged = OrderedDict()
    for arg in argv[1:]:
        folder = outcome_dir(arg)
        path = os.path.join(folder, "outcomes.json")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            sys.stderr.write(f"mutation_score: {path}: {e}\n")
            return 2
        for o in data.get("outcomes", []):
            mutant = o.get("scenario", {})
            if not isinstance(mutant, dict) or "Mutant" not in mutant:
                continue  # the baseline
            kind = OUTCOMES.get(o.get("summary"))
            if kind is None:
                continue
            m = mutant["Mutant"]
            seconds = sum(p.get("duration", 0.0) for p in o.get("phase_results", []))
            gate = kind == "caught" and caught_by_gate_only(folder, o)
            judged[m["name"]] = (m["file"], kind, gate, seconds)

    rows = OrderedDict()
    costs = {k: [] for k in OUTCOMES.values()}
    for file, kind, gate, seconds in judged.values():
        row = rows.setdefault(file, {"mutants": 0, "caught": 0, "missed": 0, "unviable": 0,
                                     "timeout": 0, "gate": 0})
        row["mutants"] += 1
        row[kind] += 1
        row["gate"] += gate
        costs[kind].append(seconds)

    def line(name, r):
        viable = r["caught"] + r["missed"] + r["timeout"]
        score = f"{100.0 * r['caught'] / viable:5.1f}%" if viable else "    -"
        return (f"{name:<32} {r['mutants']:>7} {r['caught']:>6} {r['missed']:>6} "
                f"{r['unviable']:>8} {r['timeout']:>7} {score:>6} {r['gate']:>9}")

    print(f"{'FILE':<32} {'MUTANTS':>7} {'CAUGHT':>6} {'MISSED':>6} {'UNVIABLE':>8} "
          f"{'TIMEOUT':>7} {'SCORE':>6} {'GATE-ONLY':>9}")
    total = {k: 0 for k in ("mutants", "caught", "missed", "unviable", "timeout", "gate")}
    for file in sorted(rows):
        print(line(file, rows[file]))
        for k in total:
            total[k] += rows[file][k]
    print(line("total", total))
    for kind, secs in costs.items():
        if secs:
            print(f"median cost of a {kind} mutant: {statistics.median(secs):.0f} s "
                  f"({len(secs)} mutants, {sum(secs) / 3600:.2f} h in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
