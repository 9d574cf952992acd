"""The report of `compile_cost.py`: each entry's metrics, the ratios jaxrigid / diffrax peer
(and gradient / forward), issue 31's targets evaluated on them, and the table on stdout."""

from __future__ import annotations

PHASES = ("cold", "cached")

# issue 31's targets: (program, kind, jaxrigid entry, metric, peer or None, limit)
TARGETS = [
    ("forward", "forward", "IMIDM", "build_seconds", "diffrax_Tsit5", 1.5),
    ("forward_direct", "forward", "IMIDM_direct", "build_seconds", "diffrax_Tsit5", 1.5),
    ("forward_direct", "forward", "IMIDM_direct", "run_seconds", "diffrax_RK4", 0.3),
    ("forward", "forward", "IMIDM", "run_seconds", "diffrax_RK4", 0.3),
    ("forward", "forward", "IMIDM", "run_seconds", "diffrax_Tsit5", 0.3),
    ("gradient", "gradient", "IMIDM", "gradient_over_forward_run", None, 5.0),
    ("rolling_ball", "gradient", "RKMK4", "build_seconds", "diffrax_RK4", 1.5),
    ("lp_split", "forward", "LP-split:yoshida6", "build_seconds", "diffrax_Dopri8", 2.0),
    ("dla_midpoint", "forward", "DLA-midpoint", "build_seconds", None, 5.0),
    ("dla_midpoint_quick", "forward", "DLA-midpoint_quick", "build_seconds", None, 5.0),
    ("dla_midpoint_direct", "forward", "DLA-midpoint_direct", "build_seconds", None, 5.0),
]


def _f(x, fmt=".2f"):
    return "-" if x is None else format(x, fmt)


def metrics(e) -> dict:
    b, r = e.get("build", {}), e.get("run", {})
    return {
        "trace_seconds": b.get("trace_seconds"),
        "lower_seconds": b.get("lower_seconds"),
        "compile_seconds": b.get("compile_seconds"),
        "build_seconds": b.get("build_seconds"),
        "run_seconds": r.get("seconds"),
        "stablehlo_lines": b.get("stablehlo_lines"),
    }


def _ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def ratios(entries) -> dict:
    """jaxrigid / peer for every metric, per pair of one kind; gradient run / forward run."""
    out = {}
    for e in entries:
        for q in entries:
            if e["library"] == "jaxrigid" and q["library"] != "jaxrigid" and q["kind"] == e["kind"]:
                me, mq = metrics(e), metrics(q)
                key = f"{e['name']} / {q['name']} ({e['kind']})"
                out[key] = {k: _ratio(me[k], mq[k]) for k in me}
    for e in entries:
        if e["kind"] == "gradient":
            fwd = next(q for q in entries if q["name"] == e["name"] and q["kind"] == "forward")
            key = f"{e['name']} gradient / forward"
            out[key] = {k: _ratio(metrics(e)[k], metrics(fwd)[k]) for k in metrics(e)}
            # beside it, the forward of the method the gradient runs (no fast path), where
            # the program has one (`gradient`'s `IMIDM_method`)
            method = next((q for q in entries if q["name"] == e["name"] + "_method"), None)
            if method is not None:
                key = f"{e['name']} gradient / method forward"
                out[key] = {k: _ratio(metrics(e)[k], metrics(method)[k]) for k in metrics(e)}
    return out


def targets(programs_rec) -> list:
    out = []
    for prog, kind, name, metric, peer, limit in TARGETS:
        for phase, r in programs_rec.get(prog, {}).get("ratios", {}).items():
            if metric == "gradient_over_forward_run":
                # the forward of the program the gradient differentiates: the method alone
                # (under a derivative `simulate` runs no fast path), where the program has
                # it; design note 59
                key = f"{name} gradient / method forward"
                key = key if key in r else f"{name} gradient / forward"
                value = r.get(key, {}).get("run_seconds")
            elif peer is None:
                ent = programs_rec[prog]["phases"][phase].get("entries", [])
                e = next((e for e in ent if e["name"] == name and e["kind"] == kind), {})
                value = metrics(e)[metric]
            else:
                value = r.get(f"{name} / {peer} ({kind})", {}).get(metric)
            what = f"{name} {metric}" + (f" / {peer}'s" if peer else "") + f" <= {limit}"
            out.append(
                {"program": prog, "phase": phase, "target": what, "value": value, "limit": limit}
                | {"pass": None if value is None else bool(value <= limit)}
            )
    return out


