#!/usr/bin/env python3
"""Compares `gantry generate --json` with the llama.cpp peer's report on the same prompt.

usage: compare_with_peer.py OURS.json PEER.json TOLERANCE GREEDY_STEPS
Prints one line: 'ok ...' or 'FAIL ...' with the largest top-5 logprob difference and how
many greedy steps agree; exits 1 on FAIL.
Rules: the same prompt ids; the same top-5 token ids in the same order unless the two
tokens at a differing position are closer than the tolerance (judged on a side that
reports both; a token missing from one side's top 5 is below that side's 5th, so it may
only be there if the other side puts it within the tolerance of that 5th); every top-4
logprob of the peer within the tolerance; the first GREEDY_STEPS greedy ids identical
(0 = not required).
"""
import json
import sys

ours = json.load(open(sys.argv[1]))
peer = json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
steps = int(sys.argv[4])
problems = []
if ours["prompt_ids"] != peer["prompt"]["ids"]:
    problems.append("prompt ids differ")
peer_top = {t["id"]: t["logprob"] for t in peer["top5_last_prompt_position"]}
peer_order = [t["id"] for t in peer["top5_last_prompt_position"]]
our_top = {i: lp for i, lp in ours["top_logprobs"]}
our_order = [i for i, _ in ours["top_logprobs"]]
worst = 0.0
for i in peer_order[:4]:  # the 5th may swap with the 6th within tolerance
    if i not in our_top:
        problems.append(f"peer top token {i} missing from ours")
        continue
    worst = max(worst, abs(our_top[i] - peer_top[i]))


def may_swap(a, b):
    """Whether our token a and the peer's token b at one position are within tol."""
    if a in peer_top and b in peer_top:
        return abs(peer_top[a] - peer_top[b]) <= tol
    if a in our_top and b in our_top:
        return abs(our_top[a] - our_top[b]) <= tol
    ok = True
    if a not in peer_top:  # below the peer's 5th there
        ok = ok and our_top[a] <= min(peer_top.values()) + tol
    if b not in our_top:  # below our 5th here
        ok = ok and peer_top[b] <= min(our_top.values()) + tol
    return ok


for a, b in zip(our_order, peer_order):
    if a != b and not may_swap(a, b):
        problems.append(f"top order differs ({our_order} vs {peer_order})")
        break
if worst > tol:
    problems.append(f"logprob difference {worst:.4f} > {tol}")
agree = 0
for a, b in zip(ours["ids"], peer["greedy"]["ids"]):
    if a != b:
        break
    agree += 1
if steps and agree < steps:
    problems.append(f"greedy agrees for {agree} steps, {steps} required")
verdict = "FAIL" if problems else "ok"
print(f"{verdict} max_dlogprob={worst:.4f} greedy_agree={agree} {'; '.join(problems)}")
sys.exit(1 if problems else 0)
