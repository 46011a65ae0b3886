#!/usr/bin/env python3
"""Assembles the evidence file of one real-client run from the router's ledger.

Usage: evidence.py --db URL --since ID --mode MODE --exit-code RC --out FILE

Reads the request.evidence events (written by the router, one per request:
router/gateway.h) recorded after ledger event id SINCE, finds the tool round trip (the
request that ended with tool calls, and the later request that carries their results)
and writes FILE (docs/tool-protocols.md, "Evidence"). Exits 1 naming what is missing
when the run does not show a round trip: a request through the other API than MODE
("chat.completions" or "responses"), no tool call, a second turn whose results are
not under the server's call ids, no rendered second-turn prompt, or a prompt on which
the router and the worker disagree (token count or SHA-256 of the token ids).
"""
import argparse
import json
import subprocess
import sys


def ledger_records(db, since):
    sql = ("select json_build_object('request_id', stream_id, 'id', id, 'evidence', "
           "payload_json::json) from ledger_events where type = 'request.evidence' "
           f"and id > {int(since)} order by id")
    out = subprocess.run(["psql", "-tA", db, "-c", sql], check=True, capture_output=True,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def turn(record):
    e = record["evidence"]
    return {
        "request_id": record["request_id"],
        "api": e.get("api"),
        "received_unix_us": e.get("received_unix_us"),
        "prompt_tokens": e.get("prompt_tokens"),
        "worker_prompt_tokens": e.get("worker_prompt_tokens"),
        "prompt_token_ids_sha256": e.get("prompt_token_ids_sha256"),
        "worker_prompt_token_ids_sha256": e.get("worker_prompt_token_ids_sha256"),
        "rendered_prompt_sha256": e.get("rendered_prompt_sha256"),
        "advertised_tools": e.get("tools"),
        "max_output_tokens": e.get("max_output_tokens"),
        "tool_calls": e.get("tool_calls"),
        "tool_results": e.get("tool_results"),
        "outcome": e.get("outcome"),
        "timings_ms": e.get("timings"),
    }


def end_us(t):
    return t["received_unix_us"] + int(t["timings_ms"]["finished_ms"] * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--since", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--exit-code", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    records = ledger_records(args.db, args.since)
    problems = []
    turns = [turn(r) for r in records]
    first = next((i for i, t in enumerate(turns) if t["tool_calls"]), None)
    second = None
    if first is None:
        problems.append("no request ended with a tool call")
    else:
        issued = [c["id"] for c in turns[first]["tool_calls"]]
        second = next((i for i in range(first + 1, len(turns)) if turns[i]["tool_results"]), None)
        if second is None:
            problems.append("no later request carried tool results")
        elif turns[second]["tool_results"] != issued:
            problems.append(f"the second turn answers {turns[second]['tool_results']}, "
                            f"the server issued {issued}")
    for t in turns:
        if t["api"] != args.mode:
            problems.append(f"{t['request_id']} came through {t['api']}, not {args.mode}")
        if t["prompt_tokens"] != t["worker_prompt_tokens"]:
            problems.append(f"{t['request_id']}: router counted {t['prompt_tokens']} prompt "
                            f"tokens, the worker {t['worker_prompt_tokens']}")
        if t["prompt_token_ids_sha256"] != t["worker_prompt_token_ids_sha256"]:
            problems.append(f"{t['request_id']}: the router's and the worker's prompt token "
                            "ids differ (SHA-256)")
    rendered = None
    if second is not None:
        rendered = records[second]["evidence"].get("rendered_prompt")
        if not rendered:
            problems.append("the second turn's rendered prompt is missing")

    timings = {}
    if first is not None and second is not None:
        t1, t2 = turns[first], turns[second]
        timings = {
            # From the router receiving turn 1 to its first output / its complete call.
            "time_to_first_token_ms": t1["timings_ms"]["first_output_ms"],
            "time_to_complete_tool_call_ms": t1["timings_ms"]["tool_call_complete_ms"],
            # From the end of turn 1 (the call delivered) to turn 2 arriving: the client
            # running the tool plus its own overhead.
            "client_tool_round_trip_ms": (t2["received_unix_us"] - end_us(t1)) / 1000.0,
            # From the end of turn 1 to the first output of turn 2.
            "time_until_model_resumes_ms": round(
                (t2["received_unix_us"] - end_us(t1)) / 1000.0
                + (t2["timings_ms"]["first_output_ms"] or 0), 3),
        }
    client = records[0]["evidence"].get("client", {}) if records else {}
    evidence = {
        "client": {"name": client.get("name"), "version": client.get("version"),
                   "user_agent": records[0]["evidence"].get("user_agent") if records else None},
        "mode": args.mode,
        "client_exit_code": args.exit_code,
        "bundle_sha256": sorted({r["evidence"].get("bundle_sha256") for r in records}),
        "requests": turns,
        "tool_round_trip": {"first_turn": first, "second_turn": second},
        "second_turn_rendered_prompt": rendered,
        "timings_ms": timings,
        "problems": problems,
    }
    with open(args.out, "w") as f:
        json.dump(evidence, f, indent=2)
        f.write("\n")
    summary = {k: evidence[k] for k in ("client", "mode", "timings_ms", "problems")}
    summary["requests"] = [(t["outcome"], t["prompt_tokens"], t["prompt_token_ids_sha256"][:12])
                           for t in turns]
    print(json.dumps(summary))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