def print_tables(record, members, steps):
    cols = "trace   lower compile   build     run  HLO lines  xbuild   xrun  nested  hit/req"
    for name, prog in record["programs"].items():
        size = f"{members} members, {steps} steps"
        print(f"\n{name} ({size}; x = jaxrigid / the first diffrax entry of its kind)")
        print(f"{'phase':<7}{'entry':<20}{'kind':<9}{cols}")
        for phase, r in prog["phases"].items():
            entries = r.get("entries")
            if entries is None:
                print(f"{phase:<7}worker failed: {r.get('error', '')[-200:]}")
                continue
            for e in entries:
                m = metrics(e)
                peer = next(
                    (q for q in entries if q["library"] != "jaxrigid" and q["kind"] == e["kind"]),
                    None,
                )
                xb = xr = None
                if e["library"] == "jaxrigid" and peer is not None:
                    xb = _ratio(m["build_seconds"], metrics(peer)["build_seconds"])
                    xr = _ratio(m["run_seconds"], metrics(peer)["run_seconds"])
                ev = e.get("build", {}).get("events", {})
                nested = (ev.get("trace") or {}).get("backend_compiles", 0)
                comp = ev.get("compile") or {}
                hm = f"{comp.get('cache_hits', 0)}/{comp.get('cache_requests', 0)}"
                if "error" in e:
                    print(f"{phase:<7}{e['name']:<20}{e['kind']:<9}FAILED {e['error'][:120]}")
                    continue
                print(
                    f"{phase:<7}{e['name']:<20}{e['kind']:<9}{_f(m['trace_seconds']):>5} "
                    f"{_f(m['lower_seconds']):>7} {_f(m['compile_seconds']):>7} "
                    f"{_f(m['build_seconds']):>7} {_f(m['run_seconds'], '.4f'):>7} "
                    f"{m['stablehlo_lines'] or 0:>10} {_f(xb):>7} {_f(xr):>6} {nested:>6} {hm:>8}"
                )
        w = prog["process_wall_seconds"]
        print("process wall: " + ", ".join(f"{k} {v:.1f} s" for k, v in w.items()))
        for phase, r in prog.get("ratios", {}).items():
            for key, value in r.items():
                if key.endswith("gradient / method forward"):
                    run = _f(value.get("run_seconds"))
                    fast = r.get(key.replace("method forward", "forward"), {})
                    fast = _f(fast.get("run_seconds"))
                    print(f"{phase}: {key} run {run} (the target; the fast `forward`: {fast})")
    for t in record.get("targets", []):
        print(f"target [{t['program']}, {t['phase']}] {t['target']}: {_f(t['value'])} {_v(t)}")
    for name, line in (("cli", _cli_line), ("control", _control_line)):
        if command := record.get(name):
            for phase in PHASES:
                print(f"{name} {phase}: {line(command[phase])}")
            for t in command.get("targets", [command.get("target")]):
                print(f"{name} target: {t['target']}: {_f(t['value'])} {_v(t)}")


def _cli_line(r) -> str:
    return (
        f"process {r['process_wall_seconds']:.1f} s, compile {_f(r.get('compile_seconds'))} s, "
        f"run {_f(r.get('run_seconds'))} s"
    )


def _control_line(r) -> str:
    return (
        f"process {r['process_wall_seconds']:.1f} s wall, {r['process_cpu_seconds']:.1f} CPU-s, "
        f"converged {r.get('converged')}, cost {_f(r.get('cost_final'), '.6f')}"
    )


def _v(target) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[target["pass"]]
